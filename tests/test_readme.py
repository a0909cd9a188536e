"""The Python snippets of the README and docs run, in order, as a newcomer would paste them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_snippets(document: Path, tmp_path: Path) -> dict:
    snippets = re.findall(r"```python\n(.*?)```", document.read_text(), flags=re.S)
    assert len(snippets) >= 3, document
    namespace: dict = {}
    for snippet in snippets:
        code = re.sub(r'"/tmp/([\w-]+)"', lambda m: repr(str(tmp_path / m.group(1))), snippet)
        code = code.replace("'/tmp/orders'", f"'{tmp_path / 'orders'}'")
        exec(compile(code, str(document), "exec"), namespace)
    return namespace


def test_readme_snippets_run(tmp_path, spark, capsys):
    namespace = run_snippets(ROOT / "README.md", tmp_path)
    out = capsys.readouterr().out
    assert "chk-1" in out and "ann" in out
    assert "chk-2" in out  # the Spark rewrite's new checkpoint
    assert namespace["backend"].key_group_range.end == 42  # subtask 0 of 3 at max parallelism 128


@pytest.mark.parametrize("document", ["docs/STATE.md"])
def test_doc_snippets_run(tmp_path, document):
    namespace = run_snippets(ROOT / document, tmp_path)
    assert namespace["info"].checkpoint_id == 1
    assert namespace["restored"].key_group_range.end == 63
