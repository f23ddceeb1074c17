"""A profile, a fix.toml or a lock that is no regular file: a FIFO hung ``fixpack check`` and every run of that
profile (the read waits for a writer), and a lock that is a folder, a dangling link or a FIFO was reported as
"no lock". Each is named, with what it is and what to do, before anything reads it: bad input, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_authoring import pack3  # noqa: F401 (the fixture)

from fixpack import engine
from fixpack.errors import PackError, StaleLockError
from fixpack.pack_check import check_pack


def _pack(builder) -> Path:
    builder.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    builder.profile(["one"])
    clean = builder.tree("clean", {"demo_pkg/a.py": "x = 1\n"})
    builder.lock(clean)
    return clean


def _plant(path: Path, kind: str) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("nowhere")


WHAT = {"fifo": "is a FIFO (named pipe)", "folder": "is a folder", "link": "is a symbolic link to nowhere, which is missing"}


def test_a_fifo_profile_is_named_by_check_and_by_a_run_without_a_read(builder):
    clean = _pack(builder)
    _plant(builder.pack / "profiles" / "p2.toml", "fifo")
    cli = [sys.executable, "-m", "fixpack.cli"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args in (["check"], ["status", "-p", "p2", "--root", f"demo={clean}"]):
        done = subprocess.run([*cli, *args, "--pack", str(builder.pack), "--color", "never"], env=env,
                              capture_output=True, text=True, timeout=60)
        said = done.stdout + done.stderr
        assert done.returncode == 2 and "profiles/p2.toml: is a FIFO (named pipe), not a regular file" in said, said
    assert engine.status(builder.request(clean)).ok  # the other profile is not held up by it


def test_a_fix_toml_that_is_a_fifo_is_named(builder):
    clean = _pack(builder)
    toml = builder.pack / "fixes" / "one" / "fix.toml"
    _plant(toml, "fifo")
    with pytest.raises(PackError) as exc:
        engine.status(builder.request(clean))
    assert f"{toml}: is a FIFO (named pipe), not a regular file" in str(exc.value), str(exc.value)
    assert "has no fixes/one/fix.toml" not in str(exc.value)


@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
def test_a_lock_that_is_no_file_says_what_it_is_and_what_to_do(builder, kind):
    clean = _pack(builder)
    lock = builder.pack / "profiles" / "p1.lock"
    _plant(lock, kind)
    with pytest.raises(StaleLockError) as exc:
        engine.status(builder.request(clean))
    said = str(exc.value)
    rm = "rm -r" if kind == "folder" else "rm"
    assert said.startswith(f"{lock}: {WHAT[kind]}, not a lock file; remove it ({rm} -- {lock}), then regenerate")
    assert "no lock" not in said
    (finding,) = [f for f in check_pack(builder.pack)[0] if "lock" in f.file]
    assert (finding.file, finding.message) == ("profiles/p1.lock", f"{WHAT[kind]}, not a lock file"), finding
    assert finding.hint.startswith(f"remove it ({rm} -- {lock}), then regenerate it"), finding.hint


@pytest.mark.parametrize("kind", ["fifo", "folder", "link"])
def test_lock_writes_over_a_fifo_or_a_link_and_names_a_folder(builder, kind):
    """A folder where the lock goes stopped `fixpack lock` with an internal error (exit 1); a FIFO or a link
    is replaced by the new lock, as the advice above says to do after removing it."""
    from fixpack.errors import BadInputError

    clean = _pack(builder)
    lock = builder.pack / "profiles" / "p1.lock"
    _plant(lock, kind)
    if kind == "folder":
        with pytest.raises(BadInputError, match=rf"{lock}: is a folder, not a lock file; remove it \(rm -r -- "):
            builder.lock(clean)
        assert lock.is_dir() and not any(lock.iterdir())
        return
    builder.lock(clean)
    assert lock.is_file() and not lock.is_symlink() and engine.status(builder.request(clean)).ok


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_patched_path_that_is_no_regular_file_is_named_for_what_it_is(builder, kind):
    """A FIFO where a fix changes a file was called "(a folder or a device)": the refusal says what is there
    (without reading it, which for a FIFO would block), exit 3, nothing written."""
    from conftest import snapshot

    from fixpack.errors import MismatchError

    _pack(builder)
    image = builder.tree("image", {})
    _plant(image / "demo_pkg" / "a.py", kind)
    before = snapshot(image) if kind == "folder" else None
    with pytest.raises(MismatchError, match=r"a\.py is a (FIFO \(named pipe\)|folder), not a regular file: the run "
                                            r"reads and writes this path as a file"):
        engine.apply(builder.request(image))
    assert not (image / ".fixpack").exists()
    if before is not None:
        assert snapshot(image) == before


PATCH_WHAT = {"fifo": "is a FIFO (named pipe), not a regular file", "folder": "is a folder, not a regular file",
              "link": "is a symbolic link to /etc/passwd: a patch is read only from the fix's own folder, never "
                      "through a link",
              "link to a patch": "is a symbolic link to other.patch: a patch is read only from the fix's own "
                                 "folder, never through a link"}


@pytest.mark.parametrize("kind", sorted(PATCH_WHAT))
def test_a_patch_file_that_is_no_regular_file_is_named_unread(builder, kind):
    """Found by a fresh user: a FIFO or a folder for a patch was "does not exist", and a patch that is a
    symbolic link was read through it (to /etc/passwd: "the patch changes no file"). A patch is read from the
    fix's folder only, as a [binary] source is: a link, even to a file beside it, is refused unread."""
    clean = _pack(builder)
    folder = builder.pack / "fixes" / "one"
    patch = folder / "0001-change.patch"
    if kind.startswith("link"):
        (folder / "other.patch").write_bytes(patch.read_bytes())
        patch.unlink()
        patch.symlink_to("other.patch" if kind == "link to a patch" else "/etc/passwd")
    else:
        _plant(patch, kind)
    with pytest.raises(PackError) as exc:
        engine.status(builder.request(clean))
    assert exc.value.exit_code == 2 and f"patch '0001-change.patch' in {folder} {PATCH_WHAT[kind]}" in str(exc.value)
    assert "does not exist" not in str(exc.value) and "changes no file" not in str(exc.value), str(exc.value)


