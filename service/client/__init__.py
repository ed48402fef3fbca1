"""The Python client of Marginalia: what an analyst's notebook, a steward's script or an auditor imports.

numpy, pandas and httpx only (the ``marginalia[client]`` install): importing this package pulls neither scipy,
FastAPI, SQLAlchemy, JAX nor mbi (a test checks it). :mod:`service.client.http` speaks the HTTP API;
:mod:`service.client.fitted` holds the fitted regressions it returns, built on :mod:`estimators.base`'s model types;
:mod:`service.client.collections` the local-DP collections (campaigns, a participant's ``submit``, a gateway's
batches, models fitted from campaigns), :mod:`service.client.device` what a participant's device runs
(:mod:`workloads.local.device`, refusing with the client's errors) and :mod:`service.client.spend` her own privacy
filter (:class:`Device`: her ceilings and spend file). Every exception the client raises on purpose is a
:class:`MarginaliaError` (:mod:`service.client.errors`): the server's answers, and
:class:`CollectionError` and :class:`DeviceError` for refusals on the device.

    from service.client import Client
"""

from service.client.collections import CampaignHandle, CampaignModel
from service.client.errors import CollectionError, DeviceError, MarginaliaError
from service.client.fitted import ExtrapolationWarning, FittedRegression
from service.client.http import Client, marginal_frame
from service.client.spend import Ceiling, Device

__all__ = ["CampaignHandle", "CampaignModel", "Ceiling", "Client", "CollectionError", "Device", "DeviceError",
           "ExtrapolationWarning", "FittedRegression", "MarginaliaError", "marginal_frame"]
