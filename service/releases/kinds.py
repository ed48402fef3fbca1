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
model      a released linear model (JSON)                          objpert (:mod:`service.mechanisms.objpert`),
                                                                   dp-iht (:mod:`service.mechanisms.dp_iht`)
========== ====================================================== ===========================================

Each kind names its payload type (:mod:`service.mechanisms.payloads`): a mechanism's result carries one, the release
engine checks its type and stores its bytes, and the kind's ``decode_payload`` reads them back. A new mechanism of
an existing kind therefore touches nothing here. A new kind is one :class:`KindSpec` and one :func:`register` call
(and its payload type). Kinds are not all charged to a dataset's central budget in (epsilon, delta, rho):
``charged_to_dataset`` says whether the release engine reserves the kind's releases in the dataset's ledger (a
local-DP campaign, whose participants spend their own budget, would not).

This module is light on purpose (the command line and the API schema read it): the payload types and codecs import
the numerical stack only when they run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.errors import InvalidInput
from service.mechanisms.payloads import GramPayload, MarginalsPayload, ModelPayload
from service.mechanisms.registry import ReleaseKind
from workloads.registry import Registry

if TYPE_CHECKING:
    from workloads.domain import Domain


@dataclass(frozen=True)
class KindSpec:
    """One kind of release.

    ``payload_type``: the type of the payload a mechanism of this kind returns in its result (its ``to_bytes`` is
    what is stored); ``decode_payload(payload, domain)`` reads a stored payload back (the graphical model or the
    measured residuals, the Gram payload, the model payload)."""

    kind: str
    description: str
    payload_type: type
    decode_payload: Callable[[bytes, Domain], object]
    charged_to_dataset: bool = True


def _refused(kind: object, choices: list[str]) -> InvalidInput:
    return InvalidInput(f"release kind must be one of {choices}, got {kind!r}", code="invalid_parameter")


#: The registered kinds (the project's one generic registry, :class:`workloads.registry.Registry`).
_KINDS: Registry[KindSpec] = Registry("release kind", _refused)


def register(spec: KindSpec) -> KindSpec:
    """Add a kind; refused if a kind of that name exists."""
    return _KINDS.register(str(spec.kind), spec)


def unregister(kind: str) -> None:
    """Remove a kind (tests that register one of their own remove it afterwards)."""
    _KINDS.unregister(kind)


def get(kind: str) -> KindSpec:
    """The kind named ``kind`` (an :class:`InvalidInput` naming the known kinds otherwise)."""
    return _KINDS.get(kind)


def find(kind: str) -> KindSpec | None:
    """The kind named ``kind``, or None."""
    return _KINDS.find(kind)


def names() -> list[str]:
    return _KINDS.names()


def _decode_marginals(payload: bytes, domain: Domain) -> object:
    """A :class:`~service.releases.measured.MeasuredRelease` for a payload of noisy residuals (issue 9), else the
    fitted graphical model (releases of MST and AIM, and direct releases made before issue 9)."""
    from service.releases import measured

    release = measured.decode(payload, domain)
    if release is not None:
        return release
    from estimators.graphical import mbi_adapter  # only a model needs mbi (and JAX: seconds to import)

    return mbi_adapter.model_from_bytes(payload, domain)


def _decode_gram(payload: bytes, domain: Domain) -> object:  # noqa: ARG001 - the payload names its columns
    return GramPayload.from_bytes(payload)


def _decode_linear_model(payload: bytes, domain: Domain) -> object:  # noqa: ARG001 - the payload names its columns
    return ModelPayload.from_bytes(payload)


register(KindSpec(ReleaseKind.MARGINALS, "noisy marginals (as residuals) or a graphical model that answers any "
                  "marginal", MarginalsPayload, _decode_marginals))
register(KindSpec(ReleaseKind.GRAM, "a noisy Gram matrix Z^T Z of encoded columns, with a noisy lambda_min",
                  GramPayload, _decode_gram))
register(KindSpec(ReleaseKind.MODEL, "a released linear model", ModelPayload, _decode_linear_model))
