"""The import architecture (issue 19): no import circle and no upward import, checked on the import graph that
grimp builds statically from the source (https://grimp.readthedocs.io; every ``import`` statement, those inside
functions too).

* Layers: ``db`` imports nothing of the project, ``workloads`` only itself, ``estimators`` only ``workloads``;
  ``service`` may import all three (docs/architecture.md, the design's layout table).
* No circle between modules: the module import graph has no strongly connected component of two or more modules.
* No upward arrow inside a package: inside every package, the imports between its direct children (subpackages and
  modules; a subpackage stands for everything in it) form no circle either. ``service/data`` importing
  ``service/releases`` while ``service/releases`` imports ``service/data`` is such an arrow, though no two modules
  import each other.

* The client is a leaf (docs/architecture.md): ``service.client`` imports only ``workloads``, the estimators' base
  and itself, so that what ships to an analyst's notebook or a participant's phone loads none of the server; and no
  module of the server imports the client (the demo, which plays the analysts and participants, may). What a device
  runs lives beside the randomizers (``workloads.local.device``), where the server's simulator finds it.

Imports made only for type checkers (under ``if TYPE_CHECKING:``) count everywhere, in the circle checks as in the
layer check: they never run, but a circle of them is still two modules that each need the other to be read (and the
next engineer to turn one into a runtime import meets the circle then). None is tolerated (issue 28).

``benchmarks`` is a package of its own outside the layers: it may import any layer, never ``tests``
(:func:`test_benchmarks_do_not_import_the_tests`).
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp
import pytest

PACKAGES = ("db", "workloads", "estimators", "service")
#: What each top-level package may import of the project besides itself.
ALLOWED = {"db": set(), "workloads": set(), "estimators": {"workloads"}, "service": {"db", "workloads", "estimators"}}
#: The client's package, what it may import of the project besides itself, and who may import it.
CLIENT = "service.client"
CLIENT_MAY_IMPORT = ("workloads", "estimators.base")
CLIENT_IMPORTED_BY = ("service.tools.demo",)
#: Circles tolerated, each with its reason: none (the campaign twins were cut by service/campaigns/protocols/).
TOLERATED_CIRCLES_INSIDE: tuple[str, ...] = ()


@pytest.fixture(scope="module")
def full_graph() -> grimp.ImportGraph:
    """Every import of the project's packages, those under ``if TYPE_CHECKING:`` included."""
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)


def _edges(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    return {(a, b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)}


def _where(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    lines = ", ".join(f"line {d['line_number']}: {d['line_contents'].strip()}" for d in details)
    return f"{importer} -> {imported} ({lines})"


def strongly_connected(nodes: Iterable[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with two or more nodes (Tarjan 1972, iterative), each sorted."""
    successors: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        successors.setdefault(a, []).append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(successors.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors.get(child, ()))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _inside(module: str, packages: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``packages`` or inside one."""
    return any(module == p or module.startswith(p + ".") for p in packages)


def _tolerated(modules: Iterable[str]) -> bool:
    return any(all(_inside(m, (p,)) for m in modules) for p in TOLERATED_CIRCLES_INSIDE)


def _describe(graph: grimp.ImportGraph, component: list[str], edges: set[tuple[str, str]]) -> str:
    inside = set(component)
    return "\n  ".join([" <-> ".join(component)] + [_where(graph, a, b) for a, b in sorted(edges)
                                                    if a in inside and b in inside])


def test_strongly_connected_components() -> None:
    edges = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("f", "f")}
    assert strongly_connected("abcdefg", edges) == [["d", "e"], ["a", "b", "c"]]
    assert strongly_connected("abc", {("a", "b"), ("b", "c")}) == []


def test_layers(full_graph: grimp.ImportGraph) -> None:
    """db imports nothing of the project, workloads only itself, estimators only workloads."""
    upward = [_where(full_graph, a, b) for a, b in sorted(_edges(full_graph))
              if b.split(".")[0] != a.split(".")[0] and b.split(".")[0] not in ALLOWED[a.split(".")[0]]]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_the_client_is_a_leaf(full_graph: grimp.ImportGraph) -> None:
    """The client imports only workloads, the estimators' base and itself; nothing of the server imports it."""
    edges = _edges(full_graph)
    out = [_where(full_graph, a, b) for a, b in sorted(edges)
           if _inside(a, (CLIENT,)) and not _inside(b, (CLIENT, *CLIENT_MAY_IMPORT))]
    into = [_where(full_graph, a, b) for a, b in sorted(edges)
            if _inside(b, (CLIENT,)) and not _inside(a, (CLIENT, *CLIENT_IMPORTED_BY))]
    assert not out, "the client imports more than workloads, estimators.base and itself:\n" + "\n".join(out)
    assert not into, "the server imports the client:\n" + "\n".join(into)


def test_no_circle_between_modules(full_graph: grimp.ImportGraph) -> None:
    edges = _edges(full_graph)
    circles = [c for c in strongly_connected(full_graph.modules, edges) if not _tolerated(c)]
    assert not circles, "import circles:\n" + "\n".join(_describe(full_graph, c, edges) for c in circles)


def test_no_upward_arrow_inside_a_package(full_graph: grimp.ImportGraph) -> None:
    """Inside every package, its children's imports of each other (a subpackage standing for all of its modules)
    form no circle: there is an order of the children in which every import goes downward."""
    edges = _edges(full_graph)
    packages = sorted({m.rsplit(".", 1)[0] for m in full_graph.modules if "." in m})
    problems = []
    for package in packages:
        prefix = package + "."

        def child(module: str, prefix: str = prefix) -> str | None:
            return prefix + module[len(prefix):].split(".")[0] if module.startswith(prefix) else None

        between: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for a, b in sorted(edges):
            if child(a) and child(b) and child(a) != child(b):
                between.setdefault((child(a), child(b)), []).append((a, b))
        children = {c for pair in between for c in pair}
        for component in strongly_connected(children, set(between)):
            if _tolerated(component):
                continue
            inside = set(component)
            arrows = [_where(full_graph, *edge) for pair in sorted(between) if set(pair) <= inside
                      for edge in between[pair][:3]]
            problems.append(f"inside {package}: " + " <-> ".join(component) + "\n  " + "\n  ".join(arrows))
    assert not problems, "circles between the parts of a package:\n" + "\n".join(problems)


def test_benchmarks_do_not_import_the_tests() -> None:
    """``benchmarks`` may use the service (the throwaway PostgreSQL is :mod:`service.tools.pgserver`), never the test
    suite: a benchmark run must not depend on test helpers that change with the tests (issue 28)."""
    graph = grimp.build_graph("benchmarks", "tests", *PACKAGES, exclude_type_checking_imports=False, cache_dir=None)
    into_tests = [_where(graph, a, b) for a, b in sorted(_edges(graph))
                  if a.split(".")[0] == "benchmarks" and b.split(".")[0] == "tests"]
    assert not into_tests, "benchmarks importing the tests:\n" + "\n".join(into_tests)
