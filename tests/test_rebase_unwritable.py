"""A rebase that meets a file it cannot write, and signals once it has ended (found by a fresh user):

- a pack folder it cannot write while the pack is written (`chattr +i profiles`: here the write seam raises
  PermissionError or ENOSPC at the Nth file) was exit 1 `internal error: PermissionError(...)`, leaving the files
  written so far and the state 'writing': now every file written so far is put back, as for Ctrl-C, exit 5, naming
  the file, its errno and what to do; the same for --continue's write, and --abort / --continue while the folder is
  still unwritable say which files they could not put back (exit 5);
- any other error of this tool as the lock is written (the end of the pack write: a release copy or a fix it
  refuses) left the pack files written and the state 'writing': they are put back the same way, and the run exits
  with that error's own code, saying nothing was written to the pack;
- the put-back stopped at its first failure: it tries every file and names those it could not put back;
- a work folder it cannot write (a work repository's mkdir) was exit 1: exit 5 naming the folder, no trace left;
- a Ctrl-C or SIGTERM once the rebase was done (as its report prints) said "fixpack rebase did not finish", and
  SIGTERM killed it silently: it says the rebase is done and `--undo` puts it back (exit 5 / 143);
- an interrupted `--undo` could not be run again ("these files changed since the rebase wrote them", naming the
  files it had put back): a file already as it was counts as put back, and its put-back runs with Ctrl-C and
  SIGTERM held until it is done;
- a reports folder it cannot write during --continue said "the rebase went on to its end" while it was still in
  progress: it says --continue finishes it.

Each run is compared byte for byte (the pack, the work folder), with its exit code and message."""

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git
from test_rebase import BASE, MOD, OTHER, OTHER_BASE, conflicting, new_release, pack, pack_files  # noqa: F401
from test_rebase_interrupt import resolved  # noqa: F401
from test_rebase_trust import run, world

from fixpack import gitwork, rebase_session
from fixpack.errors import ConflictError, MismatchError, PackError, Problem

DENIED = (errno.EACCES, "Permission denied")
FULL = (errno.ENOSPC, "No space left on device")


def start_args(old, new) -> tuple[str, ...]:
    return ("--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}")


def carried_cleanly(b):
    return new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})  # every fix moves: a variant


def fails_at(monkeypatch, n: int, err: tuple[int, str]) -> list:
    """rebase_session._write raises ``err`` (an OSError) at its ``n``th pack file; returns the paths asked for."""
    real, calls = rebase_session._write, []

    def write(path, data, *rest):
        calls.append(path)
        if len(calls) == n:
            raise OSError(*err, str(path))
        real(path, data, *rest)
    monkeypatch.setattr(rebase_session, "_write", write)
    return calls


def cannot_put_back(monkeypatch, names: tuple[str, ...], err: tuple[int, str] = DENIED, after: list | None = None,
                    n: int = 0) -> None:
    """The put-back (rebase_session.remove_file / atomic_write) and the write (write_under: root, rel) fail on the
    pack files named ``names`` (once ``after``, the paths a :func:`fails_at` write was asked for, holds ``n``: the
    write has failed)."""
    for attr in ("remove_file", "atomic_write", "write_under"):
        real = getattr(rebase_session, attr)

        def hooked(path, *args, _real=real, _under=attr == "write_under", **kw):
            target = path / args[0] if _under else path
            if target.as_posix().endswith(names) and "fixes" in target.parts and (after is None or len(after) >= n):
                raise OSError(*err, str(target))
            return _real(path, *args, **kw)
        monkeypatch.setattr(rebase_session, attr, hooked)


def rel(b, path) -> str:
    return path.relative_to(b.pack).as_posix()


@pytest.mark.parametrize("err,text", [(DENIED, "Permission denied (EACCES)"), (FULL, "No space left on device "
                                                                                      "(ENOSPC)")])
def test_a_pack_folder_it_cannot_write_puts_back_what_the_start_wrote(pack, monkeypatch, err, text):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)
    calls = fails_at(monkeypatch, 3, err)
    code, out = run(b, *start_args(old, new))
    said = " ".join(out.split())
    assert code == 5 and "internal error" not in out, (code, out)
    assert f"cannot write {rel(b, calls[2])}: {text} while writing the pack: every pack file it had written is put " \
           f"back (nothing written to the pack), and the rebase left no trace; free space or make it writable, then " \
           f"run it again" in said, said
    assert world(b.pack) == before  # every byte: the pack, .rebase/ and reports/ (no trace)
    monkeypatch.undo()
    assert run(b, *start_args(old, new))[0] == 0  # as told


