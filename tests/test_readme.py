"""The README's Python snippets run, in order, as a newcomer would paste them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_snippets_run(tmp_path, spark, capsys):
    snippets = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(snippets) >= 3
    namespace: dict = {}
    for snippet in snippets:
        exec(compile(snippet.replace("/tmp/orders", str(tmp_path / "orders")), "README", "exec"),
             namespace)
    out = capsys.readouterr().out
    assert "chk-1" in out and "ann" in out
    assert namespace["backend"].key_group_range.end == 42  # subtask 0 of 3 at max parallelism 128
