"""zCDP <-> (epsilon, delta)-DP conversions (Canonne, Kamath & Steinke 2020, Cor. 13), re-exported.

The functions live in :mod:`workloads.conversions` (plain floats, no numpy), so that a participant's device can
calibrate its discrete Gaussian noise with the very same conversion the accountant uses (``docs/privacy.md`` 8.7);
the service keeps importing them from here.
"""

from workloads.conversions import cdp_delta, cdp_eps, cdp_rho, log_cks_constant, optimal_order

__all__ = ["cdp_delta", "cdp_eps", "cdp_rho", "log_cks_constant", "optimal_order"]