def test_a_pack_folder_it_cannot_write_puts_back_what_a_continue_wrote(resolved, monkeypatch):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    pack_before, work_before = world(b.pack), world(work)
    state_before = json.loads((work / "state.json").read_text())
    calls = fails_at(monkeypatch, 2, DENIED)
    code, out = run(b, *cont)
    said = " ".join(out.split())
    assert code == 5, (code, out)
    assert f"cannot write {rel(b, calls[1])}: Permission denied (EACCES) while writing the pack: every pack file it " \
           f"had written is put back (nothing written to the pack); the rebase in {work} is kept as it was, resolved " \
           f"conflicts too: free space or make it writable, then run it again (`" in said and \
           f"rebase --continue --pack {b.pack} --work {work} --allow-unproven`)" in said, said
    assert world(b.pack) == pack_before and pack_files(b) == before
    now = world(work)  # the work folder as it was, but for the backups the write keeps in its state (--abort's)
    assert {k: v for k, v in now.items() if k != "state.json"} == \
        {k: v for k, v in work_before.items() if k != "state.json"}
    after = json.loads((work / "state.json").read_text())
    assert after["phase"] == "conflicts" and after["backups"]
    kept = state_before | {"proof": state_before["proof"] | {"allow_unproven": True}}
    assert {k: v for k, v in after.items() if k != "backups"} == {k: v for k, v in kept.items() if k != "backups"}
    monkeypatch.undo()
    assert run(b, *cont)[0] == 0  # as told
    assert "five (upstream wording kept)" in (b.pack / "fixes/first/v2.0-mine/0001-change.patch").read_text()


def lock_refused(monkeypatch, error) -> None:
    """The lock's write (engine.write_lock, the end of the pack write) raises ``error``, once it has written the
    lock's bytes (a refusal after the lock is written is put back too)."""
    from fixpack import engine

    real = engine.write_lock

    def refused(req, before=None):
        real(req, before)
        raise error
    monkeypatch.setattr(engine, "write_lock", refused)


@pytest.mark.parametrize("error,code", [(MismatchError("the release copy of target demo changed since its unpack"), 3),
                                        (PackError("the pack does not load", [Problem("bad key", Path("x.toml"), 2)]),
                                         2)])
def test_an_error_as_the_lock_is_written_puts_back_what_the_start_wrote(pack, monkeypatch, error, code):  # noqa: F811
    # any error of this tool there (not an OSError) left every pack file written and the state 'writing'
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)
    lock_refused(monkeypatch, error)
    code_, out = run(b, *start_args(old, new))
    said = " ".join(out.split())
    assert code_ == code and "internal error" not in out, (code_, out)
    assert f"{error.args[0]}; at profiles/v2.0.lock while writing the pack: every pack file it had written is put " \
           f"back (nothing written to the pack), and the rebase left no trace; fix that, then run it again" in said, said
    assert all(str(p) in out for p in error.problems), out
    assert world(b.pack) == before  # every byte: the pack, .rebase/ and reports/ (no trace)
    monkeypatch.undo()
    assert run(b, *start_args(old, new))[0] == 0  # as told


@pytest.mark.parametrize("n", [2, 0])
def test_a_bug_inside_the_pack_write_puts_back_what_it_wrote_and_is_said_as_a_bug(pack, monkeypatch, n):  # noqa: F811
    # a bug of this tool (not an OSError nor one of its errors: exit 1) inside the pack write left the pack files
    # written so far and the state 'writing'; they are put back all the same, then the bug is said as one, and the
    # rebase is as before the write (its work folder kept, phase 'merging': --abort, or a start again after it)
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    if n:  # at its second pack file
        real, calls = rebase_session._write, []

        def write(path, data, *rest):
            calls.append(path)
            if len(calls) == n:
                raise RuntimeError("a bug in the write")
            real(path, data, *rest)
        monkeypatch.setattr(rebase_session, "_write", write)
    else:  # once the lock is written, at its end
        lock_refused(monkeypatch, RuntimeError("a bug in the write"))
    code, out = run(b, *start_args(old, new))
    assert code == 1 and "a bug in the write" in out, (code, out)
    assert pack_files(b) == before  # every pack file put back, the lock too
    state = json.loads((b.pack / ".rebase/v2.0/state.json").read_text())
    assert state["phase"] == "merging", state["phase"]
    monkeypatch.undo()
    assert run(b, "--abort", "--name", "v2.0")[0] == 0 and pack_files(b) == before
    assert run(b, *start_args(old, new))[0] == 0  # and the rebase runs


