"""The one adapter between Marginalia and private-pgm (``mbi`` 2.x).

Everything graphical-model related goes through here: turning noisy marginal measurements into a
consistent model (``estimate``), reading any marginal from a model (``marginal``), drawing seeded
synthetic rows (``synthetic_rows``), and storing a model as plain arrays (``model_to_bytes`` /
``model_from_bytes``) without pickling library internals.

Estimation is post-processing of already-noisy measurements: it never touches sensitive rows and
costs no privacy (McKenna, Sheldon, Miklau 2019, "Graphical-model based estimation and inference
for differential privacy").
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mbi  # noqa: E402
    from mbi import estimation as mbi_estimation  # noqa: E402
    from mbi.extensions import synthetic_data as mbi_synthetic_data  # noqa: E402

from workloads.domain import Domain  # noqa: E402

Model = mbi.MarkovRandomField


@dataclass(frozen=True)
class Measurement:
    """A noisy measurement of one marginal: ``values`` has the marginal's shape (axes in the order
    of ``attributes``) and i.i.d. noise of standard deviation ``stddev`` on every cell."""

    attributes: tuple[str, ...]
    values: np.ndarray
    stddev: float

    def to_mbi(self) -> mbi.LinearMeasurement:
        return mbi.LinearMeasurement(np.asarray(self.values, dtype=float).ravel(), self.attributes, self.stddev)


def mbi_domain(domain: Domain) -> mbi.Domain:
    return mbi.Domain(list(domain.names), [a.size for a in domain.attributes])


def estimate(
    domain: Domain,
    measurements: Sequence[Measurement],
    *,
    iters: int = 1000,
    total: float | None = None,
    warm_start: Model | None = None,
    callback: Callable[[object], None] | None = None,
) -> Model:
    """Fit a Markov random field to noisy marginals by mirror descent (McKenna et al. 2019).

    With ``total`` None, the total count is the minimum-variance unbiased combination of the
    measurements' sums (each noisy marginal sums to a noisy estimate of N).
    """
    if not measurements:
        raise ValueError("estimate needs at least one measurement")
    return mbi_estimation.MirrorDescent().estimate(
        mbi_domain(domain),
        [m.to_mbi() for m in measurements],
        known_total=total,
        iters=iters,
        warm_start=warm_start,
        callback_fn=callback,
    )


def marginal(model: Model, attributes: Sequence[str]) -> np.ndarray:
    """The model's marginal over ``attributes`` as a float array with axes in the order asked."""
    return np.asarray(model.project(tuple(attributes)).datavector(flatten=False), dtype=float)


def synthetic_rows(model: Model, rows: int, seed: int) -> dict[str, np.ndarray]:
    """Draw ``rows`` synthetic records with an explicit seed (mbi's own ``synthetic_data`` method
    uses numpy's global generator; the extension used here takes a JAX PRNG seed)."""
    if rows < 1:
        raise ValueError(f"rows must be a positive integer, got {rows}")
    dataset = mbi_synthetic_data(model, int(rows), seed=int(seed) % (2**32))
    columns = dataset.to_dict()
    return {name: np.asarray(columns[name], dtype=np.int64) for name in model.domain.attributes}


def model_to_bytes(model: Model) -> bytes:
    """Serialise a model as an ``.npz`` of its clique potentials plus a JSON header."""
    arrays: dict[str, np.ndarray] = {}
    cliques = [list(c) for c in model.potentials.cliques]
    for i, clique in enumerate(model.potentials.cliques):
        arrays[f"potential_{i}"] = np.asarray(model.potentials[clique].values, dtype=np.float64)
    header = {"cliques": cliques, "total": float(model.total), "format": 1}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def model_from_bytes(payload: bytes, domain: Domain) -> Model:
    """Rebuild a model written by :func:`model_to_bytes` (marginals recomputed by belief propagation)."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
        header = json.loads(npz["header"].tobytes().decode())
        full = mbi_domain(domain)
        cliques = [tuple(c) for c in header["cliques"]]
        tables = {
            clique: mbi.Factor(full.project(clique), jax.numpy.asarray(npz[f"potential_{i}"]))
            for i, clique in enumerate(cliques)
        }
    potentials = mbi.CliqueVector(full, cliques, tables)
    total = header["total"]
    oracle = mbi.marginal_oracles.message_passing_stable
    return mbi.MarkovRandomField(potentials=potentials, marginals=oracle(potentials, total), total=total)


def model_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Size in MB of the junction-tree model these cliques would need (private-pgm's estimate)."""
    return float(mbi.junction_tree.hypothetical_model_size(mbi_domain(domain), [tuple(c) for c in cliques]))
