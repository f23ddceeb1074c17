"""State on disk is untrusted input: planted or damaged manifests, journals, backups and links are refused
with exit 3 by every command, revert included, and nothing inside or outside the target changes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import FixpackError

MOD = "demo_pkg/mod.py"


@pytest.fixture
def world(builder, tmp_path):
    """A target with both fixes applied, and an 'outside' folder next to it that must never change."""
    base = numbered(30)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {MOD: base, "demo_pkg/b.py": base},
                    {MOD: base.replace("line 20\n", "twenty\n"), "demo_pkg/b.py": base.replace("line 9\n", "nine\n"),
                     "demo_pkg/c.py": "c\n"})
    builder.profile(["one", "two"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base, "demo_pkg/b.py": base})
    assert engine.apply(builder.request(target)).ok
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    return builder, target, outside


def outcome(call: Callable[[], Any]) -> tuple[int, str]:
    try:
        r = call()
    except FixpackError as exc:
        return exc.exit_code, str(exc)
    return r.exit_code, r.error


COMMANDS = {
    "status": lambda b, t: engine.status(b.request(t)),
    "apply": lambda b, t: engine.apply(b.request(t)),
    "apply --dry-run": lambda b, t: engine.apply(b.request(t, dry_run=True)),
    "revert": lambda b, t: engine.revert(b.request(t)),
    "revert --dry-run": lambda b, t: engine.revert(b.request(t, dry_run=True)),
}


def _journal(target: Path, entries: Any, backups: dict[str, bytes] | None = None) -> None:
    state = target / ".fixpack"
    (state / "journal.json").write_bytes(entries if isinstance(entries, bytes) else json.dumps(entries).encode())
    if backups is not None:
        (state / "journal").mkdir(exist_ok=True)
        for name, data in backups.items():
            (state / "journal" / name).write_bytes(data)


def _plant(case: str, target: Path, outside: Path) -> None:
    victim = str(outside / "victim.txt")
    state = target / ".fixpack"
    if case == "absolute path":
        _journal(target, {"entries": [{"path": victim, "existed": False, "backup": 0}]})
    elif case == "../ path":
        _journal(target, {"entries": [{"path": "../outside/victim.txt", "existed": False, "backup": 0}]})
    elif case == "path through a link":
        (target / "demo_pkg" / "out").symlink_to(outside)
        _journal(target, {"entries": [{"path": "demo_pkg/out/victim.txt", "existed": True, "backup": 0, "mode": 420}]},
                 {"0": b"planted\n"})
    elif case == "path is a link":
        (target / "demo_pkg" / "c.py").unlink()
        (target / "demo_pkg" / "c.py").symlink_to(outside / "victim.txt")
        _journal(target, {"entries": [{"path": "demo_pkg/c.py", "existed": True, "backup": 0, "mode": 420}]},
                 {"0": b"planted\n"})
    elif case == "absolute backup key":
        _journal(target, {"entries": [{"path": MOD, "existed": True, "backup": victim, "mode": 420}]}, {})
    elif case == "backup of another index":
        _journal(target, {"entries": [{"path": MOD, "existed": True, "backup": 3, "mode": 420}]}, {"3": b"x\n"})
    elif case == "backup is a link":
        _journal(target, {"entries": [{"path": MOD, "existed": True, "backup": 0, "mode": 420}]}, {})
        (state / "journal" / "0").symlink_to(outside / "victim.txt")
    elif case == "backup does not match its sha256":
        _journal(target, {"entries": [{"path": MOD, "existed": True, "backup": 0, "mode": 420, "sha256": "0" * 64}]},
                 {"0": b"x\n"})
    elif case == "missing backup":
        _journal(target, {"entries": [{"path": MOD, "existed": True, "backup": 0, "mode": 420}]})
    elif case == "garbage journal":
        _journal(target, b"\x00\xffgarbage")
    elif case == "truncated journal":
        _journal(target, b'{"entries": [{"path": "demo_pkg/mod.py", "exi')
    elif case == "keyless journal":
        _journal(target, {})
    elif case == "entry-less journal":
        _journal(target, {"entries": [{}]})
    elif case == "journal.json is a link":
        (state / "journal.json").symlink_to(outside / "victim.txt")
    elif case == "journal.json is a folder":
        (state / "journal.json").mkdir()
    elif case == ".fixpack/journal is a file":
        (state / "journal").write_text("x\n")
    elif case == ".fixpack/journal is a link to a folder":
        (state / "journal").symlink_to(outside)
    elif case == "manifest is a folder":
        (state / "demo.manifest.json").unlink()
        (state / "demo.manifest.json").mkdir()
    elif case == "manifest is a link":
        (outside / "m.json").write_bytes((state / "demo.manifest.json").read_bytes())
        (state / "demo.manifest.json").unlink()
        (state / "demo.manifest.json").symlink_to(outside / "m.json")
    elif case in ("manifest entry removed", "manifest path climbs out", "manifest not UTF-8"):
        m = json.loads((state / "demo.manifest.json").read_text())
        if case == "manifest entry removed":
            m["fixes"] = [f for f in m["fixes"] if f["id"] != "two"]
        elif case == "manifest path climbs out":
            m["files"]["../outside/victim.txt"] = None
            m["fixes"][0]["files"]["../outside/victim.txt"] = None
        raw = json.dumps(m).encode()
        (state / "demo.manifest.json").write_bytes(raw + (b"\xff" if case == "manifest not UTF-8" else b""))
    elif case == ".fixpack is a file":
        import shutil
        shutil.rmtree(state)
        state.write_text("x\n")
    else:
        raise AssertionError(case)


CASES = ["absolute path", "../ path", "path through a link", "path is a link", "absolute backup key", "backup of another index",
         "backup is a link", "backup does not match its sha256", "missing backup", "garbage journal",
         "truncated journal", "keyless journal", "entry-less journal", "journal.json is a link",
         "journal.json is a folder", ".fixpack/journal is a file", ".fixpack/journal is a link to a folder", "manifest is a folder", "manifest is a link",
         "manifest entry removed", "manifest path climbs out", "manifest not UTF-8", ".fixpack is a file"]


def _everything(target: Path, outside: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    links = sorted(str(p) for p in [*target.rglob("*"), *outside.rglob("*")] if p.is_symlink())
    return snapshot(target), snapshot(outside), links


@pytest.mark.parametrize("case", CASES)
def test_planted_state_is_refused_by_every_command(world, case):
    b, target, outside = world
    _plant(case, target, outside)
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3, f"{case}: {name} exited {code}: {message}"
        assert "damaged" in message or "symbolic link" in message, f"{case}: {name}: {message}"
        assert _everything(target, outside) == before, f"{case}: {name} changed files"


def test_a_journal_backups_folder_that_is_a_link_is_said_to_be_one(world):
    """found by a fresh user: a link to a folder was said to be "not a folder", which it seems to be."""
    b, target, outside = world
    _plant(".fixpack/journal is a link to a folder", target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3 and f"journal is damaged: it is a symbolic link to {outside}, not a folder" in message, (
            name, message)


def test_a_journal_path_that_is_itself_a_link_is_said_to_be_one(world):
    """found by a fresh user: it was said to go "through the symbolic link demo_pkg/c.py", the path itself."""
    b, target, outside = world
    _plant("path is a link", target, outside)
    code, message = outcome(lambda: engine.apply(b.request(target)))
    assert code == 3 and "demo_pkg/c.py is a symbolic link" in message and "through the symbolic link" not in message


def test_damaged_state_through_the_cli_is_exit_3_not_1(world):
    """The CLI's exit code and message for one planted journal (the engine tests cover the rest)."""
    import subprocess
    import sys

    from conftest import REPO
    b, target, outside = world
    _plant("absolute path", target, outside)
    for cmd in ("status", "revert", "apply"):
        p = subprocess.run([sys.executable, "-m", "fixpack.cli", cmd, "--profile", "p1", "--pack", str(b.pack),
                            "--root", f"demo={target}"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        assert p.returncode == 3, p.stderr
        assert f"the state in {target / '.fixpack' / 'journal.json'} is damaged" in p.stderr
        assert "In this order: 1. put the files the fixes touch back to the clean release: rm -f -- " in p.stderr
        assert f"fetch --profile p1 --pack {b.pack} --target demo" in p.stderr, p.stderr
    assert (outside / "victim.txt").read_text() == "keep me\n"


def test_a_damaged_backup_says_to_restore_the_target_before_removing_the_journal(builder, tmp_path):
    """A run killed half-way, then a backup that fails its sha256 check: 'remove it' alone left the half-applied
    target, `partial` from then on. The message names the journal, the backups, the files the run was writing
    and the steps in order; following them gives a target that applies cleanly."""
    import shutil
    import subprocess
    import sys

    from conftest import REPO

    from fixpack.progname import program
    base = numbered(30)
    files = {MOD: base, "demo_pkg/b.py": base}
    clean = builder.tree("clean", files)
    builder.add_fix("two", dict(files), {MOD: base.replace("line 20\n", "twenty\n"),
                                         "demo_pkg/b.py": base.replace("line 9\n", "nine\n")})
    builder.profile(["two"])
    builder.lock(clean)
    target = builder.tree("image", files)
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_FAULT_AT": "3"}  # after the first file is written
    killed = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "--pack", str(builder.pack), "-p", "p1",
                             "--root", f"demo={target}"], env=env, capture_output=True)
    assert killed.returncode == 137 and (target / ".fixpack/journal.json").exists()
    assert (target / "demo_pkg/b.py").read_text() != base and (target / MOD).read_text() == base  # half-applied
    state = target / ".fixpack"
    (state / "journal/0").write_bytes(b"not what it held\n")
    code, message = outcome(lambda: engine.status(builder.request(target)))
    journal, backups = state / "journal.json", state / "journal"
    assert code == 3 and f"the state in {journal} is damaged: entry 0: the backup of demo_pkg/b.py does not " in message
    steps = [f"{target} may be half-written (it names demo_pkg/b.py, {MOD})", "removing the journal alone leaves it so",
             f"1. put the files the fixes touch back to the clean release: (src=$({program()} fetch --profile p1 "
             f"--pack {builder.pack} --target demo | sed -n 's/^demo=//p') && [ -n \"$src\" ] && cd \"$src\" && "
             f"cp --remove-destination --parents demo_pkg/b.py {MOD} {target})",
             f"2. remove the journal and its backups: rm -rf -- {journal} {backups} && rmdir "
             f"--ignore-fail-on-non-empty {state}", "3. run the command again"]
    at = [message.find(s) for s in steps]
    assert -1 not in at and at == sorted(at), message
    for rel in files:  # the steps, as written
        shutil.copy2(clean / rel, target / rel)
    journal.unlink()
    shutil.rmtree(backups)
    assert engine.status(builder.request(target)).ok
    assert engine.apply(builder.request(target)).ok and engine.revert(builder.request(target)).ok
    assert snapshot(target) == snapshot(clean)