@pytest.mark.parametrize("then", ["cannot", "SIGTERM", "SIGINT"])
def test_a_bug_inside_the_pack_write_whose_put_back_fails_or_is_signalled_says_so(pack, monkeypatch, then):  # noqa: F811
    # found by a fresh user: a bug inside the pack write whose put-back then could not put a file back was said as the
    # bare bug (exit 1), the file left written without a word; a Ctrl-C or SIGTERM during that put-back was dropped
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    real, calls = rebase_session._write, []

    def write(path, data, *rest):
        calls.append(path)
        if len(calls) == 3:
            raise RuntimeError("a bug in the write")
        real(path, data, *rest)
    monkeypatch.setattr(rebase_session, "_write", write)
    real_remove, removes = rebase_session.remove_file, []

    def remove(path, *args, **kw):
        removes.append(path)
        if len(removes) == 1:
            if then == "cannot":
                raise OSError(*DENIED, str(path))
            os.kill(os.getpid(), getattr(signal, then))
        return real_remove(path, *args, **kw)
    monkeypatch.setattr(rebase_session, "remove_file", remove)
    code, out = run(b, *start_args(old, new))
    said = " ".join(out.split())
    assert said.count("a bug in the write") == 1 and "Traceback" not in out, out
    if then == "cannot":
        assert code == 1 and "internal error: RuntimeError('a bug in the write') while writing the pack; 1 pack " \
            f"file(s) it wrote could not be put back ({rel(b, removes[0])}: Permission denied (EACCES)): make them " \
            "writable, then finish the rebase with `" in said and "rebase --abort --pack" in said, (code, said)
        assert json.loads((b.pack / ".rebase/v2.0/state.json").read_text())["phase"] == "writing"
        monkeypatch.undo()
        assert run(b, "--abort", "--name", "v2.0")[0] == 0  # as told
    else:
        assert code == (143 if then == "SIGTERM" else 1), (code, said)
        bug = "internal error RuntimeError('a bug in the write') (please report it)" if then == "SIGTERM" else \
            "internal error: RuntimeError('a bug in the write')"  # (SIGINT: said as the bug, exit 1)
        assert f"{bug} while writing the pack: every pack file it had written is put back (nothing written to the " \
            "pack) (a Ctrl-C or SIGTERM meanwhile waited until it was done), and the rebase left no trace; run it " \
            "again" in said, said
        assert not (b.pack / ".rebase/v2.0").exists()
    assert pack_files(b) == before
    monkeypatch.undo()
    assert run(b, *start_args(old, new))[0] == 0  # and the rebase runs


def test_an_error_as_the_lock_is_written_puts_back_what_a_continue_wrote(resolved, monkeypatch):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    pack_before, work_before = world(b.pack), world(work)
    lock_refused(monkeypatch, ConflictError("fix first does not apply to the release copy"))
    code, out = run(b, *cont)
    said = " ".join(out.split())
    assert code == 4 and "internal error" not in out, (code, out)
    assert f"fix first does not apply to the release copy; at profiles/v2.0-mine.lock while writing the pack: every " \
           f"pack file it had written is put back (nothing written to the pack); the rebase in {work} is kept as it " \
           f"was, resolved conflicts too: fix that, then run it again (`" in said, said
    assert world(b.pack) == pack_before and pack_files(b) == before
    now = world(work)  # the work folder as it was, but for the backups the write keeps in its state (--abort's)
    assert {k: v for k, v in now.items() if k != "state.json"} == \
        {k: v for k, v in work_before.items() if k != "state.json"}
    assert json.loads((work / "state.json").read_text())["phase"] == "conflicts"
    monkeypatch.undo()
    assert run(b, *cont)[0] == 0  # as told


