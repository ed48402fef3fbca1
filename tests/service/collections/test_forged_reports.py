"""Issue 18, findings 2 and 6 (estimator half): reports the randomizer cannot emit are refused, every local estimate
lies in its feasible set, and the influence bound a fit reports is an upper bound on what one accepted report moves."""

from __future__ import annotations

import numpy as np
import pytest

from service.collections import campaigns, estimates, simulate, submission
from service.errors import InvalidInput


def _line(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, 1))
    return x, 0.5 * x[:, 0] + rng.uniform(-0.05, 0.05, size=n)


def _submit(engine, name: str, fields: dict, tag: str) -> submission.SubmissionResult:  # noqa: ANN001
    batch = {key: np.asarray(value, dtype=float)[np.newaxis, ...] for key, value in fields.items()}
    return submission.submit_reports(engine, name, 0, batch, submission.Submitter.simulator(tag), [tag])


# ----------------------------------------------------------------------------------------------------- finding 2
@pytest.fixture
def one_bit(engine):  # noqa: ANN001, ANN201
    """A 1-bit Bernstein campaign (3 grid points) with 3,000 honest reports and its round still open."""
    campaigns.create_campaign(engine, "bit", "bernstein-1bit", ["x"], "y", epsilon=2.0,
                              options={"participants": 10_000, "degree": 2})
    x, y = _line(3_000, seed=3)
    simulate.simulate(engine, "bit", x, y, seed=4)
    return campaigns.get_campaign(engine, "bit").spec


def test_the_issues_forged_one_bit_report_is_refused(engine, one_bit) -> None:  # noqa: ANN001
    bound = one_bit.string_bound  # the issue's 122 at epsilon 1; the schema's own bound here
    before = estimates.fit_campaign(engine, "bit", "linear").coefficients["x"]
    forged = {"count": np.zeros(3), "weighted": np.array([-bound, bound, -bound])}
    with pytest.raises(InvalidInput, match="'count' must be one-hot") as refused:
        _submit(engine, "bit", forged, "forger")
    assert refused.value.code == "invalid_report"
    # one-hot, but weight off the hot entry: also not a report the randomizer emits
    with pytest.raises(InvalidInput, match="'weighted' must be 0 off the grid point"):
        _submit(engine, "bit", {"count": [1.0, 0.0, 0.0], "weighted": [bound, -bound, 0.0]}, "forger")
    with pytest.raises(InvalidInput, match="count"):  # two hot entries (the norm refuses it), or a fraction
        _submit(engine, "bit", {"count": [1.0, 1.0, 0.0], "weighted": [0.0, 0.0, 0.0]}, "forger")
    with pytest.raises(InvalidInput, match="one-hot"):
        _submit(engine, "bit", {"count": [0.5, 0.0, 0.0], "weighted": [0.0, 0.0, 0.0]}, "forger")
    assert estimates.fit_campaign(engine, "bit", "linear").coefficients["x"] == before
    assert campaigns.get_campaign(engine, "bit").rounds[0].reports == 3_000
    # what the randomizer can emit is still accepted: b y at the hot entry, y anywhere in the schema's range
    _submit(engine, "bit", {"count": [0.0, 1.0, 0.0], "weighted": [0.0, bound, 0.0]}, "extreme")
    _submit(engine, "bit", {"count": [0.0, 0.0, 1.0], "weighted": [0.0, 0.0, 0.0]}, "zero-bit")
    assert campaigns.get_campaign(engine, "bit").rounds[0].reports == 3_002


# ----------------------------------------------------------------------------------------------------- finding 4
def test_a_label_ldp_report_carries_no_function_of_the_features(engine, tmp_path) -> None:  # noqa: ANN001
    """The device sends (public row id, tilde y): two participants with the same label and device randomness but
    different features send the same label, and the server forms x tilde y from its own copy of the public table."""
    from service.client.device import make_report
    from tests.service.collections.helpers import load_public

    public = np.array([[1.0, 0.0, -0.5], [0.25, 2.0, 1.0], [-1.0, -1.0, 0.5]])
    load_public(engine, tmp_path, public)
    campaigns.create_campaign(engine, "labels", "label-ldp", ["a", "b", "c"], "y", "pub", 2.0, 1e-5,
                              {"sparsity": 2, "participants": 10, "standardize": False})
    state = campaigns.public_state(campaigns.get_campaign(engine, "labels"))
    sent = [make_report(state, [row], 0.7, np.random.default_rng(11))[1] for row in (0, 1)]
    assert [set(report) for report in sent] == [{"row", "label"}] * 2
    assert [float(report["row"]) for report in sent] == [0.0, 1.0]
    assert float(sent[0]["label"]) == float(sent[1]["label"])  # nothing in it depends on the features
    with pytest.raises(ValueError, match="the id of your row"):  # features are not what a device sends
        make_report(state, public[0], 0.7)
    for tag, report in zip(("p0", "p1"), sent, strict=True):
        _submit(engine, "labels", report, tag)
    fit = estimates.fit_campaign(engine, "labels", "iht")
    assert fit.reports == 2
    # the server's sum is its own rows times the labels sent
    from tests.service.collections.test_sparse_campaigns import _aggregate_sums

    label = float(sent[0]["label"])
    np.testing.assert_allclose(_aggregate_sums(engine, "labels")["xy"], (public[0] + public[1]) * label, rtol=1e-12)
    with pytest.raises(InvalidInput, match="whole-number id"):
        _submit(engine, "labels", {"row": 1.5, "label": 0.0}, "forger")
    with pytest.raises(InvalidInput, match="outside its allowed range"):
        _submit(engine, "labels", {"row": 3.0, "label": 0.0}, "forger")
