"""Command-line options built from the option declarations of the registries (:class:`~service.options.OptionSpec`):
the command line lists no mechanism's, method's or protocol's options itself.

:func:`declared_options` adds one ``--name`` option per public option of the given owners (the marginal mechanisms of
``release marginals``, the regression methods of ``fit``, the campaign protocols of ``campaign create`` and ``campaign
plan``) to a command, typed and helped from the declaration, and hands the command the values given as one
``options`` dict (the registries check them, naming the option). A flag (``bool``) is ``--name/--no-name``; a
structured option (no kind) is its text, as ``--option KEY=VALUE`` gives it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

import typer

from service.options import OptionSpec, declarations, describe

_TYPES: dict[type | None, type] = {int: int, float: float, str: str, bool: bool, None: str}
OUTPUT_FLAGS = ("quiet", "as_json")


def _parameter(name: str, option: OptionSpec, help_text: str) -> inspect.Parameter:
    spelling = f"{option.flag}/--no-{option.flag[2:]}" if option.kind is bool else option.flag
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                             annotation=Annotated[_TYPES[option.kind] | None, typer.Option(spelling, help=help_text)])


def declared_options(owners: Mapping[str, Sequence[OptionSpec]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator: the command gets a ``--name`` option per public option of ``owners`` (appended to its own
    parameters) and, instead of them, ``options``: ``{name: value}`` of those given. A parameter of the command's own
    named like a declared option is refused (a ``ValueError`` at import): one name, one flag, one meaning."""
    declared = declarations(owners)

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function, eval_str=True)
        own_parameters = [p for p in signature.parameters.values() if p.name != "options"]
        taken = sorted(set(declared) & {p.name for p in own_parameters})
        if taken:
            raise ValueError(f"{function.__name__} has parameters named like declared options: {taken}")
        added = [_parameter(name, entries[0][0], describe(entries)) for name, entries in declared.items()]

        @functools.wraps(function)
        def command(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in declared}
            return function(*args, options={k: v for k, v in given.items() if v is not None}, **kwargs)

        # the declared options go before the output flags (--quiet, --json), so --help lists them with the others
        at = next((i for i, p in enumerate(own_parameters) if p.name in OUTPUT_FLAGS), len(own_parameters))
        parameters = [*own_parameters[:at], *added, *own_parameters[at:]]
        command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return decorate
