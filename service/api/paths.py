"""Path parameters that are ids: ASCII decimals up to 2^31-1 (:func:`db.ids.parse_id`), else the path names nothing.

FastAPI reads an ``int`` path parameter as pydantic's lax mode does, which takes ``' 3'``, ``'+3'``, ``'3.0'`` and
``'3_0'`` (30: ``/releases/3_0`` answered release 30), and a 26-digit id was a 422 here and a 500 in the campaign
routes (an overflow in the database driver). :func:`path_id` takes ASCII digits only, within ``low..MAX_ID``, and
anything else fails validation, which :mod:`service.api.errors` answers, for every path parameter, with a 404
``not_found``: no resource can be there. The OpenAPI document still says ``integer`` with its minimum and maximum.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from pydantic import BeforeValidator

from db.ids import MAX_ID, parse_id


def _ascii_id(low: int) -> BeforeValidator:
    def parse(value: object) -> int:
        parsed = parse_id(value, low) if isinstance(value, str) else None
        if parsed is None:
            raise ValueError(f"an id is ASCII decimal digits, from {low} to {MAX_ID}")
        return parsed

    return BeforeValidator(parse)


def path_id(description: str, low: int = 1) -> Any:
    """The type of an id path parameter: ``Annotated[int, ...]`` from ``low`` to :data:`~db.ids.MAX_ID`."""
    return Annotated[int, Path(ge=low, le=MAX_ID, description=description), _ascii_id(low)]