def test_a_planted_lock_link_is_never_followed(world):
    """The run lock is a flock on the root folder: a link at .fixpack/lock is not opened by anyone."""
    b, target, outside = world
    (target / ".fixpack" / "lock").symlink_to(outside / "victim.txt")
    assert engine.status(b.request(target)).ok
    assert engine.revert(b.request(target)).ok
    assert engine.apply(b.request(target)).ok
    assert (outside / "victim.txt").read_text() == "keep me\n"


def test_a_patch_path_through_a_link_into_the_state_folder_is_refused(builder):
    base = numbered(10)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {"demo_pkg/st/new.json": None}, {"demo_pkg/st/new.json": "{}\n"})
    builder.profile(["one"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base})
    (target / ".fixpack").mkdir()
    (target / "demo_pkg" / "st").symlink_to("../.fixpack")
    before = _everything(target, target)
    code, message = outcome(lambda: engine.apply(builder.request(target)))
    assert code == 3 and "is a symbolic link" in message
    assert _everything(target, target) == before and not list((target / ".fixpack").iterdir())
    # the message's way out: remove the link (a copy of the state folder is no way out), then apply goes in
    assert "leads into the target's state folder .fixpack/" in message, message
    subprocess.run(message.split("remove it (", 1)[1].split("), then run again", 1)[0], shell=True, check=True)
    assert engine.apply(builder.request(target)).ok and (target / "demo_pkg/st/new.json").is_file()


