"""A write that fails part-way (disk full, read-only remount, permission, I/O error) is rolled back inside
the same run: exit 5 naming the file and the errno's meaning, every byte of the target as before, no temp
file left. Faults come from the engine's own hook ($FIXPACK_IO_FAULT), which fails the N-th I/O call the
way the kernel would (a failing write has written part of its bytes)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from conftest import numbered, snapshot, with_fault

from fixpack import engine, fsio, nofollow
from fixpack.errors import EnvironmentProblem

MOD = "demo_pkg/mod.py"
ERRNOS = ("ENOSPC", "EROFS", "EACCES", "EIO")


@pytest.fixture
def setup(builder):
    base = numbered(30)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {MOD: base, "demo_pkg/b.py": base},
                    {MOD: base.replace("line 20\n", "twenty\n"), "demo_pkg/b.py": base.replace("line 9\n", "nine\n"),
                     "demo_pkg/new/c.py": "c\n"})
    builder.profile(["one", "two"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base, "demo_pkg/b.py": base})
    (target / "demo_pkg/__pycache__").mkdir()
    (target / "demo_pkg/__pycache__/mod.cpython-311.pyc").write_bytes(b"stale")  # its removal is a write too
    return builder, target


def _io_points(monkeypatch: pytest.MonkeyPatch, run) -> int:  # type: ignore[no-untyped-def]
    report, exc = with_fault(monkeypatch, "1000000:EIO", run)
    assert exc is None and report.ok
    return fsio.io_calls()


def _temp_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.endswith(fsio.TMP_SUFFIX)]


def _all(root: Path) -> tuple[dict, list[str]]:
    """Every file with bytes and mode, and every folder (a rolled-back run leaves no new folder either)."""
    return snapshot(root), sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_failing_write_at_every_io_call_is_rolled_back(setup, monkeypatch, command):
    b, target = setup
    if command == "revert":
        assert engine.apply(b.request(target)).ok
        (target / "demo_pkg/__pycache__/b.cpython-311.pyc").write_bytes(b"stale")
    run = (lambda: engine.apply(b.request(target))) if command == "apply" else (lambda: engine.revert(b.request(target)))
    before = _all(target)
    points = _io_points(monkeypatch, run)
    # put the target back where it was (the counting run wrote); then fail each I/O call in turn
    assert (engine.revert if command == "apply" else engine.apply)(b.request(target)).ok
    stale = "b" if command == "revert" else "mod"  # the counting run removed it
    (target / f"demo_pkg/__pycache__/{stale}.cpython-311.pyc").write_bytes(b"stale")
    assert _all(target) == before
    assert points >= 20
    for n in range(1, points + 1):
        name = ERRNOS[n % len(ERRNOS)]
        report, exc = with_fault(monkeypatch, f"{n}:{name}", run)
        if n == points and exc is None:  # the folder's fsync after the commit: the run is done, not undone
            assert report.ok
            break
        assert report is None and isinstance(exc, EnvironmentProblem), f"I/O call {n} ({name}): {report or exc}"
        assert exc.exit_code == 5
        message = str(exc)
        assert os.strerror(getattr(errno, name)) in message and f"({name})" in message
        assert str(target) in message  # names the file
        assert _all(target) == before, f"I/O call {n} ({name}): the target changed"
        assert not _temp_files(target), f"I/O call {n} ({name}): temp files left"


@pytest.mark.parametrize("linkable", [True, False])
def test_backups_are_links_or_copies_and_a_killed_write_restores_either(setup, monkeypatch, linkable):
    """A backup is a hard link to the original (nothing copied or flushed) or, where the file system cannot
    link (another mount: EXDEV), a copy; a run that fails after the first target write restores from it."""
    b, target = setup
    before = _all(target)
    real_link, linked = os.link, []

    def link(src, dst, **kw):  # type: ignore[no-untyped-def]
        if not linkable:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), str(dst))
        linked.append(os.stat(src, dir_fd=kw.get("src_dir_fd")).st_ino)  # (a name in a folder's descriptor)
        return real_link(src, dst, **kw)
    monkeypatch.setattr(os, "link", link)
    real_rename = nofollow.rename_at  # (a target's file is renamed into place in its folder: nofollow.write_under)

    def replace_then_fail(fd, src, dst, path):  # type: ignore[no-untyped-def]
        real_rename(fd, src, dst, path)
        if dst == "mod.py":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
    monkeypatch.setattr(nofollow, "rename_at", replace_then_fail)
    with pytest.raises(EnvironmentProblem):
        engine.apply(b.request(target))
    assert _all(target) == before and bool(linked) == linkable


def test_a_rollback_that_cannot_finish_leaves_the_journal_for_the_next_run(setup, monkeypatch):
    b, target = setup
    before = _all(target)
    points = _io_points(monkeypatch, lambda: engine.apply(b.request(target)))
    assert engine.revert(b.request(target)).ok
    (target / "demo_pkg/__pycache__/mod.cpython-311.pyc").write_bytes(b"stale")
    journal_writes = 0
    for n in range(1, points + 1):
        # from call n on, every I/O call fails (a file system remounted read-only mid-run)
        report, exc = with_fault(monkeypatch, f"{n}:EROFS+", lambda: engine.apply(b.request(target)))
        if n == points and exc is None:  # only the fsync after the commit failed
            break
        assert isinstance(exc, EnvironmentProblem) and exc.exit_code == 5
        if "rolling back failed too" in str(exc):
            journal_writes += 1
            assert "journal" in str(exc) and (target / ".fixpack/journal.json").is_file()
            # the next run (here a revert) rolls back first: every byte as before
            assert engine.revert(b.request(target)).ok
        assert {k: v for k, v in _all(target)[0].items()} == before[0], f"from I/O call {n}"
    assert journal_writes > 0


def test_free_space_is_checked_before_anything_is_written(setup, monkeypatch):
    b, target = setup
    before = _all(target)
    real = os.statvfs(target)

    class Full:
        def __getattr__(self, name: str) -> int:
            return 1 if name in ("f_bfree", "f_bavail") else getattr(real, name)

    monkeypatch.setattr(os, "statvfs", lambda p: Full())
    with pytest.raises(EnvironmentProblem, match="not enough space.*nothing was changed"):
        engine.apply(b.request(target))
    assert _all(target) == before

    class NoInodes:  # space enough, but no file left to make (found by a fresh user: the free inodes went unsaid)
        def __getattr__(self, name: str) -> int:
            return 3 if name in ("f_ffree", "f_favail") else getattr(real, name)

    monkeypatch.setattr(os, "statvfs", lambda p: NoInodes())
    with pytest.raises(EnvironmentProblem, match=r"\(needs up to \d+ inodes \(files\), 3 free\); nothing was changed"):
        engine.apply(b.request(target))
    assert _all(target) == before


def test_an_unwritable_pycache_is_refused_before_writing(setup, monkeypatch):
    """A root-owned __pycache__ for a non-root user: refused up front, not half way through."""
    b, target = setup
    before = _all(target)
    real = os.access
    cache = str(target / "demo_pkg/__pycache__")
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if str(p) == cache and m == os.W_OK
                        else real(p, m, *a, **k))
    with pytest.raises(EnvironmentProblem, match="__pycache__"):
        engine.apply(b.request(target))
    assert _all(target) == before


def test_backups_swapped_for_a_link_at_the_end_of_a_run_are_not_followed(setup, monkeypatch, tmp_path):
    """The backups folder is removed at the end of a run: a link put in its place meanwhile (state is
    untrusted) is not followed into what it points at (shutil.rmtree refused links; a scandir did not)."""
    from fixpack import transaction

    b, target = setup
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("not fixpack's\n")
    backups = target / ".fixpack/journal"

    def swap() -> None:
        if backups.is_dir() and not backups.is_symlink() and not (target / ".fixpack/journal.json").exists():
            backups.rename(tmp_path / "moved-backups")
            backups.symlink_to(victim)
    monkeypatch.setattr(transaction, "fault_point", swap)
    assert engine.apply(b.request(target)).ok
    assert backups.is_symlink()  # the swap happened at the end of the run
    assert (victim / "keep.txt").read_text() == "not fixpack's\n"


def test_ctrl_c_at_every_write_point_leaves_the_target_before_or_done(setup, monkeypatch):
    """Ctrl-C (SIGINT) at each write point of a run: the run puts every file back before it ends (exit 5,
    'interrupted'; it left a journal and a half-applied target until the next run), or, once the journal
    is gone, says the run was complete; no journal or backup is left either way."""
    import shutil

    from fixpack import transaction

    builder, target = setup
    before = _all(target)
    probe = target.parent / "probe"
    shutil.copytree(target, probe)
    calls = {"n": 0, "at": 0}

    def point() -> None:
        calls["n"] += 1
        if calls["n"] == calls["at"]:
            raise KeyboardInterrupt

    monkeypatch.setattr(transaction, "fault_point", point)
    assert engine.apply(builder.request(probe)).ok
    points, done = calls["n"], _all(probe)
    assert points >= 5
    outcomes = set()
    for at in range(1, points + 1):
        calls.update(n=0, at=at)
        with pytest.raises(EnvironmentProblem, match=r"interrupted \(Ctrl-C, SIGINT\)") as caught:
            engine.apply(builder.request(target))
        assert "EINTR" not in str(caught.value) and "let the run finish" not in str(caught.value), str(caught.value)
        complete = "writes were complete" in str(caught.value)
        outcomes.add(complete)
        assert caught.value.exit_code == 5 and _all(target) == (done if complete else before), at
        assert not (target / ".fixpack/journal.json").exists() and not (target / ".fixpack/journal").exists()
        assert complete == (at == points), at  # only the last point lies after the journal went
    assert outcomes == {True, False}


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["apply", "revert"])
def test_ctrl_c_again_while_the_write_is_put_back_does_not_cut_it(setup, monkeypatch, command, sig):
    """Ctrl-C at a write point, then again at the rollback's start, at each of its I/O calls and at its end (a
    fresh user pressed it three times: the second cut the rollback, leaving the target half written with its
    journal, exit 5 saying no write was under way). Real signals, at every write point: the run is put back whole
    (or was complete), exit 5, no journal left. SIGTERM (a CI timeout, docker stop) the same, exit 143: it ended the
    process where it stood, the target half written with its journal until the next run (a fresh user's finding)."""
    import shutil
    import signal

    from fixpack.errors import Terminated

    signum = getattr(signal, sig)
    kind, said_as = (EnvironmentProblem, "interrupted (Ctrl-C, SIGINT)") if sig == "SIGINT" else \
        (Terminated, "terminated (SIGTERM)")

    from fixpack import transaction

    builder, target = setup
    if command == "revert":
        assert engine.apply(builder.request(target)).ok
    run = getattr(engine, command)
    before = _all(target)
    probe = target.parent / "probe"
    shutil.copytree(target, probe)
    calls, rolling = {"n": 0, "at": 0}, {"on": False}

    def point() -> None:
        calls["n"] += 1
        if calls["n"] == calls["at"]:
            os.kill(os.getpid(), signum)

    real_recover, real_io = transaction.recover, fsio.io_point

    def recover(root):  # type: ignore[no-untyped-def]
        rolling["on"] = True
        os.kill(os.getpid(), signum)
        try:
            return real_recover(root)
        finally:
            os.kill(os.getpid(), signum)
            rolling["on"] = False

    def io(path):  # type: ignore[no-untyped-def]
        if rolling["on"]:
            os.kill(os.getpid(), signum)
        return real_io(path)

    monkeypatch.setattr(transaction, "fault_point", point)
    monkeypatch.setattr(transaction, "recover", recover)
    monkeypatch.setattr(fsio, "io_point", io)
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a shell's foreground run has it
    try:
        assert run(builder.request(probe)).ok
        points, done = calls["n"], _all(probe)
        assert points >= 4
        for at in range(1, points + 1):
            calls.update(n=0, at=at)
            try:
                run(builder.request(target))
                pytest.fail(f"no interrupt said at write point {at}")
            except kind as exc:
                said = str(exc)
                assert exc.exit_code == (5 if sig == "SIGINT" else 143)
            except KeyboardInterrupt:  # (one that escapes would end the test session)
                pytest.fail(f"a Ctrl-C cut the rollback of the interrupt at write point {at}")
            assert said_as in said, said
            complete = "writes were complete" in said
            assert _all(target) == (done if complete else before), (at, said)
            assert not (target / ".fixpack/journal.json").exists() and not (target / ".fixpack/journal").exists()
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back after the write
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, old)


