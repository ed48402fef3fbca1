"""The kinds of release: what a release's payload is, how it is written and read back, and what it is charged to.

A release *kind* says what its stored payload holds; the *mechanism* (:mod:`service.mechanisms.registry`) says how
it was made. The string stored in ``releases.kind`` is the kind's value and never changes:

========== ====================================================== ===========================================
kind       payload                                                made by
========== ====================================================== ===========================================
marginals  a fitted graphical model (clique potentials, ``.npz``),  mst, aim; residual, laplace, gaussian
           or noisy residuals with their noise scales (``.npz``;
           answered without a model, one fitted lazily)
gram       a noisy ``Z^T Z`` and ``lambda_min``                     adassp (:mod:`service.mechanisms.gram`)
model      a released linear model (JSON)                          objpert (:mod:`service.mechanisms.objpert`)
========== ====================================================== ===========================================

A new kind is one :class:`KindSpec` and one :func:`register` call. Kinds are not all charged to a dataset's
central budget in (epsilon, delta, rho): ``charged_to_dataset`` says whether the release engine reserves the kind's
releases in the dataset's ledger (a local-DP campaign, whose participants spend their own budget, would not).

This module is light on purpose (the command line and the API schema read it): the payload codecs import the
numerical stack only when they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.errors import InvalidInput
from service.mechanisms.registry import ReleaseKind

if TYPE_CHECKING:
    from service.mechanisms.base import MechanismResult
    from workloads.domain import Domain


@dataclass(frozen=True)
class KindSpec:
    """One kind of release.

    ``decode_payload(payload, domain)`` reads a stored payload back (the graphical model, the Gram payload, the
    model payload). ``encode_result(result)`` writes a mechanism's result when its runner keeps no payload of its
    own (runners of the gram and model kinds carry an ``encode`` method instead, so they leave it None)."""

    kind: str
    description: str
    decode_payload: Callable[[bytes, Domain], object]
    encode_result: Callable[[MechanismResult], bytes] | None = None
    charged_to_dataset: bool = True


_KINDS: dict[str, KindSpec] = {}


def register(spec: KindSpec) -> KindSpec:
    """Add a kind; refused if a kind of that name exists."""
    if spec.kind in _KINDS:
        raise ValueError(f"release kind {spec.kind!r} is registered already")
    _KINDS[spec.kind] = spec
    return spec


def unregister(kind: str) -> None:
    """Remove a kind (tests that register one of their own remove it afterwards)."""
    _KINDS.pop(kind, None)


def get(kind: str) -> KindSpec:
    """The kind named ``kind`` (an :class:`InvalidInput` naming the known kinds otherwise)."""
    try:
        return _KINDS[kind]
    except KeyError:
        raise InvalidInput(f"release kind must be one of {names()}, got {kind!r}", code="invalid_parameter") from None


def names() -> list[str]:
    return list(_KINDS)


def _decode_marginals(payload: bytes, domain: Domain) -> object:
    """A :class:`~service.releases.measured.MeasuredRelease` for a payload of noisy residuals (issue 9), else the
    fitted graphical model (releases of MST and AIM, and direct releases made before issue 9)."""
    from estimators.graphical import mbi_adapter
    from service.releases import measured

    release = measured.decode(payload, domain)
    return release if release is not None else mbi_adapter.model_from_bytes(payload, domain)


def _encode_marginals(result: MechanismResult) -> bytes:
    from estimators.graphical import mbi_adapter
    from estimators.residual.codec import residuals_to_bytes

    if result.residuals is not None:
        return residuals_to_bytes(result.residuals)
    return mbi_adapter.model_to_bytes(result.model)


def _decode_gram(payload: bytes, domain: Domain) -> object:  # noqa: ARG001 - the payload names its columns
    from service.mechanisms.gram import GramPayload

    return GramPayload.from_bytes(payload)


def _decode_linear_model(payload: bytes, domain: Domain) -> object:  # noqa: ARG001 - the payload names its columns
    from service.mechanisms.objpert import ModelPayload

    return ModelPayload.from_bytes(payload)


register(KindSpec(ReleaseKind.MARGINALS, "noisy marginals (as residuals) or a graphical model that answers any "
                  "marginal", _decode_marginals, _encode_marginals))
register(KindSpec(ReleaseKind.GRAM, "a noisy Gram matrix Z^T Z of encoded columns, with a noisy lambda_min",
                  _decode_gram))
register(KindSpec(ReleaseKind.MODEL, "a released linear model", _decode_linear_model))
