"""The benchmarks: one module per benchmark, each run as ``python -m benchmarks.NAME`` from the repository root,
all sharing one harness (:mod:`benchmarks.harness`: seeds, temporary databases, ``--json PATH`` / ``--plot PATH``,
the summary table, errors). ``make bench`` runs every one, ``make bench-quick`` the quick ones; ``README.md`` here
says what each measures and where its results are.

This package is not part of the shipped code (``pyproject.toml`` packages only ``service``, ``estimators``,
``workloads`` and ``db``): it may import anything of the project, and nothing in the project imports it.
"""
