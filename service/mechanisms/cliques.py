"""What a marginal release measured, by mechanism: the clique rules a mechanism's spec names
(``MechanismSpec.measured_cliques``, :mod:`service.mechanisms.registry`).

A release's graphical model answers *any* marginal, but it only learned from the marginals the release measured;
:mod:`service.releases.coverage` tells the two apart with these rules. Each rule reads what the release stored (its
``params`` and ``details``) and the dataset's columns:

* ``laplace``, ``gaussian`` (:func:`fitted_cliques`): the workload (since issue 9 every marginal of it, and of its
  downward closure, is answered straight from the measurements); for a release made before issue 9, the workload's
  marginals that its model was fitted to (``model_cliques``; a measured marginal left out of a model too large to
  fit does not back the model's answers);
* ``residual`` (:func:`workload_cliques`): the workload (every marginal of its downward closure is answered from the
  measured residuals);
* ``mst`` (:func:`tree_cliques`): every 1-way marginal and the pairs of its spanning tree;
* ``aim`` (:func:`workload_cliques`): the initial and selected cliques, and the workload itself. AIM spends its
  selection rounds where the model's error on the workload is largest (McKenna et al. 2022, Alg. 2), so its
  workload's marginals are what it is built to answer; a marginal outside the workload is extrapolation.

Plain functions of stored JSON: this module imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Clique = tuple[str, ...]


def fitted_cliques(params: Mapping[str, object], details: Mapping[str, object],
                   attributes: Sequence[str]) -> list[Clique]:
    """laplace, gaussian: the workload; for a release made before issue 9 (its details name ``model_cliques``), the
    workload marginals its model was fitted to."""
    if "model_cliques" in details:
        return [tuple(c) for c in _lists(details.get("model_cliques"))]
    return workload_cliques(params, details, attributes)


def tree_cliques(params: Mapping[str, object], details: Mapping[str, object],  # noqa: ARG001
                 attributes: Sequence[str]) -> list[Clique]:
    """mst: every 1-way marginal and the pairs of its spanning tree."""
    return [(a,) for a in attributes] + [tuple(c) for c in _lists(details.get("tree"))]


def workload_cliques(params: Mapping[str, object], details: Mapping[str, object],
                     attributes: Sequence[str]) -> list[Clique]:  # noqa: ARG001
    """aim, and any mechanism that records a workload: the workload, the initial and selected cliques, and the
    cliques of the fitted model."""
    cliques = [e["attributes"] for e in _dicts(params.get("workload")) if isinstance(e.get("attributes"), list)]
    cliques += _lists(details.get("initial_cliques")) + _lists(details.get("selected"))
    cliques += _lists(details.get("model_cliques"))
    return [tuple(c) for c in cliques]


def _lists(value: object) -> list[list[str]]:
    return [c for c in value if isinstance(c, list)] if isinstance(value, list) else []


def _dicts(value: object) -> list[dict[str, object]]:
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []
