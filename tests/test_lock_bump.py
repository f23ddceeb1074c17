"""A patch changed without a version bump, past a removed lock file (a fresh user's report): `lock` compared with
the lock on disk alone, so removing it got past the refusal, and status on an image with the old patch then said
the patch "was changed without a version bump, which `lock` now refuses" (false: lock had accepted it). With no
lock on disk, `lock` compares with the lock committed in git HEAD of the pack (read with `git cat-file`, the index
left alone) and refuses the same way; the status message is true whatever happened, and says where to bump."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, PackBuilder, git, numbered, snapshot

from fixpack import engine

MOD = "demo_pkg/mod.py"


def fixpack(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout, run from a folder without a ``fixpack`` package (the tmp folder)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=Path(os.environ["HOME"]).parent)


def one_fix(b: PackBuilder) -> Path:
    """Fix "one" (``line 3`` -> ``three``) in profile p1, locked on the clean tree it returns."""
    clean = b.tree("clean", {MOD: numbered(20)})
    b.add_fix("one", {MOD: numbered(20)}, {MOD: numbered(20).replace("line 3\n", "three\n")})
    b.profile(["one"])
    b.lock(clean)
    return clean


def _change_patch(b: PackBuilder) -> None:
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace("+three\n", "+THREE\n"))


def test_lock_without_a_lock_on_disk_compares_with_the_one_committed_in_git_head(builder):
    """The pack is a git checkout with its lock committed; the patch is changed without a bump and the lock file
    removed: `lock` refuses (exit 2, nothing written, the git index untouched), naming the committed lock and
    where to bump; bumped, it locks. Not a git checkout: nothing to compare with, it locks (as before)."""
    b = builder
    clean = one_fix(b)
    git(b.pack, "init", "-q")
    git(b.pack, "add", "-A")
    git(b.pack, "commit", "-qm", "pack")
    _change_patch(b)
    lock = b.pack / "profiles/p1.lock"
    lock.unlink()
    index = b.pack / ".git/index"
    before, index_before = snapshot(b.pack), (index.read_bytes(), index.stat().st_mtime_ns)
    args = ("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    r = fixpack(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    toml = b.pack / "fixes/one/fix.toml"
    assert f"fix one: its patch changed since the lock was made ({lock} as committed in git HEAD records version 1 " \
           "with change " in r.stderr, r.stderr
    assert f"(version 1 in the lock, 1 in {toml}:2); bump it there (version = 2), then lock again" in r.stderr
    assert snapshot(b.pack) == before and not lock.exists()
    assert (index.read_bytes(), index.stat().st_mtime_ns) == index_before  # no index refresh
    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    r = fixpack(*args)
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr
    # not a git checkout: no previous lock at all, lock accepts
    toml.write_text(toml.read_text().replace("version = 2", "version = 1"))
    lock.unlink()
    subprocess.run(["rm", "-rf", str(b.pack / ".git")], check=True)
    r = fixpack(*args)
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr


def test_status_on_the_old_patch_of_the_same_version_says_what_is_true_and_where_to_bump(builder):
    """An image with the old patch applied; the patch changed under the same version and, the lock removed, locked
    (a pack that is no git checkout: nothing to compare with). Status said "changed without a version bump,
    which `lock` now refuses" (lock had just accepted it); it says the patch differs from the one applied under
    that version, and where to bump it."""
    b = builder
    clean = one_fix(b)
    image = b.tree("image", {MOD: numbered(20)})
    assert engine.apply(b.request(image)).ok
    _change_patch(b)
    (b.pack / "profiles/p1.lock").unlink()
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    assert r.returncode == 0, r.stderr
    r = fixpack("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    toml = b.pack / "fixes/one/fix.toml"
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 2 and "now refuses" not in said, said
    assert "applied with another patch than this pack's v1 (the same version: its patch differs from the one " \
           f"applied under that version; if the pack's change is not meant, put the pack's patch back as it " \
           f"was and run again; if it is, bump the version in {toml}:2 too, and take the image back as follows)" in said, said


def test_lock_check_names_the_files_whose_fingerprints_differ():
    """``lock --check`` said only "other fingerprints on the release copy than the lock records" of a fix (of three
    files, a fresh user could not tell which): each file whose pre-image or post-image differs is named with the
    side, one whose hunks alone differ says so, and one only one entry has says which (the end-to-end message:
    tests/test_advice.py, the lock of another release)."""
    from fixpack.lock_bump import _files_differ
    from fixpack.records import LockFile, LockFix, LockHunk

    def fix(files, hunks=()):
        return LockFix("f", 1, "demo", "p" * 64, tuple(LockFile(*x) for x in files), tuple(hunks))

    have = fix([("a.py", "1", "2"), ("b.py", "3", "4"), ("c.py", "5", "6"), ("d.py", "7", "8")],
               [LockHunk("c.py", 0, "x", "y")])
    fresh = fix([("a.py", "1", "2"), ("b.py", "3", "9"), ("c.py", "5", "6"), ("e.py", None, "0")],
                [LockHunk("c.py", 0, "x", "z")])
    assert _files_differ(fresh, have) == (": b.py: its post-image; c.py: its hunks; d.py (the lock alone has it); "
                                          "e.py (the release copy alone has it)")
    assert _files_differ(have, have) == ""
    # a side and the hunks of one file both differ: both said (the hunks were said only when no side differed)
    both = fix([("a.py", "1", "2"), ("b.py", "3", "4"), ("c.py", "0", "6"), ("d.py", "7", "8")],
               [LockHunk("c.py", 0, "x", "z")])
    assert _files_differ(both, have) == ": c.py: its pre-image and hunks"
