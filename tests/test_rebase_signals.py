"""A rebase stopped by a signal says what it wrote and what to do, and a CI timeout (SIGTERM) is not a death mid-write:

- SIGTERM while the pack is written unwinds as Ctrl-C does: every pack file written so far is put back, the message
  says so, and the exit is 143 (128 + SIGTERM), as prove's; it had killed the process mid-write (part of the new
  profile's files left in the pack, the state left 'writing');
- a second Ctrl-C or SIGTERM while that put-back runs waits until it is done (it interrupted the put-back, leaving
  pack files written and the state 'writing');
- Ctrl-C (or SIGTERM) while a start carries the fixes says that nothing was written to the pack, what the start
  keeps (its state, the conflicts' work repositories, the pack's record of the rebase) and the --continue and
  --abort that go on from there (it said only "fixpack rebase did not finish. Run it again", which is refused);
- a Ctrl-C or SIGTERM while --abort puts the pack files back waits until that is done, as --undo's does, then says
  so (exit 5 / 143; it cut the put-back, leaving pack files written and the state 'writing'); where a pack file could
  not be put back meanwhile, the signal is said with that, and a SIGTERM's 143 kept (it was exit 5, the signal
  dropped).

Each run is the CLI in a child process that sends the signal to itself at the point (a patched seam), compared
byte for byte before and after, with its exit code and message."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO
from test_json_schemas import validate
from test_rebase import BASE, MOD, OTHER, OTHER_BASE, conflicting, new_release, pack, pack_files  # noqa: F401
from test_rebase_interrupt import resolved  # noqa: F401
from test_rebase_trust import world

# `python -c` this, then the CLI's arguments: the CLI sends itself $FIXPACK_TEST_SIGNAL as it is about to write its
# second pack file ($FIXPACK_TEST_AT "write": rebase_session._write) or carry its second fix ("carry": rebase._carry);
# with $FIXPACK_TEST_AGAIN, that signal too as the put-back then removes its first file (rebase_session.remove_file);
# with $FIXPACK_TEST_DROP, that one as the start then drops its work folder (rebase.drop_work); $FIXPACK_TEST_NTH
# moves "write" to another pack file; with $FIXPACK_TEST_AT "abort", as --abort puts back its first pack file
# (rebase_session.atomic_write / remove_file), and $FIXPACK_TEST_AGAIN as it puts back its second; there, the
# put-back of pack file number $FIXPACK_TEST_FAIL fails (EACCES)
SENDS = """
import os, runpy, signal, sys
from fixpack import rebase, rebase_session
env, calls = os.environ, []
def send(name):
    os.kill(os.getpid(), getattr(signal, name))
def again(real):
    def remove(path):
        rebase_session.remove_file = real
        send(env["FIXPACK_TEST_AGAIN"])
        real(path)
    return remove
module, name = (rebase_session, "_write") if env["FIXPACK_TEST_AT"] == "write" else (rebase, "_carry")
real = getattr(module, name)
def hooked(*args, **kw):
    calls.append(name)
    if len(calls) == int(env.get("FIXPACK_TEST_NTH") or 2) and env["FIXPACK_TEST_SIGNAL"]:
        if env.get("FIXPACK_TEST_AGAIN"):
            rebase_session.remove_file = again(rebase_session.remove_file)
        send(env["FIXPACK_TEST_SIGNAL"])
    return real(*args, **kw)
setattr(module, name, hooked)
if env.get("FIXPACK_TEST_DROP"):  # and this one as a start that leaves no trace drops its work folder
    drop = rebase.drop_work
    def dropped(*args, **kw):
        send(env["FIXPACK_TEST_DROP"])
        return drop(*args, **kw)
    rebase.drop_work = dropped
def put_back(real, put=[]):
    def hooked(*args, **kw):
        put.append(1)
        sig = env["FIXPACK_TEST_SIGNAL"] if len(put) == 1 else env.get("FIXPACK_TEST_AGAIN") if len(put) == 2 else ""
        if sig:
            send(sig)
        if str(len(put)) == env.get("FIXPACK_TEST_FAIL"):
            import errno
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(args[0]))
        return real(*args, **kw)
    return hooked
