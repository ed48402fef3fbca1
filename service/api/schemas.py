"""Request and response bodies of the HTTP API (pydantic), with the limits the API enforces.

Every request body forbids unknown fields, every number is a JSON number and every flag a JSON boolean
(:data:`Number`, :data:`Integer`, :data:`Flag`: ``true`` or ``"0.01"`` in a numeric field is a 422 naming the
field, never read as 1 or 0.01), every number is finite (``NaN`` and infinities are refused with a 422 naming the
field), and every list and string has an upper bound, so a request that passes validation is small enough to run.
The service functions validate again (privacy parameters, column names, workload sizes): the schema is the first
line, not the only one.

No request body has a ``seed``: whoever chooses the seed of a release can regenerate and subtract its noise, so no
caller of the API may choose one, not even for post-processing (synthetic rows). Seeded releases exist only
in-process (tests, benchmarks); the API shows them as ``seeded`` and answers nothing from them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

from db.ids import MAX_ID
from service.api.declared import option_fields
from service.mechanisms import registry
from service.mechanisms.auto import AUTO
from service.mechanisms.registry import ReleaseKind
from service.privacy.cost import MAX_AMOUNT
from service.regression import methods
from service.regression.choice import AUTO_METHOD

#: Dataset names usable in URLs: no control characters and no "/" (it would split the path).
NAME_PATTERN = r"^[^\x00-\x1f\x7f/]+$"
MAX_NAME = 200
MAX_COLUMNS = 64  # attributes in one marginal
MAX_WORKLOAD_ENTRIES = 5_000
MAX_EPSILON = float(MAX_AMOUNT)  # larger budgets overflow the ledger's fixed-point columns and mean nothing
MAX_SYNTHETIC_ROWS = 1_000_000  # per request; the CLI writes larger samples to files
MAX_CSV_CHARS = 64 * 2**20


def _printable(value: str) -> str:
    """Refuse strings that cannot be stored as UTF-8 text (lone surrogates) or hold NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    if "\x00" in value:
        raise ValueError("text must not contain NUL characters")
    return value


