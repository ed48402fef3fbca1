"""Sparse linear regression and low-dimensional ERM under local DP (Wang & Xu, ICML 2019; Wang, Gaboardi & Xu,
NeurIPS 2018): LDP-IHT, the label-private Lasso, DR-ERM, the Local Bernstein Mechanism, their synthetic problems, and
convex.py, the one home of cvxpy calls."""
