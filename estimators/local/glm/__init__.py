"""The Stein-lemma GLMs from local reports (Wang, Hu, Zhang, Gaboardi & Xu, ALT 2021 and its journal version):
private OLS, the link constant, the fitted single-index models, the 2-round protocol, and the synthetic problems of
the experiments."""
