"""The Python snippets of the README and docs run, in order, as a newcomer would paste them."""

from __future__ import annotations

import re
import shlex
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
    from statesource.cli import main

    readme = (ROOT / "README.md").read_text()
    command, printed = re.search(r"^\$ (statesource diff .*)\n((?:.*\n)+?)```", readme,
                                 flags=re.M).groups()
    orders = str(tmp_path / "orders")
    assert main(shlex.split(command.replace("/tmp/orders", orders))[1:]) == 1  # changed
    assert capsys.readouterr().out.replace(orders, "/tmp/orders") == printed


@pytest.mark.parametrize("document", ["docs/STATE.md"])
def test_doc_snippets_run(tmp_path, document):
    namespace = run_snippets(ROOT / document, tmp_path)
    assert namespace["info"].checkpoint_id == 1
    assert namespace["restored"].key_group_range.end == 63


def test_readme_tour_commands_run_as_printed(tmp_path, monkeypatch, capsys):
    """Every ``$ statesource ...`` line of the tour, in order, against the demo's output.

    The demo line gets ``--events 3000 --checkpoint-every 1000 --no-spark`` appended to
    keep the test fast (Spark's part is tested in tests/cli/test_cli_demo_inspect.py); every
    other line runs exactly as printed, with /tmp/demo pointing into tmp_path.
    """
    from statesource.cli import main

    monkeypatch.chdir(tmp_path)
    commands = re.findall(r"^\$ (statesource .*)$", (ROOT / "README.md").read_text(), flags=re.M)
    assert [c.split()[1] for c in commands] == ["demo", "inspect", "rescale", "retain", "diff",
                                                "keygroup"]
    commands = [c for c in commands if "/tmp/orders" not in c]  # run by the snippets' test
    for command in commands:
        words = shlex.split(command.replace("/tmp/demo", str(tmp_path / "demo")))
        if words[1] == "demo":
            words += ["--events", "3000", "--checkpoint-every", "1000", "--no-spark"]
        capsys.readouterr()
        assert main(words[1:]) == 0, command
        out = capsys.readouterr().out
        assert out.strip(), command
    printed = re.search(r"^\$ statesource keygroup .*\n((?:.+\n)+?)```",
                        (ROOT / "README.md").read_text(), flags=re.M).group(1)
    assert out == printed  # the last command's output, exactly as the README shows it


def test_readme_test_command_is_what_ci_runs():
    """.ci/run promises to run the README's test command: a step added to one belongs in both."""
    setup = re.search(r"this is what `\.ci/run` runs\):\n\n```bash\n(.+)\n```",
                      (ROOT / "README.md").read_text()).group(1)
    commands = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line and not line.startswith("#") and not line.startswith(("set ", "cd "))]
    assert commands == [setup]
    assert "ruff check" in setup and "mypy" in setup and "pytest" in setup