Text = Annotated[str, AfterValidator(_printable)]
DatasetName = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)]
ColumnName = Annotated[Text, Field(min_length=1, max_length=MAX_NAME)]
#: The number types of every request body (here and in the collections' routes). Pydantic's default (lax) mode reads
#: ``true`` as 1 and ``"0.01"`` as 0.01, so a careless client was charged epsilon 1 for ``"epsilon": true``; in strict
#: mode a field takes a JSON number only (a JSON integer is still a number for a float field), an integer field a
#: JSON integer only, a flag a JSON boolean only, each refused otherwise with a 422 naming the field.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Integer = Annotated[int, Field(strict=True)]
Flag = Annotated[bool, Field(strict=True)]
#: A row's id in a body (a key's, a release's): an integer from 1 to 2^31-1, the most a table's id holds on every
#: backend (db/ids.py); larger is a 422 naming the field, never an overflow in the database (a 500).
Id = Annotated[Integer, Field(ge=1, le=MAX_ID)]
Epsilon = Annotated[Number, Field(gt=0, le=MAX_EPSILON)]
Delta = Annotated[Number, Field(ge=0, lt=1)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# errors -------------------------------------------------------------------------------------------
class ErrorBody(BaseModel):
    error: str = Field(description="A stable machine-readable code, e.g. budget_exceeded.")
    message: str = Field(description="What went wrong, naming the parameter, column or row at fault.")
    fields: list[str] | None = Field(None, description="For validation errors: the offending fields.")


class Health(BaseModel):
    status: Literal["ok"]
    version: str


class ReadinessCheck(BaseModel):
    name: str = Field(description="`database`, `schema`, or `source:NAME` for each attach source")
    ok: bool
    detail: str = Field(description="Why the check failed, in the service's words (no host, port, role or URL)")


class Readiness(BaseModel):
    status: Literal["ready", "degraded", "not_ready"] = Field(
        description="`ready`; `degraded`: an attach source is down, everything else works; `not_ready` (503): the "
                    "service database does not answer or its schema is not this code's")
    checks: list[ReadinessCheck]


# datasets -----------------------------------------------------------------------------------------
class AttributeSpec(Strict):
    size: Annotated[Integer, Field(ge=1, le=2**31 - 1)]
    kind: Literal["categorical", "ordinal"] = "ordinal"


class UploadedAttribute(AttributeSpec):
    labels: Annotated[list[Annotated[Text, Field(max_length=1000)]], Field(min_length=1, max_length=100_000)] | None = (
        Field(None, description="What each code means, in code order (`size` distinct labels; public): answers then "
              "show them (the dataset's `labels`)."))


class BinFormat(Strict):
    header: Flag = True
    names: Annotated[list[ColumnName], Field(max_length=10_000)] | None = None
    comment: Annotated[Text, Field(min_length=1, max_length=1)] | None = None
    strip: Flag = True

    @model_validator(mode="after")
    def _names(self) -> BinFormat:
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise ValueError("format.names contains duplicates")
        return self


class BinColumn(Strict):
    kind: Literal["categorical", "ordinal"] | None = None
    edges: Annotated[list[Number], Field(min_length=2, max_length=100_000)] | None = None
    values: Annotated[list[Annotated[Text, Field(max_length=1000)]], Field(min_length=1, max_length=100_000)] | None = (
        None
    )
    strip_suffix: Annotated[Text, Field(max_length=100)] = ""


class BinSpec(Strict):
    """A public binning spec, as in :mod:`workloads.binning` (the YAML file's content as JSON)."""

    format: BinFormat | None = None
    columns: Annotated[dict[ColumnName, BinColumn], Field(min_length=1, max_length=10_000)]


class DatasetUpload(Strict):
    """A table to load: CSV text plus either a domain (coded table) or a binning spec (raw table)."""

    name: DatasetName
    csv: Annotated[Text, Field(min_length=1, max_length=MAX_CSV_CHARS,
                               description="The table as CSV text with a header line.")]
    domain: Annotated[dict[ColumnName, Integer | UploadedAttribute], Field(min_length=1, max_length=10_000)] | None = (
        Field(None, description="For a table coded 0..size-1: {column: size} or {column: {size, kind, labels?}}."))
    categorical: Annotated[list[ColumnName], Field(max_length=10_000)] = Field(
        default_factory=list, description="With `domain`: the unordered columns.")
    bins: BinSpec | None = Field(None, description="For a raw table: the public binning spec.")
    engine: Literal["duckdb", "sql"] = Field(
        "duckdb", description="Where the rows are kept: `duckdb` (a Parquet file in the service's data folder, "
        "counted by DuckDB; the default) or `sql` (a table in the service database).")

    @model_validator(mode="after")
    def _one_source(self) -> DatasetUpload:
        if (self.domain is None) == (self.bins is None):
            raise ValueError("give exactly one of domain (coded table) or bins (raw table with a binning spec)")
        if self.bins is not None and self.categorical:
            raise ValueError("categorical goes with domain; a binning spec gives each column's kind itself")
        if self.domain is not None:
            for column, size in self.domain.items():
                if isinstance(size, int) and not 1 <= size <= 2**31 - 1:
                    raise ValueError(f"domain: size of column {column!r} must be a positive integer, got {size}")
        return self


#: Paths or globs in one attach (a glob may match more files: service.data.attach.through_source).
MAX_ATTACH_FILES = 1_000


class DatasetAttach(Strict):
    """A table attached where it lives, through a source the operator registered (`marginalia source add`): Parquet
    files inside the source's folder, or a table of its database or Spark session. No server path, no URL."""

    name: DatasetName
    source: Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN,
                                 description="A registered source's name (`marginalia source list`).")]
    parquet: Annotated[list[Annotated[Text, Field(min_length=1, max_length=1000)]],
                       Field(min_length=1, max_length=MAX_ATTACH_FILES)] | None = Field(
        None, description="For a folder source: Parquet files or globs (`part-*.parquet`, `year=*/**/*.parquet`) "
        "relative to the source's folder; nothing absolute, no `..`, nothing that resolves outside it.")
    table: Annotated[Text, Field(min_length=1, max_length=MAX_NAME)] | None = Field(
        None, description="For a SQL or Spark source: the table's name (for Spark a catalog name, `db.table`).")
    bins: BinSpec = Field(description="The public binning spec, applied inside the engine (only `columns` and "
                          "`format.strip` apply); a value outside it is refused, naming its column.")
    privacy_unit: Annotated[Text, Field(min_length=1, max_length=MAX_NAME)] | None = Field(
        None, description="A column identifying the person (or other unit) each row belongs to: every scan then keeps "
        "one row per unit, so every guarantee holds per unit (docs/privacy.md 1.1). Not coded, never released.")

    @model_validator(mode="after")
    def _one_kind(self) -> DatasetAttach:
        if (self.parquet is None) == (self.table is None):
            raise ValueError("give exactly one of parquet (files inside a folder source) or table (a SQL or Spark "
                             "source's table)")
        return self


