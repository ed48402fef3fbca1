"""Private regressions answered from releases: the design, which stored release can answer, and the fit."""