@pytest.mark.parametrize("kind", ["fifo", "link to a fifo", "folder"])
def test_a_series_that_is_no_regular_file_is_named_unread(builder, kind):
    """Found by a fresh user: fixes/series as a symbolic link to a FIFO was "no series file"."""
    clean = _pack(builder)
    series = builder.pack / "fixes" / "series"
    series.unlink()
    if kind == "link to a fifo":
        os.mkfifo(builder.base / "fifo")
        series.symlink_to(builder.base / "fifo")
    else:
        _plant(series, kind.split()[-1])
    with pytest.raises(PackError) as exc:
        engine.status(builder.request(clean))
    what = f"a symbolic link to {builder.base / 'fifo'}, which is a FIFO (named pipe)" if kind == "link to a fifo" \
        else WHAT[kind].removeprefix("is ")
    assert f"{series}: is {what}, not a regular file (put the series file itself there)" in str(exc.value), \
        str(exc.value)
    assert "no series file" not in str(exc.value)


@pytest.mark.parametrize("which", ["fixes/one/fix.toml", "profiles/p1.toml", "fixes/series", "profiles/p1.lock"])
def test_a_pack_file_that_is_a_link_to_a_regular_file_is_refused_unread(builder, which):
    """Found by a user: a fix.toml that was a symbolic link to a regular file outside the pack was read through it,
    while a patch file so linked is refused. A pack's files are read from its own folder only: each is named
    with where it leads and what to do, exit 2, unread, nothing written."""
    from conftest import snapshot

    clean = _pack(builder)
    path = builder.pack / which
    outside = builder.base / "outside" / path.name
    outside.parent.mkdir()
    outside.write_bytes(path.read_bytes())  # the very bytes: only the link is wrong
    path.unlink()
    path.symlink_to(outside)
    before = snapshot(builder.pack), snapshot(clean)
    with pytest.raises((PackError, StaleLockError)) as exc:
        engine.apply(builder.request(clean))
    said = str(exc.value)
    assert exc.value.exit_code == 2 and f"{path}: is a symbolic link to {outside}" in said, said
    if which.endswith(".lock"):
        assert f"not a lock file; remove it (rm -- {path}), then regenerate" in said, said
    else:
        assert "read only from the pack's own folder, never through a link (put the" in said, said
    assert (snapshot(builder.pack), snapshot(clean)) == before
    found = [f for f in check_pack(builder.pack)[0] if f.file == which]
    assert found and f"is a symbolic link to {outside}" in found[0].message, check_pack(builder.pack)[0]