class DatasetMigrate(Strict):
    engine: Literal["duckdb", "sql"] = Field(description="The engine to move the rows to: a SQL table of the "
                                             "service database moves to `duckdb` (a Parquet file in the data folder).")


class DatasetOut(BaseModel):
    name: str
    rows: int | None = Field(description="The exact count: of rows, or of units for a table with a `privacy_unit` "
                             "(one row kept per unit); shown to stewards only (it is not a DP statistic).")
    engine: str = Field(description="The data engine that counts the table: `duckdb`, `sql` or `spark` (where the "
                        "table lives is the steward's business and is never shown).")
    privacy_unit: str | None = Field(
        default=None, description="The column naming one privacy unit when the table was attached with one "
        "(several rows per person): every count, model and guarantee is then about units, one row kept per unit "
        "(docs/privacy.md 1.1). Null: one row is one unit.")
    domain: dict[str, AttributeSpec]
    labels: dict[str, list[str]] = Field(
        default_factory=dict, description="The label of each code of a column, from the public binning spec of a raw "
        "table (a bin such as `[25, 30)` or a category's name) or the labels a coded table's domain gave.")


# budgets ------------------------------------------------------------------------------------------
class BudgetIn(Strict):
    epsilon: Epsilon
    delta: Delta = 0.0
    delta_reserve: Delta | None = Field(
        None, description="The part of delta kept for (epsilon, delta) charges made after zCDP charges have started "
        "(docs/privacy.md 6.3); at most delta. Omitted: a tenth of delta, so that objective perturbation stays "
        "possible after zCDP releases; 0 gives all of delta to zCDP releases.")


class BudgetOut(BaseModel):
    dataset: str
    epsilon_total: float
    delta_total: float
    delta_reserve: float = Field(description="Delta kept for (epsilon, delta) releases after zCDP releases start.")
    epsilon_spent: float = Field(description="The composed epsilon of everything spent (the accountant's rule).")
    delta_spent: float = Field(description="Delta spent by (epsilon, delta) releases.")
    rho_spent: float
    epsilon_pure_spent: float = Field(description="Sum of the epsilons of (epsilon, delta) releases.")
    epsilon_priced_spent: float = Field(description="What those epsilons cost in the rule (after the zCDP anchor: "
                                        "the Renyi divergence of randomized response).")
    epsilon_remaining: float = Field(description="epsilon_total - epsilon_spent, in the budget's own epsilon.")
    delta_remaining: float = Field(description="The delta (epsilon, delta) releases can still spend.")
    epsilon_spendable: float = Field(description="The largest epsilon of one more (epsilon, delta) release.")
    delta_spendable: float = Field(description="The largest delta of one more (epsilon, delta) release.")
    rho_spendable: float = Field(description="The largest rho of one more zCDP release.")
    zcdp_anchor_fixed: bool = Field(description="Whether the first zCDP charge has fixed the accountant's anchor.")
    zcdp_alpha: float | None = Field(description="The anchor's Renyi order (null before the first zCDP release).")
    zcdp_delta: float | None = Field(description="The delta held by zCDP releases (null before).")
    zcdp_offset: float | None = Field(description="The anchor's one-time epsilon offset t (null before).")


