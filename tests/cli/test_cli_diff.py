"""``statesource diff``: the change feed between two checkpoints, counted per state."""

from __future__ import annotations

from statesource.checkpointing import CheckpointWriter
from statesource.cli import main
from statesource.keygroups import assign_to_key_group
from statesource.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.types import STRING


def test_statesource_diff_prints_counts_and_key_groups(tmp_path, capsys):
    backend = KeyedStateBackend("string", 128)
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    entries = backend.get_state(MapStateDescriptor("m", "string", "long"))
    for i in range(200):
        backend.set_current_key(f"k{i}")
        value.update(i)
        entries.put("a", i)
    with CheckpointWriter(str(tmp_path), incremental=True) as writer:
        writer.write(1, {"op": [backend]})
        backend.set_current_key("k5")
        value.update(-5)
        entries.put("b", 1)
        backend.set_current_key("k6")
        value.clear()
        backend.set_current_key("new")
        value.update(1)
        writer.write(2, {"op": [backend]})
    assert main(["diff", str(tmp_path / "chk-1"), str(tmp_path / "chk-2")]) == 1  # changed
    lines = capsys.readouterr().out.splitlines()
    groups = {k: assign_to_key_group(k, STRING, 128) for k in ("k5", "k6", "new")}
    value_groups = ", ".join(str(g) for g in sorted(set(groups.values())))
    assert any(line.split()[:4] == ["m", "1", "0", "0"]
               and line.endswith(f": {groups['k5']}") for line in lines)
    assert any(line.split()[:4] == ["v", "1", "1", "1"] and line.endswith(f": {value_groups}")
               for line in lines), lines
    assert main(["diff", str(tmp_path / "chk-2"), str(tmp_path / "chk-1")]) == 2  # a failure
    assert "runs forward" in capsys.readouterr().err
