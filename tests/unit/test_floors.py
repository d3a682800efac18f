"""The floors of the code (issue #25): no import cycle among tablesvc's packages, ``timeline``
imports nothing of tablesvc, and every import points down the floors written below.

Imports are read with ``ast`` from every module of ``tablesvc`` and ``timeline``, at any depth
(an import inside a function is a dependency too: it only runs later); those under
``if TYPE_CHECKING:`` are left out (they never run).  Standard library only.

docs/architecture.md draws the same floors.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP_PACKAGES = ("tablesvc", "timeline")

# Modules that sit on another floor than their package (none today: the Table handle, which once
# sat in tablesvc/table beside the table format, has its package tablesvc.api).
OWN_FLOOR_MODULES: tuple[str, ...] = ()

# The floors, from the bottom.  A unit may import units of lower floors only, never one of its
# own floor or above (units of one floor are independent of each other).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("timeline",),
    ("tablesvc", "tablesvc.errors"),                      # tablesvc/__init__ (__version__), the errors
    ("tablesvc.storage", "tablesvc.config", "tablesvc.hfile"),      # tablesvc.hfile: bytes in, cells out
    ("tablesvc.table", "tablesvc.fsview", "tablesvc.logformat"),   # tablesvc.table: the table format
    ("tablesvc.merge", "tablesvc.logfiles"),          # tablesvc.logfiles: log-file steps needing names and format
    ("tablesvc.metadata",),                               # the metadata table's files partition (reading)
    ("tablesvc.write",),
    ("tablesvc.spark",),
    ("tablesvc.services",),
    ("tablesvc.api",),                                    # the Table handle: the Python API
    ("tablesvc.runner",),
    ("tablesvc.cli",),
    ("tablesvc.demo", "tablesvc.__main__"),
)

# Edges known to go up, each with the issue that removes it.  The cycle check leaves them out, so
# it still pins that no NEW cycle appears; a listed edge that no longer exists fails the test
# (take it off the list).
KNOWN_UPWARD_EDGES: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    source: str        # the importing unit
    target: str        # the imported unit
    where: str         # file:line of the import


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str, depth: int = 2) -> str:
    """The unit a module belongs to: its package at ``depth`` (``tablesvc.services.clean.planner``
    -> ``tablesvc.services`` at depth 2), ``timeline`` for all of the lower floor, or the module
    itself when it has a floor of its own."""
    for own in OWN_FLOOR_MODULES:
        if module == own or module.startswith(own + "."):
            return own
    if module == "timeline" or module.startswith("timeline."):
        return "timeline" if depth <= 2 else ".".join(module.split(".")[:depth - 1])
    return ".".join(module.split(".")[:depth])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_modules(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    # `from a.b import c` imports a.b, and a.b.c too when c is a module
    return [source] + [f"{source}.{alias.name}" for alias in node.names]


def module_imports() -> list[tuple[str, str, str]]:
    """(importing module, imported module, file:line) for every import of tablesvc or timeline
    made by a module of tablesvc or timeline, at any depth, except under ``if TYPE_CHECKING:``."""
    found: list[tuple[str, str, str]] = []
    for top in TOP_PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = _module_name(path)
            is_package = path.name == "__init__.py"
            where = path.relative_to(ROOT).as_posix()

            def visit(node: ast.AST) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.If) and _is_type_checking(child.test):
                        for other in child.orelse:
                            visit_statement(other)
                        continue
                    visit_statement(child)

            def visit_statement(node: ast.AST) -> None:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for target in _imported_modules(node, module, is_package):
                        if target.split(".")[0] in TOP_PACKAGES:
                            found.append((module, target, f"{where}:{node.lineno}"))
                visit(node)

            visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def unit_edges(depth: int = 2) -> list[Edge]:
    edges = []
    for source, target, where in module_imports():
        a, b = unit_of(source, depth), unit_of(target, depth)
        if a != b:
            edges.append(Edge(a, b, where))
    return edges


def find_cycle(edges: list[Edge]) -> list[Edge] | None:
    """One cycle of the graph as its edges, or None."""
    graph: dict[str, dict[str, Edge]] = defaultdict(dict)
    for e in edges:
        graph[e.source].setdefault(e.target, e)
    state: dict[str, int] = {}          # 1 on the current path, 2 done
    path: list[Edge] = []

    def walk(node: str) -> list[Edge] | None:
        state[node] = 1
        for nxt, edge in sorted(graph[node].items()):
            if state.get(nxt) == 1:
                # nxt is on the path walked to here (units never import themselves)
                start = next(i for i, e in enumerate(path) if e.source == nxt)
                return path[start:] + [edge]
            if nxt not in state:
                path.append(edge)
                found = walk(nxt)
                if found:
                    return found
                path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def _describe(cycle: list[Edge]) -> str:
    return "import cycle:\n" + "\n".join(f"  {e.source} -> {e.target}  ({e.where})" for e in cycle)


def _without_known(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if (e.source, e.target) not in KNOWN_UPWARD_EDGES]


def test_the_cycle_finder_names_each_edge():
    edges = [Edge("a", "b", "a.py:1"), Edge("b", "c", "b.py:2"), Edge("c", "a", "c.py:3"), Edge("c", "d", "c.py:4")]
    cycle = find_cycle(edges)
    assert cycle is not None and {e.where for e in cycle} == {"a.py:1", "b.py:2", "c.py:3"}
    assert find_cycle(edges[:2] + edges[3:]) is None


def test_no_cycle_among_packages():
    cycle = find_cycle(_without_known(unit_edges(depth=2)))
    assert cycle is None, _describe(cycle)


def test_no_cycle_among_subpackages_and_modules():
    """One level down too: the services' packages, and the modules of each package."""
    cycle = find_cycle(_without_known(unit_edges(depth=3)))
    assert cycle is None, _describe(cycle)


