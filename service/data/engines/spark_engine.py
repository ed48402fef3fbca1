"""The Spark engine's record: a table of the Spark session, attached where it lives (``dataset attach --spark TABLE
--spec SPEC``) and coded inside Spark by the spec on every scan (:mod:`service.data.engines.spark`).

One location, :class:`SparkTableName` (``{"spark": TABLE, "spec": SPEC}``, with ``"privacy_unit"`` when set):
``TABLE`` is a name in the session's catalog (``db.table``) or a path Spark reads (``parquet.`/data/adult```). Spark
keeps no copy of the rows for the service (``dataset load`` cannot store there). Attaching (:func:`attach`) refuses
an empty name; the session is reached, and the table's schema read, once no dataset claims the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import Engine

from service.data.engines import claims as claiming
from service.data.engines.base import SPARK, EngineError, TableEngine
from service.data.engines.claims import Claim
from service.data.engines.dialect import SPARK_SQL
from service.data.engines.record import Attaching, DataEngine, Location, Opening, spec_of, spec_to_dict
from service.data.engines.spec_sql import spec_columns
from service.errors import InvalidInput
from workloads.binning import BinningSpec

if TYPE_CHECKING:
    from service.data.engines.spark import SparkTable


@dataclass(frozen=True)
class SparkTableName(Location):
    """The table ``spark`` of the Spark session, coded by the binning spec ``spec``."""

    TAG: ClassVar[str | None] = "spark"
    spark: str
    spec: dict[str, object] = field(default_factory=dict)
    privacy_unit: str | None = None

    def open(self, service: Engine, dataset: Opening) -> TableEngine:  # noqa: ARG002
        from service.data.engines.spark import SparkTable  # the session is started on first use only

        spec = spec_of(self.spec, dataset.name)
        return SparkTable(self.spark, spec_columns(spec, SPARK_SQL), dataset.name, privacy_unit=self.privacy_unit)

    def claims(self, service: Engine, data_table: str) -> set[Claim]:  # noqa: ARG002
        return claiming.spark_claims(self.spark)


@dataclass
class _SparkAttach:
    """:class:`~service.data.engines.record.Attaching` of a table of the Spark session (module docstring)."""

    name_in_spark: str
    spec: BinningSpec
    unit: str | None
    name: str
    what: str = "table"
    unreadable: str = "engine_error"
    opened: SparkTable | None = None

    @property
    def where(self) -> str:
        return f"--spark {self.name_in_spark}"

    @property
    def source(self) -> str:
        return f"spark:{self.name_in_spark}"

    @property
    def prefix(self) -> str:
        return f"{self.where}: "

    @property
    def claims(self) -> dict[Claim, str]:
        return dict.fromkeys(claiming.spark_claims(self.name_in_spark), self.where)

    @property
    def location(self) -> SparkTableName:
        return SparkTableName(self.name_in_spark, spec_to_dict(self.spec), self.unit)

    def columns(self) -> list[str]:
        return list(self.table().columns)

    def table(self) -> SparkTable:
        if self.opened is None:
            from service.data.engines.spark import SparkTable

            try:
                self.opened = SparkTable(self.name_in_spark, spec_columns(self.spec, SPARK_SQL), self.name,
                                         privacy_unit=self.unit)
            except EngineError as exc:
                raise InvalidInput(f"{self.where}: {exc.message}. Nothing was stored.", code="engine_error") from None
        return self.opened

    def close(self) -> None:
        if self.opened is not None:
            self.opened.close()


def attach(target: object, spec: BinningSpec, unit: str | None, name: str) -> Attaching:
    """The attach of the Spark table ``target`` (module docstring)."""
    if not isinstance(target, str) or not target.strip():
        raise InvalidInput("--spark needs a table name or a path Spark reads", code="invalid_parameter")
    return _SparkAttach(target, spec, unit, name)


ENGINE = DataEngine(SPARK, locations=(SparkTableName,), attach=attach)
