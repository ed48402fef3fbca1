"""The campaign protocols. Each is one :class:`~service.campaigns.protocols.base.CampaignProtocol` record,
registered in :mod:`.catalog` (its declared options, spec class and so its randomizer, models, and where its builder,
round transition, fit and planner live); those functions are in one module here per protocol family, mirroring
:mod:`workloads.local.protocols`: ``ldp_avg``, ``stein_glm`` (``stein-glm``, ``stein-glm-2round``), ``glm``,
``ldp_iht``, ``label_ldp``, ``bernstein`` (``bernstein``, ``bernstein-1bit``), ``dr_erm`` and ``linear_ssp``, each
imported when a campaign of it is first built or fitted. What they share is :mod:`.common`; the record and the
registry are :mod:`.base`.

Importing this package registers every record and loads no estimator: the command line reads the declarations to
build its flags.

A new protocol: its spec and randomizer in :mod:`workloads.local.protocols` and :mod:`workloads.local.randomizers`,
its estimator in :mod:`estimators.local`, one module here with its builder and fit, and its record in
:mod:`.catalog`; then a row in docs/campaigns.md, a section in docs/privacy.md and an entry in ``PROTOCOL_CAMPAIGNS``
of ``tests/support/roles.py`` (``tests/service/campaigns/test_protocol_contract.py`` checks all of them).
"""

from service.campaigns.protocols import catalog  # noqa: F401  (registers every protocol's record)
from service.campaigns.protocols.base import (
    CAMPAIGN_PROTOCOLS,
    CampaignProtocol,
    build_spec,
    get_protocol,
    next_state,
    register,
)

__all__ = ["CAMPAIGN_PROTOCOLS", "CampaignProtocol", "build_spec", "get_protocol", "next_state", "register"]
