"""The mechanism registry: a mechanism defined here, in the test, releases through the engine with nothing else
edited; the API schema and the command line offer exactly the registered names; every built-in is registered."""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
import typer
from sqlalchemy import text

from service.api import create_app
from service.cli import app
from service.errors import InvalidInput
from service.mechanisms import direct, registry
from service.mechanisms.registry import MechanismSpec, PrivacyNotion, ReleaseKind, RunRequest
from service.options import OptionSpec
from service.privacy.cost import PrivacyCost
from service.releases import answers
from service.releases import engine as release_engine
from tests.support.datasets import titanic_with_budget

DUMMY = "test-halved-laplace"


def _halved_laplace(request: RunRequest):  # noqa: ANN202
    """A mechanism that exists only in this test: the Laplace mechanism on the workload, at half the charged
    epsilon, reporting the half it used (so the engine's check that a mechanism used what it was charged fails
    loudly if the registry ever handed it the wrong cost)."""
    def run(oracle, noise, progress):  # noqa: ANN001, ANN202
        result = direct.run_laplace(oracle, request.queries, request.cost.epsilon / 2, noise, progress=progress)
        result.cost = request.cost
        result.details["halved"] = True
        return result

    return run


@pytest.fixture
def dummy() -> Iterator[MechanismSpec]:
    spec = registry.register(MechanismSpec(DUMMY, ReleaseKind.MARGINALS, PrivacyNotion.PURE, _halved_laplace,
                                           options=(OptionSpec("iters", int),), answers=frozenset({"dd-ssp"})))
    try:
        yield spec
    finally:
        registry.unregister(DUMMY)


@pytest.fixture
def titanic(engine, data_dir: Path):  # noqa: ANN001, ANN201
    return titanic_with_budget(engine, data_dir, "4", "1e-6")


def _charges(engine) -> list[tuple[int, int, int, int]]:  # noqa: ANN001
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text(
            "SELECT release_id, epsilon_units, delta_units, rho_units FROM ledger_entries WHERE entry = 'charge' "
            "ORDER BY id"))]


def test_a_mechanism_registered_in_a_test_releases_through_the_engine(engine, titanic, dummy) -> None:  # noqa: ANN001
    outcome = release_engine.release_marginals(engine, "titanic", DUMMY, [["Sex"], ["Pclass", "Survived"]],
                                               epsilon="0.5", seed=4)
    assert outcome.mechanism == DUMMY and outcome.cost.epsilon == Fraction(1, 2)
    assert _charges(engine) == [(outcome.release_id, 5 * 10**11, 0, 0)]  # charged by its notion: pure epsilon
    stored = answers.get_release(engine, outcome.release_id)
    assert (stored.kind, stored.mechanism, stored.status) == ("marginals", DUMMY, "complete")
    assert stored.details["halved"] is True
    # its release answers like any marginal release, and its coverage is read by the default (workload) rule
    answer = answers.answer_marginal(engine, outcome.release_id, ["Pclass", "Survived"], allow_seeded=True)
    assert answer["shape"] == [3, 3] and answer["coverage"]["measured"] is True
    assert answers.answer_marginal(engine, outcome.release_id, ["Sex", "Pclass"],
                                   allow_seeded=True)["coverage"]["measured"] is False


def test_a_registered_mechanism_refuses_what_its_spec_does_not_allow(engine, titanic, dummy) -> None:  # noqa: ANN001
    with pytest.raises(InvalidInput, match=f"{DUMMY} has no option 'rounds'"):
        release_engine.release_marginals(engine, "titanic", DUMMY, "all-1way", epsilon="0.5", options={"rounds": 2})
    with pytest.raises(InvalidInput, match="option iters must be a positive int"):
        release_engine.release_marginals(engine, "titanic", DUMMY, "all-1way", epsilon="0.5", options={"iters": 0.5})
    with pytest.raises(InvalidInput, match="pure-DP mechanism: give epsilon, not rho"):
        release_engine.release_marginals(engine, "titanic", DUMMY, "all-1way", rho="0.1")
    assert _charges(engine) == []  # every refusal came before the reservation


def test_an_unregistered_mechanism_is_refused_naming_the_registered_ones(dummy) -> None:  # noqa: ARG001
    registry.unregister(DUMMY)
    with pytest.raises(InvalidInput,
                       match=r"mechanism must be one of \['laplace', 'gaussian', 'mst', 'aim', 'residual'\]"):
        registry.get(DUMMY, kind=ReleaseKind.MARGINALS)
    with pytest.raises(ValueError, match="registered already"):
        registry.register(registry.get("aim"))