@pytest.mark.parametrize("which", ["fixes", "fixes/one", "fixes/one/p1", "profiles"])
def test_a_pack_folder_that_is_a_symbolic_link_is_refused_and_never_read_nor_written_through(builder, which):
    """Found by a fresh user: a fix folder (or fixes/, profiles/) that was a symbolic link to a folder outside the
    pack was read through it, and refresh wrote the patch and fix.toml there. A pack's files are read from the
    pack's own folder only: the link is named, with where it leads and what to do, exit 2, nothing written."""
    from conftest import snapshot

    clean = _pack(builder)
    variant = builder.pack / "fixes/one/p1"
    variant.mkdir()
    (variant / "variant.toml").write_text("version = 1\n")
    (variant / "0001-change.patch").write_bytes((builder.pack / "fixes/one/0001-change.patch").read_bytes())
    builder.lock(clean)
    assert engine.status(builder.request(clean)).exit_code == 0
    link, outside = builder.pack / which, builder.base / "outside" / which.replace("/", "_")
    outside.parent.mkdir()
    link.rename(outside)
    link.symlink_to(outside)
    before = snapshot(builder.pack), snapshot(outside), snapshot(clean)
    with pytest.raises(PackError) as exc:
        engine.status(builder.request(clean))
    said = str(exc.value)
    assert exc.value.exit_code == 2 and f"{link}: is a symbolic link to {outside}: a pack's files are read" in said
    assert f"(put the folder itself there: rm -- {link}, then move the folder it leads to" in said, said
    assert [f.file for f in check_pack(builder.pack)[0]] == [which], check_pack(builder.pack)[0]
    assert (snapshot(builder.pack), snapshot(outside), snapshot(clean)) == before


def test_refresh_never_writes_through_a_fix_folder_that_is_a_symbolic_link(pack3, tmp_path):  # noqa: F811
    """Found by a fresh user: `fixpack edit`, a commit, then the fix's folder moved out of the pack and linked
    back: `fixpack refresh` rewrote the patch and fix.toml outside the pack, through the link. It is refused at
    the load, exit 2, naming the link; the pack and the folder it leads to are left as they were."""
    from conftest import git, snapshot
    from test_authoring import MOD

    from fixpack.editrefresh import refresh_from_work
    from fixpack.editwork import start

    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / MOD).write_text((work / MOD).read_text().replace("line 40\n", "forty\n"))
    git(work, "commit", "-qam", "forty")
    link, outside = builder.pack / "fixes/b", tmp_path / "outside_b"
    link.rename(outside)
    link.symlink_to(outside)
    before = snapshot(builder.pack), snapshot(outside)
    with pytest.raises(PackError) as exc:
        refresh_from_work(builder.pack, "b")
    assert exc.value.exit_code == 2 and f"{link}: is a symbolic link to {outside}" in str(exc.value), str(exc.value)
    assert (snapshot(builder.pack), snapshot(outside)) == before


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_file_where_the_folder_of_a_new_file_goes_is_a_conflict_before_any_write(builder, kind):
    """A fix creates demo_pkg/newdir/x.py; the image has a file (or a FIFO) named demo_pkg/newdir. The dry run said
    it would apply and the real apply failed writing (ENOTDIR, exit 5, rolled back; found by a fresh user). Now both
    are exit 4 naming it, nothing written, and the next step, run as written, lets apply through. On the release
    copy, lock refuses such a patch (a file the release ships where its new file's folder goes) the same way."""
    from conftest import snapshot

    from fixpack.errors import ConflictError

    clean = builder.tree("clean", {"demo_pkg/a.py": "x = 1\n"})
    builder.add_fix("mk", {"demo_pkg/newdir/x.py": None}, {"demo_pkg/newdir/x.py": "x = 1\n"})
    builder.profile(["mk"])
    builder.lock(clean)
    image = builder.tree("image", {"demo_pkg/a.py": "x = 1\n"})
    way = image / "demo_pkg" / "newdir"
    way.write_text("junk\n") if kind == "file" else os.mkfifo(way)
    before = snapshot(image)
    for dry in (True, False):
        r = engine.apply(builder.request(image, dry_run=dry))
        fr = r.fix("mk")
        assert r.exit_code == 4 and fr.state.value == "conflict", fr.messages
        what = "a file" if kind == "file" else "a FIFO (named pipe)"
        assert fr.messages[0] == (f"demo_pkg/newdir/x.py: demo_pkg/newdir is {what}, not a folder, but the patch "
                                  f"makes demo_pkg/newdir/x.py in it"), fr.messages
        assert snapshot(image) == before and not (image / ".fixpack").exists()
    step = fr.messages[-1]
    assert step.startswith("next: demo_pkg/newdir is there, though the release lacks it and the fix creates it"), step
    subprocess.run(step.split("move it aside (", 1)[1].split("), then run ", 1)[0], shell=True, check=True)
    assert engine.apply(builder.request(image)).ok and (image / "demo_pkg/newdir/x.py").read_text() == "x = 1\n"
    # the release ships demo_pkg/a.py; a patch making demo_pkg/a.py/y.py in it does not lock
    builder.add_fix("under", {"demo_pkg/a.py/y.py": None}, {"demo_pkg/a.py/y.py": "y = 1\n"})
    builder.profile(["mk", "under"])
    with pytest.raises(ConflictError, match=r"demo_pkg/a\.py is a file, not a folder, but the patch makes "
                                            r"demo_pkg/a\.py/y\.py in it"):
        builder.lock(clean)