if env["FIXPACK_TEST_AT"] == "abort":
    rebase_session.atomic_write = put_back(rebase_session.atomic_write)
    rebase_session.remove_file = put_back(rebase_session.remove_file)
sys.argv = ["fixpack", *sys.argv[1:]]
runpy.run_module("fixpack.cli", run_name="__main__", alter_sys=True)
"""

PUT_BACK = "while writing the pack: every pack file it had written is put back (nothing written to the pack)"
HOW = {"SIGINT": ("interrupted (Ctrl-C, SIGINT)", 5), "SIGTERM": ("terminated (SIGTERM)", 143)}


def cli(b, *args: str, sig: str = "", at: str = "write", again: str = "", drop: str = "",
        nth: int = 2, fail: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_TEST_SIGNAL": sig, "FIXPACK_TEST_AT": at,
           "FIXPACK_TEST_AGAIN": again, "FIXPACK_TEST_DROP": drop, "FIXPACK_TEST_NTH": str(nth),
           "FIXPACK_TEST_FAIL": str(fail or "")}
    head = ["-c", SENDS] if sig or drop else ["-m", "fixpack.cli"]
    return subprocess.run([sys.executable, *head, "rebase", *args, "--pack", str(b.pack)], capture_output=True,
                          text=True, env=env, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                                            signal.SIG_DFL))


def start_args(b, old, new) -> tuple[str, ...]:
    return ("--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}")


def carried_cleanly(b):
    return new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})  # no conflict: it writes


def state(work) -> dict:
    return json.loads((work / "state.json").read_text())


@pytest.mark.parametrize("as_json", [False, True])
def test_sigterm_while_a_start_writes_the_pack_puts_it_back_and_exits_143(pack, as_json):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)
    p = cli(b, *start_args(b, old, new), *(("--json",) if as_json else ()), sig="SIGTERM")
    assert p.returncode == 143 and "Traceback" not in p.stderr, (p.returncode, p.stdout, p.stderr)
    said = validate(json.loads(p.stdout), "rebase")["error"] if as_json else p.stderr
    assert f"terminated (SIGTERM) {PUT_BACK}, and the rebase left no trace; run it again" in said, said
    assert world(b.pack) == before  # every byte, .rebase/ and reports/ too: no trace
    done = cli(b, *start_args(b, old, new))  # as told
    assert done.returncode == 0, (done.stdout, done.stderr)


def test_sigterm_while_a_continue_writes_the_pack_keeps_the_rebase_as_it_was(resolved):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    pack_before, work_before, state_before = world(b.pack), world(work), state(work)
    p = cli(b, *cont, sig="SIGTERM")
    assert p.returncode == 143 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"terminated (SIGTERM) {PUT_BACK}; the rebase in {work} is kept as it was, resolved conflicts too: run " \
           f"it again (`" in p.stderr and f"rebase --continue --pack {b.pack} --work {work} --allow-unproven`)" \
           in p.stderr, p.stderr
    assert world(b.pack) == pack_before and pack_files(b) == before
    # the work folder as it was: its files, and its state but for the backups the write keeps (--abort's)
    now = world(work)
    assert {k: v for k, v in now.items() if k != "state.json"} == \
        {k: v for k, v in work_before.items() if k != "state.json"}
    after = state(work)
    assert after["phase"] == "conflicts" and after["backups"] and not state_before["backups"]
    kept = state_before | {"proof": state_before["proof"] | {"allow_unproven": True}}  # --continue's, kept on
    assert {k: v for k, v in after.items() if k != "backups"} == {k: v for k, v in kept.items() if k != "backups"}
    again = cli(b, *cont)  # as told
    assert again.returncode == 0, (again.stdout, again.stderr)
    assert "five (upstream wording kept)" in (b.pack / "fixes/first/v2.0-mine/0001-change.patch").read_text()


@pytest.mark.parametrize("first,second", [("SIGINT", "SIGINT"), ("SIGINT", "SIGTERM"), ("SIGTERM", "SIGINT"),
                                          ("SIGTERM", "SIGTERM")])
def test_a_second_signal_while_the_put_back_runs_waits_until_it_is_done(pack, first, second):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)
    p = cli(b, *start_args(b, old, new), sig=first, again=second)
    how, _code = HOW[first]
    code = 143 if "SIGTERM" in (first, second) else 5  # a SIGTERM, held, ends the run once it is put back
    assert p.returncode == code and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"{how} {PUT_BACK} (a further Ctrl-C or SIGTERM waited until it was done), and the rebase left no " \
           f"trace; run it again" in p.stderr, p.stderr
    assert world(b.pack) == before


@pytest.mark.parametrize("second", ["SIGINT", "SIGTERM"])
def test_a_second_signal_while_a_start_drops_its_work_waits_until_it_is_done(pack, second):  # noqa: F811
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)
    p = cli(b, *start_args(b, old, new), sig="SIGINT", drop=second)
    assert p.returncode == HOW[second][1] and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"interrupted (Ctrl-C, SIGINT) {PUT_BACK}, and the rebase left no trace; run it again" in p.stderr
    if second == "SIGTERM":
        assert "(a SIGTERM while it removed its work folder waited until that was done)" in p.stderr, p.stderr
    assert world(b.pack) == before  # no trace: the work folder and the pack's record of the rebase are gone


def test_sigterm_as_a_finished_rebase_drops_its_work_waits_then_says_it_is_done(pack):  # noqa: F811
    # the ending (undo record, work folder, the pack's record of a rebase in progress) runs to its end with the
    # signal held: a SIGTERM there left the work folder and the '.started' record, which no command then removed
    b, old = pack
    new = carried_cleanly(b)
    before = pack_files(b)
    p = cli(b, *start_args(b, old, new), drop="SIGTERM")  # as the finished rebase drops its work folder
    assert p.returncode == 143 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    said = " ".join(p.stderr.split())
    assert "terminated (SIGTERM) once the rebase to v2.0 was done" in said and \
        f"rebase --undo --pack {b.pack} --name v2.0` puts its pack files back" in said, said
    assert pack_files(b) != before and not (b.pack / ".rebase/v2.0").exists()
    assert not (b.pack / ".rebase/.v2.0.started").exists() and (b.pack / ".rebase/v2.0.undo.json").is_file()
    assert cli(b, "--undo", "--name", "v2.0").returncode == 0 and pack_files(b) == before


def test_a_second_ctrl_c_while_a_continue_puts_back_leaves_no_write_in_the_state(resolved):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    pack_before = world(b.pack)
    p = cli(b, *cont, sig="SIGINT", again="SIGINT")
    assert p.returncode == 5 and "(a further Ctrl-C or SIGTERM waited until it was done)" in p.stderr, p.stderr
    assert world(b.pack) == pack_before and state(work)["phase"] == "conflicts"  # never left 'writing'
    assert cli(b, *cont).returncode == 0


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_start_stopped_while_it_carries_says_what_it_kept_and_how_to_go_on(conflicting, sig):  # noqa: F811
    b, old, new = conflicting  # fix first conflicts: its work repository is kept before fix second is carried
    before = world(b.pack)
    p = cli(b, *start_args(b, old, new), sig=sig, at="carry")
    how, code = HOW[sig]
    assert p.returncode == code and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    work = b.pack / ".rebase/v2.0"
    said = " ".join(p.stderr.split())
    assert f"{how} while the rebase carried the fixes: nothing was written to the pack (fixes/ and profiles/ are as " \
           f"they were: it writes them once every fix is carried); the start's work is kept ({work}/state.json and " \
           f"the work repositories of the conflicts met so far (first)), and the pack records the rebase to v2.0 as " \
           f"in progress ({b.pack}/.rebase/.v2.0.started), so a new start to that name is refused: carry the " \
           f"fixes again and write the pack with `" in said, said
    assert f"rebase --continue --pack {b.pack} --name v2.0 --allow-unproven`, or drop the rebase (nothing in the " \
           f"pack to put back) with `" in said and f"rebase --abort --pack {b.pack} --name v2.0`" in said, said
    now = world(b.pack)
    assert {k: v for k, v in now.items() if not k.startswith(".rebase")} == before  # the pack, every byte
    assert state(work)["phase"] == "merging" and (work / "first/.git").is_dir()
    refused = cli(b, *start_args(b, old, new))
    assert refused.returncode == 2 and "in progress" in refused.stderr, refused.stderr
    cont = cli(b, "--continue", "--name", "v2.0", "--allow-unproven")  # as told: the conflict is met again
    assert cont.returncode == 4, (cont.stdout, cont.stderr)
    dropped = cli(b, "--abort", "--name", "v2.0")  # as told
    assert dropped.returncode == 0, dropped.stderr
    assert {k: v for k, v in world(b.pack).items() if not k.startswith("reports")} == before  # its report is kept


def test_a_continue_stopped_while_it_carries_keeps_the_rebase(resolved):  # noqa: F811
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    pack_before = world(b.pack)
    p = cli(b, *cont, sig="SIGTERM", at="carry")
    assert p.returncode == 143 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    said = " ".join(p.stderr.split())
    assert "terminated (SIGTERM) while the rebase carried the fixes: nothing was written to the pack" in said and \
        f"the rebase in {work} is kept as it was, resolved conflicts too: run it again (`" in said and \
        f"rebase --abort --pack {b.pack} --work {work}`" in said, said
    assert world(b.pack) == pack_before and pack_files(b) == before and state(work)["phase"] == "conflicts"
    assert cli(b, *cont).returncode == 0


@pytest.mark.parametrize("first,second", [("SIGINT", ""), ("SIGTERM", ""), ("SIGINT", "SIGTERM")])
def test_a_signal_while_abort_puts_back_waits_until_it_is_done(pack, first, second):  # noqa: F811
    # --abort's put-back ran with no signal held: a Ctrl-C or SIGTERM there left pack files written (and the
    # state 'writing'), said as "did not finish"; it now runs to its end, as --undo's does, then says so
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)  # the pack, and the work folder under it (.rebase/v2.0): every byte
    killed = cli(b, *start_args(b, old, new), sig="SIGKILL", nth=4)  # 3 pack files written, the state 'writing'
    assert killed.returncode == -signal.SIGKILL and state(b.pack / ".rebase/v2.0")["phase"] == "writing"
    assert len([k for k in world(b.pack) if k.startswith("fixes/") and k not in before]) >= 3
    p = cli(b, "--abort", "--name", "v2.0", sig=first, at="abort", again=second)
    how, code = HOW["SIGTERM" if "SIGTERM" in (first, second) else first]  # a SIGTERM held is said, exit 143
    said = " ".join(p.stderr.split())
    assert p.returncode == code and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"{how} while rebase --abort put the pack files back; it waited until that was done: the rebase to " \
           f"v2.0 is aborted (3 pack file(s) restored or removed: fixes/first/v2.0/0001-change.patch, " \
           f"fixes/first/v2.0/variant.toml, fixes/second/v2.0/0001-change.patch)" in said, said
    assert world(b.pack) == before  # every file put back, the work folder and the pack's record of it gone


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_held_while_abort_cannot_put_a_file_back_is_said_with_its_exit_code(pack, sig):  # noqa: F811
    # --abort's put-back with a SIGTERM held and a pack file it cannot put back said only the file (exit 5): the
    # SIGTERM (a CI timeout) was dropped; now both are said, with 143. The --abort again it advises then finishes it:
    # it was refused, "the pack is invalid" (the patch removed, its variant.toml not: the failed one),
    # as --abort loaded the pack it was putting back (rebase_session.load_session(targets=False) now)
    b, old = pack
    new = carried_cleanly(b)
    before = world(b.pack)
    killed = cli(b, *start_args(b, old, new), sig="SIGKILL", nth=4)  # 3 pack files written, the state 'writing'
    assert killed.returncode == -signal.SIGKILL
    p = cli(b, "--abort", "--name", "v2.0", sig=sig, at="abort", fail=2)
    how, code = HOW[sig]
    said = " ".join(p.stderr.split())
    assert p.returncode == code and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert f"{how} while rebase --abort put the pack files back; it waited until that was done, but rebase --abort " \
           f"could not put back 1 pack file(s): fixes/first/v2.0/variant.toml (Permission denied (EACCES)); the " \
           f"others are put back, and the rebase in " in said and "again, which finishes it" in said, said
    assert state(b.pack / ".rebase/v2.0")["phase"] == "writing"  # the rebase kept, for --abort again
    done = cli(b, "--abort", "--name", "v2.0")  # as told
    assert done.returncode == 0 and world(b.pack) == before, (done.returncode, done.stderr)