class BudgetEffectOut(BaseModel):
    epsilon_total: float
    epsilon_spent_before: float = Field(description="The budget's composed epsilon spent just before this release.")
    epsilon_spent_after: float = Field(description="... and just after it.")
    note: str = Field(description="Why the release cost what it did in epsilon, when that is not just its epsilon "
                      "(e.g. the first zCDP release fixes the accountant's anchor).")


# releases -----------------------------------------------------------------------------------------
class WorkloadEntry(Strict):
    attributes: Annotated[list[ColumnName], Field(min_length=1, max_length=MAX_COLUMNS)]
    weight: Annotated[Number, Field(gt=0, le=1e6)] = 1.0


NamedWorkload = Annotated[str, Field(max_length=len("target:") + MAX_NAME,
                                     pattern=r"^(all-[1-9][0-9]?way|target:[^\x00]{1,200})$",
                                     description="all-1way, all-2way, all-3way ... or target:COLUMN")]
WorkloadList = Annotated[
    list[Annotated[list[ColumnName], Field(min_length=1, max_length=MAX_COLUMNS)] | WorkloadEntry],
    Field(min_length=1, max_length=MAX_WORKLOAD_ENTRIES),
]


#: The marginal mechanisms registered when the API is built (:mod:`service.mechanisms.registry`).
MARGINAL_MECHANISMS = tuple(registry.names(ReleaseKind.MARGINALS))
#: The options of a marginal release: one field per public option the marginal mechanisms declare
#: (:class:`~service.options.OptionSpec`, :mod:`service.api.declared`); which mechanism takes which is
#: checked by :class:`MarginalReleaseIn`.
ReleaseOptions = create_model(
    "ReleaseOptions", __base__=Strict, __doc__="The mechanism's options; each field says which mechanisms take it.",
    **option_fields({name: registry.get(name).options for name in MARGINAL_MECHANISMS}, Integer, Number))


class MarginalReleaseIn(Strict):
    """A marginal release. Laplace takes epsilon; gaussian/mst/aim/residual take rho, or epsilon and delta; `auto`
    (rho, or epsilon and delta; no options) chooses among the zCDP ones from the domain, the workload and the budget
    only (docs/mechanisms.md, "Which mechanism: auto")."""

    mechanism: Literal[(*MARGINAL_MECHANISMS, AUTO)]  # type: ignore[valid-type]
    workload: NamedWorkload | WorkloadList = "all-2way"
    epsilon: Epsilon | None = None
    delta: Delta | None = None
    rho: Annotated[Number, Field(gt=0, le=MAX_EPSILON)] | None = None
    options: ReleaseOptions = Field(default_factory=ReleaseOptions)

    @model_validator(mode="after")
    def _options_fit_mechanism(self) -> MarginalReleaseIn:
        for name in self.options.model_dump(exclude_none=True):
            if self.mechanism == AUTO:
                raise ValueError(f"options.{name}: auto chooses the options too, and takes none: name a mechanism "
                                 "to set its options")
            if name not in registry.get(self.mechanism).option_names:
                takers = [m for m in MARGINAL_MECHANISMS if name in registry.get(m).option_names]
                raise ValueError(f"options.{name} is for {' or '.join(takers)}, not {self.mechanism}")
        return self

    def service_workload(self) -> str | list[object]:
        if isinstance(self.workload, str):
            return self.workload
        return [e if isinstance(e, list) else e.model_dump() for e in self.workload]

    def service_options(self) -> dict[str, object]:
        return self.options.model_dump(exclude_none=True)


class MarginalPlanIn(MarginalReleaseIn):
    """A marginal release's dry run: the release's own body, plus ``target_error`` to solve for epsilon."""

    target_error: Annotated[Number, Field(gt=0, le=MAX_EPSILON, description=(
        "Solve for epsilon: the expected L1 error of the normalised marginal that every workload marginal must "
        "meet (laplace, gaussian, residual). Omit epsilon and rho; give delta for a zCDP mechanism."))] | None = None


class Cost(BaseModel):
    epsilon: float
    delta: float
    rho: float


