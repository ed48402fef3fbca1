"""``marginalia bench ...``: the experiments, each on temporary databases (yours is never touched).

:data:`bench_app` is the command group; each module of this package adds one experiment's command to it when
imported (``regression``, ``sparse``, ``stein_glm``, ``dp_iht``; :mod:`service.cli` imports them, so this package
imports none of its modules and the imports go one way). The experiments themselves live in
:mod:`service.tools.bench`, imported only when a command runs, so ``marginalia --help`` stays quick.
"""

from __future__ import annotations

from service.cli.common import Typer

bench_app = Typer(help="Benchmarks on temporary databases (yours is never touched).")