def test_a_linked_file_inside_the_target_is_refused_not_replaced(world):
    """Writing would replace the link with a regular file that revert could not turn back into a link."""
    b, target, outside = world
    assert engine.revert(b.request(target)).ok
    real = target / "demo_pkg" / "real.py"
    real.write_bytes((target / MOD).read_bytes())
    (target / MOD).unlink()
    (target / MOD).symlink_to("real.py")
    before = _everything(target, outside)
    code, message = outcome(lambda: engine.apply(b.request(target)))
    assert code == 3 and "demo_pkg/mod.py (the file) is a symbolic link" in message
    assert _everything(target, outside) == before and (target / MOD).is_symlink()
    # the message's command replaces the link with a copy of its file; then apply goes in, the copy only
    cmd = message.split("holding what it points to (", 1)[1].split("), then run again", 1)[0]
    subprocess.run(cmd, shell=True, check=True)
    assert not (target / MOD).is_symlink() and (target / MOD).read_bytes() == real.read_bytes()
    assert engine.apply(b.request(target)).ok and (target / MOD).read_bytes() != real.read_bytes()
    # a link that points to nothing: remove it and put the release's file there
    (target / MOD).unlink()
    (target / MOD).symlink_to("gone.py")
    code, message = outcome(lambda: engine.revert(b.request(target)))
    assert code == 3 and "points to nothing" in message and f"rm {target / MOD}" in message, message


@pytest.mark.parametrize("case", ["loop", "to nothing outside", "to its folder", "to a folder"])
def test_a_link_no_copy_can_stand_for_is_to_be_removed(world, case):
    """A link in place of a patched file that loops, points to nothing outside the target, to the folder that
    holds it, or to a folder: exit 3 (a loop was an internal error, exit 1), nothing written, and the way on is
    to remove it (a copy command would fail); after the named rm, the next run names the file missing with the
    command that puts it back, and that command, run as written, leads to a revert that passes."""
    b, target, outside = world
    assert engine.revert(b.request(target)).ok
    (target / "demo_pkg" / "sub").mkdir()
    (target / MOD).unlink()
    (target / MOD).symlink_to({"loop": "mod.py", "to nothing outside": str(outside / "gone.py"),
                               "to its folder": ".", "to a folder": "sub"}[case])
    link = f"{target / MOD} (the file)"
    before = _everything(target, outside)
    for run in (engine.apply, engine.status, engine.revert):
        code, message = outcome(lambda: run(b.request(target)))
        assert code == 3 and link in message and ") is a symbolic link to" in message, (case, message)
        assert _everything(target, outside) == before
    want = {"loop": "It points to nothing, or loops", "to nothing outside": "It points to nothing, or loops",
            "to its folder": "It points to a folder that holds it", "to a folder": "It points to a folder, where"}
    assert want[case] in message and "cp " not in message, message
    subprocess.run(message.split("remove it (", 1)[1].split("), then run again", 1)[0], shell=True, check=True)
    r = engine.apply(b.request(target))
    assert r.exit_code == 4 and "is missing or differs from the release" in " ".join(r.fix("one").messages)


