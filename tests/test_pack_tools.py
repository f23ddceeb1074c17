"""Maintainer helpers: refresh (regenerate a patch against its chain) and deterministic patches."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, numbered

from fixpack import engine
from fixpack.evaluate import State, decide
from fixpack.loader import load_pack
from fixpack.pack_tools import refresh, stale_patches
from fixpack.tree import Tree

MOD = "demo_pkg/mod.py"


def test_refresh_turns_drift_into_exact_and_is_idempotent(builder):
    base = numbered(60)
    clean = builder.tree("clean", {MOD: base})
    first = base.replace("line 10\n", "line 10\nnew a\nnew b\nnew c\n")
    builder.add_fix("first", {MOD: base}, {MOD: first})
    # written against the clean file, not against "first": applies with an offset of +3
    builder.add_fix("second", {MOD: base}, {MOD: base.replace("line 40\n", "forty\n")})
    builder.profile(["first", "second"])
    pack = load_pack(builder.pack)
    tree = Tree(clean)
    tree.adopt(decide(pack.fixes["first"], tree, None, False).forward.tree)
    ev = decide(pack.fixes["second"], tree, None, False)
    assert ev.state is State.DRIFTED and ev.offsets[0].offset == 3
    path = refresh(builder.pack, "p1", "second", clean)
    once = path.read_bytes()
    assert "@@ -40,7 +40,7 @@" in once.decode() or "@@ -40," in once.decode()
    # another patch to an image (its ranges moved): the next version, as a refresh from a work tree gives it (it was
    # left at 1, and lock then refused the pack: a fresh user's finding); the same patch again is no new version
    toml = builder.pack / "fixes/second/fix.toml"
    assert "version = 2\n" in toml.read_text()
    builder.lock(clean)
    r = engine.apply(builder.request(clean, dry_run=True, strict=True))
    assert r.ok and r.fix("second").state == "absent"
    refresh(builder.pack, "p1", "second", clean)
    assert path.read_bytes() == once and "version = 2\n" in toml.read_text()
    assert stale_patches(load_pack(builder.pack)) == [path.parent.parent / "first" / "0001-change.patch"]


def test_refresh_on_a_copy_that_is_not_the_pinned_release_is_refused(builder, tmp_path):
    """Found by a fresh maintainer: refresh --profile P --root checked neither the pin nor that the copy was clean,
    and rewrote the patch at another release's lines (0.31.0's copy for profile v0.30.0), exit 0, as lock refuses."""
    import shutil

    import pytest

    from fixpack.errors import MismatchError
    from fixpack.release import MARKER, SDIST_KEY, TREE_KEY, tree_digest

    base = numbered(60)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 40\n", "forty\n")})
    builder.profile(["one"])
    path = load_pack(builder.pack).fixes["one"].patches[0].path
    before = path.read_bytes()
    other = tmp_path / "other"
    shutil.copytree(clean, other)
    (other / "demo_pkg/_version.py").write_text("__version__ = '1.1'\n")
    with pytest.raises(MismatchError, match="does not match the profile's pin"):
        refresh(builder.pack, "p1", "one", other)
    applied = tmp_path / "applied"
    shutil.copytree(clean, applied)
    (applied / ".fixpack").mkdir()
    with pytest.raises(MismatchError, match="is not a clean release copy: fixpack has applied fixes there"):
        refresh(builder.pack, "p1", "one", applied)
    edited = tmp_path / "edited"
    shutil.copytree(clean, edited)
    (edited / MARKER).write_text(f"sdist.tar.gz\n{SDIST_KEY}{'0' * 64}\n{TREE_KEY}{tree_digest(edited)}\n")  # fetch's
    (edited / MOD).write_text("# an edit\n" + base)
    with pytest.raises(MismatchError, match="is no longer the release copy fetch unpacked") as exc:
        refresh(builder.pack, "p1", "one", edited)
    # the fetch it names is of this pack, not the one the command finds by itself (a fresh user's finding)
    assert f"fetch --profile p1 --target demo --pack {builder.pack}`" in str(exc.value), str(exc.value)
    builder.lock(clean)  # a copy without fetch's marker, a fix (or an edit) in it: the lock's release says so
    (edited / MARKER).unlink()
    with pytest.raises(MismatchError, match=rf"--root demo={edited} is not the clean release: {MOD} differ"):
        refresh(builder.pack, "p1", "one", edited)
    assert path.read_bytes() == before
    assert refresh(builder.pack, "p1", "one", clean) == path  # (the clean copy still refreshes)


def test_format_check_names_the_pack_it_checked_and_finds_it_from_a_folder_inside(builder, tmp_path):
    """Found by a fresh user: `format --check --pack P` said "run `fixpack format`", which run elsewhere formats
    another pack (the checkout's); and `format --check` run in P/fixes checked the checkout's pack, not P. The
    command it names carries --pack P, and a folder inside a pack finds that pack, as git finds its repository."""
    base = numbered(10)
    builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    patch = builder.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    at = text.index("\n--- a/")
    patch.write_text(text[:at] + "\nindex 1234567..89abcde 100644" + text[at:])  # churn format drops
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FIXPACK_PACK", None)

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "fixpack.cli", "format", "--check", *args], capture_output=True,
                              text=True, env=env, cwd=cwd)

    r = run("--pack", str(builder.pack), cwd=tmp_path)
    assert r.returncode == 2 and f"format --pack {builder.pack}` and commit" in r.stdout + r.stderr, r
    r = run(cwd=builder.pack / "fixes" / "one")
    assert r.returncode == 2 and str(patch) in r.stdout, r  # this pack's patch, found from inside it
