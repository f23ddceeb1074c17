"""A journal is untrusted input: a planted or damaged one never removes a file the release ships, never
changes a file this profile could not have written, nor its mode or owner beyond what it had, and its
recovery steps, run as printed, keep the release's files byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, make_diff, numbered, snapshot

MOD = "demo_pkg/mod.py"


def _pack(builder, tmp_path, kind):
    base = numbered(30)
    release, source = builder.git_release({MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"], extra_targets=source)
    builder.lock(release)
    target = release
    if kind == "plain copy":
        target = tmp_path / "image"
        shutil.copytree(release, target, ignore=shutil.ignore_patterns(".git"))
        (target / "demo_pkg/_version.py").write_text(f"__version__ = '1.0'\n__commit_id__ = 'g{builder.commit}'\n")
    return target


def _cli(builder, target, *args):
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(builder.pack), "-p", "p1",
                           "--root", f"demo={target}"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def _steps(message: str) -> list[str]:
    one = message.split("In this order: 1. ", 1)[1].split("; 2. ", 1)[0]
    two = message.split("; 2. ", 1)[1].split("; 3. ", 1)[0]
    return [one.split(": ", 1)[1], two.split(": ", 1)[1].split(" (a manifest stays", 1)[0]]


@pytest.mark.parametrize("kind", ["git checkout", "plain copy"])
def test_damaged_journal_steps_never_remove_a_file_the_release_has(builder, tmp_path, kind):
    """A journal saying the release's ``__init__.py`` did not exist (and a file only the image has): the steps
    put the first back from the release, leave the second, remove the killed run's temp files (the target
    is its release again, with no .fixpack/ left), and apply then works."""
    target = _pack(builder, tmp_path, kind)
    (target / "demo_pkg/built.so").write_bytes(b"\x7fELF only the image has it\n")
    clean = snapshot(target)
    (target / ".fixpack").mkdir()
    entries = [{"backup": None, "existed": False, "mode": None, "owner": None, "path": p, "sha256": None}
               for p in ("demo_pkg/__init__.py", "demo_pkg/built.so")]
    (target / ".fixpack/journal.json").write_text(json.dumps({"dirs": [], "entries": entries}))
    for tmp in ("demo_pkg/.mod.py.fixpack-tmp", ".fixpack/.journal.json.fixpack-tmp"):  # the killed run's (L8)
        (target / tmp).write_text("half\n")
    said = _cli(builder, target, "apply")
    assert said.returncode == 3, said.stderr
    steps = _steps(" ".join(said.stderr.split()))
    first, rest = steps[0].split(" && ", 1)  # the only removal is of the killed run's temp file
    assert first == f"rm -f -- {target}/demo_pkg/.mod.py.fixpack-tmp" and "rm -f" not in rest, steps[0]
    for step in steps:
        subprocess.run(["bash", "-c", step], cwd=tmp_path, check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert snapshot(target) == clean
    assert _cli(builder, target, "apply").returncode == 0
    assert (target / "demo_pkg/__init__.py").read_bytes() == (builder.base / "release/demo_pkg/__init__.py").read_bytes()
    assert (target / "demo_pkg/built.so").read_bytes() == b"\x7fELF only the image has it\n"


def _outcome(call):
    from fixpack.errors import FixpackError
    try:
        r = call()
    except FixpackError as exc:
        return exc.exit_code, str(exc)
    return r.exit_code, r.error


def _plant(target, entry, backup: bytes | None = None, dirs=()):
    state = target / ".fixpack"
    state.mkdir(exist_ok=True)
    entry = {"backup": 0, "mode": None, "owner": None, "sha256": None, **entry}
    (state / "journal.json").write_text(json.dumps({"dirs": list(dirs), "entries": [entry]}))
    if backup is not None:
        (state / "journal").mkdir(exist_ok=True)
        (state / "journal/0").write_bytes(backup)


PLANTED = {  # what a well-formed planted journal asked a rollback to do
    "another file's content": ({"path": "demo_pkg/__init__.py", "existed": True, "mode": 0o644}, b"planted\n", ()),
    "setuid mode": ({"path": MOD, "existed": True, "mode": 0o6777}, None, ()),
    "group-writable mode": ({"path": MOD, "existed": True, "mode": 0o666}, None, ()),
    "another owner": ({"path": MOD, "existed": True, "mode": 0o644, "owner": [1234, 1234]}, None, ()),
    "a folder it did not make": ({"path": MOD, "existed": True, "mode": 0o644}, None, ["demo_pkg/emptyx"]),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_journal_is_obeyed_only_for_what_the_profile_writes(builder, tmp_path, case):
    """Only the journal's paths were checked: a well-formed journal replaced any file of the target, set any
    mode (setuid included) and owner, and removed any empty folder. Each is damaged state now: exit 3 from
    apply, status and revert, and nothing on disk changed."""
    from fixpack import engine
    target = _pack(builder, tmp_path, "plain copy")
    assert engine.apply(builder.request(target)).ok
    (target / "demo_pkg/emptyx").mkdir()
    entry, backup, dirs = PLANTED[case]
    clean = (builder.base / "release" / MOD).read_bytes()
    _plant(target, entry, clean if backup is None else backup, dirs)
    before = snapshot(target), {p: os.stat(p).st_uid for p in target.rglob("*")}, (target / "demo_pkg/emptyx").is_dir()
    for run in (engine.apply, engine.status, engine.revert):
        code, message = _outcome(lambda: run(builder.request(target)))
        assert code == 3 and "journal.json is damaged: " in message, (run, message)
        now = snapshot(target), {p: os.stat(p).st_uid for p in target.rglob("*")}, (target / "demo_pkg/emptyx").is_dir()
        assert now == before, run


def test_a_killed_run_of_this_profile_still_rolls_back(builder, tmp_path):
    """The checks leave a journal fixpack wrote alone: a killed apply on a group-writable executable file is
    rolled back by the next run, bytes and mode."""
    target = _pack(builder, tmp_path, "plain copy")
    (target / MOD).chmod(0o775)
    clean = snapshot(target)
    killed = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "--pack", str(builder.pack), "-p", "p1",
                             "--root", f"demo={target}"], capture_output=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_FAULT_AT": "3"})
    assert killed.returncode == 137 and (target / ".fixpack/journal.json").exists()
    assert _cli(builder, target, "revert").returncode == 0
    assert snapshot(target) == clean


_NO_LINKS = ("import errno, os, runpy\n"
             "def _no(*a, **k):\n    raise OSError(errno.EXDEV, 'Invalid cross-device link')\n"
             "os.link = _no\nrunpy.run_module('fixpack.cli', run_name='__main__')\n")


def test_a_killed_run_whose_backups_are_copies_still_rolls_back_a_deleted_executable(builder, tmp_path):
    """Where the file system cannot hard-link (another mount), a backup is a copy. A killed apply that had
    deleted an executable file was refused on rollback as a planted journal: the copy was 0600, so the
    journal's mode 0755 looked like new rights. The copy now keeps the file's permission bits: killed at
    every write point in turn, the next run rolls back, bytes and mode."""
    base = numbered(30)
    release, source = builder.git_release({MOD: base, "demo_pkg/tool.py": base})
    before, after = {MOD: base, "demo_pkg/tool.py": base}, {MOD: base.replace("line 3\n", "three\n"), "demo_pkg/tool.py": None}
    diff = make_diff(before, after, tmp_path).replace("deleted file mode 100644", "deleted file mode 100755")
    builder.add_fix("one", before, after, diff=diff)  # the file it deletes is executable (what revert re-creates)
    builder.profile(["one"], extra_targets=source)
    builder.lock(release)
    target = tmp_path / "image"
    shutil.copytree(release, target, ignore=shutil.ignore_patterns(".git"))
    (target / "demo_pkg/_version.py").write_text(f"__version__ = '1.0'\n__commit_id__ = 'g{builder.commit}'\n")
    (target / "demo_pkg/tool.py").chmod(0o755)
    clean = snapshot(target)
    modes = {p: os.stat(p).st_mode for p in target.rglob("*")}
    args = ["apply", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={target}"]
    killed_at = 0
    for at in range(1, 40):
        run = subprocess.run([sys.executable, "-c", _NO_LINKS, *args], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_FAULT_AT": str(at)})
        if run.returncode == 0:
            break
        assert run.returncode == 137, run.stderr
        killed_at += (target / ".fixpack/journal.json").exists()
        back = _cli(builder, target, "revert")
        assert back.returncode == 0, (at, back.stderr)
        assert snapshot(target) == clean and {p: os.stat(p).st_mode for p in target.rglob("*")} == modes, at
    assert run.returncode == 0 and not (target / "demo_pkg/tool.py").exists() and killed_at
