"""Noisy residuals to bytes and back (a release's stored payload): plain arrays in an ``.npz`` and a JSON header,
no pickling. The noise scales travel with the values, so a stored release still answers with its standard errors.

Only what the mechanism published is stored -- noisy residuals and their public noise scales -- never a count.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping

import numpy as np

from estimators.residual.basis import ResidualError, as_domain
from estimators.residual.reconstruct import NoisyResiduals
from workloads.domain import Domain

__all__ = ["is_residual_payload", "residuals_from_bytes", "residuals_to_bytes"]

FORMAT = 1


def residuals_to_bytes(residuals: NoisyResiduals) -> bytes:
    """``residuals`` as a compressed ``.npz``: one array per residual, a header with the names, scales and domain."""
    if not isinstance(residuals, NoisyResiduals):
        raise ResidualError(f"residuals must be NoisyResiduals, got {type(residuals).__name__}")
    arrays = {f"residual_{i}": np.asarray(v, dtype=np.float64) for i, v in enumerate(residuals.values.values())}
    header = {
        "format": FORMAT,
        "domain": {name: residuals.domain.size(name) for name in residuals.domain.names},
        "residuals": [list(a) for a in residuals.values],
        "scales": [float(residuals.scales[a]) for a in residuals.values],
    }
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def is_residual_payload(payload: bytes) -> bool:
    """Whether ``payload`` was written by :func:`residuals_to_bytes` (reads its header only). A graphical model's
    payload (``estimators.graphical.mbi_adapter.model_to_bytes``) is an ``.npz`` with a header too, without
    ``residuals``."""
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            header = json.loads(npz["header"].tobytes().decode())
    except (OSError, ValueError, KeyError):
        return False
    return isinstance(header, dict) and "residuals" in header and "scales" in header


def residuals_from_bytes(payload: bytes, domain: Domain | Mapping[str, int] | None = None) -> NoisyResiduals:
    """The :class:`NoisyResiduals` written by :func:`residuals_to_bytes`; with ``domain``, checked against it."""
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
            header = json.loads(npz["header"].tobytes().decode())
            values = {tuple(a): np.asarray(npz[f"residual_{i}"]) for i, a in enumerate(header["residuals"])}
    except (OSError, ValueError, KeyError) as exc:
        raise ResidualError(f"not a stored residual release ({exc})") from None
    if header.get("format") != FORMAT:
        raise ResidualError(f"stored residual release has format {header.get('format')!r}, expected {FORMAT}")
    stored = as_domain(header["domain"])
    if domain is not None and dict(zip(stored.names, stored.shape(stored.names), strict=True)) != {
        n: as_domain(domain).size(n) for n in as_domain(domain).names
    }:
        raise ResidualError("stored residual release was made on a different domain")
    scales = dict(zip(values, header["scales"], strict=True))
    return NoisyResiduals(stored, values, scales)
