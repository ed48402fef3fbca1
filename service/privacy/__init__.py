"""All privacy arithmetic, in one place: cost values (``cost``), conversions between zCDP and (epsilon, delta)-DP
(``conversions``), noise calibration (``calibration``), the accountant's rule (``filter``) and every random draw
(``noise``). Parameter validation is :mod:`workloads.parameters`, shared with the client and participants."""
