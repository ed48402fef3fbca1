"""What a release of each kind stores: one payload type per :class:`~service.mechanisms.registry.ReleaseKind`.

A mechanism returns its payload inside its :class:`~service.mechanisms.base.MechanismResult`; the release engine
checks that it is of its kind's type (:attr:`service.releases.kinds.KindSpec.payload_type`) and stores
``payload.to_bytes()``. The kinds' codecs (:mod:`service.releases.kinds`) read the bytes back. So a new mechanism of
an existing kind returns the kind's payload type and writes no codec of its own.

========== ========================= ===========================================================================
kind       payload type              what it holds
========== ========================= ===========================================================================
marginals  :class:`MarginalsPayload` the noisy measurements, and either the fitted graphical model (MST, AIM) or
                                     the noisy residuals (residual, laplace, gaussian: answered without one); a
                                     model is stored with the measurements and their noise scales (issue 29)
gram       :class:`GramPayload`       a noisy ``Z^T Z`` of named encoded columns, a noisy ``lambda_min`` (adassp)
model      :class:`ModelPayload`      a released linear model (objpert, dp-iht)
========== ========================= ===========================================================================

The stored bytes of every type are what they were before the types moved here (issue 28), except that a model payload
keeps its measurements since issue 29 (format 3, read by
:func:`estimators.graphical.mbi_adapter.measurements_from_bytes`): stored releases stay readable. They live beside the
mechanisms, not in :mod:`service.releases`, because the mechanisms build them and the release engine imports the
mechanisms (imports go one way: tests/system/test_architecture.py). The module imports
nothing numerical until a payload is written or read, so the kinds' catalog stays light.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from estimators.graphical.mbi_adapter import Model
    from estimators.graphical.mirror_descent import Measurement
    from estimators.residual.reconstruct import NoisyResiduals


class Payload(Protocol):
    """What every payload type offers the release engine: the bytes it stores."""

    def to_bytes(self) -> bytes: ...


@dataclass(eq=False)
class MarginalsPayload:
    """A marginal release: ``measurements`` (the noisy marginals it took), and what it stores: ``residuals`` when
    given (the release answers from them and fits a model only when an answer needs one,
    :mod:`service.releases.stored_models`), else the fitted graphical ``model`` with the ``measurements`` beside it
    (since issue 29: their noise scales give a measured marginal's standard error and drive the parametric bootstrap,
    :mod:`service.releases.bootstrap`; a model stored before then has none)."""

    measurements: list[Measurement] = field(default_factory=list)
    model: Model | None = None
    residuals: NoisyResiduals | None = None

    def to_bytes(self) -> bytes:
        from estimators.residual.codec import residuals_to_bytes

        if self.residuals is not None:
            return residuals_to_bytes(self.residuals)
        if self.model is None:
            raise ValueError("a marginal release needs its residuals or its fitted model")
        from estimators.graphical import mbi_adapter  # only a model needs mbi (and JAX: seconds to import)

        return mbi_adapter.model_to_bytes(self.model, self.measurements)


@dataclass(frozen=True, eq=False)
class GramPayload:
    """What a Gram release stores: the noisy ``Z^T Z`` (rows/columns named ``names``) and noisy ``lambda_min``."""

    names: tuple[str, ...]
    zz: np.ndarray
    lambda_min_noisy: float

    def to_bytes(self) -> bytes:
        import numpy as np

        buffer = io.BytesIO()
        header = np.frombuffer(json.dumps({"names": list(self.names), "format": 1}).encode(), dtype=np.uint8)
        np.savez_compressed(buffer, zz=np.asarray(self.zz, dtype=np.float64),
                            lambda_min=np.array([self.lambda_min_noisy]), header=header)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, payload: bytes) -> GramPayload:
        import numpy as np

        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            header = json.loads(npz["header"].tobytes().decode())
            return cls(tuple(header["names"]), np.array(npz["zz"]), float(npz["lambda_min"][0]))


@dataclass(frozen=True)
class ModelPayload:
    """A released linear model: ``score(x) = intercept + sum_j coef[j] x_j`` over the named encoded columns.

    ``curvature``, when the mechanism released one (the error bars' input, :mod:`service.mechanisms.curvature`): the
    noisy Hessian of the loss at the released point, a symmetric matrix, as rows of floats, over the coefficients
    ``curvature_names`` (DP-IHT's: those its model kept) or, when those are None, over ``[intercept?,
    *feature_names]`` (objective perturbation's). ``row_count``: the release's noisy row count, when it released one
    (DP-IHT's ``n_hat``)."""

    feature_names: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float | None  # None: fitted without an intercept
    curvature: tuple[tuple[float, ...], ...] | None = None
    curvature_names: tuple[str, ...] | None = None
    row_count: float | None = None

    def to_bytes(self) -> bytes:
        body = {"feature_names": list(self.feature_names), "coef": list(self.coef), "intercept": self.intercept}
        if self.curvature is not None:
            body["curvature"] = [list(row) for row in self.curvature]
        if self.curvature_names is not None:
            body["curvature_names"] = list(self.curvature_names)
        if self.row_count is not None:
            body["row_count"] = self.row_count
        return json.dumps({"format": 1, **body}).encode()

    @classmethod
    def from_bytes(cls, payload: bytes) -> ModelPayload:
        data = json.loads(payload.decode())
        curvature, names, count = data.get("curvature"), data.get("curvature_names"), data.get("row_count")
        return cls(tuple(data["feature_names"]), tuple(float(c) for c in data["coef"]), data["intercept"],
                   None if curvature is None else tuple(tuple(float(v) for v in row) for row in curvature),
                   None if names is None else tuple(names), None if count is None else float(count))
