"""``marginalia bench ...``: the experiments, each on temporary databases (yours is never touched).

:data:`bench_app` is the command group; each module of this package adds one experiment's command to it when
imported (``regression``, ``sparse``, ``stein_glm``, ``dp_iht``). The experiments themselves live in
:mod:`service.tools.bench`, imported only when a command runs, so ``marginalia --help`` stays quick.
"""

from __future__ import annotations

from service.cli.common import Typer

bench_app = Typer(help="Benchmarks on temporary databases (yours is never touched).")

# in the order `marginalia bench --help` lists them
from service.cli.bench import regression, sparse, stein_glm, dp_iht  # noqa: E402, F401, I001
