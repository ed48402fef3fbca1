"""The one adapter between Marginalia and private-pgm (``mbi`` 2.x): models as mbi objects, and the payload codec.

A release's mechanism hands over an mbi ``MarkovRandomField``; a model read back from storage is the numpy
:class:`~estimators.graphical.model.Fit` (either is a :data:`Model`). This module converts: a numpy fit to an mbi
model (:func:`fit_to_mbi`) and back (:func:`numpy_view`, cached for the last few models), a model to plain arrays and
back (:func:`model_to_bytes` / :func:`model_from_bytes`, without pickling library internals; the payload keeps the
junction tree, so reading it back triangulates nothing and imports neither mbi nor JAX, which alone took three of a
free answer's four seconds on the command line). The estimator is :func:`estimators.graphical.mirror_descent.fit`
(numpy, nothing compiled). Reading a model (:func:`marginal`, :func:`synthetic_rows`) runs in numpy on the cached
calibrated copy, because mbi 2.0.0 compiles a JAX program for every new clique structure, attribute set and sample
size (seconds each; see docs/mechanisms.md, "Estimation, and where the time goes").

Estimation is post-processing of already-noisy measurements: it never touches sensitive rows and costs no privacy
(McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and inference for differential privacy").
"""

from __future__ import annotations

import collections
import io
import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

import numpy as np

from estimators.graphical.factors import Clique, reshape_into
from estimators.graphical.junction_tree import JunctionTree
from estimators.graphical.mirror_descent import Measurement
from estimators.graphical.model import Fit, calibrated
from workloads.domain import Domain

if TYPE_CHECKING:
    from estimators.graphical._mbi import mbi

#: A fitted model: an mbi ``MarkovRandomField`` (what a mechanism hands over) or a numpy :class:`Fit` (read back).
Model = Union[Fit, "mbi.MarkovRandomField"]  # noqa: UP007 - the mbi half is a forward reference

#: Log-potential given to structurally impossible cells in an exported mbi model. Finite (unlike
#: -inf) so mbi's HUGIN message passing, which subtracts messages, never forms -inf - (-inf);
#: exp(-1e9) is exactly 0.0 in floating point, so the cells still get probability zero.
STRUCTURAL_ZERO_LOG = -1e9


def marginal(model: Model, attributes: Sequence[str]) -> np.ndarray:
    """The model's marginal over ``attributes`` as a float array with axes in the order asked.

    Computed with numpy from the calibrated junction tree (:meth:`Fit.marginal`): mbi's own
    ``project`` compiles a JAX variable-elimination program for every new set of attributes."""
    return numpy_view(model).marginal(tuple(attributes))


def synthetic_rows(model: Model, rows: int, seed: int) -> dict[str, np.ndarray]:
    """Draw ``rows`` i.i.d. records from the model with an explicit seed (:meth:`Fit.sample`, numpy:
    mbi's own sampler compiles JAX programs for every model, about 27 s on an Adult AIM model)."""
    if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
        raise ValueError(f"rows must be a positive integer, got {rows}")
    return numpy_view(model).sample(int(rows), np.random.default_rng(int(seed)))


def model_to_bytes(model: Model, measurements: Sequence[Measurement] | None = None) -> bytes:
    """Serialise a model as an ``.npz`` of its clique potentials plus a JSON header with its total and its junction
    tree (format 2; format 1, before the tree was kept, is still read). With ``measurements`` (the noisy marginals
    the model was fitted to, with their noise scales: what MST and AIM measured), they are kept beside it (format 3,
    issue 29: a marginal answer states its measurement's standard error and the parametric bootstrap redraws their
    noise; :func:`measurements_from_bytes` reads them back, and older payloads simply have none)."""
    view = numpy_view(model)
    if isinstance(model, Fit):
        cliques, logs = list(model.potentials), [model.potentials[c] for c in model.potentials]
        if model.zeros:
            raise ValueError("a model with structural zeros is stored through fit_to_mbi, which folds them in")
    else:
        cliques = list(model.potentials.cliques)
        logs = [model.potentials[c].values for c in cliques]
    arrays = {f"potential_{i}": np.asarray(values, dtype=np.float64) for i, values in enumerate(logs)}
    header = {"cliques": [list(c) for c in cliques], "total": float(view.total), "format": 2,
              "tree": view.tree.structure()}
    if measurements is not None:
        header["format"] = 3
        header["measurements"] = [{"attributes": list(m.attributes), "stddev": float(m.stddev), "noise": "gaussian"}
                                  for m in measurements]
        for i, m in enumerate(measurements):
            arrays[f"measurement_{i}"] = np.asarray(m.values, dtype=np.float64)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def model_from_bytes(payload: bytes, domain: Domain) -> Fit:
    """Rebuild a model written by :func:`model_to_bytes`, calibrated with numpy on the stored tree (a format-1
    payload has none: its tree is triangulated again, as when it was fitted)."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        header = json.loads(npz["header"].tobytes().decode())
        logs = {tuple(c): np.asarray(npz[f"potential_{i}"]) for i, c in enumerate(header["cliques"])}
    tree = JunctionTree.from_structure(domain, header["tree"]) if "tree" in header else None
    return calibrated(domain, logs, header["total"], tree)


def measurements_from_bytes(payload: bytes) -> list[Measurement] | None:
    """The noisy measurements a format-3 model payload keeps (:func:`model_to_bytes`), in the order they were taken;
    None for an older payload (a model stored without them). Every measurement is Gaussian noise of standard deviation
    ``stddev`` on each cell (MST's and AIM's discrete Gaussian of variance parameter ``stddev**2``, whose variance is
    at most that: Canonne, Kamath & Steinke 2020)."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        header = json.loads(npz["header"].tobytes().decode())
        if "measurements" not in header:
            return None
        return [Measurement(tuple(m["attributes"]), np.asarray(npz[f"measurement_{i}"]), float(m["stddev"]))
                for i, m in enumerate(header["measurements"])]


