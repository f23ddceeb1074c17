"""Bad input and hostile conditions: a clear error, and the tree byte-identical afterwards.
Crash safety: the apply is killed at every write point; the next run leaves the tree whole."""

import fcntl
import os
import shutil

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import BusyError, EnvironmentProblem, MismatchError, PackError

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(30)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {MOD: base, "demo_pkg/b.py": base},
                    {MOD: base.replace("line 20\n", "twenty\n"), "demo_pkg/b.py": base.replace("line 9\n", "nine\n"),
                     "demo_pkg/c.py": "c\n"})
    builder.profile(["one", "two"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base, "demo_pkg/b.py": base})
    return builder, target


def test_read_only_target(setup):
    b, target = setup
    before = snapshot(target)
    for p in [target, target / "demo_pkg", *target.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        if os.access(target, os.W_OK):
            pytest.skip("running as a user who ignores file modes (root): cannot make a read-only folder")
        with pytest.raises(EnvironmentProblem, match="not writable"):
            engine.apply(b.request(target))
    finally:
        for p in [target, target / "demo_pkg", *target.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    assert snapshot(target) == before


def test_read_only_target_as_root(setup, monkeypatch):
    """Root ignores modes, so the check is exercised through os.access as the tool sees it."""
    b, target = setup
    before = snapshot(target)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if m == os.W_OK else real(p, m, *a, **k))
    with pytest.raises(EnvironmentProblem, match="not writable.*nothing was changed"):
        engine.apply(b.request(target))
    monkeypatch.undo()
    assert {k: v for k, v in snapshot(target).items() if not k.startswith(".fixpack")} == before


def test_a_dry_run_and_status_on_a_read_only_target_say_what_would_apply(setup, monkeypatch):
    """README (--dry-run): whether the target may be written is the run's to find. A dry run and status on a
    read-only copy (a CI job's release copy in a read-only cache) report the fixes as they would lay them, exit 0,
    and write nothing; apply there is exit 5 (the test above)."""
    b, target = setup
    before = snapshot(target)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if m == os.W_OK else real(p, m, *a, **k))
    for report in (engine.apply(b.request(target, dry_run=True)), engine.status(b.request(target))):
        assert report.exit_code == 0 and {f.state.value for f in report.fixes} == {"absent"}, report.fixes
    monkeypatch.undo()
    assert snapshot(target) == before


@pytest.mark.parametrize("where", ["demo_pkg", ""])
def test_a_read_only_folder_is_named_not_the_files_in_it(setup, monkeypatch, where):
    """A folder the run writes in that it may not write (its files writable): the folder is what keeps them from
    being written, so it is named, once (each file in it was named instead, the target's root twice; found by a
    fresh user)."""
    b, target = setup
    before = snapshot(target)
    real, folder = os.access, target / where if where else target
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if (m == os.W_OK and os.fspath(p) == str(folder))
                        else real(p, m, *a, **k))
    with pytest.raises(EnvironmentProblem) as exc:
        engine.apply(b.request(target))
    monkeypatch.undo()
    assert f"system): {folder}/ (a folder the run writes in); nothing was changed" in str(exc.value), str(exc.value)
    assert {k: v for k, v in snapshot(target).items() if not k.startswith(".fixpack")} == before


def test_symlink_pointing_outside(setup, tmp_path):
    b, target = setup
    outside = tmp_path / "outside.py"
    outside.write_text((target / MOD).read_text())
    (target / MOD).unlink()
    (target / MOD).symlink_to(outside)
    before, outside_before = snapshot(target), outside.read_bytes()
    with pytest.raises(MismatchError, match="outside the target root"):
        engine.apply(b.request(target))
    assert snapshot(target) == before and outside.read_bytes() == outside_before


def test_second_concurrent_run_is_refused(setup, monkeypatch):
    b, target = setup
    holder = os.open(target, os.O_RDONLY | os.O_DIRECTORY)  # the run lock is a flock on the root folder
    fcntl.flock(holder, fcntl.LOCK_EX)
    before = snapshot(target)
    try:
        with pytest.raises(BusyError, match="another fixpack run holds"):
            engine.apply(b.request(target, lock_wait=0.3))
    finally:
        os.close(holder)
    assert snapshot(target) == before


def test_malformed_patch_changes_nothing(setup):
    b, target = setup
    p = b.pack / "fixes/two/0001-change.patch"
    p.write_text(p.read_text().replace("@@ -17,7 +17,7 @@", "@@ -17,9 +17,7 @@"))
    before = snapshot(target)
    with pytest.raises(PackError, match="malformed"):
        engine.apply(b.request(target))
    assert snapshot(target) == before


def test_kill_at_every_write_point(setup, tmp_path):
    b, target = setup
    original = snapshot(target)
    reference = tmp_path / "reference"
    _restore(reference, original)
    assert b.run_child(reference) == 0
    patched = {k: v for k, v in snapshot(reference).items() if not k.startswith(".fixpack")}
    points = 0
    for n in range(1, 30):
        _restore(target, original)
        rc = b.run_child(target, fault_at=n)
        if rc == 0:  # ran past the last write point: the fault never fired
            break
        points += 1
        assert rc == 137
        # the next run rolls back what the killed one left, then applies the whole profile
        assert b.run_child(target) == 0
        files = {k: v for k, v in snapshot(target).items() if not k.startswith(".fixpack")}
        assert files == patched, f"after a kill at write point {n}, the next run did not end fully patched"
        assert not (target / ".fixpack/journal.json").exists()
        # and a kill followed by a revert gives back the original bytes
        _restore(target, original)
        assert b.run_child(target, fault_at=n) == 137
        assert engine.revert(b.request(target)).ok
        files = {k: v for k, v in snapshot(target).items() if not k.startswith(".fixpack")}
        assert files == original, f"kill at write point {n}, then revert: not the original bytes"
    assert points >= 6  # backups, journal, each of the 4 files, the manifest


