"""The campaign protocols, one module each (mirroring :mod:`workloads.local.protocols`): ``ldp_avg``,
``stein_glm`` (``stein-glm``, ``stein-glm-2round``), ``glm``, ``ldp_iht``, ``label_ldp``, ``bernstein`` (``bernstein``,
``bernstein-1bit``), ``dr_erm`` and ``linear_ssp``. Each registers one
:class:`~service.campaigns.protocols.base.CampaignProtocol` per protocol: its declared options, its spec class (and
so its randomizer), builder, round transition, models and estimates. What they share is :mod:`.common`; the record
and the registry are :mod:`.base`.

A new protocol: its spec and randomizer in :mod:`workloads.local.protocols` and :mod:`workloads.local.randomizers`,
its estimator in :mod:`estimators.local`, and one module here that registers its record; then a row in
docs/campaigns.md, a section in docs/privacy.md and a fit in ``tests/service/api/test_api_roles.py``
(``tests/service/campaigns/test_protocol_contract.py`` checks all of them).
"""

# each protocol registers its record on import, in the order workloads.local.protocols lists them
from service.campaigns.protocols import bernstein, dr_erm, glm, label_ldp, ldp_avg, ldp_iht, linear_ssp, stein_glm  # noqa: E402, F401, I001
from service.campaigns.protocols.base import (
    CAMPAIGN_PROTOCOLS,
    CampaignProtocol,
    build_spec,
    get_protocol,
    next_state,
    register,
)


__all__ = ["CAMPAIGN_PROTOCOLS", "CampaignProtocol", "build_spec", "get_protocol", "next_state", "register"]