def test_a_folder_link_to_a_file_or_a_device_is_to_be_removed(tmp_path):
    """A folder on the way that is a link to a regular file (a copy would make a file of the folder), and a patched
    file that is a link to a device: no copy command, remove it."""
    from fixpack.tree import link_refused

    root = tmp_path / "t"
    (root / "pkg").mkdir(parents=True)
    (tmp_path / "f.txt").write_text("x\n")
    (root / "pkg" / "sub dir").symlink_to(tmp_path / "f.txt")
    said = link_refused(root, root.resolve(), "pkg/sub dir", "pkg/sub dir/d.py")
    assert "It points to no folder, where a folder is on the way: remove it (rm " in said and "cp " not in said, said
    (root / "pkg" / "m.py").symlink_to("/dev/null")
    said = link_refused(root, root.resolve(), "pkg/m.py", "pkg/m.py")
    assert "It points to no regular file, where a fix patches a file: remove it" in said and "cp " not in said, said


def test_one_edited_file_does_not_make_fixes_on_other_files_tampered(builder):
    base = numbered(30)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {"demo_pkg/b.py": base}, {"demo_pkg/b.py": base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {MOD: base}, {MOD: base.replace("line 20\n", "twenty\n")})
    builder.profile(["one", "two"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base, "demo_pkg/b.py": base})
    assert engine.apply(builder.request(target)).ok
    (target / MOD).write_text((target / MOD).read_text() + "# local edit\n")
    st = engine.status(builder.request(target))
    assert st.exit_code == 3
    assert {f.id: f.state for f in st.fixes} == {"one": "applied", "two": "tampered"}


def test_bad_lock_wait_is_bad_input(world):
    """$FIXPACK_LOCK_WAIT (read by the CLI, never the engine) that is not a number of seconds: exit 2."""
    import subprocess
    import sys

    from conftest import REPO

    b, target, _ = world
    before = snapshot(target)
    for args in (["apply"], ["apply", "--dry-run"], ["status"], ["revert"], ["revert", "--dry-run"]):
        p = subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(b.pack), "-p", "p1", "--root",
                            f"demo={target}"], capture_output=True, text=True, cwd=REPO,
                           env={**os.environ, "FIXPACK_LOCK_WAIT": "abc"})
        assert p.returncode == 2 and "FIXPACK_LOCK_WAIT='abc'" in p.stderr, (args, p.stderr)
    assert snapshot(target) == before


def _steps(message: str) -> tuple[str, str]:
    """A damaged journal's steps 1 and 2, each the command it names."""
    one = message.split("In this order: 1. ", 1)[1].split("; 2. ", 1)[0]
    two = message.split("; 2. ", 1)[1].split("; 3. ", 1)[0]
    return one.split(": ", 1)[1], two.split(": ", 1)[1].split(" (a manifest stays", 1)[0]