def test_the_api_schema_and_the_cli_offer_exactly_the_registered_marginal_mechanisms() -> None:
    registered = registry.names(ReleaseKind.MARGINALS)
    assert registered == ["laplace", "gaussian", "mst", "aim", "residual"]
    schema = create_app(None).openapi()  # type: ignore[arg-type]
    offered = [*registered, "auto"]  # auto chooses among the zCDP ones (service/mechanisms/auto.py)
    assert schema["components"]["schemas"]["MarginalReleaseIn"]["properties"]["mechanism"]["enum"] == offered
    command = typer.main.get_command(app).commands["release"].commands["marginals"]  # type: ignore[attr-defined]
    option = next(p for p in command.params if p.name == "mechanism")
    assert re.split(r", (?:or )?", option.help.split(" (the default)")[0]) == offered and option.default == "auto"


def test_every_builtin_mechanism_is_registered_with_its_kind_and_notion() -> None:
    table = {spec.name: (spec.kind, spec.notion) for spec in registry.specs()}
    assert table == {
        "laplace": (ReleaseKind.MARGINALS, PrivacyNotion.PURE), "gaussian": (ReleaseKind.MARGINALS, PrivacyNotion.ZCDP),
        "mst": (ReleaseKind.MARGINALS, PrivacyNotion.ZCDP), "aim": (ReleaseKind.MARGINALS, PrivacyNotion.ZCDP),
        "residual": (ReleaseKind.MARGINALS, PrivacyNotion.ZCDP),
        "adassp": (ReleaseKind.GRAM, PrivacyNotion.ZCDP), "objpert": (ReleaseKind.MODEL, PrivacyNotion.APPROXIMATE),
        "dp-iht": (ReleaseKind.MODEL, PrivacyNotion.ZCDP),
    }
    assert {name for name in table if "dd-ssp" in registry.get(name).answers} == {"laplace", "gaussian", "mst", "aim",
                                                                                  "residual"}


def test_an_approximate_dp_mechanism_is_charged_its_epsilon_and_delta() -> None:
    assert registry.get("objpert").cost("0.5", "1e-6", None) == PrivacyCost(
        epsilon=Fraction(1, 2), delta=Fraction(1, 10**6))
    with pytest.raises(InvalidInput, match="delta > 0"):
        registry.get("objpert").cost("0.5", "0", None)
    with pytest.raises(InvalidInput, match="not rho"):
        registry.get("objpert").cost(None, None, "0.1")


# issue 19: options declared once, on the spec ------------------------------------------------------------------------
KNOB = OptionSpec("knob", int, "a knob of a test mechanism", default=3, high=7)
SHADE = OptionSpec("shade", str, "a colour", choices=("light", "dark"))
INNER = OptionSpec("inner", help="set by the service", internal=True)


def test_a_bound_declared_on_the_spec_is_enforced_in_process_too(engine, titanic) -> None:  # noqa: ANN001
    """The API refused max_model_size above 4096 MB and rounds above 100,000 but the engine (the command line,
    in-process callers) took them: the bound lived in the API's schema only. Declared on the spec, it holds for all."""
    with pytest.raises(InvalidInput, match=r"option max_model_size must be a positive float <= 4096, got 5000"):
        release_engine.release_marginals(engine, "titanic", "laplace", "all-1way", epsilon="0.5",
                                         options={"max_model_size": 5000.0})
    with pytest.raises(InvalidInput, match=r"option rounds must be a positive int <= 100000"):
        release_engine.release_marginals(engine, "titanic", "aim", "all-1way", rho="0.01",
                                         options={"rounds": 100_001})
    with pytest.raises(InvalidInput,
                       match=r"option loss must be one of \['sum_var', 'max_var', 'max_var_floor'\], got 'l1'"):
        release_engine.release_marginals(engine, "titanic", "residual", "all-1way", rho="0.01",
                                         options={"loss": "l1"})
    assert _charges(engine) == []


