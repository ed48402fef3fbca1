"""SQLAlchemy 2 models: datasets, budgets, releases, the append-only privacy ledger, API keys.

Privacy amounts are stored EXACTLY as integers in fixed units so that SQL sums are exact on every
backend (SQLite has no decimal type): epsilon and rho in units of 1e-12 (``*_units`` columns, see
``EPSILON_SCALE``), delta in units of 1e-18. The service rounds every charge *up* and every budget
*down* to that grid, which can only make the accounting more conservative.

Sensitive rows do not live in these tables: each dataset's rows are in a table of their own,
``data_<dataset id>``, created at load time (see :mod:`db.tables`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

EPSILON_SCALE = 10**12  # epsilon_units / EPSILON_SCALE = epsilon; the same for rho
DELTA_SCALE = 10**18  # delta_units / DELTA_SCALE = delta
ALPHA_SCALE = 10**9  # anchor_alpha_units / ALPHA_SCALE = the anchor's Renyi order alpha


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
    charge was refunded); ``failed_after_noise`` (its charge stands, the payload is lost).
    ``runner_*`` and ``heartbeat_at`` say which process runs a pending release, so that recovery
    only touches releases whose runner is provably gone (service/releases/runners.py).

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


class ReleaseModel(Base):
    """The graphical model fitted to a release that was stored without one (issue 9): a residual release, or a direct
    Laplace or Gaussian release made after issue 9, answers its measured marginals straight from its measurements and
    fits a model only when an answer needs one (a marginal outside what it measured, synthetic rows). The first such
    answer fits it and stores it here, so every later answer -- in any process -- reads it instead of fitting again
    (service/releases/models.py). It is post-processing of the release: a function of its noisy payload only.

    ``payload``: the model (clique potentials, ``.npz``); ``details_json``: public facts about the fit (its cliques,
    how many mirror-descent iterations ran)."""

    __tablename__ = "release_models"

    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"), primary_key=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    details_json: Mapped[str] = mapped_column(Text, nullable=False, default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)


class LedgerEntry(Base):
    """An append-only row of the privacy ledger (UPDATE and DELETE are refused by triggers).

    ``entry`` is ``charge``, ``refund`` or ``budget`` (a budget change: zero amounts, recorded so
    the audit trail shows it and ``epsilon_spent_after_units`` is recomputed for the new delta_B).
    A refund carries the negated amounts of the charge it
    reverses (``refunds_entry_id``) and is only ever written for a release that failed before any
    noisy value existed. ``epsilon_spent_after_units`` is the composed epsilon of the dataset's
    whole ledger after this row, as computed by the accountant's rule (docs/privacy.md), so an
    auditor can check the conversion row by row.

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


class ApiKey(Base):
    """A principal's API key; only a SHA-256 hash of the key is stored."""

    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint("role IN ('steward', 'analyst', 'auditor')", name="ck_api_key_role"),
        UniqueConstraint("key_hash", name="uq_api_key_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    key_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    # JSON list of dataset names a steward key is limited to; NULL = all datasets.
    scope_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class IdempotencyRecord(Base):
    """A charging request made with an ``Idempotency-Key`` header, and the response it produced.

    One row per (API key, idempotency key). ``state`` is ``pending`` while the request runs and
    ``done`` once its response is stored; a retry with the same key and the same request replays
    that response instead of charging again (service/access/idempotency.py). ``request_hash`` is the
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
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Job(Base):
    """A long request run in the background (``Prefer: respond-async``): its progress while it runs,
    and the response the synchronous request would have given once it is done.

    ``state``: ``running``, ``done`` (``response_*`` holds a 2xx answer) or ``failed`` (an error
    answer). A job whose runner is provably gone (the server was killed) becomes ``failed`` with a
    409 ``request_interrupted`` answer (service/releases/runners.py)."""

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
    runner_host: Mapped[str | None] = mapped_column(String(200), nullable=True)
    runner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runner_started: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
