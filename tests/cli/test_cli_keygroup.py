"""``statesource keygroup`` prints Flink's assignment and reports bad input without a traceback."""

from __future__ import annotations

from statesource.cli import main


def test_prints_key_group_and_subtask(capsys):
    # key_group values from shared/flink-golden/keygroups.csv ("" -> 94, " " -> 36 at 128)
    assert main(["keygroup", "--key-type", "string", "--max-parallelism", "128",
                 "--parallelism", "3", "", " "]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["key\tkey_group\tsubtask", "\t94\t2", " \t36\t0"]


def test_json_keys_for_composite_types(capsys):
    assert main(["keygroup", "--key-type", "Tuple2<String,Long>", "--max-parallelism", "128",
                 '["a", 1]']) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith('["a", 1]\t')


def test_bad_input_is_one_line_error(capsys):
    assert main(["keygroup", "--key-type", "long", "--max-parallelism", "128", "x1"]) == 1
    err = capsys.readouterr().err
    assert "'x1'" in err and "Traceback" not in err
    assert main(["keygroup", "--key-type", "string", "--max-parallelism", "99999", "a"]) == 1
    assert "99999" in capsys.readouterr().err
