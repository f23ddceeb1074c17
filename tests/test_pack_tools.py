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
from fixpack.patchtext import normalized
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
    # in a cache folder of its own (fetch --cache DIR unpacked it as DIR/demo-1.0): the fetch is given that folder
    cache = tmp_path / "my-cache"
    cache.mkdir()
    edited.rename(cache / "demo-1.0")
    with pytest.raises(MismatchError, match="is no longer the release copy fetch unpacked") as exc:
        refresh(builder.pack, "p1", "one", cache / "demo-1.0")
    assert f"fetch --profile p1 --target demo --cache {cache} --pack {builder.pack}`" in str(exc.value), str(exc.value)
    (cache / "demo-1.0").rename(edited)
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


def _two_fixes(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    for fid, line in (("one", "line 3\n"), ("two", "line 15\n")):
        builder.add_fix(fid, {MOD: base}, {MOD: base.replace(line, line.upper())})
    builder.profile(["one", "two"])
    patches = {fid: builder.pack / f"fixes/{fid}/0001-change.patch" for fid in ("one", "two")}
    pack = load_pack(builder.pack)
    for fid, p in patches.items():  # in the deterministic form, each with its own Fix-Id
        p.write_text(normalized(pack.fixes[fid], pack.fixes[fid].patches[0]))
    assert all(f"\nFix-Id: {fid}\n" in p.read_text() for fid, p in patches.items())
    builder.lock(clean)
    return clean, patches


def test_format_refuses_a_fix_id_that_names_another_fix_of_the_pack(builder):
    """A fresh user swapped two fixes' patches: `check` named both Fix-Id lines, but `format --check` said only "2
    patch(es) stale", and `format` rewrote both trailers to the fix that lists each patch, after which check was
    clean. Both refuse now (exit 2), at each trailer's line with both ids and what to do, nothing written; a Fix-Id
    that names no fix of the pack (a fix renamed, written with no space after its colon too) is rewritten as before."""
    import pytest

    from fixpack.errors import BadInputError
    from fixpack.pack_tools import rewrite_patches

    clean, patches = _two_fixes(builder)
    texts = {fid: p.read_text() for fid, p in patches.items()}
    patches["one"].write_text(texts["two"])
    patches["two"].write_text(texts["one"])
    swapped = {fid: p.read_bytes() for fid, p in patches.items()}
    for call in (stale_patches, rewrite_patches):
        with pytest.raises(BadInputError) as exc:
            call(load_pack(builder.pack))
        said = str(exc.value)
        assert said.startswith("2 Fix-Id trailer(s) name another fix of the pack than the one that lists the patch: "
                               "format writes a patch's Fix-Id from the fix that lists it, which would hide two fixes' "
                               "patches swapped; no patch was written"), said
        for fid, other in (("one", "two"), ("two", "one")):
            line = swapped[fid].decode().splitlines().index(f"Fix-Id: {other}") + 1
            assert (f"{patches[fid]}:{line}: its Fix-Id trailer says '{other}' (the id of fix {other}, fixes/{other}/), "
                    f"but the patch is listed under fix '{fid}' (fixes/{fid}/fix.toml's patches) (were two fixes' "
                    f"patches swapped? put each back in its own fix's folder and lock again; if this patch is {fid}'s "
                    f"after all, write its trailer as Fix-Id: {fid})") in said, said
        assert {fid: p.read_bytes() for fid, p in patches.items()} == swapped
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for check in (["--check"], []):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "format", *check, "--pack", str(builder.pack)],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 2 and "name another fix of the pack" in r.stderr and "stale" not in r.stdout, r
    assert {fid: p.read_bytes() for fid, p in patches.items()} == swapped
    patches["one"].write_text(texts["one"].replace("\nFix-Id: one\n", "\nFix-Id:one-old-name\n"))  # a fix renamed
    patches["two"].write_text(texts["two"])
    assert rewrite_patches(load_pack(builder.pack)) == [patches["one"]]
    assert patches["one"].read_text() == texts["one"]
