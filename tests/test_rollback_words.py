"""What a run says it wrote once it has rolled a killed run back: the rollback wrote (it put files back), so a
refusal after it never says "nothing was written"; it says the interrupted run was rolled back, how many files
that restored (as the rollback's note counts them), and that nothing else was written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, one_fix_pack, snapshot

MOD = "demo_pkg/mod.py"
TMP = "demo_pkg/.mod.py.fixpack-tmp"  # where a write of MOD puts its temp file


def _cli(b, target, command, *more, fault=None):
    env = {**os.environ, "PYTHONPATH": str(REPO)} | ({"FIXPACK_FAULT_AT": str(fault)} if fault else {})
    return subprocess.run([sys.executable, "-m", "fixpack.cli", command, *more, "--pack", str(b.pack), "-p", "p1",
                           "--root", f"demo={target}"], capture_output=True, text=True, env=env, timeout=60)


def _killed(b, target, command, at):
    """``command`` killed at its ``at``-th write point, its journal left; the paths that journal names."""
    journal = target / ".fixpack/journal.json"
    assert _cli(b, target, command, fault=at).returncode == 137 and journal.exists()
    return [e["path"] for e in json.loads(journal.read_text())["entries"]]


def _plant(target, path, what, outside):
    """The user's own ``what`` at ``path`` (a link: to ``outside``, a file of theirs beside the target)."""
    tmp = target / path
    if what == "file":
        tmp.write_text("MINE\n")
    elif what == "link":
        tmp.symlink_to(outside)
    else:
        os.mkfifo(tmp)
    return tmp


def _kept(tmp, what, outside):
    if what == "link":
        return tmp.is_symlink() and os.readlink(tmp) == str(outside)
    return tmp.is_fifo() if what == "FIFO" else tmp.read_text() == "MINE\n"


MANIFEST = ".fixpack/demo.manifest.json"
# a killed apply (a revert) of this pack journals MOD, then the manifest: killed at 2 it had replaced neither (the
# user's file goes beside the manifest: a regular file beside MOD would be that run's own), at 3 MOD alone
CASES = [("apply", 2, "no file needed restoring", ".fixpack/.demo.manifest.json.fixpack-tmp", "file"),
         *(("apply", 3, "1 file restored", TMP, what) for what in ("file", "link", "FIFO")),
         ("revert", 3, "1 file restored", TMP, "file")]


@pytest.mark.parametrize("command, at, said, path, what", CASES)
def test_a_refusal_over_a_users_temp_file_after_a_rollback_says_the_rollback(builder, tmp_path, command, at, said,
                                                                                path, what):
    """Found by a fresh user: an apply (a revert) killed half way, then the user's own file (a link, a FIFO) at a temp
    path (``.NAME.fixpack-tmp``) of a file the next run writes, not the killed write's own. The next run rolled the
    killed one back (MOD put back), then refused over the user's file, saying "nothing was written". It now says that
    the interrupted run was rolled back first, with the files that restored, and that nothing else was written; the
    exit code is 3 still, and the target holds the bytes the rollback gives, the user's file kept as it was."""
    b = builder
    target = one_fix_pack(b, MOD)
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE\n")
    if command == "revert":
        assert _cli(b, target, "apply").returncode == 0
    before = snapshot(target)  # what the rollback gives back
    assert _killed(b, target, command, at) == [MOD, MANIFEST]
    assert ((target / MOD).read_bytes() == before[MOD][0]) == (at == 2)
    tmp = _plant(target, path, what, outside)
    planted = {k: v for k, v in snapshot(target).items() if k == path}  # (a link's: the file it points to)
    r = _cli(b, target, command)
    message = " ".join(r.stderr.split())
    assert r.returncode == 3, r.stderr
    assert f"{tmp} is where fixpack writes {path.replace('.fixpack-tmp', '').replace('/.', '/')}'s temp file" \
        in message, message
    assert f"an interrupted run was rolled back first in {target} ({said}), and nothing else was written. Move " \
           f"it away, then run again" in message, message
    assert "nothing was written" not in message, message
    assert snapshot(target) == before | planted
    assert not (target / ".fixpack/journal.json").exists() and _kept(tmp, what, outside)
    assert outside.read_text() == "OUTSIDE\n" and sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == \
        ["outside.txt"]
    tmp.unlink()  # moved away, the run goes on
    assert _cli(b, target, command).returncode == 0
    assert ("three\n" in (target / MOD).read_text()) == (command == "apply")


def test_a_full_disk_after_a_rollback_says_the_rollback(builder, monkeypatch):
    """The space check before the write, after the rollback of a killed apply: it said "nothing was changed"; it says
    the rollback and its count now (exit 5 still), and the target holds what the rollback gives."""
    from fixpack import engine
    from fixpack.errors import EnvironmentProblem

    b = builder
    target = one_fix_pack(b, MOD)
    before = snapshot(target)
    assert b.run_child(target, "apply", fault_at=3) == 137 and (target / ".fixpack/journal.json").exists()
    real = os.statvfs(target)

    class Full:
        def __getattr__(self, name: str) -> int:
            return 1 if name in ("f_bfree", "f_bavail") else getattr(real, name)

    monkeypatch.setattr(os, "statvfs", lambda p: Full())
    with pytest.raises(EnvironmentProblem) as exc:
        engine.apply(b.request(target))
    said = str(exc.value)
    assert exc.value.exit_code == 5 and "not enough space on its file system" in said, said
    assert f"; an interrupted run was rolled back first in {target} (1 file restored), and nothing else was " \
           f"written. Free space and run again" in said and "nothing was changed" not in said, said
    assert snapshot(target) == before and not (target / ".fixpack").exists()


def test_an_error_that_claims_nothing_gets_the_rollback_added_and_keeps_its_class():
    """A refusal with no word of what was written (a bad pack, a write that failed and was rolled back) raised after a
    rollback gets it added; one raised with no rollback before it is left as it was; the class (exit code) and the
    error's own fields are kept."""
    from fixpack.errors import DamagedStateError, MismatchError
    from fixpack.report import Report

    report = Report("apply", "p1")
    with pytest.raises(MismatchError, match=r"^a refusal\.$"), report.said_truly():
        raise MismatchError("a refusal.")
    report.rolled_back["/t"] = 2
    with pytest.raises(MismatchError, match=r"^a refusal\. \(an interrupted run was rolled back first in /t \(2 "
                                            r"files restored\)\)$"), report.said_truly():
        raise MismatchError("a refusal.")
    with pytest.raises(DamagedStateError) as exc, report.said_truly():
        raise DamagedStateError(Path("/t/.fixpack/x.json"), "not JSON")
    assert str(exc.value) == ("the state in /t/.fixpack/x.json is damaged: not JSON; remove it or restore the image (an "
                              "interrupted run was rolled back first in /t (2 files restored), and nothing else was "
                              "written)") and exc.value.what == "not JSON", str(exc.value)


def test_a_revert_dry_run_after_a_killed_apply_says_the_journal(builder, tmp_path):
    """Found by a fresh user: status and apply --dry-run named the journal a killed apply left, revert --dry-run said
    "nothing to do" (and the real revert then rolled the journal back, changing the file)."""
    target = one_fix_pack(builder)
    _killed(builder, target, "apply", 3)
    before = snapshot(target)
    r = _cli(builder, target, "revert", "--dry-run")
    said = " ".join(r.stdout.split())
    assert "an interrupted run left a journal; the next apply or revert rolls it back first" in said, r.stdout
    assert snapshot(target) == before