def test_ctrl_c_outside_a_write_is_exit_5_not_a_traceback(setup, monkeypatch, capsys):
    from fixpack import cli_fast

    builder, target = setup

    def sigint(req):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "status", sigint)
    code = cli_fast.run("status", ["--profile", "p1", "--pack", str(builder.pack), "--root", f"demo={target}"])
    assert code == 5 and "interrupted (Ctrl-C, SIGINT)" in capsys.readouterr().err


def test_ctrl_c_in_a_fetch_speaks_of_the_cache_not_a_target(setup, monkeypatch):
    """A fetch has no target to roll back: the line says what holds for the release cache instead."""
    from click.testing import CliRunner

    from fixpack import cli, release

    builder, _ = setup

    def sigint(*args, **kw):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(release, "fetch", sigint)
    res = CliRunner().invoke(cli.main, ["fetch", "--profile", "p1", "--pack", str(builder.pack)])
    assert res.exit_code == 5, res.output
    assert "interrupted (Ctrl-C, SIGINT); the release cache keeps no half copy" in res.output
    assert "target" not in res.output and "fixpack status" not in res.output


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_backups_that_cannot_be_removed_at_the_end_are_said_and_removed_by_the_next_run(setup, monkeypatch,
                                                                                        command):
    """A run whose backups will not go once it is complete (EIO removing them) succeeded silently, leaving
    ``.fixpack/journal/``: a full revert then left ``.fixpack`` with exit 0 and no word. The run's outcome
    stands (exit 0: every file is written and the journal is gone), and the target's message says what was
    left and that the next run removes it; the next run does, and a revert is then byte for byte the release."""
    b, target = setup
    (target / "demo_pkg/__pycache__/mod.cpython-311.pyc").unlink()  # stale bytecode: an apply drops it for good
    clean = _all(target)
    if command == "revert":
        assert engine.apply(b.request(target)).ok
    real = os.unlink

    def failing(path, *, dir_fd=None):  # the backups are removed through their folder's descriptor
        if dir_fd is not None and os.readlink(f"/proc/self/fd/{dir_fd}").endswith("/.fixpack/journal"):
            raise OSError(errno.EIO, "Input/output error")
        return real(path, dir_fd=dir_fd)
    monkeypatch.setattr(os, "unlink", failing)
    report = getattr(engine, command)(b.request(target))
    monkeypatch.setattr(os, "unlink", real)
    assert report.ok and report.exit_code == 0
    said = report.targets[0].message
    assert "backups in" in said and "could not be removed" in said and "EIO" in said and "next run" in said, said
    assert (target / ".fixpack/journal").is_dir() and not (target / ".fixpack/journal.json").exists()
    again = engine.status(b.request(target))
    assert again.ok and "a run left backups in" in again.targets[0].message, again.targets[0].message
    assert "interrupted" not in again.targets[0].message  # it said the next apply would roll a journal back
    if command == "apply":
        assert engine.apply(b.request(target)).ok and not (target / ".fixpack/journal").exists()
        assert engine.revert(b.request(target)).ok
    else:
        assert engine.revert(b.request(target)).ok  # nothing to revert: it clears what was left
    assert _all(target) == clean