class LedgerUnitsOut(BaseModel):
    """The ledger row a charge writes, in the ledger's integer units (docs/privacy.md 6.4)."""

    epsilon_units: int
    delta_units: int
    rho_units: int
    epsilon_priced_units: int
    epsilon_spent_after_units: int | None
    anchor_alpha_units: int | None
    anchor_delta_z_units: int | None
    anchor_offset_units: int | None


class CellErrorOut(BaseModel):
    attributes: list[str]
    cells: int
    standard_error: float = Field(description="Per cell, in counts (of the unbiased estimate; for a simulation, the "
                                  "root mean square cell error measured on the proxy).")
    expected_l1: float = Field(description="The expected L1 error of the marginal, in counts.")
    expected_l1_normalised: float = Field(description="The expected L1 error of the marginal normalised to a "
                                          "distribution.")
    excess_kurtosis: float | None = Field(description="Of each cell's error (0: Gaussian); null for a simulation.")


class SimulationOut(BaseModel):
    trials: int = Field(description="Runs of the planned mechanism on the proxy.")
    seconds: float = Field(description="What the simulation took.")
    proxy_release: int = Field(description="The stored release whose synthetic rows stood in for the table.")
    proxy_mechanism: str
    proxy_coverage: float = Field(description="The share of the workload's marginals the proxy release measured (no "
                                  "more than a spanning tree's: the estimate is likely low, `basis` says so).")


class AccuracyOut(BaseModel):
    basis: str = Field(description="The formulas and approximations the figures rest on, or the simulation's "
                       "proxy and settings.")
    rows: int = Field(description="The dataset's row count N that normalises the L1 errors.")
    normalised_by: str
    total_standard_error: float | None = Field(description="The standard error of the answers' total: an answer "
                                               "divided by its own total strays from the normalised figures by about "
                                               "this over N (closed forms only).")
    worst: CellErrorOut = Field(description="The workload marginal with the largest expected error.")
    marginals: list[CellErrorOut]
    mean_l1_normalised: float | None = Field(None, description="For a simulation: the workload's mean normalised L1 "
                                             "error.")
    simulation: SimulationOut | None = Field(None, description="For mst and aim: how the estimate was simulated.")


class TargetOut(BaseModel):
    target_error: float
    epsilon: float = Field(description="The smallest epsilon (4 significant digits, rounded up) whose worst workload "
                           "marginal's expected normalised L1 error meets the target; the plan is made at it.")
    delta: float | None
    expected_error: float
    note: str


class RefusalOut(BaseModel):
    error: str = Field(description="The refusal's stable code: `budget_exceeded`.")
    message: str


class ChargePlanOut(BaseModel):
    dry_run: bool = Field(description="Always true: nothing was spent or stored.")
    fits: bool = Field(description="Whether the charge fits the budget now.")
    cost: Cost = Field(description="The charge, in the release's own terms (rho for zCDP mechanisms).")
    budget: BudgetEffectOut | None = Field(description="The budget's composed epsilon spent before -> after the "
                                           "charge, as the release would report it (null when no zCDP release can "
                                           "fit at all).")
    epsilon_charged: float | None = Field(description="What the charge costs in the budget's own epsilon (after - "
                                          "before).")
    refusal: RefusalOut | None = Field(description="When it does not fit: the error the release would be refused "
                                       "with (`budget_exceeded`), word for word; nothing is charged.")


class AutoChoiceOut(BaseModel):
    """What `mechanism: auto` chose, from the domain, the workload and the budget only."""

    mechanism: str
    options: dict[str, Any]
    rule: int = Field(description="The rule that chose it (docs/mechanisms.md, \"Which mechanism: auto\").")
    reason: str
    figures: dict[str, float] = Field(description="The public figures the rule compared.")