@pytest.mark.parametrize("kind", ["git checkout", "plain copy", "pycache link"])
def test_a_damaged_journals_printed_steps_run_through_bash_and_leave_the_release(builder, tmp_path, kind):
    """Every step of the message is a command; run as printed, then `revert`, the target is the release byte
    for byte with no .fixpack/ left (revert's 'nothing to do' removes an empty one). The plain copy had a fix
    applied before the killed run: its manifest stays, stale, and revert removes it. A ``__pycache__`` that is a
    symbolic link (found by a fresh user: the steps removed a created module's bytecode through it, outside the
    target) is not gone through."""
    import shutil
    import subprocess
    import sys

    from conftest import REPO
    base = numbered(30)
    files = {MOD: base, "demo_pkg/b.py": base}
    release, source = builder.git_release(files)
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {"demo_pkg/b.py": base, "demo_pkg/new.py": None},
                    {"demo_pkg/b.py": base.replace("line 9\n", "nine\n"), "demo_pkg/new.py": "made by two\n"},
                    opt_in=True)
    builder.profile(["one"], ["two"], extra_targets=source)
    builder.lock(release)
    target = release if kind == "git checkout" else tmp_path / "image"
    if kind != "git checkout":
        shutil.copytree(release, target, ignore=shutil.ignore_patterns(".git"))
        (target / "demo_pkg/_version.py").write_text(f"__version__ = '1.0'\n__commit_id__ = 'g{builder.commit}'\n")
    clean = snapshot(target)
    cli = [sys.executable, "-m", "fixpack.cli"]
    args = ["--pack", str(builder.pack), "-p", "p1", "--root", f"demo={target}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if kind != "git checkout":
        subprocess.run([*cli, "apply", *args], env=env, check=True, capture_output=True)
    killed = subprocess.run([*cli, "apply", *args, "two"], env={**env, "FIXPACK_FAULT_AT": "3"}, capture_output=True)
    assert killed.returncode == 137 and (target / ".fixpack/journal.json").exists()
    (target / ".fixpack/journal/0").write_bytes(b"not what it held\n")
    outside = tmp_path / "outside"
    if kind == "pycache link":
        outside.mkdir()
        (outside / "new.cpython-311.pyc").write_bytes(b"not the target's\n")
        shutil.rmtree(target / "demo_pkg/__pycache__", ignore_errors=True)
        (target / "demo_pkg/__pycache__").symlink_to(outside)
    said = subprocess.run([*cli, "revert", *args], env=env, capture_output=True, text=True)
    assert said.returncode == 3 and ": entry 0: the backup of " in said.stderr, said.stderr
    one, two = _steps(" ".join(said.stderr.split()))
    assert ("git -C" in one) == (kind == "git checkout") and f"rm -f -- {target}/demo_pkg/new.py" in one, one
    for step in (one, two):
        subprocess.run(["bash", "-c", step], cwd=tmp_path, env=env, check=True, capture_output=True)
    if kind == "pycache link":
        assert (outside / "new.cpython-311.pyc").read_bytes() == b"not the target's\n" and "__pycache__" not in one
        (target / "demo_pkg/__pycache__").unlink()
    again = subprocess.run([*cli, "revert", *args], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert snapshot(target) == clean and not (target / ".fixpack").exists()


def test_revert_with_nothing_to_revert_removes_an_empty_state_folder(world):
    """The target as the release had it: an empty .fixpack/ (a damaged journal removed by hand) is not left."""
    b, target, _outside = world
    assert engine.revert(b.request(target)).ok and not (target / ".fixpack").exists()
    (target / ".fixpack").mkdir()
    assert engine.revert(b.request(target, dry_run=True)).ok and (target / ".fixpack").is_dir()
    assert engine.revert(b.request(target)).ok and not (target / ".fixpack").exists()


@pytest.mark.parametrize("added", ["demo_pkg/b.py", "demo_pkg/extra.py"])
def test_a_file_added_by_hand_to_a_fix_entry_of_the_manifest_is_damaged_state(world, added):
    """A manifest whose fix entry names a file the fix's patch does not touch (another fix's file, or one no fix
    touches: added to the entry and to 'files' by hand) was taken as it stood: revert left the file, status
    hashed it. Every command refuses it (exit 3), naming the manifest's file and the entry's line; nothing
    written."""
    import hashlib

    from fixpack.records import dumps

    b, target, outside = world
    (target / "demo_pkg/extra.py").write_text("mine\n")
    path = target / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    digest = hashlib.sha256((target / added).read_bytes()).hexdigest()
    one = next(f for f in m["fixes"] if f["id"] == "one")
    one["files"][added] = digest
    m["files"][added] = digest
    path.write_bytes(dumps(m))
    lines = path.read_text().splitlines()
    start = next(n for n, ln in enumerate(lines) if ln.strip() == '"fixes": [')
    entry = next(n for n in range(start, len(lines)) if lines[n].strip() == '"id": "one",')
    line = max(n for n in range(start, entry) if lines[n].strip().startswith(f'"{added}":')) + 1
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3, f"{name} exited {code}: {message}"
        assert message == (f"the state in {path} is damaged: line {line}: fix one's entry names {added}, a file its "
                           f"patch does not touch (added by hand?); remove it or restore the image (nothing was "
                           f"written)"), (name, message)
        assert _everything(target, outside) == before, f"{name} changed files"
    from fixpack import sbom  # the SBOM listed the file as the fix's
    with pytest.raises(FixpackError) as exc:
        sbom.sbom(b.request(target), None)
    assert exc.value.exit_code == 3 and f"line {line}: fix one's entry names {added}" in str(exc.value)


MANIFEST = {  # found by a fresh user: each was taken as it is (the id: exit 2, "another patch", a 5 KB line)
    "another schema": ({"schema": 99}, "its schema is 99; this fixpack (", ") reads schema 1 only; revert with the "
                       "fixpack that wrote it, or remove it and restore the image (nothing was written)"),
    "another profile": ({"profile": "v0.31.0"}, "demo.manifest.json: the image is in profile v0.31.0's state, not "
                        "p1's; use --profile v0.31.0 --target demo (revert with it first to apply p1)", ""),
    # found by a fresh user: a profile of the pack that pins another release (the manifest of an image since
    # reinstalled at another release, or planted) sent the run to it, and that profile's pin back to this one
    "a profile of another release": ({"profile": "v0.32.0"}, "demo.manifest.json is damaged: it records profile ",
                                     "v0.32.0, which pins demo 9.9.9 @ 0badc0de, not the release here (1.0 @ "),
    # found by a fresh user: a manifest that says it was written on another release was taken as it was
    "another release found": ({"found": {"version": "9.9.9", "commit": "0badc0de"}}, "demo.manifest.json is damaged: "
                              "it records the release it was written on as 9.9.9 @ 0badc0de, not the release here "
                              "(1.0 @ ", "remove the file"),
    # found by a fresh user: a null version was said as None, a list as ['0.30.0'], a string found taken silently
    "found not strings": ({"found": {"version": None, "commit": "abc"}}, "not a valid fixpack manifest: key 'found' "
                          "is {\"version\": null, \"commit\": \"abc\"}, not an object of strings", ""),
    "found a string": ({"found": "0.30.0"}, "key 'found' is \"0.30.0\", not an object of strings", ""),
    # found by a fresh maintainer: a profile the pack lacks was suggested as --profile
    "a profile this pack lacks": ({"profile": "v9.9.9"}, "demo.manifest.json: the image is in profile v9.9.9's state, "
                                  "which this pack (", ") does not have: revert it with the pack that has that "
                                  "profile, or restore the image"),
    "a profile name too long": ({"profile": "p" * 5000}, "not a valid fixpack manifest: key 'profile' is \"pppp",
                                "... (5002 characters), no profile name (5000 characters, more than the 100 a name "
                                "may have)"),
    # found by a fresh user: the profile a planted manifest names went unquoted into a suggested command ("use
    # --profile a b;touch /tmp/PWNED"), a newline printed a fake line of its own, a NUL went to stderr, and ""
    # was taken as the profile of the run (status 0, revert reverted)
    **{f"a profile {what}": ({"profile": name}, f"not a valid fixpack manifest: key 'profile' is {json.dumps(name)}, "
                             "no profile name (names are lower-case letters", "")
       for what, name in (("with shell words", "a b;touch /tmp/PWNED"), ("with a newline", "p1\nnext: rm -rf / #"),
                          ("with a NUL", "p1\u0000"), ("that is empty", ""), ("that is a space", " "))},
    "a fix id too long": ({"id": "a" * 5000}, "not a valid fixpack manifest: fix entry 1: fix id 'aaaa", "... (5000 "
                          "characters)' is no fix id: 5000 characters, more than the 100 a name may have"),
}


@pytest.mark.parametrize("case", sorted(MANIFEST))
def test_a_manifest_of_another_schema_profile_or_with_a_long_id_is_refused(world, case):
    b, target, outside = world
    change, said, then = MANIFEST[case]
    if change.get("profile") == "v0.31.0":  # another profile of this pack
        b.profile(["one", "two"], name="v0.31.0")
    if change.get("profile") == "v0.32.0":  # one that pins another release
        b.profile(["one", "two"], name="v0.32.0").write_text(
            (b.pack / "profiles/p1.toml").read_text().replace("p1", "v0.32.0").replace(b.version, "9.9.9")
            .replace(b.commit[:8], "0badc0de"))
    path = target / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    if "id" in change:
        m["fixes"][0]["id"] = change["id"]
    else:
        m.update(change)
    path.write_text(json.dumps(m))
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        short = message.replace(str(target), "ROOT").replace(str(b.pack), "PACK")  # (the bound: what the value adds)
        assert code == 3 and said in message and then in message and len(short) < 400, (name, code, message)
        assert _everything(target, outside) == before, f"{name} changed files"


def test_a_target_in_another_profile_s_state_is_left_out_with_target(builder):
    """found by a fresh user: one root's vllm in one profile's state, vllm-gaudi in another's: every run of both
    targets was refused, each profile's pointing at the other's, and no message named the way out: --target."""
    import json as _json

    from test_journal_trust import _two_targets_on_one_root

    image = _two_targets_on_one_root(builder)
    req = engine.Request(pack_root=builder.pack, profile="p1", roots={"demo": image, "other": image})
    assert engine.apply(req).ok
    builder.profile(["one"], name="p2")  # another profile of the pack
    path = image / ".fixpack/other.manifest.json"
    path.write_text(_json.dumps({**_json.loads(path.read_text()), "profile": "p2"}))
    code, message = outcome(lambda: engine.status(req))
    assert code == 3 and "use --profile p2 --target other (revert with it first to apply p1), or leave other out " \
                         "of this run: --target demo" in message, message
    only = engine.Request(pack_root=builder.pack, profile="p1", roots={"demo": image}, only_targets=("demo",))
    assert engine.status(only).exit_code == 0 and engine.revert(only).ok


@pytest.mark.parametrize("run", ["apply", "revert"])
def test_backups_alone_are_removed_and_said_so(world, run):
    """Backups with no journal (a complete run killed before it removed them, or a planted folder) are removed, as the
    README says; the note said 'rolled back an interrupted run (0 files restored)', though nothing was rolled back."""
    b, target, outside = world
    (target / ".fixpack" / "journal").mkdir()
    (target / ".fixpack" / "journal" / "0").write_text("stale\n")
    keep = snapshot(outside)
    st = engine.status(b.request(target))
    assert st.targets[0].notes[0] == f"a run left backups in {target / '.fixpack' / 'journal'} that no journal " \
                                     f"names (it was complete, or killed before it wrote its journal: no file of " \
                                     f"the target is half-written); the next run removes them", st.targets[0].notes
    r = getattr(engine, run)(b.request(target))
    assert r.ok and r.targets[0].notes[0] == f"removed the backups a run left in {target / '.fixpack' / 'journal'} " \
                                             f"(no journal names them: that run was complete, or killed before it " \
                                             f"wrote its journal)", r.targets
    assert not (target / ".fixpack" / "journal").exists() and snapshot(outside) == keep
    (target / ".fixpack").mkdir(exist_ok=True)
    (target / ".fixpack" / "journal").mkdir()
    (target / MOD).write_text("edited by hand\n")  # a refused run says what it wrote first
    r = engine.apply(b.request(target)) if run == "apply" else None
    if r is not None:
        assert r.exit_code == 3 and r.error.startswith("backups a run left (no journal names them) were removed "
                                                       "first, and nothing else was written; "), r.error


def test_a_patched_file_hard_linked_from_outside_is_never_written_through(builder, tmp_path):
    """A file of the target that is a hard link to a file elsewhere (an installer's cache: uv links packages into a
    venv from its cache by default): apply gives the target its own file and revert puts the release's bytes back in
    it; the other name keeps the release's bytes throughout (writing through the link would patch every venv that
    shares it). The link is not made again by revert: the target's file stays its own (same bytes, mode)."""
    base = numbered(30)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base})
    cache = tmp_path / "cache"
    cache.mkdir()
    os.link(target / MOD, cache / "mod.py")
    original, kept = snapshot(target), snapshot(cache)
    assert engine.apply(builder.request(target)).ok
    assert "three\n" in (target / MOD).read_text() and snapshot(cache) == kept
    assert os.stat(target / MOD).st_ino != os.stat(cache / "mod.py").st_ino
    assert engine.revert(builder.request(target)).ok
    assert snapshot(target) == original and snapshot(cache) == kept


