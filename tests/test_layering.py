"""The package's layering (docs/ARCHITECTURE.md) holds: no upward or forbidden imports, no cycles.

Every ``import`` and ``from ... import`` anywhere in a module counts, including those under
``if TYPE_CHECKING:`` and inside functions. ``LAYERS`` mirrors the table in
docs/ARCHITECTURE.md; change both together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "statesource"

# Bottom to top. A unit (a module or a package with all its submodules) may import units of its
# own tier and of lower tiers, except the pairs in FORBIDDEN; the no-cycle test keeps imports
# within a tier one-way. The three foundation tiers are docs/ARCHITECTURE.md's
# "errors < checks, types < keygroups, keyequality, keyjson, schema".
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation (errors)", ("statesource.errors",)),
    ("foundation (checks, types)", ("statesource.checks", "statesource.types")),
    ("foundation", ("statesource.keygroups", "statesource.keyequality", "statesource.keyjson",
                    "statesource.schema")),
    ("vocabulary", ("statesource.model", "statesource.redistribution")),
    ("sides", ("statesource.state", "statesource.format")),
    ("bridges", ("statesource.checkpointing", "statesource.skew", "statesource.plot",
                 "statesource.rescale", "statesource.flink", "statesource.jvm",
                 "statesource.sources")),
    ("top", ("statesource.spark", "statesource.spark.read", "statesource.spark.write",
             "statesource.spark.jvm", "statesource.demo", "statesource.cli")),
    # The curated public API imports every layer, so nothing inside the package may import it.
    ("public API", (PACKAGE,)),
]

FORBIDDEN: frozenset[tuple[str, str]] = frozenset({
    ("statesource.state", "statesource.format"),
    ("statesource.format", "statesource.state"),
    ("statesource.spark", "statesource.demo"),
    ("statesource.spark.read", "statesource.spark.write"),
    ("statesource.spark.write", "statesource.spark.read"),
    ("statesource.spark.read", "statesource.spark.jvm"),
    ("statesource.spark", "statesource.cli"),
    ("statesource.demo", "statesource.cli"),
    ("statesource.flink", "statesource.state"),
    ("statesource.flink", "statesource.checkpointing"),
})

# Inside ``statesource.flink``, bottom to top (docs/ARCHITECTURE.md, "Inside flink"): the bytes,
# RocksDB's files, the serializers, what _metadata records, the state files, the key-group
# layouts, the snapshot as a whole, then what reads and operates on whole snapshots.
FLINK = "statesource.flink"
FLINK_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("binary", (FLINK + ".binary",)),
    ("rocksdb", (FLINK + ".rocksdb",)),
    ("serializers", (FLINK + ".serializers",)),
    ("handles", (FLINK + ".handles",)),
    ("state files", (FLINK + ".statefiles",)),
    ("layouts", (FLINK + ".layouts",)),
    ("snapshot", (FLINK + ".snapshot",)),
    ("declarations", (FLINK + ".declarations",)),
    ("readers", (FLINK + ".reader", FLINK + ".jvm_layout")),
    ("operations", (FLINK + ".operations",)),
    ("package", (FLINK,)),
]

# Importers the layer rules do not apply to (imports *of* them are still checked).
EXEMPT = frozenset({PACKAGE})


@dataclass(frozen=True)
class Import:
    file: str  # relative to the repository root
    line: int
    statement: str
    importer: str  # module name
    imported: str  # module name


# ---------------------------------------------------------------- scanning the package


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py"))}


def in_package(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def imports_of(module: str, is_package: bool, source: str, file: str,
               known: Iterable[str]) -> list[Import]:
    """Every import of a ``statesource`` module in ``source``, resolved to module names.

    ``from X import y`` counts as importing ``X.y`` when that is a module, else ``X``;
    ``import X.Y`` counts as importing ``X.Y`` (not its parents).
    """
    known = set(known)
    found = []
    for node in ast.walk(ast.parse(source, filename=file)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if in_package(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".") if is_package else module.split(".")[:-1]
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if in_package(base):
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    targets.append(candidate if candidate in known else base)
        else:
            continue
        statement = ast.unparse(node)
        if len(statement) > 100:
            statement = statement[:96] + " ..."
        for target in dict.fromkeys(targets):
            if target != module:
                found.append(Import(file, node.lineno, statement, module, target))
    return found


def scan(root: Path = ROOT) -> tuple[dict[str, Path], list[Import]]:
    modules = package_modules(root)
    found = []
    for name, path in modules.items():
        found += imports_of(name, path.name == "__init__.py", path.read_text(),
                            str(path.relative_to(root)), modules)
    return modules, found


# ---------------------------------------------------------------- the rules


def unit_of(module: str, layers=LAYERS) -> tuple[int, str, str] | None:
    """(tier index, tier name, unit) of ``module``, or None when no layer holds it."""
    best = None
    for tier, (layer, units) in enumerate(layers):
        for unit in units:
            matches = module == unit or (unit != PACKAGE and module.startswith(unit + "."))
            if matches and (best is None or len(unit) > len(best[2])):
                best = (tier, layer, unit)
    return best


def layer_violations(found: Iterable[Import], layers=LAYERS, forbidden=FORBIDDEN,
                     exempt=EXEMPT) -> list[str]:
    problems = []
    for imp in found:
        if imp.importer in exempt:
            continue
        source, target = unit_of(imp.importer, layers), unit_of(imp.imported, layers)
        where = f"{imp.file}:{imp.line}: {imp.statement}"
        if source is None:
            problems.append(f"{where}: {imp.importer} belongs to no layer")
        elif target is None:
            problems.append(f"{where}: {imp.imported} belongs to no layer")
        elif source[2] == target[2]:
            continue
        elif (source[2], target[2]) in forbidden:
            problems.append(f"{where}: {source[2]} must never import {target[2]}"
                            f" (forbidden: {imp.imported})")
        elif target[0] > source[0]:
            problems.append(f"{where}: {source[2]} ({source[1]}) imports {imp.imported}"
                            f" from the higher layer {target[1]}")
    return problems


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component that has one.

    Each reported cycle is a shortest cycle through the component's smallest node; the
    component's other members are cycles too, and show up once this one is broken.
    """
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    edges = {n: sorted(set(graph.get(n, ()))) for n in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    for start in nodes:  # iterative Tarjan: deep import chains must not hit the recursion limit
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
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
                    components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    cycles = []
    for component in components:
        members = set(component)
        first = min(component)
        if len(component) == 1 and first not in edges[first]:
            continue
        # breadth-first from `first` back to itself inside the component
        parent: dict[str, str] = {}
        frontier = [first]
        while frontier and first not in parent:
            following = []
            for node in frontier:
                for child in edges[node]:
                    if child in members and child not in parent:
                        parent[child] = node
                        following.append(child)
            frontier = following
        path = [first]
        node = parent[first]
        while node != first:
            path.append(node)
            node = parent[node]
        path.append(first)
        path.reverse()
        cycles.append(path)
    return sorted(cycles)


def import_graph(found: Iterable[Import]) -> dict[str, dict[str, Import]]:
    graph: dict[str, dict[str, Import]] = {}
    for imp in found:
        graph.setdefault(imp.importer, {}).setdefault(imp.imported, imp)
    return graph


def describe_cycle(cycle: list[str], graph: Mapping[str, Mapping[str, Import]]) -> str:
    steps = []
    for importer, imported in zip(cycle, cycle[1:]):
        imp = graph[importer][imported]
        steps.append(f"    {imp.file}:{imp.line}: {imp.statement}")
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


# ---------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def package():
    modules, found = scan()
    # the scan itself works: a broken path or parser would otherwise make every test pass
    assert {"statesource", "statesource.errors", "statesource.state", "statesource.format",
            "statesource.cli"} <= set(modules)
    assert len(modules) > 20
    assert any(imp.imported == "statesource.errors" for imp in found)
    return modules, found


def test_no_import_reaches_up_or_across(package):
    _, found = package
    problems = layer_violations(found)
    assert not problems, (
        f"{len(problems)} import(s) break the layering of docs/ARCHITECTURE.md:\n"
        + "\n".join(problems))


def test_no_import_cycles(package):
    _, found = package
    graph = import_graph(found)
    cycles = find_cycles({module: set(targets) for module, targets in graph.items()})
    assert not cycles, (
        f"{len(cycles)} import cycle(s) in {PACKAGE}:\n"
        + "\n".join(describe_cycle(cycle, graph) for cycle in cycles))


def inside_flink(found: Iterable[Import]) -> list[Import]:
    """The imports from one module of ``statesource.flink`` to another."""
    def flink(name: str) -> bool:
        return name == FLINK or name.startswith(FLINK + ".")
    return [imp for imp in found if flink(imp.importer) and flink(imp.imported)]


def test_flink_package_imports_flow_down(package):
    modules, found = package
    problems = layer_violations(inside_flink(found), layers=FLINK_LAYERS, forbidden=frozenset(),
                                exempt=frozenset({FLINK}))
    unplaced = [m for m in modules
                if m.startswith(FLINK + ".") and unit_of(m, FLINK_LAYERS) is None]
    assert not problems and not unplaced, (
        "the flink package's inner order (docs/ARCHITECTURE.md) is broken:\n"
        + "\n".join(problems + [f"{m} belongs to no flink layer" for m in unplaced]))


def test_flink_order_catches_synthetic_violations():
    bad = [
        fake(FLINK + ".binary.snappy", FLINK + ".rocksdb.compression"),
        fake(FLINK + ".rocksdb.table", FLINK + ".serializers.columns"),
        fake(FLINK + ".serializers.columns", FLINK + ".layouts.framing"),
        fake(FLINK + ".statefiles.operator_state", FLINK + ".snapshot.metadata"),
        fake(FLINK + ".layouts.keyed", FLINK + ".reader"),
        fake(FLINK + ".reader", FLINK + ".operations.census"),
    ]
    good = [
        fake(FLINK + ".rocksdb.fetch", FLINK + ".binary.crc32c"),
        fake(FLINK + ".layouts.keyed", FLINK + ".rocksdb.merge"),
        fake(FLINK + ".operations.rescale", FLINK + ".layouts.keyed"),
        fake(FLINK + ".snapshot.directory", FLINK + ".layouts.keyed"),
        fake(FLINK + ".layouts.keyed", FLINK + ".serializers.collections"),
    ]
    problems = layer_violations(inside_flink(bad + good), layers=FLINK_LAYERS,
                                forbidden=frozenset(), exempt=frozenset())
    assert [p.split(": import ")[1].split(":")[0] for p in problems] == [
        imp.imported for imp in bad], "\n".join(problems)


def test_every_module_has_a_layer(package):
    modules, _ = package
    unplaced = [f"{modules[m].relative_to(ROOT)} ({m})" for m in modules
                if unit_of(m) is None or (unit_of(m)[2] == PACKAGE and m != PACKAGE)]
    assert not unplaced, (
        "modules in no layer; place them in docs/ARCHITECTURE.md and LAYERS in this test:\n"
        + "\n".join(unplaced))


# ---------------------------------------------------------------- the checks check


def fake(importer: str, imported: str) -> Import:
    return Import(importer.replace(".", "/") + ".py", 1, f"import {imported}", importer, imported)


def test_layer_checker_catches_synthetic_violations():
    bad = [
        fake("statesource.format.writer", "statesource.state.keyed_backend"),  # sibling
        fake("statesource.state.statetable", "statesource.format.columns"),  # sibling
        fake("statesource.model", "statesource.format.metadata"),  # upward
        fake("statesource.errors", "statesource.types"),  # upward inside foundation
        fake("statesource.keygroups.bulk", "statesource.model"),  # upward
        fake("statesource.format.reader", "statesource.checkpointing.restore"),  # upward
        fake("statesource.skew", "statesource.spark.read.keyed"),  # upward
        fake("statesource.spark.source", "statesource.demo.job"),  # forbidden in top
        fake("statesource.spark", "statesource.cli"),  # forbidden in top
        fake("statesource.demo.job", "statesource.cli.demo"),  # forbidden in top
        fake("statesource.spark.read.keyed", "statesource.spark.write.plan"),  # read vs write
        fake("statesource.spark.write.task", "statesource.spark.read.slices"),  # write vs read
        fake("statesource.state.descriptors", "statesource"),  # the public API
        fake("statesource.format.ipc", "statesource.nowhere"),  # no layer
        fake("statesource.nowhere", "statesource.errors"),  # no layer
    ]
    good = [
        fake("statesource.types", "statesource.errors"),
        fake("statesource.schema.value_schema", "statesource.schema.avro_parsing"),
        fake("statesource.redistribution", "statesource.model"),
        fake("statesource.state.keyed_backend", "statesource.model"),
        fake("statesource.format.metadata", "statesource.schema"),
        fake("statesource.checkpointing.snapshot", "statesource.state.keyed_backend"),
        fake("statesource.checkpointing.snapshot", "statesource.format.writer"),
        fake("statesource.plot", "statesource.skew"),
        fake("statesource.demo.job", "statesource.checkpointing"),
        fake("statesource.demo.report", "statesource.spark"),
        fake("statesource.cli.demo", "statesource.demo.job"),
        fake("statesource.cli.inspect", "statesource.spark"),
        fake("statesource", "statesource.cli"),  # exempt
    ]
    problems = layer_violations(bad + good)
    flagged = [p.split(": import ")[1].split(":")[0] for p in problems]
    assert flagged == [imp.imported for imp in bad], "\n".join(problems)
    assert "statesource/format/writer.py:1: import statesource.state.keyed_backend" in problems[0]


def test_cycle_finder_catches_synthetic_cycles():
    graph = {
        "a": {"b", "x"}, "b": {"a"},  # a two-cycle
        "c": {"d"}, "d": {"e"}, "e": {"c", "x"},  # a three-cycle
        "x": {"y", "z"}, "y": {"w"}, "z": {"w"},  # a diamond is no cycle
        "s": {"s"},  # importing itself
    }
    assert find_cycles(graph) == [["a", "b", "a"], ["c", "d", "e", "c"], ["s", "s"]]
    assert find_cycles({"x": {"y", "z"}, "y": {"w"}, "z": {"w"}}) == []
    long_chain = {str(i): {str(i + 1)} for i in range(5000)}
    assert find_cycles(long_chain) == []
    long_chain["5000"] = {"0"}
    assert len(find_cycles(long_chain)[0]) == 5002


def test_imports_are_found_everywhere_and_resolved():
    source = """
from __future__ import annotations
import json
from typing import TYPE_CHECKING
import statesource.types
from statesource.errors import StateSourceError
from . import statemap, descriptors
from .statetable import StateTable
from .. import keygroups
from ..format import writer
from statesource.schema import ValueSchema

if TYPE_CHECKING:
    from statesource.state.keyed_backend import KeyedStateBackend

def later():
    from statesource.spark import session
"""
    known = {"statesource", "statesource.types", "statesource.errors", "statesource.state",
             "statesource.state.statemap", "statesource.state.statetable",
             "statesource.state.keyed_backend", "statesource.keygroups", "statesource.format",
             "statesource.format.writer", "statesource.schema", "statesource.schema.value_schema",
             "statesource.spark"}
    found = imports_of("statesource.state.keyed_states", False, source, "x.py", known)
    assert sorted(imp.imported for imp in found) == sorted([
        "statesource.types", "statesource.errors", "statesource.state.statemap",
        "statesource.state",  # descriptors is not a module here, so it is a name of the package
        "statesource.state.statetable", "statesource.keygroups", "statesource.format.writer",
        "statesource.schema", "statesource.state.keyed_backend", "statesource.spark",
    ])
    # relative imports in a package's __init__ start from the package itself
    found = imports_of("statesource.state", True, "from .statemap import X\n", "x.py", known)
    assert [imp.imported for imp in found] == ["statesource.state.statemap"]