_VIEWS: collections.OrderedDict[int, tuple[Model, Fit]] = collections.OrderedDict()
_VIEWS_LOCK = threading.Lock()
_VIEWS_KEPT = 4  # calibrated models kept for marginal queries (each as large as its junction tree)


def numpy_view(model: Model) -> Fit:
    """The model calibrated with numpy (itself when it is a :class:`Fit`; cached for the last few mbi models asked
    about)."""
    if isinstance(model, Fit):
        return model
    with _VIEWS_LOCK:
        hit = _VIEWS.get(id(model))
        if hit is not None and hit[0] is model:
            _VIEWS.move_to_end(id(model))
            return hit[1]
    domain = Domain.from_sizes(dict(zip(model.domain.attributes, model.domain.shape, strict=True)))
    logs = {tuple(c): np.asarray(model.potentials[c].values, dtype=np.float64) for c in model.potentials.cliques}
    view = calibrated(domain, logs, float(model.total))
    with _VIEWS_LOCK:
        _VIEWS[id(model)] = (model, view)
        while len(_VIEWS) > _VIEWS_KEPT:
            _VIEWS.popitem(last=False)
    return view


def fit_to_mbi(fit: Fit) -> mbi.MarkovRandomField:
    """The same model as an mbi ``MarkovRandomField``: potentials over the measured maximal
    cliques (structural zeros folded in as :data:`STRUCTURAL_ZERO_LOG`, on a clique of their own
    when no measured clique contains them), marginals over the same cliques."""
    logs = {c: np.array(v, dtype=np.float64) for c, v in fit.potentials.items()}
    for clique, mask in fit.zeros.items():
        target = next((c for c in logs if set(clique) <= set(c)), None)
        if target is None:
            logs[clique] = np.zeros(mask.shape)
            target = clique
        logs[target] = logs[target] + reshape_into(np.where(mask, STRUCTURAL_ZERO_LOG, 0.0), clique, target,
                                                    fit.domain)
    if fit.zeros:
        return as_mbi(calibrated(fit.domain, logs, fit.total))
    return as_mbi(Fit(fit.domain, fit.tree, logs, {}, fit.probabilities, fit.total, fit.loss,
                       fit.stepsize, fit.lipschitz, fit.iterations))


def as_mbi(view: Fit) -> mbi.MarkovRandomField:
    """``view`` as an mbi model (its potentials and its clique marginals as mbi factors)."""
    from estimators.graphical._mbi import jax, mbi, mbi_domain

    full = mbi_domain(view.domain)
    cliques = list(view.potentials)

    def factor(clique: Clique, values: np.ndarray) -> mbi.Factor:
        return mbi.Factor(full.project(clique), jax.device_put(np.ascontiguousarray(values, dtype=np.float64)))

    potentials = mbi.CliqueVector(full, cliques, {c: factor(c, view.potentials[c]) for c in cliques})
    marginals = mbi.CliqueVector(full, cliques, {c: factor(c, view.marginal(c)) for c in cliques})
    model = mbi.MarkovRandomField(potentials=potentials, marginals=marginals, total=view.total)
    with _VIEWS_LOCK:
        _VIEWS[id(model)] = (model, view)
        while len(_VIEWS) > _VIEWS_KEPT:
            _VIEWS.popitem(last=False)
    return model
