"""A fix that deletes or renames a file, and the folder its deletion empties: revert, and the rollback of a
killed run, give back their mode and owner, not only their bytes (found by a fresh user: a 600 file came back
644, a 750 folder 755, an owner 1000 root). The snapshot is of every path under the target (folders too) with
its bytes, mode and, running as root, owner."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import numbered

from fixpack import engine, fsio
from fixpack.errors import DamagedStateError, EnvironmentProblem

ROOT = os.geteuid() == 0
GONE, GONE_DIR = "demo_pkg/sub/gone.py", "demo_pkg/sub"
OLD, OLD_DIR, NEW = "demo_pkg/ren/old.py", "demo_pkg/ren", "demo_pkg/moved/new.py"


def full(root: Path) -> dict[str, tuple[bytes | None, int, int, int]]:
    out = {}
    for p in sorted([root, *root.rglob("*")]):
        st = os.lstat(p)
        data = p.read_bytes() if stat.S_ISREG(st.st_mode) else None
        out[p.relative_to(root).as_posix()] = (data, stat.S_IMODE(st.st_mode), *((st.st_uid, st.st_gid) if ROOT
                                                                                 else (0, 0)))
    return out


def _own(path: Path, uid: int) -> None:
    if ROOT:
        os.chown(path, uid, uid)


@pytest.fixture
def setup(builder):
    base = numbered(12)
    files = {"demo_pkg/mod.py": base, GONE: numbered(5, "gone"), OLD: numbered(6, "old")}
    clean = builder.tree("clean", files)
    builder.add_fix("del", {GONE: files[GONE]}, {GONE: None})
    builder.add_fix("ren", {OLD: files[OLD]}, {OLD: None, NEW: files[OLD]})
    builder.add_fix("mod", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    builder.profile(["del", "ren", "mod"])
    builder.lock(clean)
    target = builder.tree("image", files)
    (target / GONE).chmod(0o600)
    (target / GONE_DIR).chmod(0o2750)
    (target / OLD).chmod(0o640)
    (target / OLD_DIR).chmod(0o710)
    for p in (GONE, GONE_DIR):
        _own(target / p, 1000)
    for p in (OLD, OLD_DIR):
        _own(target / p, 1001)
    return builder, target


def test_revert_gives_back_the_mode_and_owner_of_deleted_renamed_files_and_emptied_folders(setup):
    b, target = setup
    before = full(target)
    assert engine.apply(b.request(target)).ok
    assert not (target / GONE_DIR).exists() and not (target / OLD_DIR).exists()
    moved = os.lstat(target / NEW)  # the renamed file keeps its source's mode and owner
    assert stat.S_IMODE(moved.st_mode) == 0o640 and (not ROOT or moved.st_uid == 1001)
    manifest = json.loads((target / ".fixpack/demo.manifest.json").read_bytes())
    assert manifest["removed_files"][GONE]["mode"] == 0o600 and manifest["removed_dirs"][GONE_DIR]["mode"] == 0o2750
    assert manifest["removed_files"][OLD]["mode"] == 0o640 and manifest["removed_dirs"][OLD_DIR]["mode"] == 0o710
    assert engine.apply(b.request(target)).ok  # a second run keeps the records (nothing written)
    assert engine.revert(b.request(target)).ok
    assert full(target) == before


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_killed_run_rolled_back_at_every_write_point_gives_back_modes_and_owners(setup, command, tmp_path):
    b, target = setup
    before = full(target)
    if command == "revert":
        assert engine.apply(b.request(target)).ok
    start = full(target)
    killed = 0
    for n in range(1, 40):
        rc = b.run_child(target, command, n)
        if rc == 0:  # past the last write point
            break
        assert rc == 137
        killed += 1
        # the next revert rolls the killed run back (then reverts what an apply had left)
        assert b.run_child(target, "revert", None) == 0
        assert full(target) == before, f"{command} killed at write point {n}, then revert"
        if command == "revert":
            assert engine.apply(b.request(target)).ok
            assert full(target) == start
    assert killed >= 6


def test_a_killed_apply_rolled_back_by_the_next_apply_gives_the_folder_back(setup):
    b, target = setup
    before = full(target)
    assert b.run_child(target, "apply", 6) == 137  # past the deletion (the 4th file), with the folder gone
    assert not (target / GONE_DIR).exists()
    journal = json.loads((target / ".fixpack/journal.json").read_bytes())
    assert journal["removed_dirs"][GONE_DIR]["mode"] == 0o2750
    assert engine.apply(b.request(target)).ok and engine.revert(b.request(target)).ok
    assert full(target) == before


def test_a_manifest_without_the_records_still_reverts_as_before(setup):
    b, target = setup
    assert engine.apply(b.request(target)).ok
    path = target / ".fixpack/demo.manifest.json"
    data = json.loads(path.read_bytes())
    del data["removed_files"], data["removed_dirs"]
    path.write_text(json.dumps(data))
    assert engine.revert(b.request(target)).ok
    assert stat.S_IMODE(os.lstat(target / GONE).st_mode) == 0o644  # the patch's mode, as before the records
    assert stat.S_IMODE(os.lstat(target / OLD).st_mode) == 0o640  # a rename carries it back either way


@pytest.mark.parametrize("key, path, value, what", [
    ("removed_files", GONE, {"mode": 0o4755, "owner": [0, 0]}, "permission bits"),
    ("removed_dirs", GONE_DIR, {"mode": 0o4755, "owner": None}, "no setuid"),
    ("removed_files", GONE, {"mode": 0o600, "owner": [-1, 0]}, r"\[uid, gid\]"),
    ("removed_files", GONE, {"mode": 0o600}, "mode and owner"),
    ("removed_files", "demo_pkg/mod.py", {"mode": 0o600, "owner": None}, "no file its applied fixes remove"),
    ("removed_dirs", "demo_pkg", {"mode": 0o700, "owner": None}, None),  # above a removed file: allowed
    ("removed_dirs", "../x", {"mode": 0o700, "owner": None}, "'../x'"),
])
def test_a_planted_record_in_the_manifest_is_damaged_state(setup, key, path, value, what):
    b, target = setup
    assert engine.apply(b.request(target)).ok
    mpath = target / ".fixpack/demo.manifest.json"
    data = json.loads(mpath.read_bytes())
    data[key][path] = value
    mpath.write_text(json.dumps(data))
    snap = full(target)
    if what is None:
        assert engine.revert(b.request(target)).ok
        return
    with pytest.raises(DamagedStateError, match=what):
        engine.revert(b.request(target))
    assert full(target) == snap


@pytest.mark.skipif(not ROOT, reason="needs root to own a file as another user")
def test_records_in_another_users_manifest_are_not_obeyed(setup):
    """A manifest another user put there is never obeyed to give a file a mode or an owner by a run as root:
    its records are dropped, and the revert makes the file as it would with none (the patch's mode, root)."""
    b, target = setup
    assert engine.apply(b.request(target)).ok
    mpath = target / ".fixpack/demo.manifest.json"
    data = json.loads(mpath.read_bytes())
    data["removed_files"][GONE] = {"mode": 0o666, "owner": [1234, 1234]}
    mpath.write_text(json.dumps(data))
    os.chown(mpath, 1234, 1234)
    assert engine.revert(b.request(target)).ok
    st = os.lstat(target / GONE)
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o644, 0)


@pytest.mark.parametrize("value, what", [
    ({GONE_DIR: {"mode": 0o4777, "owner": None}}, "no setuid"),
    ({"demo_pkg/mod.py": {"mode": 0o755, "owner": None}}, "demo_pkg/mod.py holds no file the journal has a"),
    ({"other": {"mode": 0o755, "owner": None}}, "holds no file the journal has a backup of"),
    ([GONE_DIR], "not an object"),
])
def test_a_planted_removed_folder_in_the_journal_is_damaged_state(setup, value, what):
    b, target = setup
    assert b.run_child(target, "apply", 6) == 137
    jpath = target / ".fixpack/journal.json"
    data = json.loads(jpath.read_bytes())
    data["removed_dirs"] = value
    jpath.write_text(json.dumps(data))
    snap = full(target)
    with pytest.raises(DamagedStateError, match=what):
        engine.revert(b.request(target))
    assert full(target) == snap


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_failed_write_rolled_back_in_the_same_run_gives_back_modes_and_owners(setup, monkeypatch, command):
    """A write failing at each I/O call in turn (the engine's hook): the run rolls itself back from its journal,
    folders emptied or made again included."""
    b, target = setup
    if command == "revert":
        assert engine.apply(b.request(target)).ok
    before = full(target)
    run = getattr(engine, command)
    undo = engine.revert if command == "apply" else engine.apply
    failed = 0
    for n in range(1, 200):
        monkeypatch.setenv(fsio.IO_FAULT_ENV, f"{n}:EIO")
        fsio.reset_fault_counters()
        try:
            report = run(b.request(target))
        except EnvironmentProblem:
            failed += 1
            assert full(target) == before, f"{command} failing at I/O call {n}"
            continue
        finally:
            monkeypatch.delenv(fsio.IO_FAULT_ENV)
        assert report.ok  # past the last I/O call: put it back for the next one
        assert undo(b.request(target)).ok and full(target) == before
        if fsio.io_calls() < n:
            break
    assert failed >= 10


@pytest.mark.parametrize("bits", [0o4755, 0o2755, 0o1644])
def test_a_killed_run_on_a_set_id_file_is_rolled_back_not_called_damaged(setup, bits):
    """A file the fix modifies with setuid, setgid or sticky: the journal a killed run leaves records its mode,
    and the next run must take that journal for what it is (it was called damaged: the journal check allowed
    permission bits only), give the file back, bytes and mode, and go on."""
    b, target = setup
    mod = target / "demo_pkg/mod.py"
    _own(mod, 1002)  # before the mode: a chown clears set-id bits
    mod.chmod(bits)
    if stat.S_IMODE(os.lstat(mod).st_mode) != bits:
        pytest.skip(f"this file system does not keep mode {oct(bits)}")
    before = full(target)
    killed = 0
    for n in range(1, 40):
        rc = b.run_child(target, "apply", n)
        if rc == 0:
            break
        assert rc == 137
        killed += 1
        assert b.run_child(target, "revert", None) == 0, f"apply killed at write point {n}: the rollback was refused"
        assert full(target) == before, f"apply killed at write point {n}, then revert"
    assert killed >= 6