def test_apply_and_revert_keep_a_patched_file_s_extended_attributes(world):
    """Found by a fresh user: a user.* attribute (and so an ACL or an SELinux label) was dropped by apply, the file
    being written beside itself and renamed over it, and not given back by revert."""
    b, target, _ = world
    assert engine.revert(b.request(target)).ok
    try:
        os.setxattr(target / MOD, "user.origin", b"image-build-42")
    except OSError as exc:  # pragma: no cover - a file system without user xattrs
        pytest.skip(f"no user xattrs here: {exc}")
    assert engine.apply(b.request(target)).ok
    assert "three\n" in (target / MOD).read_text() and os.getxattr(target / MOD, "user.origin") == b"image-build-42"
    assert engine.revert(b.request(target)).ok and os.getxattr(target / MOD, "user.origin") == b"image-build-42"


def test_a_manifest_or_lock_holding_a_key_twice_is_refused(world):
    """Found by a fresh maintainer: JSON with a key twice in one object was read as its last value without a word
    (a hand edit that says one thing to fixpack and another to a person). A manifest is damaged state (exit 3), a
    lock bad input (exit 2), each naming the line."""
    from fixpack.errors import BadInputError, DamagedStateError

    b, target, outside = world
    mpath = target / ".fixpack" / "demo.manifest.json"
    text = mpath.read_text()
    mpath.write_text(text.replace('"profile": "p1"', '"profile": "p1", "profile": "p1"', 1))
    before, keep = snapshot(target), snapshot(outside)
    with pytest.raises(DamagedStateError, match=r'the key "profile" appears twice in one object'):
        engine.revert(b.request(target))
    assert snapshot(target) == before and snapshot(outside) == keep
    mpath.write_text(text)
    lock = b.pack / "profiles" / "p1.lock"
    lock.write_text(lock.read_text().replace('"profile": "p1"', '"profile": "p1",\n  "profile": "p1"', 1))
    with pytest.raises(BadInputError, match=r'p1\.lock.*the key "profile" appears twice'):
        engine.status(b.request(target))


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/hostname", "demo_pkg/../x.py"])
def test_a_resealed_lock_naming_a_path_outside_the_target_is_refused(world, path):
    """Found by a fresh user: a lock edited to name ../../etc/passwd and sealed again (its digest is a plain sha256
    anyone can recompute) was taken: apply patched the image, saying the file's pre-image "None" differed, and
    revert then blamed the manifest. A lock's paths are checked as a patch's are: exit 2 naming the lock's entry."""
    import json as _json

    from fixpack.errors import StaleLockError
    from fixpack.records import lock_digest

    b, target, _outside = world
    assert engine.revert(b.request(target)).ok
    lock = b.pack / "profiles" / "p1.lock"
    data = _json.loads(lock.read_text())
    data["fixes"][0]["files"][0]["path"] = path
    data["digest"] = lock_digest(data)
    lock.write_text(_json.dumps(data, indent=2, sort_keys=True) + "\n")
    before = snapshot(target)
    with pytest.raises(StaleLockError, match=r"entry 1 of its \"fixes\" .*is not one `fixpack lock` writes: its file "
                                             r"entry 1 .*: its \"path\" is .*, not a path relative, inside the target"):
        engine.apply(b.request(target))
    assert snapshot(target) == before


