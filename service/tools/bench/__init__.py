"""The experiments behind ``marginalia bench ...``, each through the service's real paths on temporary databases:

* :mod:`.regression`: the private-regression protocol of Ferrando & Sheldon (2024) (``bench regression``);
* :mod:`.stein_glm` and :mod:`.stein_glm_real`: Sec. 6 of Wang, Hu, Zhang, Gaboardi & Xu (ALT 2021) through local-DP
  campaigns (``bench stein-glm``, ``bench stein-glm-real``);
* :mod:`.sparse`: Sec. 7.1 of Wang & Xu (ICML 2019) through campaigns, with the central DP-IHT on the same rows
  (``bench sparse``);
* :mod:`.dp_iht`: Sec. 7.2 of Wang & Xu, DP-IHT's optimality gap on a real table (``bench dp-iht``).

Each writes JSON records (one per setting and trial, plus a summary) and a PNG plot; the results pages in ``docs/``
say what was run and what it showed.
"""
