"""Central-model estimators: private regressions answered from released statistics (DD-SSP, AdaSSP), objective
perturbation with a certified minimiser, DP-IHT, the non-private references and the evaluation metrics."""
