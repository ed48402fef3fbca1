"""One home for links (issue 28 point 5): every estimator's link extends the project's :class:`workloads.links.Link`
of its name by reference (its mean, range and binary flag are that value's, never a second table of means), and the
normal density the probit's slope needs has one home too."""

from __future__ import annotations

import pytest

from estimators.local.glm.links import LINKS as STEIN_LINKS
from estimators.local.glm.moment import MOMENT_LINKS
from workloads import links


@pytest.mark.parametrize("name", sorted(STEIN_LINKS))
def test_a_stein_link_is_its_base_links_mean_and_flag(name: str) -> None:
    base, link = links.LINKS.get(name), STEIN_LINKS[name]
    assert link.name == base.name and link.mean is base.mean and link.binary is base.binary


@pytest.mark.parametrize("name", sorted(MOMENT_LINKS))
def test_a_moment_link_extends_its_base_link(name: str) -> None:
    base = links.IDENTITY if name == "linear" else links.LINKS.get(name)
    link = MOMENT_LINKS[name]
    assert isinstance(link, links.Link)
    assert link.mean is base.mean and (link.low, link.high, link.binary) == (base.low, base.high, base.binary)


def test_the_normal_density_has_one_home() -> None:
    assert STEIN_LINKS["probit"].slope is links.normal_density is MOMENT_LINKS["probit"].slope


def test_a_linear_model_and_the_linear_link_share_the_identity() -> None:
    assert links.model_mean("iht") is links.IDENTITY.mean is MOMENT_LINKS["linear"].mean
