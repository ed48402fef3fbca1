"""The Python client of Marginalia: what an analyst's notebook, a steward's script or an auditor imports.

numpy, pandas and httpx only (the ``marginalia[client]`` install): importing this package pulls neither scipy,
FastAPI, SQLAlchemy, JAX nor mbi (a test checks it). :mod:`service.client.http` speaks the HTTP API;
:mod:`service.client.fitted` holds the fitted regressions it returns, built on :mod:`estimators.base`'s model types.

    from service.client import Client
"""

from service.client.fitted import ExtrapolationWarning, FittedRegression
from service.client.http import Client, MarginaliaError, marginal_frame

__all__ = ["Client", "ExtrapolationWarning", "FittedRegression", "MarginaliaError", "marginal_frame"]