def test_timeline_imports_nothing_of_tablesvc():
    found = [f"{where}: {target}" for source, target, where in module_imports()
             if unit_of(source) == "timeline" and target.split(".")[0] == "tablesvc"]
    assert found == []


def test_every_unit_has_a_floor():
    floors = {unit for floor in FLOORS for unit in floor}
    units = {unit_of(m) for m, _t, _w in module_imports()}
    assert units - floors == set(), "add these to FLOORS in tests/unit/test_floors.py and docs/architecture.md"


def test_imports_point_down_the_floors():
    rank = {unit: i for i, floor in enumerate(FLOORS) for unit in floor}
    upward = sorted({f"{e.source} -> {e.target}  ({e.where})" for e in unit_edges(depth=2)
                     if (e.source, e.target) not in KNOWN_UPWARD_EDGES
                     and rank.get(e.target, -1) >= rank.get(e.source, len(FLOORS))})
    assert upward == [], "imports that do not point down the floors:\n" + "\n".join(upward)


def test_known_upward_edges_still_exist():
    present = {(e.source, e.target) for e in unit_edges(depth=2)}
    gone = [edge for edge in KNOWN_UPWARD_EDGES if edge not in present]
    assert gone == [], f"no longer imported, take off KNOWN_UPWARD_EDGES: {gone}"


