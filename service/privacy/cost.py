"""Privacy costs as exact rationals, and their fixed-point form in the database.

A cost is (epsilon, delta) for pure/approximate-DP mechanisms and rho for zCDP mechanisms
(docs/privacy.md). Python holds them as :class:`fractions.Fraction`; the database as integers in
the units of :mod:`db.models` (1e-12 for epsilon and rho, 1e-18 for delta). Converting a charge to
units rounds UP and a budget rounds DOWN, so the stored accounting is never optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from db.models import DELTA_SCALE, EPSILON_SCALE

#: The largest epsilon or rho a budget or a charge may name. Beyond it a release protects nothing,
#: and the ledger's 64-bit units (1e-12 each, at most 9.2e18) would overflow after a few of them.
MAX_AMOUNT = 10**6


class AmountError(ValueError):
    """A privacy amount that cannot be charged or budgeted (negative, not finite, too large, below the ledger's
    unit): bad input, its message naming the amount (the API's 422 ``invalid_input``, the command line's status 2)."""


@dataclass(frozen=True)
class PrivacyCost:
    """What one mechanism run costs: pure/approximate DP (epsilon, delta) plus zCDP rho."""

    epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        for name in ("epsilon", "delta", "rho"):
            value = getattr(self, name)
            value = Fraction(0) if value is None else exact(value)
            if value < 0:
                raise AmountError(f"{name} of a cost cannot be negative, got {value}")
            object.__setattr__(self, name, value)

    def as_units(self) -> tuple[int, int, int]:
        """(epsilon_units, delta_units, rho_units), each rounded up to the grid."""
        return (
            ceil_units(self.epsilon, EPSILON_SCALE),
            ceil_units(self.delta, DELTA_SCALE),
            ceil_units(self.rho, EPSILON_SCALE),
        )

    def to_json(self) -> dict[str, float]:
        return {"epsilon": float(self.epsilon), "delta": float(self.delta), "rho": float(self.rho)}

    @property
    def is_zero(self) -> bool:
        return self.epsilon == 0 and self.delta == 0 and self.rho == 0


def exact(value: object) -> Fraction:
    """The exact rational value of an int, Fraction, Decimal, decimal string or float (a float is
    taken at its shortest decimal representation, so 0.1 means 1/10)."""
    if isinstance(value, bool):
        raise TypeError("a privacy amount cannot be a boolean")
    if isinstance(value, Fraction | int):
        return Fraction(value)
    if isinstance(value, Decimal):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AmountError(f"a privacy amount must be finite, got {value}")
        return Fraction(Decimal(repr(value)))
    if isinstance(value, str):
        return Fraction(Decimal(value.strip()))
    raise TypeError(f"cannot read {value!r} as a privacy amount")


def check_amount(value: Fraction, name: str) -> Fraction:
    """``value`` unchanged when it is at most :data:`MAX_AMOUNT`; otherwise an :class:`AmountError` naming
    ``name`` (raised before anything reaches the database, whose integer columns would overflow)."""
    if value > MAX_AMOUNT:
        raise AmountError(f"{name} must be at most {MAX_AMOUNT:g} (a larger value protects nothing), "
                         f"got {float(value):g}")
    return value


def ceil_units(value: Fraction, scale: int) -> int:
    return math.ceil(value * scale)


def floor_units(value: Fraction, scale: int) -> int:
    return math.floor(value * scale)


def floor_to_grid(value: Fraction | float, scale: int = EPSILON_SCALE) -> Fraction:
    """Round down to the storage grid (used for a zCDP rho derived from (epsilon, delta), so the
    rho the mechanism calibrates to is exactly the rho stored)."""
    return Fraction(floor_units(exact(value), scale), scale)


def chargeable(value: Fraction, name: str, scale: int = EPSILON_SCALE) -> Fraction:
    """``value`` rounded DOWN to the ledger's grid (multiples of ``1/scale``), so that the amount a mechanism is
    calibrated to, the amount the ledger charges and the amount a response shows are one and the same number
    (docs/privacy.md 6.4). Rounding down only adds noise, so the guarantee stated is never optimistic. A ``value``
    that rounds to 0 (below the ledger's unit) cannot be charged: an :class:`AmountError` naming ``name``, raised before
    anything is reserved or any noise drawn."""
    on_grid = floor_to_grid(value, scale)
    if on_grid <= 0:
        raise AmountError(f"{name}={float(value):g} is below the accountant's resolution of {1 / scale:g} (the "
                         f"ledger's unit of {name}): it cannot be charged")
    return on_grid


def from_units(units: int, scale: int) -> Fraction:
    return Fraction(int(units), scale)
