"""The registry of regression methods: one :class:`MethodSpec` per method, the only place that says what a method is.

A spec says which models the method fits (``tasks``: linear, logistic), which kind of release it reads
(``release_kind``, :mod:`service.releases.kinds`), the settings a caller may give a new release for it (``options``:
the :class:`~service.options.OptionSpec` declarations of the mechanism that makes that release, so they
are declared once) and its answer function (``answer(engine, release, design, seed) -> (model, details)``,
:mod:`service.regression.answering`). The fit (:mod:`service.regression.fit`), the API's request schema and the
command line's ``fit`` read it instead of listing names; which mechanisms' releases answer a method
is the mechanism registry's (``MechanismSpec.answers``).

Like the mechanism registry, this module imports nothing numerical (each answer function is imported when it runs),
so the API schema and the command line's help can read it; the client does not (it sends settings as given and the
server checks them: docs/architecture.md). The catalog is the project's one generic
:class:`~workloads.registry.Registry`.

A new method is one answer function and one :func:`register` call here, a row in docs/mechanisms.md's table of
methods, and a mechanism that answers it (``answers=``); the contract test
(tests/service/test_registry_contracts.py) checks that nothing is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.mechanisms import registry
from service.mechanisms.registry import ReleaseKind
from service.options import OptionSpec
from workloads.registry import Registry

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from estimators.base import LinearScoreModel
    from service.releases.answers import StoredRelease
    from workloads.encodings import DesignEncoding

BOTH_TASKS = ("linear", "logistic")  # workloads.encodings.TASKS (checked by the contract test)


@dataclass(frozen=True)
class MethodSpec:
    """One regression method (module docstring)."""

    name: str
    tasks: tuple[str, ...]
    release_kind: str
    answer: Callable[[Engine, StoredRelease, DesignEncoding, int | None], tuple[LinearScoreModel, dict[str, object]]]
    description: str = ""
    options: tuple[OptionSpec, ...] = ()

    @property
    def reads_marginals(self) -> bool:
        """Whether it answers from marginal releases (any marginal mechanism may make one; coverage matters)."""
        return self.release_kind == ReleaseKind.MARGINALS

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(option.name for option in self.options)


_METHODS: Registry[MethodSpec] = Registry("regression method")


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method; refused (a ``ValueError``) if one of that name exists. Returns ``spec``."""
    return _METHODS.register(spec.name, spec)


def find(name: object) -> MethodSpec | None:
    """The method called ``name``, or None."""
    return _METHODS.find(name)


def names() -> list[str]:
    """The registered names, in the order they were registered."""
    return _METHODS.names()


def specs() -> list[MethodSpec]:
    return _METHODS.entries()


def option_names() -> tuple[str, ...]:
    """Every setting some method takes, each once, in declaration order (the API's and the client's fit fields)."""
    return tuple(dict.fromkeys(name for spec in _METHODS.entries() for name in spec.option_names))


def misplaced(method: str, given: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(settings, takers)``: the ``given`` settings that ``method`` does not take, and the methods that take them
    all (for the message that refuses them; both empty when every setting fits)."""
    spec = find(method)
    wrong = [name for name in given if spec is not None and name not in spec.option_names]
    takers = [other.name for other in _METHODS.entries() if wrong and set(wrong) <= set(other.option_names)]
    return wrong, takers


def describe_choices(*extra: str) -> str:
    """``dd-ssp, adassp (linear), objpert (logistic), aim-synth or dp-iht``: the names, with the one task of a
    method that fits only one, then ``extra`` choices as given."""
    shown = [spec.name + (f" ({spec.tasks[0]})" if len(spec.tasks) == 1 else "") for spec in _METHODS.entries()]
    shown += list(extra)
    return f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else "".join(shown)


# the built-in methods: each answer function is imported when it runs ------------------------------------------------
def _dd_ssp(*args):  # noqa: ANN002, ANN202
    from service.regression.answering import dd_ssp

    return dd_ssp(*args)


def _aim_synth(*args):  # noqa: ANN002, ANN202
    from service.regression.answering import aim_synth

    return aim_synth(*args)


def _adassp(*args):  # noqa: ANN002, ANN202
    from service.regression.answering import adassp

    return adassp(*args)


def _objpert(*args):  # noqa: ANN002, ANN202
    from service.regression.answering import objpert

    return objpert(*args)


def _dp_iht(*args):  # noqa: ANN002, ANN202
    from service.regression.answering import dp_iht

    return dp_iht(*args)


register(MethodSpec(
    "dd-ssp", BOTH_TASKS, ReleaseKind.MARGINALS, _dd_ssp,
    "DD-SSP (Ferrando & Sheldon 2024, Alg. 1, Prop. 3.4): Z^T Z from a marginal release's 1- and 2-way marginals"))
register(MethodSpec(
    "adassp", ("linear",), ReleaseKind.GRAM, _adassp,
    "AdaSSP (Wang 2018; Ferrando & Sheldon 2024, App. B, Alg. 2) from a principal submatrix of a Gram release"))
register(MethodSpec(
    "objpert", ("logistic",), ReleaseKind.MODEL, _objpert,
    "objective perturbation (Iyengar et al. 2019, Alg. 1): the released model of exactly this design and budget",
    options=registry.get("objpert").options))
register(MethodSpec(
    "aim-synth", BOTH_TASKS, ReleaseKind.MARGINALS, _aim_synth,
    "AIM-Synth (Ferrando & Sheldon 2024, Sec. 3.4): the non-private fit on rows drawn from a release's model"))
register(MethodSpec(
    "dp-iht", BOTH_TASKS, ReleaseKind.MODEL, _dp_iht,
    "DP-IHT (Wang & Xu 2019, Alg. 3): the released sparse model of exactly this design, budget and settings",
    options=registry.get("dp-iht").options))