def test_the_put_back_tries_every_file_and_names_those_it_could_not(pack, monkeypatch):  # noqa: F811
    """The write fails at fix second's variant.toml; fix first's patch cannot be put back: fix first's variant.toml
    and fix second's patch are put back all the same, and the one left is named with its errno. --abort while it
    still cannot be written says so (exit 5, the rebase kept); once it can, --abort puts it back."""
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    calls = fails_at(monkeypatch, 4, DENIED)
    cannot_put_back(monkeypatch, ("first/v2.0/0001-change.patch",), after=calls, n=4)
    code, out = run(b, *start_args(old, new))
    said = " ".join(out.split())
    assert [rel(b, p) for p in calls] == ["fixes/first/v2.0/0001-change.patch", "fixes/first/v2.0/variant.toml",
                                          "fixes/second/v2.0/0001-change.patch", "fixes/second/v2.0/variant.toml"]
    assert code == 5, (code, out)
    assert "cannot write fixes/second/v2.0/variant.toml: Permission denied (EACCES) while writing the pack; 1 pack " \
           "file(s) it wrote could not be put back (fixes/first/v2.0/0001-change.patch: Permission denied " \
           "(EACCES)): free space or make it writable, then " \
           "finish the rebase with `" in said and f"rebase --abort --pack {b.pack} --name v2.0`" in said, said
    now = pack_files(b)
    assert {k for k in {*now, *before} if now.get(k) != before.get(k)} == {"fixes/first/v2.0/0001-change.patch"}
    state = json.loads((b.pack / ".rebase/v2.0/state.json").read_text())
    assert state["phase"] == "writing"
    monkeypatch.undo()
    cannot_put_back(monkeypatch, ("first/v2.0/0001-change.patch",), FULL)  # --abort while it still cannot
    code, out = run(b, "--abort", "--name", "v2.0")
    said = " ".join(out.split())
    assert code == 5 and "rebase --abort could not put back 1 pack file(s): fixes/first/v2.0/0001-change.patch (No " \
        "space left on device (ENOSPC)); the others are put back, and the rebase in " in said and \
        f"then run `{sys.executable}" not in said and "again, which finishes it" in said, (code, said)
    assert pack_files(b) == now and (b.pack / ".rebase/v2.0/state.json").is_file()
    monkeypatch.undo()
    code, out = run(b, "--abort", "--name", "v2.0")  # as told
    assert code == 0 and pack_files(b) == before, out


def test_a_continue_while_the_folder_is_still_unwritable_says_so(resolved, monkeypatch):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    cannot_put_back(monkeypatch, ("first/v2.0-mine/0001-change.patch",), after=fails_at(monkeypatch, 2, DENIED), n=2)
    left = "could not be put back (fixes/first/v2.0-mine/0001-change.patch: Permission denied (EACCES))"
    code, out = run(b, *cont)
    assert code == 5 and left in out, (code, out)
    code, out = run(b, *cont)  # again, the folder still unwritable: the same, never exit 1
    assert code == 5 and left in out, (code, out)
    monkeypatch.undo()
    assert run(b, *cont)[0] == 0 and (b.pack / "profiles/v2.0-mine.lock").is_file()


def test_a_work_folder_it_cannot_write_is_exit_5_naming_it(conflicting, monkeypatch):  # noqa: F811
    b, old, new = conflicting
    before = world(b.pack)

    def denied(path):
        raise PermissionError(*DENIED, str(path))
    monkeypatch.setattr(gitwork, "init_repo", denied)
    code, out = run(b, *start_args(old, new))
    said = " ".join(out.split())
    work = b.pack / ".rebase/v2.0"
    assert code == 5 and "internal error" not in out, (code, out)
    assert f"cannot write {work}/first: Permission denied (EACCES) while the rebase carried the fixes: nothing was " \
           f"written to the pack, and the rebase left no trace: free space or make it writable, then run it again" \
           in said, said
    assert world(b.pack) == before


