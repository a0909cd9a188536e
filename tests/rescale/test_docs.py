"""The Python snippets of docs/RESCALE.md run, in order."""

from __future__ import annotations

from test_readme import ROOT, run_snippets


def test_rescale_doc_snippets_run(tmp_path, capsys):
    namespace = run_snippets(ROOT / "docs" / "RESCALE.md", tmp_path)
    assert namespace["rescaled"].checkpoint_id == 2
    assert namespace["subtask_2"].key_group_range.start == 86
    assert "operator counter: parallelism 1 -> 3" in capsys.readouterr().out