def test_a_journal_that_removes_a_damaged_manifest_is_said_by_status_as_apply_finds_it(world):
    """A journal naming the manifest as made by the killed run (existed: false; its bytes "{}", the journal's sha256):
    apply and revert rolled it back (the manifest removed) and went on, exit 0, while status and a dry run read the
    manifest on disk first and said it damaged (exit 3), though they show the state the rollback gives (a fresh
    user's finding). They read the manifest the rollback leaves: none here, so the fixes are found applied."""
    import hashlib

    b, target, _outside = world
    manifest = target / ".fixpack" / "demo.manifest.json"
    manifest.write_text("{}")
    _journal(target, {"entries": [{"path": ".fixpack/demo.manifest.json", "existed": False, "backup": 0,
                                   "sha256": hashlib.sha256(b"{}").hexdigest(), "size": 2}]})
    before = snapshot(target)
    for run in ("status", "apply --dry-run"):
        code, said = outcome(lambda: COMMANDS[run](b, target))
        assert code == 0 and snapshot(target) == before, (run, said)
    assert outcome(lambda: COMMANDS["apply"](b, target))[0] == 0
    assert json.loads(manifest.read_text())["fixes"]  # the rollback removed "{}", the apply recorded the fixes


@pytest.mark.parametrize("run", ["status", "apply", "revert"])
def test_a_manifest_recording_a_fix_the_pack_lacks_is_named_by_every_command(world, run):
    """Found by a fresh user: with a fix entry the pack does not have, status said "the manifest of target demo ..."
    (no file), while revert named the manifest. Each command names the manifest file (exit 2, nothing written)."""
    b, target, _outside = world
    path = target / ".fixpack/demo.manifest.json"
    doc = json.loads(path.read_text())
    doc["fixes"].append({**doc["fixes"][-1], "id": "ghost"})  # (its files' sha256 'files' records: the last on them)
    path.write_text(json.dumps(doc))
    before = snapshot(target)
    with pytest.raises(FixpackError) as exc:
        getattr(engine, run)(b.request(target))
    assert exc.value.exit_code == 2 and str(path) in str(exc.value) and "ghost" in str(exc.value), str(exc.value)
    assert snapshot(target) == before