def test_a_reports_folder_it_cannot_write_during_continue_says_continue_finishes_it(resolved, monkeypatch):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    real = rebase_session.atomic_write

    def full(path, data, *a, **kw):
        if path.parent.name == "reports":
            raise OSError(*FULL, str(path))
        return real(path, data, *a, **kw)
    monkeypatch.setattr(rebase_session, "atomic_write", full)
    code, out = run(b, *cont)
    said = " ".join(out.split())
    assert code == 5, (code, out)
    assert "No space left on device (ENOSPC); the rebase's pack files are written, but the rebase to v2.0-mine is " \
           f"not finished (it is kept in {work}): free space or make that folder writable (or give another with " \
           f"--report DIR), then finish it with `" in said and "went on to its end" not in said, said
    assert json.loads((work / "state.json").read_text())["phase"] == "written"
    monkeypatch.undo()
    assert run(b, *cont)[0] == 0  # as told: the report, then the rebase ends
    assert (b.pack / "reports/rebase-p1-to-v2.0-mine.md").is_file() and not (work / "state.json").exists()
    assert run(b, "--undo", "--name", "v2.0-mine")[0] == 0 and pack_files(b) == before


# `python -c` this, then the CLI's arguments: the CLI sends itself $FIXPACK_TEST_SIGNAL once rebase.start (or
# resume) has returned ($FIXPACK_TEST_AT "returned"), or as it prints the report ("printing": cli_rebase._render), or
# as --undo puts back its first file ("undo": rebase_session.atomic_write / remove_file)
SENDS = """
import os, runpy, signal, sys
from fixpack import cli_rebase, rebase, rebase_session
env = os.environ
def send():
    os.kill(os.getpid(), getattr(signal, env["FIXPACK_TEST_SIGNAL"]))
def after(real):
    def hooked(*args, **kw):
        out = real(*args, **kw)
        send()
        return out
    return hooked
def before(real, sent=[]):
    def hooked(*args, **kw):
        if not sent:
            sent.append(1)
            send()
        return real(*args, **kw)
    return hooked
if env["FIXPACK_TEST_AT"] == "returned":
    rebase.start, rebase.resume = after(rebase.start), after(rebase.resume)
elif env["FIXPACK_TEST_AT"] == "printing":
    cli_rebase._render = before(cli_rebase._render)
else:
    rebase_session.atomic_write = before(rebase_session.atomic_write)
    rebase_session.remove_file = before(rebase_session.remove_file)
sys.argv = ["fixpack", *sys.argv[1:]]
runpy.run_module("fixpack.cli", run_name="__main__", alter_sys=True)
"""
HOW = {"SIGINT": ("interrupted (Ctrl-C, SIGINT)", 5), "SIGTERM": ("terminated (SIGTERM)", 143)}


def cli(b, *args: str, sig: str = "", at: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_TEST_SIGNAL": sig, "FIXPACK_TEST_AT": at}
    head = ["-c", SENDS] if sig else ["-m", "fixpack.cli"]
    return subprocess.run([sys.executable, *head, "rebase", *args, "--pack", str(b.pack)], capture_output=True,
                          text=True, env=env, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                                            signal.SIG_DFL))


@pytest.mark.parametrize("at", ["returned", "printing"])
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_once_the_rebase_is_done_says_it_is_done(pack, sig, at):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    p = cli(b, *start_args(old, new), sig=sig, at=at)
    how, code = HOW[sig]
    said = " ".join(p.stderr.split())
    assert p.returncode == code and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"{how} once the rebase to v2.0 was done (its report: {b.pack}/reports/rebase-p1-to-v2.0.md): it wrote 6 " \
           f"pack file(s) (fixes/first/v2.0/0001-change.patch, fixes/first/v2.0/variant.toml, " \
           f"fixes/second/v2.0/0001-change.patch, fixes/second/v2.0/variant.toml, profiles/v2.0.lock, " \
           f"profiles/v2.0.toml), and no " \
           f"rebase is in progress; `" in said and f"rebase --undo --pack {b.pack} --name v2.0` puts its pack files " \
           f"back" in said, said
    assert "did not finish" not in said
    # the pack as a rebase left uninterrupted leaves it: written, its undo record kept, nothing in progress
    assert sorted(x.name for x in (b.pack / ".rebase").iterdir()) == ["v2.0.undo.json"]
    assert (b.pack / "profiles/v2.0.toml").is_file() and (b.pack / "profiles/v2.0.lock").is_file()
    assert cli(b, "--undo", "--name", "v2.0").returncode == 0 and pack_files(b) == before  # as told


