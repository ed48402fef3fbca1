"""Request fields built from the option declarations of the registries (:class:`~service.options.OptionSpec`): the API
lists no mechanism's, method's or protocol's options itself.

:func:`option_fields` turns the public options of several owners (the marginal mechanisms of a release, the
regression methods of a fit) into pydantic field definitions for :func:`pydantic.create_model`: one optional field
per option name, typed with the strict number types of :mod:`service.api.schemas` (``Integer``, ``Number``; a
``str`` option with choices is a ``Literal``), bounded as declared and described with its help, its default and the
owners that take it. An option that two owners share must be declared identically (one ``OptionSpec`` object).

:func:`described_options` documents a free-form ``options`` object (a campaign's: its protocol checks the values, and
protocols may mean different things by one name) with one described property per declared name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from service.options import OptionSpec, declarations, describe


def field_type(option: OptionSpec, integer: Any, number: Any) -> Any:
    """The pydantic type of ``option`` (``integer``/``number``: the strict JSON types to build on)."""
    if option.kind is str:
        return Literal[option.choices]  # type: ignore[valid-type]
    if option.kind not in (int, float):
        raise ValueError(f"option {option.name} has no JSON type (kind {option.kind!r}); mark it internal")
    bounds: dict[str, float] = {}
    if option.kind is int and option.low_open and float(option.low).is_integer():
        bounds["ge"] = int(option.low) + 1  # a positive int is >= 1
    else:
        bounds["gt" if option.low_open else "ge"] = option.low
    if option.high is not None:
        bounds["le"] = int(option.high) if option.kind is int else option.high
    return Annotated[integer if option.kind is int else number, Field(**bounds)]


def option_fields(owners: Mapping[str, Sequence[OptionSpec]], integer: Any, number: Any) -> dict[str, Any]:
    """``{name: (type | None, Field(None, description=...))}`` for every public option of every owner, in order."""
    fields: dict[str, Any] = {}
    for name, entries in declarations(owners).items():
        if len(entries) > 1:
            raise ValueError(f"option {name} is declared differently by {entries[0][1]} and {entries[1][1]}")
        option, takers = entries[0]
        fields[name] = (field_type(option, integer, number) | None, Field(None, description=option.describe(takers)))
    return fields


def described_options(owners: Mapping[str, Sequence[OptionSpec]]) -> dict[str, Any]:
    """The JSON schema's ``properties`` of a free-form options object: ``{name: {"description": ...}}`` for every
    public option of every owner, each declaration of the name described with the owners that take it."""
    return {name: {"description": describe(entries)} for name, entries in declarations(owners).items()}