def _restore(target, files):
    import shutil
    if target.exists():
        shutil.rmtree(target)
    for rel, (data, mode) in files.items():
        p = target / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)


def test_interrupted_run_is_rolled_back_by_revert_and_status_says_so(setup):
    b, target = setup
    original = snapshot(target)
    assert b.run_child(target, fault_at=4) == 137
    st = engine.status(b.request(target))
    assert "interrupted run left a journal" in st.targets[0].message
    # status shows the state the next apply starts from (the journal's originals), not the torn files
    assert st.ok and {f.id: f.state for f in st.fixes} == {"one": "absent", "two": "absent"}
    assert engine.apply(b.request(target)).ok
    assert engine.revert(b.request(target)).ok
    assert snapshot(target) == original


@pytest.mark.parametrize("planted", ["link", "file", "fifo"])
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_something_at_a_temp_file_s_path_is_refused_and_kept(setup, tmp_path, planted, command):
    """A link or a file at the path of a file's temp file (.NAME.fixpack-tmp) in the target. A link was never
    followed, but it and a user's file there were removed by the write (a fresh user's finding: their file was gone
    after apply, or revert). No run of fixpack leaves one there outside a journal (the rollback removes it first),
    so it is someone else's: refused, exit 3, every byte kept (the victim too); once it is moved away, the run goes
    on."""
    b, target = setup
    if command == "revert":
        assert engine.apply(b.request(target)).ok
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    tmp = target / "demo_pkg" / ".mod.py.fixpack-tmp"
    if planted == "link":
        tmp.symlink_to(victim)
    elif planted == "fifo":
        os.mkfifo(tmp)
    else:
        tmp.write_text("my notes\n")
    before = snapshot(target)
    dry = [lambda: getattr(engine, command)(b.request(target, dry_run=True))] + \
        [lambda: engine.status(b.request(target))] * (command == "apply")
    for run in [*dry, lambda: getattr(engine, command)(b.request(target))]:  # a dry run says what the run will
        with pytest.raises(MismatchError) as exc:
            run()
        assert f"{tmp} is where fixpack writes demo_pkg/mod.py's temp file" in str(exc.value) and \
            "nothing was written. Move it away" in str(exc.value), str(exc.value)
    assert snapshot(target) == before and victim.read_text() == "keep me\n"
    tmp.rename(tmp_path / "moved")
    assert getattr(engine, command)(b.request(target)).ok
    assert not (target / MOD).is_symlink() and ("three" in (target / MOD).read_text()) == (command == "apply")


def test_state_folder_link_is_refused(setup, tmp_path):
    b, target = setup
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (target / ".fixpack").symlink_to(outside)
    before = snapshot(target)
    with pytest.raises(MismatchError, match="symbolic link"):
        engine.apply(b.request(target))
    assert snapshot(target) == before and not list(outside.iterdir())


def test_owner_and_mode_are_kept(setup):
    b, target = setup
    os.chown(target / MOD, 1234, 2345) if os.getuid() == 0 else pytest.skip("needs root to chown")
    (target / MOD).chmod(0o640)
    assert engine.apply(b.request(target)).ok
    st = (target / MOD).stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (1234, 2345, 0o640)
    assert engine.revert(b.request(target)).ok
    st = (target / MOD).stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (1234, 2345, 0o640)


def test_unwritable_target_leaves_no_lock_file(setup, monkeypatch):
    b, target = setup
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if m == os.W_OK else real(p, m, *a, **k))
    with pytest.raises(EnvironmentProblem):
        engine.apply(b.request(target))
    assert not (target / ".fixpack").exists()


def test_leftover_backups_are_cleaned(setup):
    b, target = setup
    last = 0
    for n in range(1, 30):  # find the last write point: after the journal is removed, before the backups are
        if b.run_child(target, fault_at=n) != 137:
            break
        last = n
        engine.revert(b.request(target))
    assert engine.revert(b.request(target)).ok
    assert b.run_child(target, fault_at=last) == 137
    assert (target / ".fixpack" / "journal").is_dir() and not (target / ".fixpack" / "journal.json").exists()
    assert engine.apply(b.request(target)).ok
    assert not (target / ".fixpack" / "journal").exists()


def test_a_linked_folder_pointing_outside_is_named_with_where_it_points(setup, tmp_path):
    """A folder on the way to a patched file that is a symbolic link out of the target (in an image or in
    the release copy a lock is made from): the message names that folder, the link's text, where it
    resolves and what to do; exit 3, nothing written on either side of the link."""
    b, target = setup
    clean = b.base / "clean"
    for root, name in ((target, "image"), (clean, "release")):
        outside = tmp_path / f"outside-{name}"
        shutil.move(root / "demo_pkg", outside)
        (root / "demo_pkg").symlink_to(outside)
        before, outside_before = snapshot(root), snapshot(outside)
        run = engine.apply if root == target else engine.write_lock
        with pytest.raises(MismatchError) as exc:
            run(b.request(root))
        assert exc.value.exit_code == 3
        assert (f"{root / 'demo_pkg'} (a folder on the way to demo_pkg/mod.py) is a symbolic link to {outside}, "
                f"which resolves to {outside.resolve()}, outside the target root {root}") in str(exc.value)
        assert f"rm {root / 'demo_pkg'} && cp -a {outside.resolve()} {root / 'demo_pkg'}" in str(exc.value)
        assert snapshot(root) == before and snapshot(outside) == outside_before
