"""Command-line options built from the option declarations of the registries (:class:`~service.mechanisms.registry.
OptionSpec`): the command line lists no mechanism's or method's options itself.

:func:`declared_options` adds one ``--name`` option per public option of the given owners (the marginal mechanisms of
``release marginals``, the regression methods of ``fit``) to a command, typed and helped from the declaration, and
hands the command the values given as one ``options`` dict (the registries check them, naming the option).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

import typer

from service.mechanisms.registry import OptionSpec

_TYPES: dict[type | None, type] = {int: int, float: float, str: str}
OUTPUT_FLAGS = ("quiet", "as_json")


def _public(owners: Mapping[str, Sequence[OptionSpec]]) -> dict[str, tuple[OptionSpec, list[str]]]:
    """``{name: (declaration, owners taking it)}`` of the public options, in order."""
    found: dict[str, tuple[OptionSpec, list[str]]] = {}
    for owner, options in owners.items():
        for option in options:
            if not option.internal:
                found.setdefault(option.name, (option, []))[1].append(owner)
    return found


def declared_options(owners: Mapping[str, Sequence[OptionSpec]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: the command gets a ``--name`` option per public option of ``owners`` (appended to its own
    parameters) and, instead of them, ``options``: ``{name: value}`` of those given."""
    declared = _public(owners)

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "options"]
        added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                   annotation=Annotated[_TYPES[option.kind] | None,
                                                        typer.Option(option.flag, help=option.describe(takers))])
                 for name, (option, takers) in declared.items()]

        @functools.wraps(function)
        def command(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in declared}
            return function(*args, options={k: v for k, v in given.items() if v is not None}, **kwargs)

        # the declared options go before the output flags (--quiet, --json), so --help lists them with the others
        at = next((i for i, p in enumerate(own) if p.name in OUTPUT_FLAGS), len(own))
        parameters = [*own[:at], *added, *own[at:]]
        command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return decorate
