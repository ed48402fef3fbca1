"""Local-DP campaign protocols: public specifications, rounds, report schemas and their validators.

A campaign runs one **protocol**. Everything here is public and fixed before anyone reports:

* a **spec** (a frozen dataclass, JSON round-trip with :meth:`ProtocolSpec.to_json` / :func:`spec_from_json`): the
  protocol's name, dimension, bounds, the groups of participants and the **rounds**;
* each round (:class:`RoundSpec`) names the group that reports in it and the local (epsilon, delta) one report
  spends; a participant's total spend is the sum over the rounds of her group (basic composition, which holds for
  adaptively chosen mechanisms with parameters fixed in advance: Dwork & Roth 2014, Thm. 3.16);
* each round has a **public state** (:class:`RoundState`) the server publishes before the round opens: the first
  from the spec (and a public table, if the protocol uses one) by :meth:`ProtocolSpec.initial_state`; round
  ``t + 1``'s from round ``t``'s aggregate, computed server side by the protocol's transition
  (``service.campaigns.protocols.next_state``);
* reports of round ``t`` are randomized with round ``t``'s state (:meth:`ProtocolSpec.randomize`, which calls the
  pure functions of :mod:`workloads.local.randomizers`) and checked against its :class:`ReportSchema`.

A batch of reports is *columnar*: ``{field: array of shape (k, *field shape)}``; :meth:`ReportSchema.stack` builds one
from a list of single reports. :meth:`ReportSchema.validate` checks a whole batch with array operations and refuses it
with a :class:`ReportError` naming the field and the first bad report.

Allowed values: what the randomizer can emit, and nothing else where that is a checkable set. A noisy report is a
clipped value rounded to the campaign's public grid plus integer noise, so every entry must be a multiple of the
grid step (``FieldSchema.grid``); the noise is unbounded, so each entry is also bounded by its grid interval plus a
tail that an honest report exceeds with probability at most 1e-9 per report (union bound over its entries,
:func:`~workloads.local.protocols.base.noisy_field`). The l2-ball randomizer's reports all have one norm
(``FieldSchema.exact_norm``, :func:`~workloads.local.protocols.base.sphere_field`). Refusing is post-processing of
what was sent and costs no privacy; derivations in ``docs/privacy.md`` 8.7. Where the randomizer's
output has a structure the ranges do not capture, :meth:`ProtocolSpec.check_reports` refuses what it cannot emit
(the 1-bit Bernstein report is one-hot; a label-ldp row id is a whole number). What the server sums may differ from
what is sent (:meth:`ProtocolSpec.aggregate_schema`, :meth:`ProtocolSpec.aggregate_input`: label-ldp's reports name a
public row and the server multiplies its own copy of that row by the label).

Protocols are found by name in :data:`PROTOCOLS` (:func:`register_protocol`). What they share is
:mod:`.base`; each protocol is a module of this package (``ldp_avg``, ``stein_glm``, ``glm``, ``ldp_iht``,
``label_ldp``, ``bernstein``, ``dr_erm``, ``linear_ssp``, ``marginals``) and registers its spec on import. Adding
one means a new module here, its randomizer in :mod:`workloads.local.randomizers`, its estimator in
:mod:`estimators.local` and its record (builder, transition, estimates) in ``service/campaigns/protocols/``.
"""

# each protocol registers its spec on import, in the order the protocols are listed
from workloads.local.protocols import (  # noqa: E402, F401, I001
    bernstein, dr_erm, glm, label_ldp, ldp_avg, ldp_iht, linear_ssp, marginals, stein_glm,
)
from workloads.local.protocols.base import (
    EXACT_NORM_RTOL,
    LAPLACE_TAIL,
    PROTOCOLS,
    FieldSchema,
    GroupSpec,
    ProtocolError,
    ProtocolSpec,
    ReportError,
    ReportSchema,
    RoundSpec,
    RoundState,
    register_protocol,
    spec_from_json,
)
from workloads.local.protocols.ldp_avg import LdpAverageSpec  # noqa: E402
from workloads.local.protocols.stein_glm import SteinGlmSpec, TwoRoundSteinSpec  # noqa: E402

__all__ = [
    "EXACT_NORM_RTOL", "LAPLACE_TAIL", "PROTOCOLS", "FieldSchema", "GroupSpec", "LdpAverageSpec", "ProtocolError",
    "ProtocolSpec", "ReportError", "ReportSchema", "RoundSpec", "RoundState", "SteinGlmSpec", "TwoRoundSteinSpec",
    "register_protocol", "spec_from_json",
]
