"""A reordered fixes/series is a stale lock, said as such everywhere (a fresh user's finding).

Before, `apply` and `status` went on with the lock of the old order: two fixes that share a file were reported
drifted ("differs from the lock's pre-image", and under --strict the advice to put the release's file back, which
changes nothing), and `lock --check` blamed the later patch's @@ numbers; a swap of fixes that share no file passed
`apply`, `status` and `check`, and only `lock --check` said the order. Now each command refuses the run with the
lock's staleness (exit 2, nothing written): the pair, the file they share and the fix's line in fixes/series, or,
for fixes that share no file, that a new lock is all the order needs (and, run as printed, it makes one)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import git, numbered, snapshot
from test_lock_edges import fixpack

MOD, OTHER = "demo_pkg/mod.py", "demo_pkg/other.py"
BASE = numbered(30)


@pytest.fixture
def pack(builder):
    """``a`` and ``b`` change MOD (``b``'s patch written on ``a``), ``c`` changes OTHER; locked in series order."""
    b = builder
    clean = b.tree("clean", {MOD: BASE, OTHER: BASE})
    a_done = BASE.replace("line 3\n", "three\n")
    b.add_fix("a", {MOD: BASE}, {MOD: a_done})
    b.add_fix("b", {MOD: a_done}, {MOD: a_done.replace("line 20\n", "twenty\n")})
    b.add_fix("c", {OTHER: BASE}, {OTHER: BASE.replace("line 9\n", "nine\n")})
    b.profile(["a", "b", "c"])
    b.lock(clean)
    return b, b.tree("image", {MOD: BASE, OTHER: BASE})


def refusals(b, image):
    """What apply, status (each with and without --strict) and check say, each run's exit code 2."""
    said = []
    for args in (["apply", "-p", "p1", "--root", f"demo={image}"], ["status", "-p", "p1", "--root", f"demo={image}"],
                 ["apply", "--strict", "-p", "p1", "--root", f"demo={image}"], ["check"]):
        r = fixpack(*args, "--pack", str(b.pack))
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        said.append(" ".join((r.stdout + r.stderr).split()))
    return said


def test_fixes_that_share_a_file_swapped_are_a_stale_lock_naming_the_pair_and_the_file(pack):
    b, image = pack
    b.series = ["b", "a", "c"]
    b.write_series()
    before, pack_before = snapshot(image), snapshot(b.pack)
    for said in refusals(b, image):
        assert ("b: fixes/series now puts it before a, the lock after it (made from the series as it was); they "
                f"share {MOD}, and each patch is written on the fixes above it: where the new lock stops on a patch of "
                f"them, put the order back, or make that patch again on the fixes the new order puts before it") in said
        assert f"{b.pack / 'fixes/series'}:1" in said or "fixes/series:1" in said, said
        assert "differs from the lock's pre-image" not in said and "@@" not in said
    assert snapshot(image) == before and snapshot(b.pack) == pack_before
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}")
    assert r.returncode == 2 and "b: fixes/series now puts it before a" in r.stderr, r.stderr


def test_fixes_that_share_no_file_swapped_need_only_a_new_lock_which_the_printed_command_makes(pack):
    b, image = pack
    b.series = ["a", "c", "b"]
    b.write_series()
    for said in refusals(b, image):
        assert "c: fixes/series now puts it before b, the lock after it (made from the series as it was); they " \
               "share no file, so a new lock is all the new order needs" in said, said
    r = fixpack("apply", "-p", "p1", "--root", f"demo={image}", "--pack", str(b.pack))
    (redo,) = re.findall(r"regenerate it from clean release copies: (.*?) \(it fetches them", " ".join(r.stderr.split()))
    redo = redo.replace(f"--pack {b.pack}", f"--pack {b.pack} --root demo={b.base / 'clean'}")
    done = subprocess.run(redo, shell=True, capture_output=True, text=True, cwd=b.base)
    assert done.returncode == 0, (redo, done.stderr)
    r = fixpack("apply", "--strict", "-p", "p1", "--root", f"demo={image}", "--pack", str(b.pack))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_series_order_unchanged_with_fixes_the_profile_leaves_out_is_no_stale_lock(builder):
    """A fix of the series the profile does not list, moved: not the profile's order, no staleness."""
    b = builder
    clean = b.tree("clean", {MOD: BASE, OTHER: BASE})
    b.add_fix("a", {MOD: BASE}, {MOD: BASE.replace("line 3\n", "three\n")})
    b.add_fix("x", {OTHER: BASE}, {OTHER: BASE.replace("line 9\n", "nine\n")})
    b.add_fix("c", {OTHER: BASE}, {OTHER: BASE.replace("line 12\n", "twelve\n")})
    b.profile(["a", "c"])
    b.lock(clean)
    b.series = ["x", "a", "c"]
    b.write_series()
    r = fixpack("apply", "--strict", "-p", "p1", "--root", f"demo={b.tree('image', {MOD: BASE, OTHER: BASE})}",
                "--pack", str(b.pack))
    assert r.returncode == 0, r.stdout + r.stderr