def test_a_key_twice_is_named_at_its_second_place_in_the_object_that_holds_it(world):
    """Found by a fresh user: the line named for a key twice was the key's second place anywhere in the document,
    another fix entry's (a manifest's "state", a lock's "id"); it is the second place in the object holding it."""
    from fixpack.errors import BadInputError, DamagedStateError

    b, target, _outside = world
    mpath = target / ".fixpack" / "demo.manifest.json"
    text = mpath.read_text()
    assert text.count('"state": "applied"') >= 2
    last = text.rindex('"state": "applied"')
    indent = text[text.rindex("\n", 0, last) + 1:last]
    mpath.write_text(text[:last] + f'"state": "applied",\n{indent}' + text[last:])
    line = text[:last].count("\n") + 2
    with pytest.raises(DamagedStateError, match=rf'not valid JSON \(line {line}: the key "state" appears twice'):
        engine.status(b.request(target))
    mpath.write_text(text)
    lock = b.pack / "profiles" / "p1.lock"
    raw = lock.read_text()
    ids = [m.start() for m in re.finditer(r'"id": "', raw)]
    assert len(ids) >= 2
    at = ids[-1]
    indent = raw[raw.rindex("\n", 0, at) + 1:at]
    end = raw.index("\n", at)
    lock.write_text(raw[:end + 1] + indent + raw[at:end] + "\n" + raw[end + 1:])
    line = raw[:at].count("\n") + 2
    with pytest.raises(BadInputError, match=rf'p1\.lock:{line}: the lock is not valid JSON \(the key "id" appears twice'):
        engine.status(b.request(target))


@pytest.mark.parametrize("key", ["path", "hash", "non-ASCII path"])
def test_a_manifest_s_own_files_naming_a_path_out_of_the_target_is_named_at_its_line(world, key):
    """found by a fresh user: a path that climbs out (or a hash that is none) in the manifest's own 'files' was refused
    with no line, though one in a fix entry is named at its line; the line is told now, for every command."""
    from fixpack.records import dumps

    b, target, outside = world
    path = target / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    bad = {"path": "../outside/victim.txt", "non-ASCII path": "demo_pkg/é/../../../x"}.get(key) or next(iter(m["files"]))
    m["files"][bad] = "not a hash" if key == "hash" else None
    path.write_bytes(dumps(m) if key != "non-ASCII path" else json.dumps(m, indent=2, ensure_ascii=False).encode())
    line = next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith(f'    "{bad}":')
                or ln.startswith(f"    {json.dumps(bad)}:"))  # (an editor writes é as it is; fixpack escapes it)
    said = (f"line {line}: 'files' names '{bad}': a '..' segment" if key != "hash" else
            f"line {line}: 'files': the hash of {bad} is not a sha256")
    before = _everything(target, outside)
    for name, run in COMMANDS.items():
        code, message = outcome(lambda: run(b, target))
        assert code == 3 and said in message, (name, code, message)
        assert _everything(target, outside) == before, f"{name} changed files"
