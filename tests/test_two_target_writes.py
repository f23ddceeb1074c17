"""A run over two targets checks both before it writes either (all or nothing across targets): a refusal over the
second (something at a temp path of its files) leaves the first as it was too, for apply and revert; a write of the
second that fails puts the first back too (tests/test_two_target_atomic.py fails every I/O call and write point);
and a rollback that cannot put a file back (a read-only file system) is exit 5 with the journal kept, not an
internal error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GAUDI_RUNNER, REPO, one_fix_pack, snapshot, two_target_pack

from fixpack import engine, nofollow
from fixpack.errors import EnvironmentProblem, MismatchError

RUNNER = GAUDI_RUNNER


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_refusal_over_the_second_target_leaves_the_first_as_it_was(builder, tmp_path, command):
    req, demo, gaudi = two_target_pack(builder, tmp_path)
    if command == "revert":
        assert engine.apply(req).ok and "four" in (demo / "demo_pkg/mod.py").read_text()
    tmp = gaudi / RUNNER.replace("hpu_model_runner.py", ".hpu_model_runner.py.fixpack-tmp")
    tmp.write_text("MINE\n")  # the user's own file where the second target's write puts its temp file
    before = snapshot(demo), snapshot(gaudi)
    with pytest.raises(MismatchError) as exc:
        getattr(engine, command)(req)
    assert ".hpu_model_runner.py.fixpack-tmp" in str(exc.value) and "nothing was" in str(exc.value)
    assert (snapshot(demo), snapshot(gaudi)) == before  # the first target too: every byte, its manifest included
    tmp.unlink()
    assert getattr(engine, command)(req).ok  # the cause gone, the run does both
    assert ("four" in (demo / "demo_pkg/mod.py").read_text()) == (command == "apply")


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_failed_write_of_the_second_target_rolls_the_first_back_too(builder, tmp_path, monkeypatch, command):
    """The real transaction of the second target fails (its journal cannot be written: ENOSPC) once the first target's
    is written: the first is put back too, its files and its manifest (its state folder as it was), and the error
    says nothing was written. It named the first as written and recorded, and left it so."""
    import errno

    req, demo, gaudi = two_target_pack(builder, tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    if command == "revert":
        assert engine.apply(req).ok
    real = nofollow.rename_at  # (a journal is renamed into place in its folder: nofollow.write_under)

    def full_disk_for_the_second_journal(fd, src, dst, path):
        if Path(path) == gaudi / ".fixpack/journal.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(fd, src, dst, path)
    before = snapshot(demo), snapshot(gaudi), outside.read_bytes(), (demo / ".fixpack").exists()
    monkeypatch.setattr(nofollow, "rename_at", full_disk_for_the_second_journal)
    with pytest.raises(EnvironmentProblem) as exc:
        getattr(engine, command)(req)
    assert f"{gaudi}/.fixpack/journal.json: No space left on device (ENOSPC) while preparing the journal; nothing in " \
           f"the target was changed. Target demo ({demo}), written before it in this run, was rolled back too: " \
           f"nothing was written. Free space on its file system and run again" == str(exc.value)
    assert (snapshot(demo), snapshot(gaudi), outside.read_bytes(), (demo / ".fixpack").exists()) == before
    monkeypatch.setattr(nofollow, "rename_at", real)
    assert getattr(engine, command)(req).ok and ("four" in (demo / "demo_pkg/mod.py").read_text()) == \
        (command == "apply") and ("seven" in (gaudi / RUNNER).read_text()) == (command == "apply")


def test_a_rollback_that_cannot_put_a_file_back_is_exit_5_and_keeps_the_journal(builder, tmp_path):
    """A killed apply, then a run on a file system that refuses every write (EROFS from the first I/O call on): it
    was an internal error (exit 1); now exit 5, the journal and the half-written target as they were."""
    b, target = builder, one_fix_pack(builder)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    words = [sys.executable, "-m", "fixpack.cli", "apply", "--pack", str(b.pack), "-p", "p1", "--root",
             f"demo={target}"]
    assert subprocess.run(words, env=env | {"FIXPACK_FAULT_AT": "3"}, capture_output=True,
                          timeout=60).returncode == 137
    before = snapshot(target)
    r = subprocess.run(words, env=env | {"FIXPACK_IO_FAULT": "1:EROFS+"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 5, r.stderr
    assert "cannot roll back the interrupted run that" in r.stderr and "Read-only file system (EROFS)" in r.stderr
    assert "the journal is kept, and the next run rolls it back. Remount it read-write and run again" in r.stderr
    assert snapshot(target) == before
    r = subprocess.run(words, env=env, capture_output=True, text=True, timeout=60)  # writable again: rolls back, applies
    assert r.returncode == 0 and "rolled back an interrupted run" in r.stdout + r.stderr, r.stderr


def test_backups_that_cannot_be_removed_are_exit_5_not_an_internal_error(builder, monkeypatch):
    """Found by a fresh user: backups no journal names (a run killed before it wrote its journal) on a read-only file
    system made the next run an internal error (exit 1): their removal's OSError went up uncaught."""
    import errno

    from fixpack import state

    target = one_fix_pack(builder)
    (target / ".fixpack/journal").mkdir(parents=True)
    (target / ".fixpack/journal/0").write_text("a backup\n")
    before = snapshot(target)

    def read_only(root, rel, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(root / rel))
    monkeypatch.setattr(state, "clear_under", read_only)  # (the leftovers' removal: nofollow.clear_under)
    for command in ("apply", "revert"):
        with pytest.raises(EnvironmentProblem) as exc:
            getattr(engine, command)(builder.request(target))
        assert f"cannot remove the backups a run left in {target / '.fixpack/journal'}" in str(exc.value)
        assert "Read-only file system (EROFS); they are kept" in str(exc.value) and snapshot(target) == before


def test_a_refused_revert_leaves_the_first_targets_empty_state_folder(builder, tmp_path):
    """Found by a fresh user: a revert refused over the second target had already removed the first target's empty
    .fixpack/ (a target with no manifest: its folder goes once the run writes)."""
    req, demo, gaudi = two_target_pack(builder, tmp_path)
    assert engine.apply(req).ok
    (demo / ".fixpack/demo.manifest.json").unlink()
    (demo / "demo_pkg/mod.py").write_text((demo / "demo_pkg/mod.py").read_text().replace("four\n", "line 4\n"))
    (gaudi / RUNNER.replace("hpu_model_runner.py", ".hpu_model_runner.py.fixpack-tmp")).write_text("MINE\n")
    before = snapshot(demo), snapshot(gaudi)
    with pytest.raises(MismatchError):
        engine.revert(req)
    assert (demo / ".fixpack").is_dir() and (snapshot(demo), snapshot(gaudi)) == before
