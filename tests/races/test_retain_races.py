"""Writers, ``retain`` and readers in separate real processes, interleaved on purpose.

Each race pauses one process at the exact call where the other side used to
do damage (tests/race.py), runs the other side to completion, then resumes
or kills the paused one; what is on disk afterwards is checked against what
the protocol of docs/FORMAT.md section 11 promises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.race import Paused, age, cli, files_on_disk, referenced, retain, run, verify_all

OPERATOR = "user-activity"
PUBLISH = "statesource.format.commit:_publish"
BEFORE_PIN = "statesource.format.pins:pin_files"


def rewrite_from(root: Path, base: int, checkpoint_id: int | None = None) -> str:
    """CODE: a writer carrying checkpoint ``base`` over, without one keyed state."""
    return ("from statesource.format.target import CheckpointTarget\n"
            f"t = CheckpointTarget.open({str(root)!r}, {base}, {checkpoint_id})\n"
            f"t.edit.drop_state({OPERATOR!r}, 'last_seen')\n"
            "print('published', t.publish().checkpoint_id)\n")


def test_retain_spares_what_a_writer_paused_at_publish_references(root, tmp_path):
    writer = Paused(tmp_path / "hook", PUBLISH, rewrite_from(root, 1))
    out = retain(root, "--keep", "1")  # retires 1 and 2 while checkpoint 4 is about to appear
    assert "pinned by running writers" in out
    done = writer.resume()
    assert done.returncode == 0 and "published 4" in done.stdout, done.stderr
    assert verify_all(root) == [3, 4]
    assert (root / "chk-1" / "_retired.json").exists()  # finished by the next run
    retain(root, "--keep", "2")
    assert not (root / "chk-1" / "_retired.json").exists()
    assert verify_all(root) == [3, 4]
    assert files_on_disk(root) == referenced(root)


def test_retain_recollects_references_after_retiring(root, tmp_path):
    """``retain --keep 1`` reads checkpoints 1 to 3 and pauses before retiring; meanwhile a
    writer pins checkpoint 1's files, publishes checkpoint 4 carrying them over and removes
    its pin. Resumed, retain retires 1 and 2, and only the references it collects after
    retiring (checkpoint 4's) keep checkpoint 1's files: none is pinned any more."""
    retainer = Paused(tmp_path / "hook", "statesource.format.retention:_retire",
                      cli("retain", str(root), "--keep", "1"))
    done = run(rewrite_from(root, 1, 4))
    assert done.returncode == 0 and "published 4" in done.stdout, done.stderr
    assert not list((root / "_pins").glob("*"))
    done = retainer.resume()
    assert done.returncode == 0, done.stderr
    assert "retired checkpoint 1" in done.stdout and "kept checkpoints: 3\n" in done.stdout
    assert verify_all(root) == [3, 4]
    retain(root, "--keep", "2")
    assert files_on_disk(root) == referenced(root)
    assert verify_all(root) == [3, 4]


def test_a_writer_whose_base_retain_removed_before_its_pin_publishes_nothing(root, tmp_path):
    writer = Paused(tmp_path / "hook", BEFORE_PIN, rewrite_from(root, 1))
    retain(root, "--keep", "1")
    done = writer.resume()
    assert done.returncode != 0
    assert "CheckpointRetiredError" in done.stderr and "removed by retention" in done.stderr
    assert verify_all(root) == [3]
    assert files_on_disk(root) == referenced(root)


@pytest.mark.parametrize("pause", [PUBLISH, BEFORE_PIN])
def test_rescale_against_retain(root, tmp_path, pause):
    rescale = Paused(tmp_path / "hook", pause,
                     cli("rescale", str(root), "--checkpoint-id", "1", "--parallelism", "3"))
    retain(root, "--keep", "1")
    done = rescale.resume()
    if pause == PUBLISH:
        assert done.returncode == 0, done.stderr
        assert verify_all(root) == [3, 4]
    else:
        assert done.returncode == 1
        assert "checkpoint 1 was removed by retention" in done.stderr \
            or "removed by retention" in done.stderr
        assert verify_all(root) == [3]
    retain(root, "--keep", "2")
    assert files_on_disk(root) == referenced(root)


READ_ALL = ("from statesource.format import Checkpoint\n"
            "try:\n"
            "    c = Checkpoint.open({root!r}, checkpoint_id={checkpoint_id})\n"
            "    rows = sum(t.num_rows for s in ('clicks', 'page_counts')\n"
            "               for t in c.read_keyed_state(s, operator='user-activity'))\n"
            "    print('rows', rows)\n"
            "except Exception as error:\n"
            "    print(type(error).__name__, error)\n")


@pytest.mark.parametrize("pause", ["statesource.format.reader:read_ranges",
                                   "statesource.format.reader:read_metadata"])
def test_a_reader_of_a_checkpoint_retain_removes_is_told_so(root, tmp_path, pause):
    reader = Paused(tmp_path / "hook", pause, READ_ALL.format(root=str(root), checkpoint_id=1))
    retain(root, "--keep", "1")
    done = reader.resume()
    assert done.stdout.startswith("CheckpointRetiredError checkpoint 1 was removed by"
                                  " retention"), done.stdout + done.stderr
    assert "Corrupt" not in done.stdout + done.stderr


def test_a_reader_of_a_kept_checkpoint_reads_its_rows_while_retain_runs(root, tmp_path):
    expected = run(READ_ALL.format(root=str(root), checkpoint_id=3)).stdout
    assert expected.startswith("rows ")
    reader = Paused(tmp_path / "hook", "statesource.format.reader:read_ranges",
                    READ_ALL.format(root=str(root), checkpoint_id=3))
    retain(root, "--keep", "1")
    assert reader.resume().stdout == expected


def test_two_writers_of_one_id_paused_at_publish_one_wins(root, tmp_path):
    writers = [Paused(tmp_path / f"hook{i}", PUBLISH, rewrite_from(root, base, 7))
               for i, base in enumerate((2, 3))]
    results = [writer.resume() for writer in writers]
    assert sorted(r.returncode for r in results) == [0, 1]
    loser = next(r for r in results if r.returncode)
    assert "CheckpointExistsError" in loser.stderr and "checkpoint 7 already exists" in loser.stderr
    assert verify_all(root) == [1, 2, 3, 7]


KILL_POINTS = [
    BEFORE_PIN,
    "statesource.format.pins:check_still_listed",
    "statesource.format.commit:_check_referenced_files",
    "os:link",  # the metadata's temporary sibling is written, not yet linked
    "statesource.format.commit:sync_directory",  # linked, directory not yet synced
    "statesource.format.pins:Pin.release",  # published, the pins not yet removed
]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_9_of_a_rescale_at_each_publish_step(root, tmp_path, point):
    command = cli("rescale", str(root), "--parallelism", "3", "--new-checkpoint-id", "4")
    Paused(tmp_path / "hook", point, command).kill()
    published = (root / "chk-4" / "_metadata.json").exists()
    assert verify_all(root) == ([1, 2, 3, 4] if published else [1, 2, 3])
    if not published:
        done = run(command)
        assert done.returncode == 0, done.stderr
    age(root)
    out = retain(root, "--keep", "4", "--older-than", "1h")
    assert verify_all(root) == [1, 2, 3, 4]
    assert files_on_disk(root) == referenced(root), out
    assert not list((root / "_pins").glob("*"))


def test_retain_dry_run_lists_what_crashes_left(root, tmp_path):
    Paused(tmp_path / "hook", "os:link",
           cli("rescale", str(root), "--parallelism", "3", "--new-checkpoint-id", "4")).kill()
    leftovers = files_on_disk(root) - referenced(root)
    assert any("_metadata.json.tmp-" in path for path in leftovers)
    assert any(path.startswith("_pins/") for path in leftovers)
    assert any(path.startswith("chk-4/data/") for path in leftovers)
    out = retain(root, "--keep", "3", "--dry-run", "--older-than", "1h")
    assert all(path not in out for path in leftovers)  # younger than an hour
    age(root)
    out = retain(root, "--keep", "3", "--dry-run", "--older-than", "1h")
    assert all(f"  {path}" in out.splitlines() for path in leftovers), out
    assert files_on_disk(root) - referenced(root) == leftovers
    retain(root, "--keep", "3", "--older-than", "1h")
    assert files_on_disk(root) == referenced(root)
    assert not (root / "chk-4").exists()
    assert verify_all(root) == [1, 2, 3]
