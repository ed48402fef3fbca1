"""SQLAlchemy 2 models: datasets, budgets, releases, the append-only privacy ledger, API keys; public tables and the
local-DP collections (campaigns, rounds, participants, append-only reports that are also the local ledger).

Privacy amounts are stored EXACTLY as integers in fixed units so that SQL sums are exact on every
backend (SQLite has no decimal type): epsilon and rho in units of 1e-12 (``*_units`` columns, see
``EPSILON_SCALE``), delta in units of 1e-18. The service rounds every charge *up* and every budget
*down* to that grid, which can only make the accounting more conservative.

Sensitive rows do not live in these tables: each dataset's rows are in a table of their own,
``data_<dataset id>``, created at load time (see :mod:`db.tables`); a public table's rows likewise live in
``public_rows_<id>`` (see :mod:`db.public_rows`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

EPSILON_SCALE = 10**12  # epsilon_units / EPSILON_SCALE = epsilon; the same for rho
DELTA_SCALE = 10**18  # delta_units / DELTA_SCALE = delta
ALPHA_SCALE = 10**9  # anchor_alpha_units / ALPHA_SCALE = the anchor's Renyi order alpha

#: The roles an API key may have (what each may call: service/api/security.py and the README's role table).
API_KEY_ROLES = ("steward", "analyst", "auditor", "participant", "gateway")


def _role_check() -> str:
    return "role IN (" + ", ".join(f"'{role}'" for role in API_KEY_ROLES) + ")"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    # JSON: {"columns": [{"name", "size", "kind", "sql"}...]} in table order; "sql" is the column's
    # name in the data table.
    domain_json: Mapped[str] = mapped_column(Text, nullable=False)
    data_table: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    row_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    # Where the rows live (service/data/engines): "sql" (the data_table above, in this database) or "duckdb" (a
    # Parquet table); ``location`` is the engine's JSON (NULL for "sql"), never shown to analysts.
    engine: Mapped[str] = mapped_column(String(16), nullable=False, default="sql", server_default="sql")
    location: Mapped[str | None] = mapped_column(Text, nullable=True)


class Budget(Base):
    """A dataset's total budget (epsilon_B, delta_B). Its row is also the lock that serialises
    check-and-charge on PostgreSQL (``SELECT ... FOR UPDATE``)."""

    __tablename__ = "budgets"
    __table_args__ = (
        CheckConstraint("epsilon_units > 0", name="ck_budget_epsilon_positive"),
        CheckConstraint("delta_units >= 0", name="ck_budget_delta_nonnegative"),
    )

    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), primary_key=True)
    epsilon_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    delta_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    # delta kept back for (epsilon, delta) charges made after zCDP charges started (docs/privacy.md 6.3)
    delta_reserve_units: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class Release(Base):
    """One release: what was measured, how, and its payload (a fitted model or statistics).

    ``status``: ``pending`` while the mechanism runs; ``complete``; ``failed_before_noise`` (its
    charge was refunded); ``failed_after_noise`` (its charge stands -- for an MST or AIM release stopped on request
    part-way, the charge of the steps that drew noise, the rest refunded -- and the payload is lost).
    ``runner_*`` and ``heartbeat_at`` say which process runs a pending release, so that recovery
    only touches releases whose runner is provably gone (service/runners.py).

    ``seeded``: the noise came from a caller-chosen seed (tests and benchmarks, in-process only): whoever knows the
    seed can regenerate and subtract it, so the release carries no privacy. A seeded release is never reused to
    answer a question and answers nothing through the HTTP API (docs/privacy.md, section 7).
    """

    __tablename__ = "releases"
    __table_args__ = (
        CheckConstraint(
            "status IN ('pending', 'complete', 'failed_before_noise', 'failed_after_noise')",
            name="ck_release_status",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), nullable=False, index=True)
    kind: Mapped[str] = mapped_column(String(40), nullable=False)  # "marginals", "gram", "model"
    mechanism: Mapped[str] = mapped_column(String(40), nullable=False)
    params_json: Mapped[str] = mapped_column(Text, nullable=False)  # workload, options, requested amounts
    seeded: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    status: Mapped[str] = mapped_column(String(24), nullable=False, default="pending")
    payload: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    details_json: Mapped[str] = mapped_column(Text, nullable=False, default="{}")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="cli")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    runner_host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    runner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runner_started: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class CampaignModel(Base):
    """The graphical model of a ``marginals`` campaign (issue 33), fitted to its round's aggregate the first time an
    answer needs it after the reports changed, keyed by the number of reports it saw
    (service/campaigns/marginal_answers.py). Post-processing of the stored aggregate: it reads no report.

    ``payload``: the model with the measurements it was fitted to (``.npz``, as an MST release's); ``details_json``:
    public facts about the fit (the sets it kept whole, its iterations, its seconds)."""

    __tablename__ = "campaign_models"

    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), primary_key=True)
    reports: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    details_json: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class ReleaseModel(Base):
    """The graphical model fitted to a release that was stored without one (issue 9): a residual release, or a direct
    Laplace or Gaussian release made after issue 9, answers its measured marginals straight from its measurements and
    fits a model only when an answer needs one (a marginal outside what it measured, synthetic rows). The first such
    answer fits it and stores it here, so every later answer -- in any process -- reads it instead of fitting again
    (service/releases/stored_models.py). It is post-processing of the release: a function of its noisy payload only.

    ``payload``: the model (clique potentials, ``.npz``); ``details_json``: public facts about the fit (its cliques,
    how many mirror-descent iterations ran)."""

    __tablename__ = "release_models"

    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"), primary_key=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    details_json: Mapped[str] = mapped_column(Text, nullable=False, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class ReleaseBootstrap(Base):
    """The parametric bootstrap of a graphical-model release (issue 29): replicate models refitted to the release's
    measurements with their noise redrawn at its public scales, computed the first time an answer asks for error bars
    on a marginal the release did not measure (or a regression fitted from it) and kept here for every later answer
    (service/releases/bootstrap.py). Post-processing of the stored release only.

    ``payload``: the replicate models (``.npz`` of their model payloads); ``details_json``: how they were made (the
    replicate count, the iterations per refit, seconds)."""

    __tablename__ = "release_bootstraps"

    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"), primary_key=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    details_json: Mapped[str] = mapped_column(Text, nullable=False, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class LedgerEntry(Base):
    """An append-only row of the privacy ledger (UPDATE and DELETE are refused by triggers).

    ``entry`` is ``charge``, ``refund`` or ``budget`` (a budget change: zero amounts, recorded so
    the audit trail shows it and ``epsilon_spent_after_units`` is recomputed for the new delta_B).
    A refund carries the negated amounts of the charge it
    reverses (``refunds_entry_id``) and is only ever written for a release (or a simulation) that failed before any
    noisy value existed, or -- negating only part of a zCDP charge's rho -- for a release stopped on request after
    some of its steps drew noise, which keeps exactly their rho (docs/privacy.md 6.5). The accountant writes at most
    one refund per charge.
    ``campaign_id``: the campaign a ``campaign-simulation`` charge paid for (a stored table's rows
    played through it, docs/privacy.md 8.7.7; migration 0007), NULL otherwise. ``epsilon_spent_after_units`` is the
    composed epsilon of the dataset's whole ledger after this row, as computed by the accountant's rule
    (docs/privacy.md), so an auditor can check the conversion row by row.

    The first charge with rho > 0 on a dataset also carries the **anchor** of the accountant's rule
    (docs/privacy.md, section 6.3): the Renyi order ``alpha`` (units of 1e-9), the share of delta
    given to the zCDP charges ``delta_z`` and the offset ``t`` (epsilon units, rounded up). From then
    on the epsilon spent is ``C + alpha R + t``. An anchor, once written, stays in force.

    ``epsilon_priced_units`` is what the row's epsilon costs in that rule (C is its sum): the epsilon itself for
    charges made before the anchor, ``min(eps, D_alpha(RR_eps))`` rounded up for (epsilon, delta) charges made
    after it (docs/privacy.md 6.3), the negation of the charge's price for a refund, 0 for a budget row. NULL only
    in rows written before migration 0003, all of which were priced at their epsilon: read it as
    ``COALESCE(epsilon_priced_units, epsilon_units)`` (the views do).
    """

    __tablename__ = "ledger_entries"
    __table_args__ = (CheckConstraint("entry IN ('charge', 'refund', 'budget')", name="ck_ledger_entry"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), nullable=False, index=True)
    release_id: Mapped[int | None] = mapped_column(ForeignKey("releases.id"), nullable=True)
    campaign_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # a campaign-simulation charge's campaign
    entry: Mapped[str] = mapped_column(String(10), nullable=False)
    refunds_entry_id: Mapped[int | None] = mapped_column(ForeignKey("ledger_entries.id"), nullable=True)
    mechanism: Mapped[str] = mapped_column(String(40), nullable=False)
    epsilon_units: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    delta_units: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    rho_units: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    epsilon_spent_after_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    epsilon_priced_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    anchor_alpha_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    anchor_delta_z_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    anchor_offset_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="cli")
    note: Mapped[str] = mapped_column(Text, nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class LedgerHash(Base):
    """The hash chain of the ledger (db/ledger_chain.py): one row per ledger entry, written in its transaction,
    append-only like the ledger. ``entry_hash`` = SHA-256 of ``previous_hash`` and the entry's canonical form;
    ``previous_hash``: the dataset's previous entry's (64 zeros for its first). Migration 0015."""

    __tablename__ = "ledger_hashes"

    entry_id: Mapped[int] = mapped_column(ForeignKey("ledger_entries.id"), primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), nullable=False, index=True)
    previous_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    entry_hash: Mapped[str] = mapped_column(String(64), nullable=False)


class ApiKey(Base):
    """A principal's API key; only a SHA-256 hash of the key is stored.

    ``participant``: one person of the local-DP collections (she is a :class:`Participant` of her own); ``gateway``:
    a relay that submits batches of reports for participants it names by pseudonyms (each pseudonym a
    :class:`Participant` in the gateway's namespace). Neither reads anything but a campaign's public state."""

    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint(_role_check(), name="ck_api_key_role"),
        UniqueConstraint("key_hash", name="uq_api_key_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    key_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    # JSON list of dataset names a steward key is limited to; NULL = all datasets.
    scope_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    # JSON list of the attach sources a steward key may attach tables through; NULL = every source ([] = none: the
    # default of a key scoped to datasets, service/access/auth.py).
    source_scope_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class IdempotencyRecord(Base):
    """A charging request made with an ``Idempotency-Key`` header, and the response it produced.

    One row per (API key, idempotency key). ``state`` is ``pending`` while the request runs and
    ``done`` once its response is stored; a retry with the same key and the same request replays
    that response instead of charging again (service/access/idempotency.py). ``runner_*`` and
    ``heartbeat_at``: the process running a pending claim, as for releases and jobs. ``request_hash`` is the
    SHA-256 of the request's method, path and canonical JSON body.
    """

    __tablename__ = "idempotency_keys"
    __table_args__ = (
        CheckConstraint("state IN ('pending', 'done')", name="ck_idempotency_state"),
        UniqueConstraint("api_key_id", "key", name="uq_idempotency_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    api_key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id"), nullable=False)
    key: Mapped[str] = mapped_column(String(200), nullable=False)
    request_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    state: Mapped[str] = mapped_column(String(10), nullable=False, default="pending")
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    # who runs the claimed request (service/runners.py): a claim is interrupted only once its runner is gone
    runner_host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    runner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runner_started: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Job(Base):
    """A long request run in the background (``Prefer: respond-async``): its progress while it runs,
    and the response the synchronous request would have given once it is done.

    ``state``: ``running``, ``done`` (``response_*`` holds a 2xx answer) or ``failed`` (an error
    answer). A job whose runner is provably gone (the server was killed) becomes ``failed`` with a
    409 ``request_interrupted`` answer (service/runners.py)."""

    __tablename__ = "jobs"
    __table_args__ = (CheckConstraint("state IN ('running', 'done', 'failed')", name="ck_job_state"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"), nullable=True)
    dataset: Mapped[str] = mapped_column(String(200), nullable=False)
    kind: Mapped[str] = mapped_column(String(40), nullable=False)  # "release", "fit"
    state: Mapped[str] = mapped_column(String(10), nullable=False, default="running")
    progress_done: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    progress_message: Mapped[str] = mapped_column(Text, nullable=False, default="")
    fit_done: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    fit_total: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: when its owner asked a running release to stop (the console's Cancel; migration 0017), else NULL
    cancel_requested_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    runner_host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    runner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runner_started: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


# ------------------------------------------------------------------------------------------------------------------
# Public tables and local-DP collections (docs/campaigns.md; the privacy argument is docs/privacy.md, section 8.7)
# ------------------------------------------------------------------------------------------------------------------
#: Report ids: 64-bit on PostgreSQL; SQLite's rowid alias must be declared INTEGER to autoincrement.
ReportId = BigInteger().with_variant(Integer(), "sqlite")


class PublicTable(Base):
    """A table a steward declared public: no budget, readable by analysts and stewards, rows returned as they are.

    Its rows live in ``row_table`` (``public_rows_<id>``, one float column ``c0, c1, ...`` per column, see
    :mod:`db.public_rows`). ``columns_json``: ``[{"name", "sql", "kind": "numeric" | "coded", "values"?, "bins"?}]``
    in table order; a coded column holds the index of its value (``values``) or of its bin (``bins`` edges)."""

    __tablename__ = "public_tables"
    __table_args__ = (CheckConstraint("row_count >= 0", name="ck_public_table_rows"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    columns_json: Mapped[str] = mapped_column(Text, nullable=False)
    row_table: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    row_count: Mapped[int] = mapped_column(BigInteger, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False, default="")
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="cli")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class Campaign(Base):
    """A local-DP collection: its protocol's public spec and the public parameters around it, fixed at creation.

    ``spec_json`` is the protocol spec (``workloads.local.protocols``: rounds, groups, bounds, the (epsilon, delta)
    of each round); ``features_json`` the feature names in the order of a participant's vector, ``target`` the label
    (``None`` for a protocol without one); ``transform_json`` the public scaling a device applies before randomizing
    (from the public table or stated bounds, never from private values). ``epsilon_units`` / ``delta_units``: the
    campaign's local guarantee, the largest (epsilon, delta) one participant spends over all its rounds. ``seeded``:
    it received reports randomized with a caller-chosen seed (the in-process simulator of tests and benchmarks), so
    it answers nothing over HTTP (migration 0007)."""

    __tablename__ = "campaigns"
    __table_args__ = (
        CheckConstraint("status IN ('open', 'closed')", name="ck_campaign_status"),
        CheckConstraint("epsilon_units > 0", name="ck_campaign_epsilon_positive"),
        CheckConstraint(f"delta_units >= 0 AND delta_units < {DELTA_SCALE}", name="ck_campaign_delta_range"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    protocol: Mapped[str] = mapped_column(String(40), nullable=False)
    spec_json: Mapped[str] = mapped_column(Text, nullable=False)
    features_json: Mapped[str] = mapped_column(Text, nullable=False)
    target: Mapped[str | None] = mapped_column(String(200), nullable=True)
    public_table_id: Mapped[int | None] = mapped_column(ForeignKey("public_tables.id"), nullable=True)
    transform_json: Mapped[str] = mapped_column(Text, nullable=False, default="{}")
    epsilon_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    delta_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    status: Mapped[str] = mapped_column(String(10), nullable=False, default="open")
    seeded: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="cli")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class CampaignRound(Base):
    """One round of a campaign: the group that reports, what one report spends, its published state and the
    running aggregate of its accepted reports (updated in the transaction that inserts them).

    ``status``: ``pending`` (no public state yet: an earlier round is still open), ``open`` (``state_json``
    published, reports accepted) or ``closed``. ``expected_reports``: the group's planned size; the round closes
    by itself when that many reports are in. ``aggregate_json``: the protocol's running sums
    (``estimators.local.aggregate.ReportAggregate.to_json``), ``NULL`` before the first report."""

    __tablename__ = "campaign_rounds"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'open', 'closed')", name="ck_round_status"),
        CheckConstraint("status = 'pending' OR state_json IS NOT NULL", name="ck_round_state_published"),
        CheckConstraint("round_index >= 0", name="ck_round_index"),
        CheckConstraint("epsilon_units > 0", name="ck_round_epsilon_positive"),
        CheckConstraint(f"delta_units >= 0 AND delta_units < {DELTA_SCALE}", name="ck_round_delta_range"),
        CheckConstraint("report_count >= 0", name="ck_round_report_count"),
        CheckConstraint("expected_reports IS NULL OR expected_reports > 0", name="ck_round_expected"),
    )

    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), primary_key=True)
    round_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_name: Mapped[str] = mapped_column(String(200), nullable=False)
    epsilon_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    delta_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    expected_reports: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    status: Mapped[str] = mapped_column(String(10), nullable=False, default="pending")
    state_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    report_count: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0)
    aggregate_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    opened_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Participant(Base):
    """A person who reports, known only by a pseudonym within a namespace.

    A participant key is the participant ``("key", "<api key id>")`` (``api_key_id`` set); a gateway's pseudonyms
    live in the namespace ``"gateway:<api key id>"``; simulated participants in ``"simulator:..."``. The same
    (namespace, pseudonym) is the same participant in every campaign, so her spend composes across them.
    ``cap_*_units``: a steward's override of the default cap (:class:`LocalCapDefault`); ``NULL`` = the default."""

    __tablename__ = "participants"
    __table_args__ = (
        UniqueConstraint("namespace", "pseudonym", name="uq_participant_pseudonym"),
        CheckConstraint("cap_epsilon_units IS NULL OR cap_epsilon_units >= 0", name="ck_participant_cap_epsilon"),
        CheckConstraint("cap_delta_units IS NULL OR cap_delta_units >= 0", name="ck_participant_cap_delta"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace: Mapped[str] = mapped_column(String(200), nullable=False)
    pseudonym: Mapped[str] = mapped_column(String(200), nullable=False)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"), nullable=True, unique=True)
    cap_epsilon_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cap_delta_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class LocalCapDefault(Base):
    """The one row (``id = 1``) holding the default per-participant cap on local spend, summed over all campaigns
    (basic composition, docs/privacy.md 8.7). Migration 0005 writes epsilon 10, delta 1e-4; stewards change it."""

    __tablename__ = "local_cap_default"
    __table_args__ = (
        CheckConstraint("id = 1", name="ck_local_cap_single_row"),
        CheckConstraint("epsilon_units >= 0 AND delta_units >= 0", name="ck_local_cap_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    epsilon_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    delta_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="migration")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class Report(Base):
    """One accepted local-DP report, append-only (triggers refuse UPDATE and DELETE): also the row of the local
    ledger, since each report spends its round's (epsilon, delta) for its participant (``epsilon_units``,
    ``delta_units``, copied from the round so that the ledger reads without joins).

    ``payload``: the report's fields in the round's schema order, float64 little-endian, concatenated. One report
    per participant per round is a constraint (``uq_report_one_per_round``). ``submitted_by``: the participant or
    gateway key that sent it (``NULL`` for the in-process simulator)."""

    __tablename__ = "reports"
    __table_args__ = (
        UniqueConstraint("campaign_id", "round_index", "participant_id", name="uq_report_one_per_round"),
        ForeignKeyConstraint(["campaign_id", "round_index"], ["campaign_rounds.campaign_id",
                                                              "campaign_rounds.round_index"],
                             name="fk_report_round"),
        CheckConstraint("epsilon_units > 0 AND delta_units >= 0", name="ck_report_spend"),
        Index("ix_reports_participant", "participant_id", "campaign_id"),
    )

    id: Mapped[int] = mapped_column(ReportId, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(Integer, nullable=False)
    round_index: Mapped[int] = mapped_column(Integer, nullable=False)
    participant_id: Mapped[int] = mapped_column(ForeignKey("participants.id"), nullable=False)
    epsilon_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    delta_units: Mapped[int] = mapped_column(BigInteger, nullable=False)
    payload: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    submitted_by: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                 server_default=func.current_timestamp())


class GatewayScope(Base):
    """A campaign a steward opened to one gateway key, and the gateway's quota there (issue 18, finding 7).

    A gateway names its participants by pseudonyms it invents, so nothing stops one key from filling a campaign with
    fictitious people; a steward bounds what it can do. A gateway submits only to the campaigns it has a row for, at
    most ``max_reports`` reports over the whole campaign and ``max_reports_per_round`` in any one round (``NULL``:
    only the campaign's quota binds). Checked against :class:`GatewayUsage` in the transaction that inserts a batch
    (db/gateways.py)."""

    __tablename__ = "gateway_scopes"
    __table_args__ = (
        CheckConstraint("max_reports > 0", name="ck_gateway_scope_reports"),
        CheckConstraint("max_reports_per_round IS NULL OR max_reports_per_round > 0",
                        name="ck_gateway_scope_round_reports"),
    )

    api_key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id"), primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), primary_key=True)
    max_reports: Mapped[int] = mapped_column(BigInteger, nullable=False)
    max_reports_per_round: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="cli")
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class GatewayUsage(Base):
    """How many reports a gateway key has had accepted in one round of a campaign: the count its quota is checked
    against, kept in the transaction that inserts each batch. It equals ``SELECT COUNT(*) FROM reports WHERE
    submitted_by = key AND campaign_id = c AND round_index = r`` (an auditor can recompute it; migration 0008 filled
    it that way)."""

    __tablename__ = "gateway_usage"
    __table_args__ = (
        CheckConstraint("reports >= 0", name="ck_gateway_usage_reports"),
        ForeignKeyConstraint(["campaign_id", "round_index"], ["campaign_rounds.campaign_id",
                                                              "campaign_rounds.round_index"],
                             name="fk_gateway_usage_round"),
    )

    api_key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id"), primary_key=True)
    campaign_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    round_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    reports: Mapped[int] = mapped_column(BigInteger, nullable=False)


#: The kinds of attach sources (:class:`AttachSource`).
SOURCE_KINDS = ("parquet", "sql", "spark")


class AttachSource(Base):
    """A place the operator lets stewards attach tables from over HTTP (``marginalia source add``, issue 21).

    ``kind`` ``parquet``: ``root`` is a folder of the server (its real path); a steward names Parquet files or globs
    *inside* it. ``sql``: ``url`` is a SQLAlchemy URL, password included, never shown nor sent (a steward names a
    table of it). ``spark``: the service's Spark session (``MARGINALIA_SPARK_REMOTE`` or local mode), nothing stored.
    ``credentials``: where a ``sql`` source's password is (``env:VAR`` or ``file:/path``; the URL never holds one);
    ``needs_credentials``: migration 0016 took a password out of ``url`` and the operator has yet to name where it
    is (``marginalia source update``). A dataset attached through a SQL source connects with the source's URL and
    credentials (its location names the source's id); ``removed_at``: the source takes no new attaches but still
    serves the datasets attached through it (service/data/attach/sources.py)."""

    __tablename__ = "attach_sources"
    __table_args__ = (
        CheckConstraint("(kind = 'parquet' AND root IS NOT NULL AND url IS NULL) OR "
                        "(kind = 'sql' AND url IS NOT NULL AND root IS NULL) OR "
                        "(kind = 'spark' AND root IS NULL AND url IS NULL)", name="ck_attach_source_kind"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    root: Mapped[str | None] = mapped_column(Text, nullable=True)
    url: Mapped[str | None] = mapped_column(Text, nullable=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False, default="cli")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    credentials: Mapped[str | None] = mapped_column(Text, nullable=True)
    needs_credentials: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    removed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ExactView(Base):
    """An append-only record of a steward's look at a table's exact figures (the web console's quality view: a
    release's answers beside the table's exact marginal), which auditors read beside the ledger. UPDATE and DELETE
    are refused by triggers (migration 0017). ``attributes_json``: the marginal's columns, a JSON list."""

    __tablename__ = "exact_views"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), nullable=False, index=True)
    release_id: Mapped[int | None] = mapped_column(ForeignKey("releases.id"), nullable=True)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"), nullable=True)
    principal: Mapped[str] = mapped_column(String(200), nullable=False)
    attributes_json: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