# -- the tests' own layout (issue #25, item 6) -------------------------------------------------------
# Test files sit in one folder per floor: what a test needs to run decides where it goes, so that
# `pytest tests/unit` runs without Java and a failure's folder says what kind of test broke.
# Helper modules stay at the top of tests/ (tests/conftest.py puts that folder on sys.path, for
# every sub-folder) or in tests/oracles and tests/benchmarks.
TEST_FLOORS: dict[str, str] = {
    "unit": "no Spark session and no tablesvc process: timeline, log format, merge, config, views, planners",
    "spark": "starts the test session's Spark: write, read, compaction jobs, executors, the runner in-process",
    "crash_model": "kill -9 of real processes, the crash harness, the model-based run, the soak, runner takeovers",
    "cli": "the tablesvc command and the demo as a user runs them: exit codes, lines, flags",
}
# Folders of tests that are no floor of this suite: each has its own marker, deselected by default.
OTHER_TIERS: dict[str, str] = {
    "benchmarks": "`make bench` (marker benchmark): cases with baselines",
    "interop_java": "`make interop` (marker interop_java, issue #26): Apache Hudi (Java) beside tablesvc",
}
TESTS = ROOT / "tests"
# A test file imported by another cannot move or change alone: what tests share lives in helper
# modules (tests/helpers.py, tests/table_builders.py, tests/oracles/, tests/benchmarks/bench_data.py
# ...).  Known imports of a test file, each with what removes it; a listed import that is gone
# fails the test.  None today.
KNOWN_TEST_FILE_IMPORTS: dict[tuple[str, str], str] = {}
# conftest.py is imported by pytest, never by a test file: a sub-folder's conftest.py (the Java tier
# has one) is also named ``conftest``, so ``from conftest import`` reads whichever was loaded last.
# What test files share of it lives in tests/fixture_tables.py.
NOT_IMPORTED_BY_TESTS = ("conftest",)


def _test_files(tests: Path = TESTS) -> list[Path]:
    return sorted(p for p in tests.rglob("test_*.py") if "data" not in p.relative_to(tests).parts)


def imports_of_test_files(tests: Path = TESTS) -> list[tuple[str, str, int]]:
    """(importing file, imported test module, line) for every import, at any depth, in a module
    anywhere under ``tests/`` (test files and helpers) of a ``test_*`` module under ``tests/`` or of
    ``conftest``."""
    test_modules = {p.stem for p in _test_files(tests)} | set(NOT_IMPORTED_BY_TESTS)
    found = []
    for path in sorted(p for p in tests.rglob("*.py") if "data" not in p.relative_to(tests).parts):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [(path.relative_to(tests).as_posix(), n.split(".")[-1], node.lineno)
                      for n in names if n.split(".")[-1] in test_modules]
    return found


def test_no_test_file_imports_another():
    found = [f"tests/{source}:{line} imports {target}" for source, target, line in imports_of_test_files()
             if (source, target) not in KNOWN_TEST_FILE_IMPORTS]
    assert found == [], "move what these share into a helper module:\n" + "\n".join(found)


def test_known_test_file_imports_still_exist():
    present = {(source, target) for source, target, _line in imports_of_test_files()}
    gone = [pair for pair in KNOWN_TEST_FILE_IMPORTS if pair not in present]
    assert gone == [], f"no longer imported, take off KNOWN_TEST_FILE_IMPORTS: {gone}"


def test_the_import_check_sees_a_test_file_imported_from_a_sub_folder(tmp_path):
    (tmp_path / "unit").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "test_bench_x.py").write_text("def build(): ...\n")
    (tmp_path / "unit" / "test_y.py").write_text("def t():\n    from test_bench_x import build\n")
    assert imports_of_test_files(tmp_path) == [("unit/test_y.py", "test_bench_x", 2)]


def test_every_test_file_sits_in_a_floor_folder():
    """Pytest collects tests/ recursively: a test file left at the top or in a new folder would
    run, but on no floor.  Basenames are unique too (the folders are not packages, so two files
    of one name would shadow each other at import)."""
    misplaced = [p.relative_to(TESTS).as_posix() for p in _test_files()
                 if p.parent.name not in (*TEST_FLOORS, *OTHER_TIERS) or p.parent.parent != TESTS]
    assert misplaced == [], f"put these in one of tests/{{{','.join(TEST_FLOORS)}}}: {misplaced}"
    names = [p.name for p in _test_files()]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def _uses_spark(tree: ast.Module) -> bool:
    """A test that takes the ``spark`` fixture or carries the ``spark`` mark."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                any(a.arg == "spark" for a in node.args.args + node.args.kwonlyargs):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "spark" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "mark":
            return True
    return False


def test_unit_tests_start_no_spark():
    spark_users = [p.name for p in sorted((TESTS / "unit").glob("test_*.py")) if _uses_spark(ast.parse(p.read_text()))]
    assert spark_users == [], f"these use Spark: move them to tests/spark (or cli / crash_model): {spark_users}"