def _swapped(b):
    """``a`` adds two lines at line 3, ``b`` (written on ``a``) changes line 20; locked, then the series swapped.
    The clean tree and ``a``'s post-image."""
    clean = b.tree("clean", {MOD: BASE})
    grown = BASE.replace("line 3\n", "line 3\nnew a\nnew b\n")
    b.add_fix("a", {MOD: BASE}, {MOD: grown})
    b.add_fix("b", {MOD: grown}, {MOD: grown.replace("line 20\n", "twenty\n")})  # written 2 lines down, on a
    b.profile(["a", "b"])
    b.lock(clean)
    b.series = ["b", "a"]
    b.write_series()
    return clean, grown


def test_lock_on_a_reorder_that_moves_a_patch_off_its_lines_says_the_order_not_only_the_numbers(builder):
    """`lock` after a swap whose later patch no longer applies at its stated lines: it said only "the hunk's @@ line
    names the wrong line ... Fix those @@ lines' numbers". It names the fix now put before it (the lock on disk has
    it after), and writes nothing (exit 4)."""
    b = builder
    clean, grown = _swapped(b)
    before = snapshot(b.pack)
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 4, said
    assert ("fixes/series was reordered since the lock: it now puts a after it, which the lock on disk has before it "
            "(the patch was written on it). Put the order back, or make b's patch again on the fixes now before it; "
            "nothing was written") in said, said
    assert "Fix those @@ lines' numbers" not in said and "names the wrong line" not in said
    assert "fix b does not apply at its stated lines on the release copy " in said and "hunk #1 is at line 17 (-2 " \
        "lines)" in said, said  # where the hunk is now (found by search), not a "wrong @@ line"
    assert snapshot(b.pack) == before


