"""A journal is untrusted input: a planted or damaged one never removes a file the release ships, never
changes a file this profile could not have written, nor its mode or owner beyond what it had, and its
recovery steps, run as printed, keep the release's files byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
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
    sha = hashlib.sha256(backup).hexdigest() if backup is not None and entry.get("existed") else None
    entry = {"backup": 0, "mode": None, "owner": None, "sha256": sha, **entry}  # a run records the sha256
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
    "a release file said to be new": ({"path": MOD, "existed": False}, None, ()),  # its rollback deleted MOD
    "no sha256 of a file that existed": ({"path": MOD, "existed": True, "mode": 0o644, "sha256": None}, None, ()),
    # an applied image's manifest said to be new (a first apply's journal shape), with the sha256 of other bytes than
    # it holds (a journal left from another run): its rollback deleted the manifest
    "the manifest said to be new, other bytes": ({"path": ".fixpack/demo.manifest.json", "existed": False,
                                                  "sha256": hashlib.sha256(b"{}").hexdigest()}, None, ()),
    "the manifest said to be new, another size": ({"path": ".fixpack/demo.manifest.json", "existed": False,
                                                   "sha256": hashlib.sha256(b"{}").hexdigest(), "size": 2}, None, ()),
    "a size that is no number of bytes": ({"path": MOD, "existed": True, "mode": 0o644, "size": -1}, None, ()),
    # fewer bits than the file had (its backup keeps them): a rollback left it unreadable (a fresh user's finding)
    "mode 0": ({"path": MOD, "existed": True, "mode": 0o000}, None, ()),
}


def test_a_created_file_of_another_size_than_the_journal_records_is_not_read(tmp_path, monkeypatch):
    """The size a run records for a file it creates is compared first: a file of another size (a huge one planted
    where the journal names a created file) is damaged state without being hashed under the run lock."""
    from fixpack import journal_checks
    from fixpack.errors import DamagedStateError

    (tmp_path / "big.bin").write_bytes(b"x" * 4096)
    sha = hashlib.sha256(b"x" * 10).hexdigest()
    monkeypatch.setattr(journal_checks, "sha256_regular", lambda *a, **kw: pytest.fail("the file was hashed"))
    with pytest.raises(DamagedStateError) as exc:
        journal_checks.check_created(tmp_path, "big.bin", sha, 10, lambda what: DamagedStateError(tmp_path, what))
    assert "holds other bytes now (4096 bytes, not 10)" in str(exc.value)
    monkeypatch.undo()
    (tmp_path / "big.bin").write_bytes(b"x" * 10)
    journal_checks.check_created(tmp_path, "big.bin", sha, 10, lambda what: DamagedStateError(tmp_path, what))


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


def test_a_journal_path_of_the_manifest_s_name_and_a_newline_is_said_as_a_control_character(builder, tmp_path):
    """The manifest's name was checked with re.match and "$", which a newline may end: a journal path
    ``.fixpack/demo.manifest.json`` and a newline was taken for the manifest's, its newline printed as it was,
    breaking the message's line. It is no canonical path (exit 3, the character named, nothing written)."""
    from fixpack import engine
    target = _pack(builder, tmp_path, "plain copy")
    assert engine.apply(builder.request(target)).ok
    _plant(target, {"path": ".fixpack/demo.manifest.json\n", "existed": False,
                    "sha256": hashlib.sha256(b"{}").hexdigest()}, (builder.base / "release" / MOD).read_bytes())
    before = snapshot(target)
    for run in (engine.apply, engine.status, engine.revert):
        code, message = _outcome(lambda: run(builder.request(target)))
        assert code == 3 and "'.fixpack/demo.manifest.json\\n' is a control or formatting character, U+000A" in message, \
            (run, message)
        assert snapshot(target) == before, run


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


