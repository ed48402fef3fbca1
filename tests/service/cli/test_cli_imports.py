"""``import service.cli`` stays light: building the command line, the protocol flags of ``campaign create`` and
``campaign plan`` included, reads the option declarations only (``service.campaigns.protocols.catalog``), never the
builders and estimators they describe, which load pandas, scipy, SQLAlchemy and cvxpy (issue 28 point 1: the
declarations' first form imported every protocol module and took ``import service.cli`` from 0.4 s to 2 s)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO

#: Packages the command line's own code does not need at import: each command imports what it runs when it runs.
HEAVY = ("pandas", "scipy", "sqlalchemy", "cvxpy", "duckdb", "pyspark", "fastapi", "mbi", "jax", "sklearn")


def _loaded_after(code: str) -> list[str]:
    """The modules ``sys.modules`` holds after running ``code`` in a fresh interpreter."""
    program = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, timeout=120,
                            check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_command_line_and_its_protocol_flags_load_no_numerical_library_nor_estimator() -> None:
    loaded = _loaded_after("import typer, service.cli\n"
                           "command = typer.main.get_command(service.cli.app)\n"
                           "assert command.commands['campaign'].commands['plan'].params\n"
                           "from service.campaigns.protocols.base import protocol_options\n"
                           "assert protocol_options()")
    heavy = sorted({module.split(".")[0] for module in loaded} & set(HEAVY))
    assert heavy == [], f"import service.cli loaded {heavy}"
    estimators = [module for module in loaded if module == "estimators" or module.startswith("estimators.")]
    assert estimators == [], f"import service.cli loaded estimators: {estimators}"
    implementations = [module for module in loaded if module.startswith("service.campaigns.protocols.")
                       and module.rsplit(".", 1)[1] not in ("base", "catalog")]
    assert implementations == [], f"reading the protocols' declarations imported their builders: {implementations}"


def test_a_protocols_builder_is_imported_when_it_first_runs() -> None:
    """The record names its builder (``Deferred``); calling it imports the module then, and only then."""
    loaded = _loaded_after("from service.campaigns.protocols import get_protocol\n"
                           "record = get_protocol('ldp-avg')\n"
                           "assert 'service.campaigns.protocols.ldp_avg' not in sys.modules\n"
                           "record.build.resolve()")
    assert "service.campaigns.protocols.ldp_avg" in loaded