def test_edit_lays_a_reordered_patch_where_it_is_found_and_refresh_remakes_the_pair(builder):
    """Found by a fresh user: after a reorder of two fixes that share a file, `edit b` refused (b does not apply at
    its stated lines on the fixes now before it), so the patch the lock asked to make again was made by hand. `edit`
    now lays the edited fix where the placement rule finds it (its pre-image once, exact context: quilt's push with
    an offset) and says so; `refresh` writes it at those lines, and a, now after it, is checked on top (regenerated
    had it moved). The new lock then checks, and the pair applies to the release."""
    b = builder
    clean, grown = _swapped(b)
    subprocess.run(["git", "init", "-q", str(b.pack)], check=True)  # (the work tree's folder is ignored by git)
    git(b.pack, "add", "-A")
    git(b.pack, "commit", "-qm", "the pack, reordered")  # HEAD's lock: b at version 1, its patch as written on a
    where = ["--pack", str(b.pack), "--root", f"demo={clean}"]
    r = fixpack("edit", "b", "-p", "p1", "--json", *where)
    said = " ".join(r.stderr.split())
    assert r.returncode == 0, said
    assert json.loads(r.stdout)["laid"] == ["0001-change.patch: demo_pkg/mod.py hunk #1 -2"], r.stdout  # (--json too)
    assert ("b does not apply at its stated lines on the fixes before it (fixes/series was reordered, or one of them "
            "changed): laid where its context is found once, at an offset (0001-change.patch: demo_pkg/mod.py hunk "
            "#1 -2); refresh writes its patches at these lines") in said, said
    assert (b.pack / ".edit/b" / MOD).read_text() == BASE.replace("line 20\n", "twenty\n")
    r = fixpack("refresh", "b", "--pack", str(b.pack))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "later fixes on top: a exact" in r.stdout, r.stdout + r.stderr  # (a's line 3 is above b's change)
    r = fixpack("lock", "--check", "-p", "p1", *where)
    assert r.returncode == 0, r.stdout + r.stderr
    # its patch at other lines is another patch to an image: the next version, so that lock (which compares with
    # HEAD's) takes it (a fresh user's finding: version 1 kept, and a new lock refused it, exit 2)
    assert "version = 2\n" in (b.pack / "fixes/b/fix.toml").read_text()
    (b.pack / "profiles/p1.lock").unlink()
    r = fixpack("lock", "-p", "p1", *where)
    assert r.returncode == 0, r.stdout + r.stderr
    image = b.tree("image", {MOD: BASE})
    r = fixpack("apply", "-p", "p1", "--pack", str(b.pack), "--root", f"demo={image}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (image / MOD).read_text() == grown.replace("line 20\n", "twenty\n")


def test_edit_of_a_reordered_patch_not_found_anywhere_says_to_make_it_again_by_hand(builder):
    """A patch whose context holds the lines of the fix now after it is found nowhere on the fixes before it: edit
    refuses (exit 4), with nothing kept, and says how to go on."""
    b = builder
    clean = b.tree("clean", {MOD: BASE})
    a_done = BASE.replace("line 19\n", "nineteen\n")
    b.add_fix("a", {MOD: BASE}, {MOD: a_done})
    b.add_fix("b", {MOD: a_done}, {MOD: a_done.replace("line 20\n", "twenty\n")})  # its context holds a's line
    b.profile(["a", "b"])
    b.lock(clean)
    b.series = ["b", "a"]
    b.write_series()
    before = snapshot(b.pack)
    r = fixpack("edit", "b", "-p", "p1", "--pack", str(b.pack), "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 4 and "nor is it found elsewhere by search" in said and "make its change again by hand " \
        "on the fixes before it, or put fixes/series back as the patch was written" in said, said
    assert "names the wrong line" not in said and "fixpack refresh" not in said, said
    assert not (b.pack / ".edit").exists()
    assert snapshot(b.pack) == before


def test_edit_of_a_fix_after_a_reordered_one_names_that_one_to_edit_first(builder):
    """Found by a fresh user: with b now before a (the series swapped), `edit a` said b's "@@ line names the wrong
    line; fix its numbers ... Rebase or refresh it first": the file is not what b's patch was written on. It names
    b, where its hunk is now, the reorder, and the way on: edit b first (laid where it is found), then a. Nothing is
    kept; followed, it works."""
    b = builder
    clean, _ = _swapped(b)
    subprocess.run(["git", "init", "-q", str(b.pack)], check=True)
    where = ["--pack", str(b.pack), "--root", f"demo={clean}"]
    before = snapshot(b.pack)
    r = fixpack("edit", "a", "-p", "p1", *where)
    said = " ".join(r.stderr.split())
    assert r.returncode == 4 and snapshot(b.pack) == before, said
    assert "fix b, before a in the profile's chain, does not apply at its stated lines" in said and \
        "hunk #1 is at line 17 (-2 lines)" in said and "fixes/series was reordered since the lock" in said, said
    assert "names the wrong line" not in said and "Rebase or refresh it first" not in said, said
    assert "Edit it first (`" in said and f"edit b --profile p1 --root demo={clean}" in said and \
        "nothing was kept" in said, said  # (with the --root given: a fresh user's finding)
    assert not (b.pack / ".edit").exists()  # (a refused edit left an empty .edit/: a fresh user's finding)
    r = fixpack("edit", "b", "-p", "p1", *where)
    assert r.returncode == 0, r.stderr