def test_the_cli_and_the_api_build_their_options_from_the_declarations() -> None:
    """A declaration is all a mechanism writes: the command line gets ``--knob``/``--shade`` (typed, helped, no
    ``--inner``) and the API a strict, bounded field for each, with no edit of either."""
    from pydantic import ValidationError, create_model
    from typer.testing import CliRunner

    from service.api.declared import option_fields
    from service.api.schemas import Integer, Number, Strict
    from service.cli.options import declared_options

    owners = {"test-a": (KNOB, SHADE, INNER), "test-b": (KNOB,)}
    seen: list[dict[str, object]] = []
    command = typer.Typer()

    @command.command()
    @declared_options(owners)
    def run(name: str, quiet: bool = False, options: dict[str, object] | None = None) -> None:  # noqa: ARG001
        seen.append(options or {})

    runner = CliRunner()
    assert runner.invoke(command, ["x", "--knob", "5", "--shade", "dark"]).exit_code == 0
    assert runner.invoke(command, ["x"]).exit_code == 0
    assert seen == [{"knob": 5, "shade": "dark"}, {}]
    assert runner.invoke(command, ["x", "--inner", "1"]).exit_code == 2
    assert runner.invoke(command, ["x", "--knob", "five"]).exit_code == 2
    params = {p.name: p for p in typer.main.get_command(command).params}
    assert params["knob"].help == "test-a, test-b: a knob of a test mechanism (default 3)."
    assert params["shade"].help == "test-a: a colour (one of light, dark)."

    model = create_model("TestOptions", __base__=Strict, **option_fields(owners, Integer, Number))
    assert model(knob=7, shade="light").model_dump() == {"knob": 7, "shade": "light"}
    for bad in ({"knob": 8}, {"knob": 0}, {"knob": True}, {"knob": 2.5}, {"shade": "grey"}, {"inner": 1}):
        with pytest.raises(ValidationError):
            model(**bad)
    with pytest.raises(ValueError, match="declared differently"):
        option_fields({"a": (KNOB,), "b": (OptionSpec("knob", float, "another knob"),)}, Integer, Number)


def test_the_declared_options_agree_with_the_mechanisms_own_defaults_and_checks() -> None:
    """The declarations are the source the surfaces read; the mechanisms keep their own checks (in-process callers),
    which must say the same."""
    from estimators.residual.planner import LOSSES
    from service.mechanisms import aim, mst
    from workloads.domain import Attribute, Domain
    from workloads.encodings import DesignEncoding

    options = {(spec.name, o.name): o for spec in registry.specs() for o in spec.options}
    assert options[("aim", "max_model_size")].default == aim.DEFAULT_MAX_MODEL_SIZE_MB
    assert options[("laplace", "max_model_size")].default == direct.DEFAULT_MAX_MODEL_SIZE_MB
    assert options[("aim", "iters")].default == aim.DEFAULT_ITERS == direct.DEFAULT_ITERS == mst.DEFAULT_ITERS
    assert options[("aim", "round_iters")].default == aim.DEFAULT_ROUND_ITERS
    assert options[("residual", "loss")].choices == LOSSES
    # DP-IHT's settings are its declared options, defaulted and bounded by the declarations (declared once, issue 28)
    dp_iht = registry.get("dp-iht")
    design = DesignEncoding(Domain((Attribute("a", 3), Attribute("y", 2))), ["a"], "y", "linear", True)
    resolved = dp_iht.settings(design, {"sparsity": 1})
    assert tuple(resolved) == dp_iht.option_names
    assert resolved["iterations"] == options[("dp-iht", "iterations")].default
    high = options[("dp-iht", "iterations")].high
    assert dp_iht.settings(design, {"sparsity": 1, "iterations": high})["iterations"] == high
    with pytest.raises(InvalidInput, match="option iterations must be"):
        dp_iht.settings(design, {"sparsity": 1, "iterations": high + 1})


def test_the_mechanisms_are_a_registry_with_their_own_messages() -> None:
    """The mechanisms' catalog is the project's one generic registry (workloads/registry.py, issue 28); a taken name
    is refused, and a lookup names the choices (of the kind asked for) in an InvalidInput."""
    from workloads.registry import Registry

    assert isinstance(registry._SPECS, Registry)  # noqa: SLF001
    with pytest.raises(ValueError, match="mechanism 'aim' is registered already"):
        registry.register(registry.get("aim"))
    with pytest.raises(InvalidInput, match=r"mechanism must be one of \['adassp'\], got 'aim'") as refused:
        registry.get("aim", kind=ReleaseKind.GRAM)
    assert refused.value.code == "invalid_parameter"