def test_ctrl_c_outside_a_write_in_apply_does_not_claim_a_rollback(setup, monkeypatch, capsys):
    """Ctrl-C while apply waits for the lock or plans (no write under way) said "a write in progress was rolled
    back": nothing was. The line says no write was under way and what the target may hold."""
    from fixpack import cli_fast

    builder, target = setup

    def sigint(req):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "apply", sigint)
    code = cli_fast.run("apply", ["--profile", "p1", "--pack", str(builder.pack), "--root", f"demo={target}"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 5 and "interrupted (Ctrl-C, SIGINT)" in err and "no write was under way" in err, err
    assert "was rolled back" not in err


def test_a_folder_named_like_a_module_s_bytecode_is_left_alone(setup):
    """found by a fresh user: a folder named mod.cpython-311.pyc in __pycache__ was taken for stale bytecode; its
    removal failed (EISDIR), the rollback refused its own journal's entry for it, and the image was left half
    written, the journal said damaged at every run after. Only regular files are bytecode a run removes."""
    b, target = setup
    (target / "demo_pkg/__pycache__/mod.cpython-311.pyc").unlink()
    (target / "demo_pkg/__pycache__/mod.cpython-311.pyc").mkdir()
    (target / "demo_pkg/__pycache__/mod.cpython-311.pyc/x").write_text("x\n")
    before = _all(target)
    assert engine.apply(b.request(target)).ok
    assert (target / "demo_pkg/__pycache__/mod.cpython-311.pyc/x").read_text() == "x\n"
    assert engine.revert(b.request(target)).ok and _all(target) == before


def test_stale_bytecode_that_cannot_be_removed_is_rolled_back_whole(setup, monkeypatch):
    """found by a fresh user: an immutable stale .pyc (chattr +i) failed its removal (EPERM), and the rollback failed
    too, renaming its backup copy over it: the journal was left. A file that still holds its bytes, mode and owner is
    left as it is by a rollback. The immutable flag is played by refusing every write to that .pyc."""
    from fixpack import rollback, transaction

    b, target = setup
    pyc = target / "demo_pkg/__pycache__/mod.cpython-311.pyc"
    before = _all(target)

    def refuse(real):  # type: ignore[no-untyped-def]
        def call(*args, **kw):  # type: ignore[no-untyped-def]
            if str(pyc) in map(str, args):
                raise PermissionError(errno.EPERM, "Operation not permitted", str(pyc))
            return real(*args, **kw)
        return call

    def refuse_under(real, root_at, rel_at):  # type: ignore[no-untyped-def]
        def call(*args, **kw):  # type: ignore[no-untyped-def]  # (the file as its root and its relative name)
            if Path(args[root_at]) / args[rel_at] == pyc:
                raise PermissionError(errno.EPERM, "Operation not permitted", str(pyc))
            return real(*args, **kw)
        return call

    monkeypatch.setattr(transaction, "write_under", refuse_under(transaction.write_under, 0, 1))  # (root, rel, data)
    monkeypatch.setattr(rollback, "move_under", refuse_under(rollback.move_under, 1, 2))  # (backup, root, rel)
    monkeypatch.setattr(fsio, "unlink", refuse(fsio.unlink))  # a rollback drops a put-back module's bytecode
    monkeypatch.setattr(os, "link", refuse(os.link))  # an immutable file cannot be linked: its backup is a copy
    with pytest.raises(EnvironmentProblem) as exc:
        engine.apply(b.request(target))
    assert "the run was rolled back" in str(exc.value) and str(pyc) in str(exc.value), str(exc.value)
    assert _all(target) == before and not (target / ".fixpack/journal.json").exists()


@pytest.mark.parametrize("env", [("FIXPACK_FAULT_AT", "abc"), ("FIXPACK_IO_FAULT", "abc"),
                                 ("FIXPACK_IO_FAULT", "1:NOPE"), ("FIXPACK_IO_FAULT", "40:NOPE")])
def test_a_test_hook_with_a_bad_value_is_exit_2_and_nothing_written(setup, monkeypatch, env):
    """Found by a fresh user: each was an internal error (exit 1), and 40:NOPE, raised past the first writes, left two
    files patched and the journal (an error that is not an OSError was not rolled back in the run)."""
    from fixpack.errors import BadInputError

    builder, target = setup
    before = _all(target)
    monkeypatch.setenv(*env)
    fsio.reset_fault_counters()
    with pytest.raises(BadInputError, match=rf"^\${env[0]}=.*a test hook .*unset it"):
        engine.apply(builder.request(target))
    assert _all(target) == before and not (target / ".fixpack").exists()


@pytest.mark.parametrize("at", [1, 3, 5])
def test_an_error_that_is_no_oserror_mid_write_is_rolled_back_in_the_run(setup, monkeypatch, at):
    """A bug (any exception but an OSError) at a write point: the run puts the files back before the error goes up,
    as for a failed write; it left them half written with the journal until the next run."""
    from fixpack import transaction

    builder, target = setup
    before = _all(target)
    calls = {"n": 0}

    def point() -> None:
        calls["n"] += 1
        if calls["n"] == at:
            raise ValueError("a bug")

    monkeypatch.setattr(transaction, "fault_point", point)
    with pytest.raises(ValueError, match="a bug"):
        engine.apply(builder.request(target))
    assert _all(target) == before and not (target / ".fixpack").exists()


@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_folder_swapped_for_a_link_during_the_writes_is_never_written_through(setup, monkeypatch, tmp_path, at):
    """Found by an attacker: a folder on the way to a patched file, swapped for a link to a copy outside the target
    while apply ran (after its checks), took the patched bytes outside, and the run said OK (exit 0). Every folder
    on the way is now opened from the one before without following a link (nofollow.write_under): the swap is a failed
    write (exit 5), nothing outside changes, and with the folder put back the target is as it was, or, where the
    rollback could not see through the swap, its journal is there for the next run, which rolls it back."""
    import shutil

    from fixpack import transaction

    b, target = setup
    before = _all(target)
    pkg = target / "demo_pkg"
    outside = tmp_path / "outside"
    shutil.copytree(pkg, outside)
    outside_before = _all(outside)
    moved = tmp_path / "moved"
    points = [0]

    def swap() -> None:  # at the at-th write point once the journal is written: between two file writes
        if (target / ".fixpack/journal.json").exists() and not pkg.is_symlink():
            points[0] += 1
            if points[0] == at:
                pkg.rename(moved)
                pkg.symlink_to(outside)
    monkeypatch.setattr(transaction, "fault_point", swap)
    with pytest.raises(EnvironmentProblem) as exc:
        engine.apply(b.request(target))
    assert "symbolic link" in str(exc.value) or "ELOOP" in str(exc.value), str(exc.value)
    assert _all(outside) == outside_before
    pkg.unlink()
    moved.rename(pkg)
    monkeypatch.setattr(transaction, "fault_point", lambda: None)
    engine.status(b.request(target))  # (reads only)
    assert engine.revert(b.request(target)).ok  # rolls back what a journal left, then nothing to revert
    assert _all(target) == before and _all(outside) == outside_before


def test_a_link_that_is_a_folder_again_when_its_message_is_made_is_no_internal_error(tmp_path, monkeypatch):
    """Found by an attacker swapping .fixpack with a link in a loop: the state folder seen as a link (lstat), then
    a folder again when the refusal named where the link led (os.readlink: EINVAL), was exit 1. The refusal says the
    link changed (safepath.link_to), exit 3 as for any link there."""
    import stat

    from fixpack.errors import MismatchError
    from fixpack.safepath import link_to

    state = tmp_path / ".fixpack"
    state.mkdir()
    real = os.lstat

    def lstat(path, *a, **kw):  # type: ignore[no-untyped-def]
        st = real(path, *a, **kw)
        return os.stat_result((stat.S_IFLNK | 0o777, *tuple(st)[1:])) if str(path) == str(state) else st
    monkeypatch.setattr(os, "lstat", lstat)
    with pytest.raises(MismatchError, match="no link now: it changed while fixpack looked at it") as exc:
        fsio.state_dir(tmp_path)
    assert exc.value.exit_code == 3
    assert link_to(tmp_path / "gone") == link_to(state) == "(no link now: it changed while fixpack looked at it)"


@pytest.mark.parametrize("when", ["backups", "journal"])
def test_the_state_folder_swapped_for_a_link_during_a_run_is_never_written_through(setup, monkeypatch, tmp_path,
                                                                                    when):
    """Found by an attacker: .fixpack swapped for a link to a folder outside the target after the run's check of it
    (fsio.state_dir) took the journal (and the backups folder) outside the target: the journal, its backups and their
    folder are now reached as the target's files are (nofollow), so the swap is a failed write (exit 5, nothing
    changed in the target), and the folder outside stays empty."""
    from fixpack import transaction

    b, target = setup
    before = _all(target)
    outside = tmp_path / "outside"
    outside.mkdir()
    state = target / ".fixpack"
    moved = tmp_path / "moved-state"

    def swap() -> None:
        if state.is_dir() and not state.is_symlink():
            state.rename(moved)
        if not state.is_symlink():
            state.symlink_to(outside)

    real_folder, real_write = transaction.folder_under, transaction.write_under

    def folder(root, rel):  # type: ignore[no-untyped-def]
        if when == "backups":
            swap()
        return real_folder(root, rel)

    def write(root, rel, data, **kw):  # type: ignore[no-untyped-def]
        if when == "journal" and rel == ".fixpack/journal.json" and data is not None:
            swap()
        return real_write(root, rel, data, **kw)
    monkeypatch.setattr(transaction, "folder_under", folder)
    monkeypatch.setattr(transaction, "write_under", write)
    with pytest.raises(EnvironmentProblem, match="while preparing the journal; nothing in the target was changed"):
        engine.apply(b.request(target))
    assert list(outside.iterdir()) == []
    state.unlink()
    if moved.exists():
        moved.rename(state)
    monkeypatch.undo()
    assert engine.revert(b.request(target)).ok
    assert _all(target) == before


def test_a_link_seen_on_the_way_that_is_a_folder_again_gets_no_command_that_copies_it_onto_itself(tmp_path):
    """Found by an attacker racing a swap: a folder seen as a link and a folder again when its refusal was worded was
    told to `rm FOLDER && cp -a FOLDER FOLDER` (it resolves to itself); the refusal says the link changed meanwhile."""
    from fixpack.tree import link_refused

    (tmp_path / "pkg/ops").mkdir(parents=True)
    said = link_refused(tmp_path, tmp_path, "pkg/ops", "pkg/ops/x.py")
    assert "no link now" in said and "run again once it is done" in said and "cp -a" not in said, said


@pytest.mark.parametrize("at", ["end", "leftovers"])
def test_the_state_folder_swapped_for_a_link_before_backups_go_removes_nothing_outside(setup, monkeypatch, tmp_path,
                                                                                       at):
    """Found by an attacker: .fixpack swapped for a link to a folder outside the target as a run removed its backups
    (at its end) or an earlier run's leftovers (at its start) emptied and removed that folder's journal/ (on an image
    run as root, .fixpack -> /var/log took /var/log/journal), and the run could exit 0. The backups are removed
    through folders reached without following a link (nofollow.clear_under): nothing outside is touched."""
    from fixpack import state, transaction

    b, target = setup
    outside = tmp_path / "outside"
    (outside / "journal").mkdir(parents=True)
    (outside / "journal/precious").write_text("not fixpack's\n")
    kept = _all(outside)
    dot = target / ".fixpack"
    if at == "leftovers":  # backups an earlier killed run left, no journal naming them
        (dot / "journal").mkdir(parents=True)
        (dot / "journal/0").write_text("old backup\n")
    mod = transaction if at == "end" else state
    real = mod.clear_under

    def swapped(root, rel, **kw):  # type: ignore[no-untyped-def]
        if dot.is_dir() and not dot.is_symlink():
            dot.rename(tmp_path / "moved-state")
            dot.symlink_to(outside)
        return real(root, rel, **kw)
    monkeypatch.setattr(mod, "clear_under", swapped)
    from fixpack.errors import FixpackError

    try:
        engine.apply(b.request(target))
    except FixpackError as exc:  # refused (the link named, exit 3; or a failed write, exit 5): nothing outside goes
        assert exc.exit_code in (3, 5), exc
    assert _all(outside) == kept
