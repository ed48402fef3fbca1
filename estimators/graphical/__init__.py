"""Graphical models fitted to noisy marginals (the estimation behind every marginal release), by job: table
arithmetic (``factors``), junction trees (``junction_tree``), belief propagation (``belief_propagation``), the fitted
model (``model``), the estimator (``mirror_descent``) and the adapter to private-pgm (``mbi_adapter``)."""
