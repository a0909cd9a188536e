"""One Python API: each operation has one name and one signature per level.

Plain functions take paths; ``statesource.spark``'s take a session or DataFrames. The
rule held here: no ``**kwargs`` (a misspelt keyword is a ``TypeError`` naming it), names in
snake_case, every parameter annotated, optional ones keyword-only, and an operation
offered at both levels has the same parameters in the same order at both (after
``spark``), but for the ones listed here with the reason. The documented calls and
signatures (docs/*.md, README.md) are bound against the real signatures, so a doc that
drifts from the code fails here.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import statesource
import statesource.spark
from statesource.flink.operations import edit, export, importer, migrate, rescale
from statesource.spark.write.rewrite import Rewrite

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

PLAIN: dict[str, Callable[..., Any]] = {
    "statesource.rescale_parallelism": statesource.rescale_parallelism,
    "statesource.migrate": statesource.migrate,
    "statesource.flink.operations.rescale.rescale_max_parallelism":
        rescale.rescale_max_parallelism,
    "statesource.flink.operations.edit.erase_keys": edit.erase_keys,
    "statesource.flink.operations.edit.drop_state": edit.drop_state,
    "statesource.flink.operations.export.export_flink": export.export_flink,
    "statesource.flink.operations.importer.import_flink": importer.import_flink,
    "statesource.flink.operations.migrate.migrate": migrate.migrate,
}
SPARK: dict[str, Callable[..., Any]] = {
    f"statesource.spark.{name}": getattr(statesource.spark, name) for name in (
        "write_state", "rewrite", "rescale_max_parallelism", "rescale_parallelism",
        "erase_keys")}
SPARK["statesource.spark.write.rewrite.Rewrite.replace"] = Rewrite.replace
OPERATIONS = {**PLAIN, **SPARK}

BOTH_LEVELS = [  # (plain, spark, the Spark function's leading session argument, or None)
    ("statesource.rescale_parallelism", "statesource.spark.rescale_parallelism", "spark"),
    ("statesource.flink.operations.rescale.rescale_max_parallelism",
     "statesource.spark.rescale_max_parallelism", "spark"),
    ("statesource.flink.operations.edit.erase_keys", "statesource.spark.erase_keys", None),
]
ONE_LEVEL_ONLY = {
    # the driver runs it: a storage filesystem and progress lines cannot travel there
    ("statesource.spark.rescale_parallelism", "filesystem"): "plain",
    ("statesource.spark.rescale_parallelism", "progress"): "plain",
    # statesource checkpoints, which only the Spark level re-keys, have these
    ("statesource.spark.rescale_max_parallelism", "operator"): "spark",
    ("statesource.spark.rescale_max_parallelism", "new_checkpoint_id"): "spark",
}
SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


def _parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values() if p.name != "self"]


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_operation_has_typed_snake_case_keyword_only_options(name):
    for parameter in _parameters(OPERATIONS[name]):
        where = f"{name}: parameter {parameter.name}"
        assert parameter.kind is not inspect.Parameter.VAR_KEYWORD, f"{where} is **kwargs"
        assert parameter.kind is not inspect.Parameter.VAR_POSITIONAL, f"{where} is *args"
        assert SNAKE.fullmatch(parameter.name), f"{where} is not snake_case"
        assert parameter.annotation is not inspect.Parameter.empty, f"{where} has no type"
        if parameter.default is not inspect.Parameter.empty:
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, \
                f"{where} is optional but not keyword-only"


@pytest.mark.parametrize(("plain", "spark", "session"), BOTH_LEVELS)
def test_an_operation_has_the_same_parameters_at_both_levels(plain, spark, session):
    ours = _parameters(PLAIN[plain])
    theirs = _parameters(SPARK[spark])
    if session is not None:
        assert theirs[0].name == session
        theirs = theirs[1:]
    only_plain = [p.name for p in ours if ONE_LEVEL_ONLY.get((spark, p.name)) == "plain"]
    only_spark = [p.name for p in theirs if ONE_LEVEL_ONLY.get((spark, p.name)) == "spark"]
    shared = [p for p in ours if p.name not in only_plain]
    mirrored = [p for p in theirs if p.name not in only_spark]
    assert [(p.name, p.kind) for p in mirrored] == [(p.name, p.kind) for p in shared]
    assert [p.default for p in mirrored] == [p.default for p in shared]


def test_a_misspelt_keyword_is_a_type_error_naming_it():
    """Refused by Python before anything is read or written, camelCase included."""
    calls = [
        lambda: statesource.spark.write_state(None, "/nowhere", "op", "s", maxParallelism=4),
        lambda: statesource.spark.rescale_max_parallelism(None, "/nowhere", None, 4,
                                                          checkpointId=1),
        lambda: statesource.spark.erase_keys("/nowhere", "/out", "op", None, output="/x"),
        lambda: rescale.rescale_max_parallelism("/nowhere", "/out", 4, operator="op"),
        lambda: Rewrite.replace(None, None, "op", "s", keyType="long"),
    ]
    for call, word in zip(calls, ("maxParallelism", "checkpointId", "output", "operator",
                                  "keyType")):
        with pytest.raises(TypeError, match=word):
            call()


# -- the docs ------------------------------------------------------------------------------

def _code_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:python|py)\n(.*?)```", text, flags=re.DOTALL)


def _resolve(module: str, name: str) -> Callable[..., Any] | None:
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return found if any(found is f for f in OPERATIONS.values()) else None


def _documented_calls() -> list[tuple[str, ast.Call, Callable[..., Any]]]:
    """Every call of an operation in the docs' Python blocks, with the function the block
    imported under that name (a ``with rewrite(...) as x`` makes ``x.replace`` one)."""
    calls = []
    for doc in DOCS:
        for block in _code_blocks(doc.read_text()):
            try:
                tree = ast.parse(block)
            except SyntaxError:
                continue
            names: dict[str, Callable[..., Any]] = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    for alias in node.names:
                        function = _resolve(node.module, alias.name)
                        if function is not None:
                            names[alias.asname or alias.name] = function
            for node in ast.walk(tree):
                if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                    call = node.context_expr
                    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                            and names.get(call.func.id) is SPARK["statesource.spark.rewrite"]):
                        names[node.optional_vars.id + ".replace"] = Rewrite.replace
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    key = ast.unparse(node.func)
                    if key in names:
                        calls.append((f"{doc.name}: {ast.unparse(node)}", node, names[key]))
    return calls


DOCUMENTED_CALLS = _documented_calls()


def test_the_docs_call_the_operations():
    """Not vacuous: the blocks the next test binds are found."""
    called = {function for _, _, function in DOCUMENTED_CALLS}
    assert {rescale.rescale_max_parallelism, edit.erase_keys, SPARK["statesource.spark.erase_keys"],
            SPARK["statesource.spark.write_state"], Rewrite.replace,
            SPARK["statesource.spark.rescale_max_parallelism"]} <= called


@pytest.mark.parametrize(("shown", "call", "function"), DOCUMENTED_CALLS,
                         ids=[shown for shown, _, _ in DOCUMENTED_CALLS])
def test_every_documented_call_binds_to_the_signature(shown, call, function):
    arguments = [None] * len(call.args)
    keywords = {k.arg: None for k in call.keywords if k.arg is not None}
    if function is Rewrite.replace:
        arguments.insert(0, None)  # self
    inspect.signature(function).bind(*arguments, **keywords)


def _documented_signatures() -> list[tuple[str, str, Callable[..., Any]]]:
    """Inline signatures in the docs, ``name(a, b, *, c=None, ...)``, of the operations: a
    dotted name says which; a bare one is the operation of that name whose first parameter
    the doc names (both ``erase_keys`` start with ``source``, and have the same names)."""
    found = []
    for doc in DOCS:
        for match in re.finditer(r"`([\w.]+)\(([^`]*\*,[^`]*)\)`", doc.read_text()):
            dotted, parameters = match.groups()
            first = parameters.split(",")[0].strip()
            candidates = [f for q, f in OPERATIONS.items()
                          if (q == dotted or q.endswith("." + dotted))
                          and _parameters(f)[0].name == first]
            if candidates:
                found.append((f"{doc.name}: {match.group(0)}", parameters, candidates[0]))
    return found


DOCUMENTED_SIGNATURES = _documented_signatures()


@pytest.mark.parametrize(("shown", "parameters", "function"), DOCUMENTED_SIGNATURES,
                         ids=[shown for shown, _, _ in DOCUMENTED_SIGNATURES])
def test_every_documented_signature_names_the_real_parameters(shown, parameters, function):
    """Names in order, as far as the doc goes (``...`` ends it)."""
    written = " ".join(parameters.split()).split(", ...")[0].rstrip(", .")
    header = ast.parse(f"def f({written}): pass").body[0]
    assert isinstance(header, ast.FunctionDef)
    documented = [a.arg for a in [*header.args.args, *header.args.kwonlyargs]]
    real = [p.name for p in _parameters(function)]
    assert documented == real[:len(documented)], shown


def test_the_docs_show_signatures_of_both_levels():
    shown = {function for _, _, function in DOCUMENTED_SIGNATURES}
    assert {statesource.rescale_parallelism, SPARK["statesource.spark.rescale_parallelism"],
            rescale.rescale_max_parallelism, SPARK["statesource.spark.rescale_max_parallelism"],
            edit.erase_keys, SPARK["statesource.spark.erase_keys"],
            SPARK["statesource.spark.write_state"]} <= shown