def test_a_signal_once_a_rebase_stopped_on_conflicts_says_so(conflicting):  # noqa: F811
    b, old, new = conflicting
    before = world(b.pack)
    p = cli(b, *start_args(old, new), sig="SIGTERM", at="returned")
    said = " ".join(p.stderr.split())
    work = b.pack / ".rebase/v2.0"
    assert p.returncode == 143 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"terminated (SIGTERM) once the rebase to v2.0 had stopped on conflicts (its report: {b.pack}/reports/" \
           f"rebase-p1-to-v2.0.md): resolve them in {work}, then run `" in said and \
           f"rebase --continue --pack {b.pack} --name v2.0 --allow-unproven`" in said, said
    now = world(b.pack)  # the pack as the run left it: the rebase in progress, its report written
    assert {k: v for k, v in now.items() if not k.startswith((".rebase", "reports"))} == before
    assert json.loads((work / "state.json").read_text())["phase"] == "conflicts"
    assert cli(b, "--abort", "--name", "v2.0").returncode == 0
    assert {k: v for k, v in world(b.pack).items() if not k.startswith("reports")} == before


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_while_undo_puts_back_waits_until_it_is_done(pack, sig):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    assert cli(b, *start_args(old, new)).returncode == 0
    p = cli(b, "--undo", "--name", "v2.0", sig=sig, at="undo")
    how, code = HOW[sig]
    said = " ".join(p.stderr.split())
    assert p.returncode == code and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"{how} while rebase --undo put the pack files back; it waited until that was done: the rebase to v2.0 " \
           f"is undone (6 pack file(s) restored or removed: " in said, said
    assert pack_files(b) == before
    assert not (b.pack / ".rebase/v2.0.undo.json").exists()


def test_an_undo_cut_short_is_finished_by_another(pack, monkeypatch):  # noqa: F811
    """Cut harder than a held signal can stop (here a KeyboardInterrupt raised in the put-back itself, as a SIGKILL
    leaves it): the files it put back already hold their bytes from before, and a second --undo finishes."""
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    assert run(b, *start_args(old, new))[0] == 0
    real, calls = rebase_session.remove_file, []

    def cut(path):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(path)
    monkeypatch.setattr(rebase_session, "remove_file", cut)
    code, out = run(b, "--undo", "--name", "v2.0")
    assert code == 5 and "interrupted" in out, (code, out)
    now = pack_files(b)
    assert now != before and (b.pack / ".rebase/v2.0.undo.json").is_file()
    monkeypatch.undo()
    code, out = run(b, "--undo", "--name", "v2.0")
    assert code == 0 and "changed since" not in out, (code, out)
    assert pack_files(b) == before
    assert not (b.pack / ".rebase/v2.0.undo.json").exists()


def test_an_undo_that_cannot_put_back_a_file_names_it_and_is_finished_by_another(pack, monkeypatch):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    assert run(b, *start_args(old, new))[0] == 0
    cannot_put_back(monkeypatch, ("variant.toml",))
    code, out = run(b, "--undo", "--name", "v2.0")
    said = " ".join(out.split())
    assert code == 5, (code, out)
    assert "rebase --undo could not put back 2 pack file(s): fixes/first/v2.0/variant.toml (Permission denied " \
           "(EACCES)), fixes/second/v2.0/variant.toml (Permission denied (EACCES)); the others are put back (" in said \
           and f"{b.pack}/.rebase/v2.0.undo.json is kept: free space or make them writable, then run `" in said and \
           "rebase --undo --pack" in said and "again, which finishes it" in said, said
    now = pack_files(b)
    assert {k for k in {*now, *before} if now.get(k) != before.get(k)} == {"fixes/first/v2.0/variant.toml",
                                                                           "fixes/second/v2.0/variant.toml"}
    monkeypatch.undo()
    code, out = run(b, "--undo", "--name", "v2.0")  # as told
    assert code == 0 and pack_files(b) == before, out
    assert git(b.pack, "status", "--porcelain", "--", "fixes", "profiles") == ""