class ReleasePlanOut(ChargePlanOut):
    dataset: str
    mechanism: str
    kind: str
    fixes_anchor: bool = Field(description="Whether this is the first zCDP charge, which fixes the accountant's "
                               "anchor (see `budget.note`).")
    ledger: LedgerUnitsOut = Field(description="The ledger row the release would write.")
    accuracy: AccuracyOut | None = Field(description="The expected error of each workload marginal: in closed "
                                         "form (laplace, gaussian, residual) or estimated by simulation on a stored "
                                         "release's synthetic rows (mst, aim); null otherwise, `accuracy_note` says "
                                         "why.")
    accuracy_basis: Literal["closed_form", "simulation", "none"] = Field(
        description="What `accuracy` rests on: `closed_form`, `simulation`, or `none` (no estimate is possible).")
    accuracy_note: str
    target: TargetOut | None = Field(description="With `target_error`: the epsilon solved for.")
    auto: AutoChoiceOut | None = Field(None, description="With `mechanism: auto`: what it chose and why (then "
                                       "`mechanism` is the chosen one).")


class MethodChoiceOut(BaseModel):
    """What `method: auto` chose, from the design's domain sizes and the budget only."""

    method: str
    rule: str = Field(description="The rule that chose it (docs/regression-results.md, \"method auto\").")
    reason: str
    figures: dict[str, float] = Field(description="The public figures the rule compared.")


class FitPlanOut(ChargePlanOut):
    dataset: str
    task: str
    method: str
    target: str
    features: list[str]
    answered_by: int | None = Field(description="A stored release that answers the fit for free (then nothing "
                                    "would be charged).")
    note: str
    release: ReleasePlanOut | None = Field(description="The plan of the new release the fit would make.")
    auto: MethodChoiceOut | None = Field(None, description="With method auto: the method it chose and why.")


# regression fits ----------------------------------------------------------------------------------
#: The regression methods registered when the API is built (:mod:`service.regression.methods`).
FIT_METHODS = (*methods.names(), AUTO_METHOD)
#: The settings some method takes (DP-IHT's sparsity, iterations...), top-level fields of :data:`FitIn`.
FIT_SETTINGS = methods.option_names()


class _FitFields(Strict):
    """The fields every fit has; :data:`FitIn` adds the methods' settings from their declarations."""

    target: ColumnName
    features: Annotated[list[ColumnName], Field(min_length=1, max_length=10_000)] | None = None
    method: Literal[FIT_METHODS] = "dd-ssp"  # type: ignore[valid-type]
    epsilon: Epsilon | None = None
    delta: Delta | None = None
    release: Id | None = None
    intercept: Flag = True
    allow_unmeasured: Flag = Field(False, description="Let a marginal release that did not measure every column "
                                   "and pair among target and features answer (dd-ssp, aim-synth): the missing "
                                   "parts are then the model's extrapolation. Refused (422) otherwise.")

    @model_validator(mode="after")
    def _budget_or_release(self) -> _FitFields:
        if self.release is not None and (self.epsilon is not None or self.delta is not None):
            raise ValueError("give either release or epsilon/delta, not both")
        wrong, takers = methods.misplaced(self.method, self.settings())
        if wrong:
            raise ValueError(f"{', '.join(wrong)} apply to method {' or '.join(takers)} only")
        return self

    def settings(self) -> dict[str, object]:
        """The settings given (DP-IHT's; none for the methods that take none)."""
        return {key: getattr(self, key) for key in FIT_SETTINGS if getattr(self, key, None) is not None}


FitIn = create_model(
    "FitIn", __base__=_FitFields,
    __doc__="A private regression. With ``release`` the fit reads that release (free); without it a stored\n"
            "release that can answer is reused (free), or a new one is made with ``epsilon``/``delta`` and\n"
            "charged through the accountant.",
    **option_fields({spec.name: spec.options for spec in methods.specs()}, Integer, Number))


class FitOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    dataset: str
    task: str
    method: str
    target: str
    features: list[str]
    intercept: bool
    release_id: int
    reused: bool
    cost: Cost = Field(description="What THIS call was charged (zero when a stored release answered).")
    budget: BudgetEffectOut | None = Field(None, description="When a new release was made: what it cost in the "
                                           "budget's composed epsilon.")
    auto: MethodChoiceOut | None = Field(None, description="With method auto: the method it chose and why.")
    feature_names: list[str]
    coefficients: dict[str, float] = Field(description="On the design's encoding: ordinal columns and a linear "
                                           "target in [-1, 1], categorical levels as indicators.")
    coefficients_per_code: dict[str, float] = Field(
        description="The same model on the columns' codes: per code of an ordinal feature, per level (against level "
        "0) of a categorical one, a linear target in its codes (logistic: the log-odds); `(intercept)` is the "
        "prediction at every code 0. Free post-processing of `coefficients` (the encoding is public).")
    design: dict[str, Any] = Field(description="The encoding, so a client can encode rows the same way.")
    # the coefficients' error bars (issue 29): one shape for every method, service/regression/uncertainty.py
    standard_errors: dict[str, float] | None = Field(None, description="Per coefficient (the names of "
                                                     "`coefficients`, on the encoded scale), its standard error; "
                                                     "null when the method gives none (`error_basis`).")
    confidence_intervals: dict[str, list[float]] | None = Field(
        None, description="Per coefficient, `[low, high]`: the normal interval `coefficient +- z standard_error` at "
        "`confidence_level`.")
    confidence_level: float = Field(0.95, description="The level of `confidence_intervals`.")
    error_basis: str = Field("none", description="How the standard errors were computed from the released "
                             "statistics and the public noise scales (dd-ssp from a residual, laplace or gaussian "
                             "release: the delta method in closed form; from an mst or aim release, and aim-synth: "
                             "the release's parametric bootstrap), or `none`.")
    error_components: dict[str, dict[str, float]] | None = Field(
        None, description="The parts of each standard error where the method separates them: `noise` (the privacy "
        "noise's: how far the answer is from the same estimator on the whole table) and `sampling` (the table as a "
        "sample of a population); the standard error is the root of their summed squares.")


class ReleaseCreated(BaseModel):
    release_id: int
    dataset: str
    mechanism: str
    status: str
    cost: Cost
    budget: BudgetEffectOut
    auto: AutoChoiceOut | None = Field(None, description="With `mechanism: auto`: what it chose and why.")


class ReleaseInfo(BaseModel):
    release_id: int
    dataset: str
    kind: str
    mechanism: str
    status: str
    seeded: bool = Field(description="Made with a known seed (tests, benchmarks): no privacy; it answers nothing "
                         "here and its details are not shown.")
    params: dict[str, Any]
    details: dict[str, Any]


class JobProgressOut(BaseModel):
    done: int
    total: int
    message: str


class JobFitOut(BaseModel):
    done: int = Field(description="Iterations of the graphical-model fit done so far.")
    total: int


class JobOut(BaseModel):
    job_id: int
    dataset: str
    kind: str = Field(description="`release`, `fit/linear` or `fit/logistic`.")
    state: Literal["running", "done", "failed"]
    progress: JobProgressOut = Field(description="The release's steps (measurements, selection rounds).")
    fit: JobFitOut | None = Field(description="While a graphical model is fitted: its iterations.")
    status_code: int | None = Field(description="Once finished: the status the synchronous request would have had.")
    result: Any = Field(description="Once finished: the body the synchronous request would have had (its answer, "
                        "or an error body).")
    created_at: str
    finished_at: str | None


#: ``codes`` of a marginal or synthetic query: the table's labels by default.
CODES_FIELD = Field(False, description="`true`: codes only, without the labels of the table's spec or domain "
                    "(`labels` is then empty).")
#: ``cost`` of an answer from a stored release.
FREE_COST_FIELD = Field(description="What this answer cost: nothing (post-processing). The release `release_id` "
                        "paid when it was made (its ledger entry).")


class MarginalQuery(Strict):
    attributes: Annotated[list[ColumnName], Field(min_length=1, max_length=MAX_COLUMNS)]
    codes: Flag = CODES_FIELD
    bootstrap: Flag = Field(False, description="`true`: a marginal an MST or AIM release did not measure gets "
                            "standard errors from the release's parametric bootstrap (its measurements' noise "
                            "redrawn at their public scales, the model refitted; computed the first time, seconds to "
                            "a minute, then stored; free). Without it such a marginal has none (`error_basis` "
                            "`none`), so a plain answer stays a lookup.")