def _two_targets_on_one_root(builder):
    """Targets demo and other in one root (as a site-packages holds vllm and vllm-gaudi), a fix each; locked."""
    from fixpack import engine

    builder.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    builder.add_fix("two", {"other_pkg/b.py": "y = 1\n"}, {"other_pkg/b.py": "y = 2\n"}, target="other")
    other = '[targets.other]\npackage = "other_pkg"\nversion = "1.0"\ncommit = "abcdef12"\n'
    builder.profile(["one", "two"], extra_targets=other)

    def tree(name: str):
        root = builder.tree(name, {"demo_pkg/a.py": "x = 1\n"})
        (root / "other_pkg").mkdir()
        (root / "other_pkg/b.py").write_text("y = 1\n")
        (root / "other_pkg/_version.py").write_text((root / "demo_pkg/_version.py").read_text())
        return root

    clean = tree("clean")
    engine.write_lock(engine.Request(pack_root=builder.pack, profile="p1", roots={"demo": clean, "other": clean}))
    return tree("image")


def _killed_apply(builder, image):
    """An apply of both targets killed at each write point in turn until one leaves a journal naming other's
    files (the second target's transaction): the journal a genuine run left."""
    for at in range(1, 20):
        shutil.rmtree(image / ".fixpack", ignore_errors=True)
        for p, text in (("demo_pkg/a.py", "x = 1\n"), ("other_pkg/b.py", "y = 1\n")):
            (image / p).write_text(text)
        killed = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "--pack", str(builder.pack), "-p", "p1",
                                 "--root", f"demo={image}", "--root", f"other={image}"], capture_output=True,
                                env={**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_FAULT_AT": str(at)})
        journal = image / ".fixpack/journal.json"
        if killed.returncode == 137 and journal.exists() and "other_pkg/b.py" in journal.read_text() \
                and (image / "other_pkg/b.py").read_text() == "y = 2\n":
            return
    raise AssertionError("no write point left a journal of other's files")


def test_a_genuine_journal_of_a_run_with_more_targets_is_rolled_back(builder):
    """A killed run of both targets on one root leaves a journal of the second target's files; a run with
    --target demo refused it as planted (exit 3). The targets --target leaves out are located as that run
    located them, and their files on this root are files a run of this profile could have written: the
    journal is rolled back (other's file back to the release), then demo is applied."""
    from fixpack import engine

    image = _two_targets_on_one_root(builder)
    _killed_apply(builder, image)
    roots = {"demo": image, "other": image}
    st = engine.status(engine.Request(pack_root=builder.pack, profile="p1", roots=roots, only_targets=("demo",)))
    assert st.exit_code == 0 and "journal" in " ".join(st.targets[0].notes), st.as_dict()
    # both targets named: demo's look at the journal met other's manifest in it (exit 2, "not a canonical path")
    both = engine.status(engine.Request(pack_root=builder.pack, profile="p1", roots=roots))
    assert both.exit_code == 0, both.as_dict()
    r = engine.apply(engine.Request(pack_root=builder.pack, profile="p1", roots=roots, only_targets=("demo",)))
    assert r.ok, r.as_dict()
    assert (image / "other_pkg/b.py").read_text() == "y = 1\n" and (image / "demo_pkg/a.py").read_text() == "x = 2\n"
    assert not (image / ".fixpack/journal.json").exists()


def test_a_journal_naming_a_skipped_targets_files_is_refused_when_that_target_is_not_on_this_root(builder, tmp_path):
    """The same journal, with the left-out target not on this root (its --root elsewhere), or not its pinned
    release: no run of this profile wrote those files here; damaged state, exit 3, nothing written."""
    from fixpack import engine
    from fixpack.errors import FixpackError

    image = _two_targets_on_one_root(builder)
    _killed_apply(builder, image)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(image, elsewhere, ignore=shutil.ignore_patterns(".fixpack"))
    before = snapshot(image)
    for roots in ({"demo": image, "other": elsewhere}, {"demo": image}):
        req = engine.Request(pack_root=builder.pack, profile="p1", roots=roots, only_targets=("demo",))
        for run in (engine.apply, engine.status, engine.revert):
            with pytest.raises(FixpackError, match="journal.json is damaged") as exc:
                run(req)
            assert exc.value.exit_code == 3
            assert snapshot(image) == before
    (image / "other_pkg/_version.py").write_text("__version__ = '9.9'\n__commit_id__ = 'g999999999'\n")
    before = snapshot(image)
    with pytest.raises(FixpackError, match="journal.json is damaged"):
        engine.apply(engine.Request(pack_root=builder.pack, profile="p1", roots={"demo": image, "other": image},
                                    only_targets=("demo",)))
    assert snapshot(image) == before


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


def test_a_backup_hard_linked_from_outside_is_never_given_a_mode_or_a_name_in_the_target(builder, tmp_path):
    """A planted backup that is a hard link to a file outside the target (``ln outside/secret
    .fixpack/journal/0``) with a well-formed entry: the rollback chmodded that outside file (0600 -> 0644)
    and renamed its inode into the target, which then shared it. Now a backup whose inode has a name
    elsewhere is copied: the target file gets the bytes as a new file, the outside file keeps its mode, its
    bytes and its one name."""
    from fixpack import engine
    target = _pack(builder, tmp_path, "plain copy")
    assert engine.apply(builder.request(target)).ok
    secret = tmp_path / "outside/secret"
    secret.parent.mkdir()
    secret.write_bytes(b"SECRET\n")
    secret.chmod(0o600)
    (target / ".fixpack/journal").mkdir(parents=True)
    os.link(secret, target / ".fixpack/journal/0")
    entry = {"path": MOD, "existed": True, "mode": 0o600, "sha256": hashlib.sha256(b"SECRET\n").hexdigest()}
    _plant(target, entry)  # (its backup's mode: another is refused, the rollback gives a file no mode it never had)
    assert _cli(builder, target, "revert").returncode in (0, 3)
    st = os.stat(secret)
    assert (st.st_mode & 0o777, st.st_nlink, secret.read_bytes()) == (0o600, 1, b"SECRET\n")
    assert os.stat(target / MOD).st_ino != st.st_ino


def test_a_refusal_after_a_rollback_does_not_say_nothing_was_written(builder, tmp_path):
    """A journal whose one entry removes the manifest (the shape a first apply's journal has) is rolled back;
    revert then finds the fixes with no manifest and refuses. It said "nothing was written", though the
    rollback had removed the manifest: it now says nothing else was, and that the rollback came first."""
    target = _pack(builder, tmp_path, "plain copy")
    assert _cli(builder, target, "apply").returncode == 0
    manifest = (target / ".fixpack/demo.manifest.json").read_bytes()  # as a first apply's journal records it
    _plant(target, {"path": ".fixpack/demo.manifest.json", "existed": False,
                    "sha256": hashlib.sha256(manifest).hexdigest()})
    said = _cli(builder, target, "revert")
    message = " ".join(said.stderr.split())
    assert said.returncode == 3 and "no manifest records it. To revert: record it with: " in message, said.stderr
    assert f"an interrupted run was rolled back first in {target} (1 file restored), and nothing else was written" \
        in message, message
    assert "nothing was written" not in message


NEW = "demo_pkg/sub/new.py"  # a module the fix adds, in a folder the run makes


def _adds_pack(builder, tmp_path):
    release, source = builder.git_release({MOD: numbered(30)})
    builder.add_fix("adds", {NEW: None}, {NEW: "X = 1\n"})
    builder.profile(["adds"], extra_targets=source)
    builder.lock(release)
    target = tmp_path / "image"
    shutil.copytree(release, target, ignore=shutil.ignore_patterns(".git"))
    (target / "demo_pkg/_version.py").write_text(f"__version__ = '1.0'\n__commit_id__ = 'g{builder.commit}'\n")
    return target


def _dirs(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir())


def _run(builder, target, command, fault=None):
    env = {**os.environ, "PYTHONPATH": str(REPO)} | ({"FIXPACK_FAULT_AT": str(fault)} if fault else {})
    return subprocess.run([sys.executable, "-m", "fixpack.cli", command, "--pack", str(builder.pack), "-p", "p1",
                           "--root", f"demo={target}"], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_killed_run_s_new_folder_goes_whole_and_an_older_journal_is_still_rolled_back(builder, tmp_path, command):
    """An apply (or a revert) killed at every point, the new module demo_pkg/sub/new.py imported before the next run
    (its __pycache__ made), then revert: the folders the apply made stayed, empty but for __pycache__ (the target was
    not the one before). And a killed run's journal from an older fixpack, which recorded no sha256 for a file the
    run created, was refused as damaged when the sha256 check came: it is rolled back as before."""
    target = _adds_pack(builder, tmp_path)
    clean, dirs = snapshot(target), _dirs(target)
    journal, halfway = target / ".fixpack/journal.json", 0
    for older in (False, True):
        for n in range(1, 40):
            if command == "revert":
                assert _run(builder, target, "apply").returncode == 0
            killed = _run(builder, target, command, n)
            if (target / NEW).exists():  # the user's import before the next run
                (target / "demo_pkg/sub/__pycache__").mkdir(exist_ok=True)
                (target / "demo_pkg/sub/__pycache__/new.cpython-311.pyc").write_bytes(b"bytecode of the import\n")
            if killed.returncode == 137 and journal.exists():  # killed half way
                halfway += 1
                doc = json.loads(journal.read_text())
                created = [e for e in doc["entries"] if not e["existed"]]
                assert all(e["sha256"] for e in created), doc  # this fixpack records them
                if older and created:
                    journal.write_text(json.dumps({**doc, "entries": [{**e, "sha256": None} if not e["existed"]
                                                                      else e for e in doc["entries"]]}))
            said = _run(builder, target, "revert")
            assert said.returncode == 0, (n, said.stderr)
            assert snapshot(target) == clean and _dirs(target) == dirs, (older, n, _dirs(target))
            if killed.returncode != 137:
                assert killed.returncode == 0, killed.stderr
                break
    assert halfway >= 4


class _Killed(BaseException):
    pass


def _rollback_killed_at_the_journal(target, monkeypatch):
    """The rollback of ``target``'s journal, in this process, killed as it removes the journal (every entry done)."""
    from fixpack import rollback, state
    journal = state.journal_path(target)

    def dies(path):
        if path == journal:
            raise _Killed
        os.unlink(path)

    with monkeypatch.context() as m:
        m.setattr(rollback, "unlink", dies)
        with pytest.raises(_Killed):
            rollback.recover(target)


def test_a_rollback_killed_as_it_removes_the_journal_has_removed_the_run_s_folders(builder, tmp_path, monkeypatch):
    """The rollback removed the journal, then the folders the run made: one killed between them left those folders
    for good (the next run had no journal to say so). They go first now."""
    target = _adds_pack(builder, tmp_path)
    clean, dirs = snapshot(target), _dirs(target)
    journal = target / ".fixpack/journal.json"
    for n in range(1, 40):
        if _run(builder, target, "apply", n).returncode == 137 and journal.exists() and (target / NEW).exists():
            break
        assert _run(builder, target, "revert").returncode == 0
    else:
        pytest.fail("no kill point left the journal and the new file")
    _rollback_killed_at_the_journal(target, monkeypatch)
    assert journal.exists() and not (target / "demo_pkg/sub").exists()
    assert _run(builder, target, "revert").returncode == 0
    assert snapshot(target) == clean and _dirs(target) == dirs


def test_a_rollback_run_again_keeps_the_bytecode_it_put_back(builder, tmp_path, monkeypatch):
    """demo_pkg/__pycache__ (mode 750) held only the patched module's .pyc (mode 600) before a killed apply; its
    rollback put mod.py back, dropped the stale .pyc, then put the .pyc back from its backup, and was killed before
    its journal went. The next run found both entries put back, dropped the .pyc again for mod.py, and nothing put it
    back: the .pyc and its folder were gone. An entry a killed rollback put back is left as it is now."""
    target = _pack(builder, tmp_path, "plain copy")
    cache = target / "demo_pkg/__pycache__"
    cache.mkdir()
    (cache / "mod.cpython-311.pyc").write_bytes(b"bytecode of the release's mod.py\n")
    (cache / "mod.cpython-311.pyc").chmod(0o600)
    cache.chmod(0o750)
    clean = snapshot(target)
    journal = target / ".fixpack/journal.json"
    kept = tmp_path / "kept"
    shutil.copytree(target, kept)
    tried = 0
    for n in range(1, 40):  # every kill point of the apply whose journal names the .pyc: mod.py replaced or not yet
        shutil.rmtree(target)
        shutil.copytree(kept, target)
        killed = _run(builder, target, "apply", n)
        if killed.returncode != 137:
            break
        if journal.exists() and ".pyc" in journal.read_text():
            tried += 1
            _rollback_killed_at_the_journal(target, monkeypatch)
            assert _run(builder, target, "revert").returncode == 0  # the rollback run again, nothing to revert
            assert snapshot(target) == clean and stat.S_IMODE(cache.stat().st_mode) == 0o750, n
    assert tried >= 2


def test_a_file_where_a_folder_of_a_file_to_put_back_was_is_damaged_state_not_an_internal_error(builder, tmp_path):
    """A revert killed once its journal was written (it deletes demo_pkg/sub/new.py), then demo_pkg/sub made a file:
    the next run put some files back, then stopped with an internal error (exit 1) on that folder, at every run
    after. It is damaged state now, named, before anything is written."""
    target = _adds_pack(builder, tmp_path)
    journal = target / ".fixpack/journal.json"
    for n in range(1, 40):
        assert _run(builder, target, "apply").returncode == 0
        if _run(builder, target, "revert", n).returncode == 137 and journal.exists():
            break
        assert _run(builder, target, "revert").returncode == 0
    else:
        pytest.fail("no kill point left the journal")
    shutil.rmtree(target / "demo_pkg/sub")
    (target / "demo_pkg/sub").write_text("a file now\n")
    before = snapshot(target)
    for command in ("revert", "apply", "status"):
        said = _run(builder, target, command)
        message = " ".join(said.stderr.split())
        assert said.returncode == 3, (command, said.stderr)
        assert "demo_pkg/sub is not a folder, but demo_pkg/sub/new.py goes in it" in message, message
        assert snapshot(target) == before


def test_a_created_file_whose_folder_is_a_file_now_counts_as_absent(builder, tmp_path):
    """A journal's created file demo_pkg/sub/new.py where demo_pkg/sub is a regular file now: the file cannot be
    there, so its rollback has nothing to remove; it said "cannot be read (Not a directory): a rollback would delete
    it", exit 3."""
    target = _adds_pack(builder, tmp_path)
    (target / "demo_pkg/sub").write_text("a file, not a folder\n")
    _plant(target, {"path": NEW, "existed": False, "sha256": hashlib.sha256(b"X = 1\n").hexdigest()})
    said = _cli(builder, target, "status")
    assert "cannot be read" not in said.stderr and "damaged" not in said.stderr, said.stderr
    assert (target / "demo_pkg/sub").read_text() == "a file, not a folder\n"



def test_a_refusal_after_an_empty_journal_was_removed_does_not_say_nothing_was_written(builder, tmp_path):
    """Found by a fresh user: a journal with no entry (a killed run's, emptied by hand) and its backups were removed
    by revert's rollback, which then refused over the unrecorded fixes and said "nothing was written"."""
    target = _pack(builder, tmp_path, "plain copy")
    assert _cli(builder, target, "apply").returncode == 0
    (target / ".fixpack/demo.manifest.json").unlink()
    (target / ".fixpack/journal").mkdir()
    (target / ".fixpack/journal/0").write_bytes(b"a backup no entry names\n")
    (target / ".fixpack/journal.json").write_text(json.dumps({"dirs": [], "entries": []}))
    said = _cli(builder, target, "revert")
    message = " ".join(said.stderr.split())
    assert said.returncode == 3 and not (target / ".fixpack").exists(), said.stderr
    assert f"an interrupted run was rolled back first in {target} (no file needed restoring), and nothing else was " \
           f"written" in message, message
    assert "nothing was written" not in message


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_folder_at_a_temp_file_s_path_is_refused_before_anything_is_written(builder, tmp_path, command):
    """A folder where a file's temp file goes (.NAME.fixpack-tmp): the write failed there (exit 5), the rollback too
    (it removes a killed write's temp file first: EISDIR), and every later apply and revert was an internal error
    (exit 1) over the journal it left (a fresh user's finding). Now the run is refused before it writes (exit 3),
    and a journal left by a killed run with such a folder is damaged state, named, before the rollback touches
    anything; once the folder is moved away, the runs go on."""
    target = _pack(builder, tmp_path, "plain copy")
    if command == "revert":
        assert _run(builder, target, "apply").returncode == 0
    folder = target / "demo_pkg/.mod.py.fixpack-tmp"
    folder.mkdir()
    (folder / "kept").write_text("mine\n")
    before = snapshot(target)
    said = _run(builder, target, command)
    assert said.returncode == 3 and f"{folder} is a folder where fixpack writes" in " ".join(said.stderr.split()), \
        said.stderr
    assert snapshot(target) == before
    shutil.rmtree(folder)
    journal = target / ".fixpack/journal.json"
    for n in range(1, 40):  # a run killed once its journal is written, then the folder made
        if _run(builder, target, command, n).returncode == 137 and journal.exists():
            break
        assert _run(builder, target, "revert" if command == "apply" else "apply").returncode == 0
    else:
        pytest.fail("no kill point left the journal")
    folder.parent.mkdir(exist_ok=True)
    folder.mkdir()
    before = snapshot(target)
    for again in ("revert", "apply", "status"):
        said = _run(builder, target, again)
        message = " ".join(said.stderr.split())
        assert said.returncode == 3 and f"{folder} is a folder where " in message, (again, message)
        steps = message.split("In this order: ", 1)[-1] if "In this order: " in message else ""
        assert str(folder) not in steps, steps  # (its rm -f failed on the folder, and stopped the steps after it)
        assert snapshot(target) == before
    folder.rmdir()
    assert _run(builder, target, "revert").returncode == 0 and not journal.exists()


@pytest.mark.parametrize("what", ["a link out of the target", "a FIFO"])
def test_damaged_journal_steps_never_write_through_a_link_nor_wait_on_a_fifo(builder, tmp_path, what):
    """Found by a fresh user: a damaged journal's steps (`cp --parents` from the release copy) wrote the release's
    bytes through a link at a fixed file to the file it points to, outside the target (and left the link), or waited
    forever on a FIFO there. `cp --remove-destination` now takes the link or FIFO away and writes a file."""
    target = _pack(builder, tmp_path, "plain copy")
    clean = snapshot(target)
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM\n")
    (target / MOD).unlink()
    if what == "a FIFO":
        os.mkfifo(target / MOD)
    else:
        (target / MOD).symlink_to(victim)
    (target / ".fixpack").mkdir()
    entry = {"backup": None, "existed": False, "mode": None, "owner": None, "path": "demo_pkg/__init__.py",
             "sha256": None}
    (target / ".fixpack/journal.json").write_text(json.dumps({"dirs": [], "entries": [entry]}))
    said = _cli(builder, target, "revert")
    assert said.returncode == 3, said.stderr
    for step in _steps(" ".join(said.stderr.split())):
        subprocess.run(["bash", "-c", step], cwd=tmp_path, check=True, capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert victim.read_text() == "VICTIM\n" and snapshot(target) == clean and not (target / MOD).is_symlink()


def test_a_rollback_removes_only_the_killed_write_s_own_temp_file(builder, tmp_path):
    """Found by a fresh user: the rollback of a killed run removed whatever was at the temp path of every file its
    journal names (`.NAME.fixpack-tmp`), a user's file or FIFO put there since included. A killed run can have left
    a temp file beside one file only, the one it was writing (the first its journal names that it had not replaced),
    and only a regular file: anything else, or anything beside another file, is someone's. It is kept, and the write
    after the rollback refuses it (exit 3); moved away, the run goes on."""
    target = _pack(builder, tmp_path, "plain copy")
    journal = target / ".fixpack/journal.json"
    assert _run(builder, target, "apply", 2).returncode == 137 and journal.exists()  # the journal, no file replaced
    paths = [e["path"] for e in json.loads(journal.read_text())["entries"]]
    assert paths[0] == MOD, paths
    ours = target / "demo_pkg/.mod.py.fixpack-tmp"
    ours.write_text("half a write\n")  # the one the killed run was writing: its temp file
    fifo = target / "demo_pkg/.__init__.py.fixpack-tmp"  # (no file of the run's: kept as it is, never opened)
    os.mkfifo(fifo)
    mine = target / ".fixpack/.demo.manifest.json.fixpack-tmp"  # beside the manifest, which the run did not reach
    mine.write_text("MINE\n")
    before = snapshot(target)
    for dry in (["status"], ["apply", "--dry-run"]):  # they say it too, the killed run's own file left to its rollback
        said = subprocess.run([sys.executable, "-m", "fixpack.cli", *dry, "--pack", str(builder.pack), "-p", "p1",
                               "--root", f"demo={target}"], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        message = " ".join(said.stderr.split())
        assert said.returncode == 3 and f"{mine} is where fixpack writes" in message and str(ours) not in message, \
            (dry, message)
        assert snapshot(target) == before and fifo.is_fifo()
    said = _run(builder, target, "apply")
    message = " ".join(said.stderr.split())
    assert said.returncode == 3 and f"{mine} is where fixpack writes" in message, message
    assert not ours.exists() and mine.read_text() == "MINE\n" and fifo.is_fifo() and not journal.exists()
    mine.unlink()
    assert _run(builder, target, "apply").returncode == 0


def test_one_folder_under_two_paths_is_refused_as_such(builder, tmp_path):
    """A fresh user: --root demo=S --root other=S2, S2 a bind mount of S, made apply and revert wait on their own lock
    and say that another run held it (exit 5, never to succeed), while status said would-apply. The two roots are one
    folder: exit 2 before anything is read or written, naming both and what to give instead."""
    image = _two_targets_on_one_root(builder)
    twin = tmp_path / "twin"
    twin.mkdir()
    if subprocess.run(["mount", "--bind", str(image), str(twin)], capture_output=True).returncode != 0:
        pytest.skip("no bind mount here (needs root and mount rights)")
    try:
        before = snapshot(image)
        for command in ("status", "apply", "revert"):
            r = subprocess.run([sys.executable, "-m", "fixpack.cli", command, "--pack", str(builder.pack), "-p", "p1",
                                "--root", f"demo={image}", "--root", f"other={twin}"], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
            said = " ".join(r.stderr.split())
            assert r.returncode == 2 and snapshot(image) == before, (command, said)
            assert f"targets demo ({image}) and other ({twin}) are one folder under two paths" in said, said
            assert f"--root demo={image} --root other={image}" in said, said
    finally:
        subprocess.run(["umount", str(twin)], check=True)
