"""Edges of the lock and of names: a patch changed without a version bump (refused by `lock`; an image that
holds the old patch gets a way out), `lock --check` on a pack changed since its lock (stale, exit 2, as
`check` and `apply` say), `check`'s relock command on a profile of two targets (it runs as printed), and an
unknown fix with no close match (the profile's fixes and components listed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, PackBuilder, numbered, snapshot
from test_components import PLUGIN_TOML

from fixpack import engine
from fixpack.errors import UnknownNameError

MOD = "demo_pkg/mod.py"


def fixpack(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout, run from a folder without a ``fixpack`` package (the tmp folder)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or Path(os.environ["HOME"]).parent)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def _proof(b: PackBuilder, fid: str) -> None:
    (b.pack / "fixes" / fid / f"test_{fid.replace('-', '_')}.py").write_text("def test_it():\n    pass\n")


# --- 4. an unknown fix with no close match lists the profile's fixes -------------------------------------

def test_an_unknown_fix_without_a_close_match_lists_the_profiles_fixes(builder):
    """"unknown fix 'x' (no close match)" named nothing to pick from: the profile's fixes are listed, opt-in
    first (those are named), a handful, then "and N more"; a close match is still said alone."""
    b = builder
    base = numbered(40)
    ids = [f"fix-{c}" for c in "abcdefgh"]
    for n, fid in enumerate(ids):
        b.add_fix(fid, {MOD: base}, {MOD: base.replace(f"line {4 * n + 2}\n", f"{fid}\n")}, opt_in=fid in ids[-2:])
    b.profile(ids[:-2], ids[-2:])
    clean = b.tree("clean", {MOD: base})
    b.lock(clean)
    image = b.tree("image", {MOD: base})
    with pytest.raises(UnknownNameError) as exc:
        engine.status(b.request(image, opt_ins=("zzzqqq",)))
    said = str(exc.value)
    assert said.startswith("unknown fix 'zzzqqq' (no close match; the fixes of profile p1 ("), said
    assert "): fix-g (opt-in), fix-h (opt-in), fix-a, fix-b, fix-c, fix-d and 2 more: name one of its opt-in " \
           "fixes, or none)" in said, said
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "zzzqqq")
    assert r.returncode == 2 and "fix-g (opt-in), fix-h (opt-in), fix-a" in r.stderr and "and 2 more" in r.stderr
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "fix-q")
    assert r.returncode == 2 and "(close matches: fix-" in r.stderr and "(opt-in)" not in r.stderr, r.stderr
    # an empty name (found by a fresh user: every name begins with "", so it was "close" to the first three)
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "")
    assert r.returncode == 2 and "unknown fix '' (an empty name; the fixes of profile p1 (" in r.stderr, r.stderr
    assert "close matches" not in r.stderr


def test_an_unknown_fix_without_a_close_match_lists_the_profiles_components_too(builder):
    """A component is named on the command line as an opt-in fix is (an opt-in one is installed only when named),
    but the list said only the profile's fixes and "name one of its opt-in fixes, or none". Its components are
    listed too, marked, opt-in ones after the opt-in fixes, and the advice says both can be named; a name close
    to a component's is answered with it."""
    from fixpack.loader import load_pack, load_profile
    from fixpack.profile_components import split_names

    b = builder
    base = numbered(20)
    b.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    b.add_fix("two", {MOD: base}, {MOD: base.replace("line 9\n", "nine\n")}, opt_in=True)
    profile = b.profile(["one"], ["two"])
    for name in ("plug-a", "plug-b"):
        (b.pack / name).mkdir()
        (b.pack / name / "pyproject.toml").write_text(PLUGIN_TOML)
    profile.write_text(profile.read_text()
                       + '\n[components.plug-a]\npath = "plug-a"\nversion = "0.3.0"\ntarget = "demo"\nopt_in = true\n'
                       + '\n[components.plug-b]\npath = "plug-b"\nversion = "0.3.0"\ntarget = "demo"\n')
    image = b.tree("image", {MOD: base})
    with pytest.raises(UnknownNameError) as exc:
        engine.status(b.request(image, opt_ins=("zzzqqq",)))
    said = str(exc.value)
    assert said.startswith("unknown fix 'zzzqqq' (no close match; the fixes and components of profile p1 ("), said
    assert "): two (opt-in), plug-a (opt-in component), one, plug-b (component): name any of its opt-in fixes and " \
           "components, or none)" in said, said
    loaded = load_profile(load_pack(b.pack), "p1")
    assert split_names(loaded, ("two", "plug-a")) == (("two",), ("plug-a",))  # both can be named, as listed
    r = fixpack("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "plug-q")
    assert r.returncode == 2 and "unknown fix 'plug-q' (close matches: plug-" in r.stderr, r.stderr
    assert "plug-a" in r.stderr and "plug-b" in r.stderr and "(component)" not in r.stderr, r.stderr


# --- 3. check's relock command runs as printed on a profile of two targets ------------------------------

def test_checks_relock_command_names_every_target_the_lock_covers_and_runs_as_printed(builder):
    """A profile of two targets, fixes on one and a component on the other: `check` printed
    `lock --profile p1 --pack PACK`, which fetches only the targets with fixes, so the lock it wrote lacked the
    component and stayed stale. The command names both targets now, and runs as printed to a fresh lock."""
    from fixpack.wheels import build_wheel

    b = builder
    release, source = b.git_release({MOD: numbered(20)})
    b.add_fix("one", {MOD: numbered(20)}, {MOD: numbered(20).replace("line 3\n", "three\n")})
    _proof(b, "one")
    other = PackBuilder(b.base / "other", target="other", package="other_pkg")
    other_release, other_source = other.git_release({"other_pkg/x.py": "x = 1\n"})
    plug = b.base / "plug"
    (plug / "tiny_plug").mkdir(parents=True)
    (plug / "pyproject.toml").write_text(PLUGIN_TOML)
    (plug / "tiny_plug" / "__init__.py").write_text("def register():\n    return 'tiny'\n")
    wheel = build_wheel(plug, b.base)
    shutil.copy(wheel, b.pack / wheel.name)
    profile = b.profile(["one"], extra_targets=f'[targets.other]\npackage = "other_pkg"\n'
                                                f'commit = "{other.commit[:8]}"\n{other_source}\n')
    profile.write_text(profile.read_text().replace("[targets.demo]\n", f"[targets.demo]\n{source}\n", 1)
                       + f'\n[components.tiny-plug]\npath = "{wheel.name}"\nversion = "0.3.0"\ntarget = "other"\n'
                         'requires = []\nopt_in = true\n')
    engine.write_lock(engine.Request(pack_root=b.pack, profile="p1", roots={"demo": release, "other": other_release}))
    assert fixpack("check", "--pack", str(b.pack)).returncode == 0
    _edit(b.pack / "fixes/one/fix.toml", "version = 1", "version = 2")  # a new version: the lock is stale
    r = fixpack("check", "--pack", str(b.pack))
    assert r.returncode == 2, r.stderr
    (said,) = re.findall(r"regenerate it from clean release copies: (.*?) \(it fetches them", r.stdout)
    assert said.endswith(f"lock --profile p1 --pack {b.pack} --target demo --target other"), said
    done = subprocess.run(said, shell=True, capture_output=True, text=True, cwd=b.base)
    assert done.returncode == 0 and "wrote" in done.stdout, done.stderr
    r = fixpack("check", "--pack", str(b.pack))
    assert r.returncode == 0 and "pack is clean" in r.stderr + r.stdout, r.stdout + r.stderr


# --- 2. lock --check on a pack changed since its lock: stale (exit 2), as check and apply say -------------

def test_lock_check_on_a_changed_context_line_is_a_stale_lock_as_check_and_apply_say(builder):
    """A patch whose context line was changed: `check` and `apply` said "stale lock" (exit 2), `lock --check`
    said "conflict on the release copy" (exit 4). A lock that no longer matches the pack is stale everywhere
    (exit 2, the fix at its lock line, the lock command); lock --check also says the conflict a new lock
    meets there. Exit 4 is left where the fix does not apply: `lock` itself, and `lock --check` with a lock that
    matches the pack on a copy the fix does not apply to."""
    b = builder
    image = one_fix(b)
    clean = b.base / "clean"
    patch = b.pack / "fixes/one/0001-change.patch"
    before = snapshot(b.pack)
    _edit(patch, " line 2\n", " line two\n")  # a context line the release does not have
    for args in (["check"], ["apply", "-p", "p1", "--root", f"demo={image}"]):
        r = fixpack(*args, "--pack", str(b.pack))
        assert r.returncode == 2 and ("the lock is stale: one: " in r.stdout or " is stale: one: " in r.stderr), r
        assert "(its patch changed under the same version 1: if the change is meant, bump version in " in r.stdout + r.stderr, r
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    assert r.returncode == 2, r.stderr
    lock = b.pack / "profiles/p1.lock"
    line = lock.read_text().splitlines().index('      "id": "one",') + 1
    toml = b.pack / "fixes/one/fix.toml"
    bump = f"one: patch or version changed since the lock was generated (its patch changed under the same version 1: if the " \
           f"change is meant, bump version in {toml}:2 before locking; if not, put the patch back as it was locked)"
    assert f"{lock} is stale: {bump} (at {lock}:{line})" in r.stderr, r.stderr
    assert "and a lock made now stops on the copy as the pack is (fix one is conflict on the release copy" in r.stderr
    assert f"hunk #1 is {patch}:" in r.stderr and "make the fix apply there first, then regenerate it" in r.stderr
    assert r.stderr.rstrip().endswith(f"lock --profile p1 --pack {b.pack} --root demo={clean}"), r.stderr
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    assert r.returncode == 4 and f"hunk #1 is {patch}:" in r.stderr, r.stderr  # the relock: a genuine conflict
    _edit(patch, " line two\n", " line 2\n")
    assert snapshot(b.pack) == before  # nothing written on the way
    other = b.tree("other", {MOD: numbered(20).replace("line 2\n", "line two\n")})  # not the release's bytes
    r = fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={other}")
    assert r.returncode == 4 and "is conflict on the release copy" in r.stderr, r.stderr
    assert fixpack("lock", "--check", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}").returncode == 0


def one_fix(b: PackBuilder, change: tuple[str, str] = ("line 3\n", "three\n")) -> Path:
    """Fix "one" (``line 3`` -> ``three`` in MOD, 20 numbered lines; or ``change``) with a proof in profile p1,
    locked on the clean tree ``b.base / "clean"``; a fresh image of the release's bytes."""
    base = numbered(20)
    clean = b.tree("clean", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: base.replace(*change)})
    _proof(b, "one")
    b.profile(["one"])
    b.lock(clean)
    return b.tree("image", {MOD: base})