class CoverageOut(BaseModel):
    measured: bool = Field(description="Whether one marginal the release measured holds every attribute asked.")
    measured_cliques: list[list[str]] = Field(description="The release's measured marginals over two (for a "
                                              "1-way question: one) of the attributes asked.")
    unmeasured_attributes: list[str] = Field(description="Attributes the release never measured: the model knows "
                                             "nothing of them.")
    unmeasured_pairs: list[list[str]] = Field(description="Pairs never measured together: their dependence in the "
                                              "answer is the model's extrapolation (often independence).")
    warning: str | None = Field(description="A sentence saying what is extrapolated, or null when all was measured.")


class MarginalOut(BaseModel):
    release_id: int
    attributes: list[str]
    shape: list[int]
    counts: Any = Field(description="Nested lists (axes in the order of `attributes`) of estimated counts.")
    standard_errors: Any = Field(default=None, description="Nested lists like `counts`: each cell's standard "
                                 "error, computed as `error_basis` says; null when it is `none`.")
    error_basis: str = Field(description="How `standard_errors` were computed. `measurement`: from the release's "
                             "measurements and their public noise scales (residual, laplace, gaussian: of the "
                             "unbiased estimate the non-negative `counts` adjust; mst, aim, a marginal inside a "
                             "measured clique: of the raw measurement, summed cells adding variances and several "
                             "measurements combined by inverse variance -- the model's `counts` pool every "
                             "measurement and can be more accurate). `parametric bootstrap, K replicates`: the spread "
                             "of the marginal over K refits of the model to redrawn measurements (mst, aim, a "
                             "marginal the release did not measure, asked with `bootstrap`). `none`: no error bars "
                             "(an unmeasured marginal without `bootstrap`; a residual release's marginal outside "
                             "its measured closure; an mst or aim release made before they kept their "
                             "measurements).")
    labels: dict[str, list[str]] = Field(description="The label of each code of each axis the table's spec or "
                                         "domain labels (a bin such as `[25, 30)`, a category's name); empty for "
                                         "other axes and with `codes`.")
    coverage: CoverageOut = Field(description="What of this marginal the release measured, and what its model "
                                  "extrapolates.")
    cost: Cost = FREE_COST_FIELD


class CampaignMarginalOut(MarginalOut):
    """A marginal answered by a ``marginals`` campaign's model: a release's answer, with the campaign in place of the
    release."""

    release_id: None = Field(None, description="null: a campaign answered, not a release.")
    campaign: str = Field(description="The marginals campaign whose model answered.")
    reports: int = Field(description="The reports the campaign's model was fitted to.")


class SyntheticQuery(Strict):
    rows: Annotated[Integer, Field(ge=1, le=MAX_SYNTHETIC_ROWS)]
    codes: Flag = CODES_FIELD


class SyntheticOut(BaseModel):
    release_id: int
    rows: int
    columns: list[str]
    data: dict[str, list[int | str]] = Field(description="Column name -> one value per synthetic row: the label "
                                             "for a column the table's spec or domain labels, else the code (codes "
                                             "only with `codes`).")
    labels: dict[str, list[str]] = Field(description="Column -> the label of each code, in code order, for the "
                                         "labelled columns (empty with `codes`).")
    cost: Cost = FREE_COST_FIELD


class CampaignSyntheticOut(SyntheticOut):
    """Synthetic rows drawn from a ``marginals`` campaign's model."""

    release_id: None = Field(None, description="null: a campaign answered, not a release.")
    campaign: str = Field(description="The marginals campaign whose model drew the rows.")


# ledger -------------------------------------------------------------------------------------------
class LedgerRow(BaseModel):
    entry_id: int
    entry: str
    release_id: int | None
    release_status: str | None
    campaign_id: int | None = Field(None, description="The campaign a campaign-simulation charge paid for.")
    mechanism: str
    epsilon: float
    delta: float
    rho: float
    epsilon_priced: float = Field(description="What the entry's epsilon costs in the accountant's rule.")
    epsilon_spent_after: float
    principal: str
    note: str
    created_at: str


class LedgerOut(BaseModel):
    dataset: str
    entries: list[LedgerRow]
