"""Issue 18: every amount a release is charged lies on the ledger's grid (1e-12 for epsilon and rho, 1e-18 for
delta), rounded down, so that what the mechanism is calibrated to, what the ledger charges and what a response shows
are one number; an amount below the grid's unit is refused before anything is reserved."""

from __future__ import annotations

from fractions import Fraction

import pytest

from service.errors import InvalidInput
from service.mechanisms import registry

UNIT = Fraction(1, 10**12)


@pytest.mark.parametrize("mechanism", ["laplace", "objpert"])
@pytest.mark.parametrize("epsilon", [5e-324, 1e-16, "1e-13", "0.999999999999e-12"])
def test_an_epsilon_below_the_unit_is_refused(mechanism: str, epsilon: object) -> None:
    delta = 1e-6 if mechanism == "objpert" else None
    with pytest.raises(InvalidInput, match=r"epsilon=\S+ is below the accountant's resolution of 1e-12") as refused:
        registry.get(mechanism).cost(epsilon, delta, None)
    assert refused.value.code == "invalid_parameter"


@pytest.mark.parametrize("epsilon, charged", [
    ("1e-12", UNIT), (1.5e-12, UNIT), ("0.1", Fraction(1, 10)), (0.123456789012345, Fraction(123456789012, 10**12)),
])
def test_an_epsilon_is_charged_on_the_grid_rounded_down(epsilon: object, charged: Fraction) -> None:
    assert registry.get("laplace").cost(epsilon, None, None).epsilon == charged
    assert registry.get("objpert").cost(epsilon, 1e-6, None).epsilon == charged


def test_a_delta_is_charged_on_its_grid_and_refused_below_its_unit() -> None:
    assert registry.get("objpert").cost(0.5, 1.5e-18, None).delta == Fraction(1, 10**18)
    with pytest.raises(InvalidInput, match=r"delta=1e-20 is below the accountant's resolution of 1e-18"):
        registry.get("objpert").cost(0.5, 1e-20, None)