def released_fix(b: PackBuilder, created: dict[str, str] | None = None, image: str = "image",
                 git_image: bool = False) -> tuple[Path, Path]:
    """Fix "one" (``line 3`` -> ``three`` in MOD, 20 numbered lines; creating the files ``created`` too) with a
    proof in profile p1, whose target fetches a git release of those 20 lines, locked on it. Returns the release
    and an image of it named ``image``: a git clone of it (``git_image``), else a copy of its bytes."""
    created = created or {}
    release, source = b.git_release({MOD: numbered(20)})
    b.add_fix("one", {MOD: numbered(20), **dict.fromkeys(created)},
              {MOD: numbered(20).replace("line 3\n", "three\n"), **created})
    _proof(b, "one")
    profile = b.profile(["one"])
    profile.write_text(profile.read_text().replace("[targets.demo]\n", f"[targets.demo]\n{source}\n", 1))
    b.lock(release)
    if git_image:
        subprocess.run(["git", "clone", "-q", str(release), str(b.base / image)], check=True)
        return release, b.base / image
    return release, b.tree(image, {MOD: numbered(20)})


# --- 1. a patch changed without a version bump ----------------------------------------------------------

def test_lock_refuses_a_patch_changed_without_a_version_bump(builder):
    """Components are refused by `lock` when their source changed under the same version; a fix's patch was
    not: the new lock recorded another change under the old version. `lock` refuses it (exit 2, nothing
    written), naming the fix, its fix.toml line and both versions, and saying to bump it; bumped, it locks."""
    b = builder
    one_fix(b)
    clean = b.base / "clean"
    _edit(b.pack / "fixes/one/0001-change.patch", "+three\n", "+THREE\n")
    before = snapshot(b.pack)
    args = ("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    r = fixpack(*args)
    assert r.returncode == 2, r.stderr
    toml = b.pack / "fixes/one/fix.toml"
    line = toml.read_text().splitlines().index("version = 1") + 1
    assert "fix one: its patch changed since the lock was made (" in r.stderr, r.stderr
    assert f"but its version did not (version 1 in the lock, 1 in {toml}:{line}); bump it there (version = 2), " \
           "then lock again" in r.stderr and r.stderr.rstrip().endswith("nothing was written"), r.stderr
    assert snapshot(b.pack) == before
    r = fixpack(*args, "--json")
    assert r.returncode == 2 and "bump it there" in json.loads(r.stdout)["error"]
    _edit(toml, "version = 1", "version = 2")
    r = fixpack(*args)
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr
    _edit(b.pack / "fixes/one/0001-change.patch", "Subject: [PATCH] one", "Subject: [PATCH] one, reworded")
    assert fixpack(*args).returncode == 0  # a reworded message is the same change: no bump


def test_an_image_with_the_old_patch_of_the_same_version_is_given_a_way_out(builder):
    """An image where a fix was applied, then the pack changed its patch under the same version (a lock made
    before `lock` refused that): status, apply and revert said "revert with the pack that applied it" (exit 2),
    no way out when that pack is gone. They say so still, and the way out without it: the command that puts
    the files the manifest lists back to the clean release, which runs as written; then apply and revert work."""
    b = builder
    release, image = released_fix(b)
    original = snapshot(image)
    assert engine.apply(b.request(image)).ok
    _edit(b.pack / "fixes/one/0001-change.patch", "+three\n", "+THREE\n")
    b.lock(release)  # as lock did before it refused this (refresh and rebase write locks this way too)
    applied = snapshot(image)
    toml = b.pack / "fixes/one/fix.toml"
    way = ""
    for command in ("status", "apply", "revert"):
        r = fixpack(command, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        assert r.returncode == 2, r.stderr
        assert "records one v1 on target demo, applied with another patch than this pack's v1 (the same version: " \
               f"its patch differs from the one applied under that version; if the pack's change is not meant, put the pack's " \
               f"patch back as it was and run again; if it is, bump the version in {toml}:2 too, and take the image " \
               "back as follows)" in r.stderr, \
            r.stderr
        assert "Revert with the pack that applied it, then apply with this one; or, without that pack, put every " \
               "file the manifest lists back to the clean release: " in r.stderr, r.stderr
        assert f"; then run {command} again (the manifest is then stale" in r.stderr, r.stderr
        way = r.stderr.split("back to the clean release: ", 1)[1].split("; then run ", 1)[0]
        assert snapshot(image) == applied
    assert "cp --remove-destination --parents demo_pkg/mod.py" in way and " fetch --profile p1 " in way, way
    done = subprocess.run(way, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (image / MOD).read_text() == numbered(20)
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and "THREE" in (image / MOD).read_text(), r.stdout + r.stderr
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and snapshot(image) == original, r.stdout + r.stderr


NEW = "demo_pkg/new.py"


@pytest.mark.parametrize("image_kind", ["copy", "git"])
@pytest.mark.parametrize("lock", ["missing", "stale"])
def test_the_way_out_puts_back_a_file_the_old_patch_created_without_a_lock_that_knows_it(builder, lock, image_kind):
    """The way out for an image holding the old patch (above), when the lock is missing or stale: revert goes on
    without it (apply and status stop at the lock), so nothing said which files the release lacks, and the
    command copied every file the manifest lists from the release copy, a file the fix created too: `cp` failed
    on it. A file the lock does not know is put back from the release copy where it has it, else removed (the
    fix created it): run as printed, the image is the clean release, byte for byte; revert then removes the
    stale manifest (the command removes it: no run could tell it is stale without a lock that knows the
    files). An image that is a git checkout of the release is put back through git, the same way. The way out
    said "the lock does not know" the files of a stale lock that knows them (made from the applied patch): it
    says which case holds (no lock, or a stale one, naming what no longer matches) and how to regenerate it."""
    b = builder
    _, image = released_fix(b, {NEW: "created = 1\n"}, git_image=image_kind == "git")
    original = snapshot(image)
    assert engine.apply(b.request(image)).ok and (image / NEW).is_file()
    _edit(b.pack / "fixes/one/0001-change.patch", "+three\n", "+THREE\n")  # the lock is stale now
    if lock == "missing":
        (b.pack / "profiles/p1.lock").unlink()
    applied = snapshot(image)
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 2 and "applied with another patch than this pack's v1" in r.stderr, r.stderr
    assert snapshot(image) == applied
    way = r.stderr.split("back to the clean release: ", 1)[1].split("; then run revert again", 1)[0]
    assert ("git -C " in way) == (image_kind == "git") and "rm -f" in way and NEW in way, way
    then = r.stderr.split("; then run revert again (", 1)[1]
    # which case holds: the lock is stale (it knows NEW: it was made from the applied patch), or there is none;
    # "does not know" only of a lock that does not record the file
    lock_path = b.pack / "profiles/p1.lock"
    said = (f"there is no lock at {lock_path}: revert went on without one" if lock == "missing" else
            f"the lock at {lock_path} is stale (it no longer matches the pack: fix one): revert "
            f"went on without it")
    assert then.startswith(f"{said}, so no lock says whether the release has {MOD}, {NEW} (of {NEW}, "), then
    assert "does not know" not in then and "; then regenerate the lock from clean release copies: " in then and \
        f" lock --profile p1 --pack {b.pack}" in then, then
    done = subprocess.run(way, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, (way, done.stderr)
    assert snapshot(image) == original, way  # the clean release (as the image was before apply), byte for byte: NEW is gone
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and snapshot(image) == original, r.stdout + r.stderr


def test_the_way_out_puts_back_a_file_the_old_patch_created_that_the_lock_no_longer_knows(builder):
    """The pack's patch no longer creates the file the applied one did, and the lock (made again) knows only
    the pack's: the way out copied that file from the release copy (it lacks it) and failed; after it, a run
    still could not tell the manifest was stale. The file is removed, the manifest with it (no run could tell
    it stale): run as printed, the image is the clean release, and apply, then revert, work."""
    b = builder
    release, image = released_fix(b, {NEW: "created = 1\n"})
    original = snapshot(image)
    assert engine.apply(b.request(image)).ok and (image / NEW).is_file()
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    patch.write_text(text[:text.index(f"diff --git a/{NEW}")])  # its second file (git orders them by path)
    assert NEW not in patch.read_text(), patch.read_text()
    b.lock(release)  # as lock did before it refused a patch changed under its version
    way = ""
    for command in ("status", "apply", "revert"):
        r = fixpack(command, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        assert r.returncode == 2 and "applied with another patch than this pack's v1" in r.stderr, r.stderr
        assert f"; then run {command} again (the lock does not know {NEW} (of {NEW}, nothing here says" in r.stderr
        way = r.stderr.split("back to the clean release: ", 1)[1].split(f"; then run {command} again", 1)[0]
    done = subprocess.run(way, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, (way, done.stderr)
    assert snapshot(image) == original, way
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and "three" in (image / MOD).read_text() and not (image / NEW).exists(), r.stderr
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and snapshot(image) == original, r.stdout + r.stderr


@pytest.mark.parametrize("command", ["apply", "status"])
def test_the_relock_command_apply_and_status_print_for_a_stale_lock_runs_as_printed(builder, command):
    """`apply` and `status` on a stale lock (a fix's version bumped since) print the lock command; run as
    printed (from another folder), it writes a fresh lock, and the run then works."""
    b = builder
    _, image = released_fix(b)
    _edit(b.pack / "fixes/one/fix.toml", "version = 1", "version = 2")
    r = fixpack(command, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 2, r.stdout + r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    (redo,) = re.findall(r"regenerate it from clean release copies: (.*?) \(it fetches them", said)
    done = subprocess.run(redo, shell=True, capture_output=True, text=True, cwd=b.base)
    assert done.returncode == 0 and "wrote" in done.stdout, (redo, done.stderr)
    r = fixpack(command, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0, r.stdout + r.stderr


DEEP = "demo_pkg/new pkg/sub dir/extra 2.py"  # in folders the fix creates, spaces in every name


def folders(root: Path) -> set[str]:
    """Every folder under ``root`` (``.git`` and fixpack's ``.fixpack`` left out)."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir() and not p.is_symlink()
            and not {".git", ".fixpack"} & set(p.relative_to(root).parts)}


@pytest.mark.parametrize("image_kind", ["copy", "git"])
@pytest.mark.parametrize("lock", ["relocked", "stale", "missing"])
def test_the_way_out_removes_the_folders_the_old_patch_created_with_a_file(builder, lock, image_kind):
    """The way out (above) for a fix that created a file inside folders it also created: the command removed the
    file but left ``new pkg/sub dir/`` and ``new pkg/``, empty, where a revert removes them. It removes each
    such folder the release copy lacks, once empty (never the target's root, nor above it): run as printed, the
    image is the clean release, byte for byte and folder for folder, whether the lock knows the file
    (relocked: it is removed by name) or not (stale, missing: removed as the release copy lacks it), on a plain
    copy and on a git checkout, under a root whose name has a space too. The bytecode of the removed module goes
    first, as a revert removes it."""
    b = builder
    release, image = released_fix(b, {DEEP: "created = 2\n"}, "my image", git_image=image_kind == "git")
    original, dirs = snapshot(image), folders(image)
    assert engine.apply(b.request(image)).ok and (image / DEEP).is_file()
    assert {"demo_pkg/new pkg", "demo_pkg/new pkg/sub dir"} <= folders(image)
    cache = image / "demo_pkg/new pkg/sub dir/__pycache__"  # the new module imported since: its bytecode goes too
    cache.mkdir()
    (cache / "extra 2.cpython-312.pyc").write_bytes(b"\0")
    _edit(b.pack / "fixes/one/0001-change.patch", "+three\n", "+THREE\n")
    if lock == "relocked":
        b.lock(release)  # as lock did before it refused a patch changed under its version: it knows DEEP
    elif lock == "missing":
        (b.pack / "profiles/p1.lock").unlink()
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 2 and "applied with another patch than this pack's v1" in r.stderr, r.stderr
    way = r.stderr.split("back to the clean release: ", 1)[1].split("; then run revert again", 1)[0]
    done = subprocess.run(way, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, (way, done.stderr)
    files = {k: v for k, v in snapshot(image).items() if not k.startswith(".fixpack/")}  # relocked: a stale manifest
    assert files == original and folders(image) == dirs, way
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and snapshot(image) == original, r.stdout + r.stderr
    assert folders(image) == dirs and not (image / ".fixpack").exists()



def _shift_header(patch: Path, by: int) -> tuple[int, int]:
    """Move the patch's one hunk header by ``by`` lines (both sides); returns its pre-image start and count."""
    text = patch.read_text()
    h = re.search(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", text, flags=re.M)
    assert h and h[1] == h[3], text
    start = int(h[1])
    patch.write_text(text.replace(h[0], f"@@ -{start + by},{h[2]} +{start + by},{h[4]} @@"))
    return start, int(h[2])


def test_a_hunk_whose_header_names_the_wrong_line_is_said_as_such_by_lock(builder):
    """Found by a fresh user: a hunk header off by many lines (its pre-image whole elsewhere in the release
    file, where `lock` places a hunk at its stated line only) was said as "missing: its pre-image is not in lines
    1-20 ...; closest: lines 7-13, 7 of 7 lines match" with the advice to rebase. Now the lock says the @@ line
    names the wrong line, where the pre-image is, and to fix the numbers (exit 4, nothing written)."""
    b = builder
    one_fix(b, ("line 10\n", "ten\n"))
    clean = b.base / "clean"
    start, count = _shift_header(b.pack / "fixes/one/0001-change.patch", 5)
    before = snapshot(b.base)
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    assert r.returncode == 4, r.stderr
    assert (f"{MOD}: hunk #1 missing at its stated line {start + 5}: its pre-image is whole at lines "
            f"{start}-{start + count - 1} (-5 lines), in a file that is the pre-image it was written against: the "
            f"hunk's @@ line names the wrong line; fix its numbers") in r.stderr, r.stderr
    assert "Fix those @@ lines' numbers before locking" in r.stderr and "Rebase it" not in r.stderr, r.stderr
    assert snapshot(b.base) == before


def test_a_hunk_with_uneven_context_goes_at_its_stated_line_in_the_release_file(builder):
    """Found by a fresh user: a hunk with less context above its change than below is tied to the file's start
    (more above: to its end), as diff writes such hunks. In the file the lock says is the pre-image, that tie
    won over the hunk's stated line: a wrong start on such a hunk was placed at line 1 anyway, its offset carried
    into the next hunk, and the lock blamed that one, whose header was right; an uneven hunk in the middle at its
    right line was "missing ... (+0 lines) ... fix its numbers". Now that file takes every hunk at its stated line
    (README "The placement rule"); the tie holds where a file is searched, and says so."""
    b = builder
    base = numbered(20)
    after = "top\n" + base.replace("line 15\n", "fifteen\n")
    clean = b.tree("clean", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: after})
    _proof(b, "one")
    b.profile(["one"])
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    assert "@@ -1,3 +1,4 @@\n+top\n" in text and "@@ -12,7 +13,7 @@" in text, text
    patch.write_text(text.replace("@@ -1,3 +1,4 @@\n", "@@ -4,3 +4,4 @@\n"))  # a wrong start on the tied hunk
    before = snapshot(b.base)
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    assert r.returncode == 4 and f"{MOD}: hunk #1 missing at its stated line 4: its pre-image is whole at lines 1-3 " \
                                 "(-3 lines)" in r.stderr and "hunk #2" not in r.stderr, r.stderr
    assert snapshot(b.base) == before
    # an uneven hunk in the middle, at its right line (one context line below its change taken off by hand)
    patch.write_text(text.replace("@@ -12,7 +13,7 @@", "@@ -12,6 +13,6 @@").replace(" line 18\n", ""))
    b.lock(clean)
    image = b.tree("image", {MOD: base})
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    assert (image / MOD).read_text() == after
    # revert without the lock searches the file: the uneven hunk's post-image, alone at its stated line, is taken
    # there (a fresh user: such an image applied by the lock could not be reverted without it)
    lock = b.pack / "profiles/p1.lock"
    kept = lock.read_bytes()
    lock.unlink()
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0 and (image / MOD).read_text() == base, r.stdout + r.stderr
    lock.write_bytes(kept)
    drifted = b.tree("drifted", {MOD: "added\n" + base})  # searched: the tie to the file's end holds
    before = snapshot(drifted)
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={drifted}")
    assert r.returncode == 4, r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert f"{MOD}: hunk #2 missing: the hunk is anchored to the end of the file (it has 3 context lines above its " \
           "change and 2 below, as diff writes a hunk there), and its pre-image is not there but at lines 13-18 " \
           "(stated: line 12); such a hunk goes elsewhere only at its stated line, where its pre-image occurs once. " \
           "If the file's start or end is not where it belongs, give it as many context lines above its change as " \
           "below" in said, said
    assert snapshot(drifted) == before


def test_a_fix_written_on_top_of_one_its_profile_leaves_out_names_it_when_lock_refuses(builder):
    """found by a fresh user: a profile that drops a fix another was written on top of was told to fix the other's
    @@ lines; the lock's refusal now names the fix left out and the two ways out."""
    from fixpack.errors import ConflictError

    mod = "demo_pkg/mod.py"
    base = numbered(40)
    a = "import x\nimport y\nimport z\n" + base
    b = a.replace("line 20\n", "twenty\n")
    clean = builder.tree("clean", {mod: base})
    builder.add_fix("a", {mod: base}, {mod: a})
    builder.add_fix("b", {mod: a}, {mod: b})
    builder.profile(["b"])
    with pytest.raises(ConflictError) as exc:
        builder.lock(clean)
    said = str(exc.value)
    assert "it may have been written on top of a (earlier in the series, changing its files), which profile p1 " \
           "leaves out: add it to the profile, or list it in b's requires" in said, said
    builder.profile(["a", "b"])
    builder.lock(clean)  # with it, the lock is made
