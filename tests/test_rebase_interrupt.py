"""A `rebase --continue` stopped while it writes the pack (found by a fresh user): after a conflict resolved by hand,
`--continue` interrupted by SIGINT or SIGKILL left part of the new profile's files in the pack, and running it
again as told merged the work repository anew over the resolution (a conflict again, the resolved commit gone from
every branch and the reflog) while the report said "nothing written to the pack yet". Now a resolved conflict's
record stays until the rebase is done (a rerun reads the resolution again, never merges over it), a Ctrl-C while
the pack is written puts every file written back (exit 5, said so), a rerun after a harder stop (SIGKILL) finishes
the write, and a report that stops on conflicts names the pack files an earlier run left written; a default work
folder loses its state.json first when it is dropped. Also: `--continue --work DIR --name OTHER` is refused (exit
2), never finished under the work folder's name."""

import base64
import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO, git
from test_rebase import (  # noqa: F401
    BASE,
    MOD,
    OTHER,
    OTHER_BASE,
    conflicting,
    ctrl_c_at_second_write,
    new_release,
    pack,
    pack_files,
    req,
)
from test_rebase_trust import run, world

from fixpack import rebase, rebase_session, rebase_state
from fixpack.errors import EnvironmentProblem

RESOLVED = BASE.replace("line 5\n", "five (upstream wording kept)\n")

# `python -c` this, then the CLI's arguments: the CLI with the signal $FIXPACK_TEST_SIGNAL sent to itself as it is
# about to write its second pack file (rebase_session._write, the seam for the interruption tests)
DIES_WRITING = """
import os, runpy, signal, sys
from fixpack import rebase_session
real, calls = rebase_session._write, []
def dies(path, data, *rest):
    calls.append(path)
    if len(calls) == 2:
        os.kill(os.getpid(), getattr(signal, os.environ["FIXPACK_TEST_SIGNAL"]))
    real(path, data, *rest)
rebase_session._write = dies
sys.argv = ["fixpack", *sys.argv[1:]]
runpy.run_module("fixpack.cli", run_name="__main__", alter_sys=True)
"""


def cli(b, *args: str, sig: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_TEST_SIGNAL": sig}
    head = ["-c", DIES_WRITING] if sig else ["-m", "fixpack.cli"]
    return subprocess.run([sys.executable, *head, "rebase", *args, "--pack", str(b.pack)], capture_output=True,
                          text=True, env=env, timeout=120, preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                                                            signal.SIG_DFL))


@pytest.fixture
def resolved(conflicting):  # noqa: F811
    """A rebase to v2.0-mine in a --work folder stopped on fix first's conflict, resolved by hand and `git add`ed."""
    b, old, new = conflicting
    work = b.base / "W"
    before = pack_files(b)
    r = rebase.start(req(b, old, new, work=work, name="v2.0-mine"))
    assert r.status == "conflicts" and [o.id for o in r.fixes if o.outcome == "conflict"] == ["first"]
    (work / "first" / MOD).write_text(RESOLVED)
    git(work / "first", "add", MOD)
    return b, work, before


def _state(work) -> dict:
    return json.loads((work / "state.json").read_text())


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_an_interrupted_continue_keeps_the_resolution_and_runs_again_to_the_end(resolved, sig):
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    p = cli(b, *cont, sig=sig)
    repo = work / "first"
    if sig == "SIGINT":  # put back, and said so, with the way on
        assert p.returncode == 5 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
        assert "interrupted (Ctrl-C, SIGINT) while writing the pack: every pack file it had written is put back " \
               "(nothing written to the pack)" in p.stderr, p.stderr
        assert "rebase --continue" in p.stderr and f"--work {work}" in p.stderr, p.stderr
        assert pack_files(b) == before and _state(work)["phase"] == "conflicts"
    else:  # no handler runs: the pack holds part of the write
        assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
        assert pack_files(b) != before and _state(work)["phase"] == "writing"
    # the work repository holds the resolution, committed on branch rebased; the state still records it
    assert git(repo, "diff", "--name-only", "--diff-filter=U").split() == [] and (repo / MOD).read_text() == RESOLVED
    assert "first" in _state(work)["conflicts"]
    again = cli(b, *cont)  # as told
    assert again.returncode == 0, (again.stdout, again.stderr)
    doc = json.loads((b.pack / "reports/rebase-p1-to-v2.0-mine.json").read_text())
    assert {f["id"]: f["outcome"] for f in doc["fixes"]} == {"first": "resolved", "second": "exact",
                                                             "third": "exact"}
    assert "five (upstream wording kept)" in (b.pack / "fixes/first/v2.0-mine/0001-change.patch").read_text()
    assert (b.pack / "profiles/v2.0-mine.lock").is_file() and not (work / "state.json").exists()


def test_a_report_that_stops_on_conflicts_names_what_an_earlier_run_left_in_the_pack(resolved):
    b, work, before = resolved
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    assert cli(b, *cont, sig="SIGKILL").returncode == -signal.SIGKILL
    now = pack_files(b)
    left = sorted(k for k in {*now, *before} if now.get(k) != before.get(k))
    assert left
    git(work / "first", "reset", "-q", "--hard", "upstream")  # the resolution undone by hand: a conflict again
    p = cli(b, *cont, "--json")
    assert p.returncode == 4, (p.stdout, p.stderr)
    doc = json.loads(p.stdout)
    md = (b.pack / "reports/rebase-p1-to-v2.0-mine.md").read_text()
    assert "nothing written to the pack" not in md and "untouched" not in md, md
    assert "pack file(s), listed under Written, hold what an earlier run wrote" in md, md
    assert doc["status"] == "conflicts" and set(left) <= set(doc["written"]), doc["written"]
    assert all(f"- {w}" in md for w in doc["written"]), md
    assert cli(b, "--abort", "--work", str(work)).returncode == 0
    assert pack_files(b) == before


def test_an_interrupted_write_of_a_start_is_put_back_and_leaves_no_trace(pack):  # noqa: F811
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})  # no conflict: it writes
    before = world(b.pack)
    start = ("--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}")
    p = cli(b, *start, sig="SIGINT")
    assert p.returncode == 5 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert "every pack file it had written is put back (nothing written to the pack), and the rebase left no " \
           "trace; run it again" in p.stderr, p.stderr
    assert world(b.pack) == before
    done = cli(b, *start)  # as told
    assert done.returncode == 0, (done.stdout, done.stderr)


def test_continue_refuses_a_name_that_is_not_the_work_folders_rebase(resolved):
    b, work, before = resolved
    was = world(b.base)
    code, out = run(b, "--continue", "--work", str(work), "--name", "v2.0-typo", "--allow-unproven")
    assert code == 2 and "--name v2.0-typo" in out and "which is to v2.0-mine" in out, out
    assert world(b.base) == was and pack_files(b) == before


def test_a_rebase_stopped_while_it_drops_its_work_folder_is_none_in_progress(conflicting, monkeypatch):  # noqa: F811
    """The default work folder goes whole (rmtree): its state.json first, so that a rebase stopped half way through
    is not one in progress whose work repositories (the resolutions) are gone."""
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    work = b.pack / ".rebase/v2.0"
    (work / "first" / MOD).write_text(RESOLVED)
    git(work / "first", "add", MOD)
    real = rebase_state.shutil.rmtree

    def stopped(path, *args, **kw):
        if path == work:
            real(work / "first")  # a repository gone first, then the Ctrl-C
            raise KeyboardInterrupt
        real(path, *args, **kw)
    monkeypatch.setattr(rebase_state.shutil, "rmtree", stopped)
    with pytest.raises(EnvironmentProblem, match=r"interrupted \(Ctrl-C, SIGINT\) while the rebase ended .*its pack "
                                                 r"files are written; finish it with `.*rebase --continue"):
        rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert (b.pack / "profiles/v2.0.lock").is_file() and (b.pack / ".rebase/v2.0.undo.json").is_file()
    assert not (work / "state.json").exists()


def test_a_write_that_cannot_be_put_back_says_so_and_keeps_the_way_back(pack, monkeypatch):  # noqa: F811
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    before = pack_files(b)

    def read_only(session, keep=()):
        raise OSError(30, "Read-only file system")
    ctrl_c_at_second_write(monkeypatch)
    monkeypatch.setattr(rebase_session, "restore", read_only)
    with pytest.raises(EnvironmentProblem, match=r"1 pack file\(s\) it wrote could not be put back \(fixes/first/"
                                                 r"v2.0/.*rebase --continue.*rebase --abort") as err:
        rebase.start(req(b, old, new))
    assert "nothing written" not in str(err.value) and pack_files(b) != before
    monkeypatch.undo()
    assert rebase.abort(rebase.RebaseRequest(pack_root=b.pack))[0] and pack_files(b) == before


def test_a_continue_of_a_start_stopped_early_never_says_it_left_no_trace(pack, monkeypatch):  # noqa: F811
    """A start stopped while it carried (its state still 'merging'), then a --continue stopped while it wrote: the
    files are put back and the rebase is kept (only a start drops its work folder then), as said."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    before = pack_files(b)
    real_carry, real_write = rebase._carry, rebase_session._write

    def stopped(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(rebase, "_carry", stopped)
    with pytest.raises(EnvironmentProblem, match="while the rebase carried the fixes: nothing was written to the pack"):
        rebase.start(req(b, old, new))
    monkeypatch.setattr(rebase, "_carry", real_carry)
    monkeypatch.setattr(rebase_session, "_write", stopped)
    with pytest.raises(EnvironmentProblem, match="nothing written to the pack.*is kept as it was") as err:
        rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert "left no trace" not in str(err.value) and pack_files(b) == before
    monkeypatch.setattr(rebase_session, "_write", real_write)
    assert rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True)).status == "done"


# `python -c` this, then the CLI's arguments: the CLI killed (SIGKILL) inside the atomic write of the first pack file
# named $FIXPACK_TEST_DIES_AT, its temp file written, not yet renamed (fsio.fsync_fd: the seam)
DIES_IN_A_WRITE = """
import os, runpy, signal, sys
from fixpack import fsio
real = fsio.fsync_fd
def dies(fd, path):
    if path.name == os.environ["FIXPACK_TEST_DIES_AT"]:
        os.kill(os.getpid(), signal.SIGKILL)
    real(fd, path)
fsio.fsync_fd = dies
sys.argv = ["fixpack", *sys.argv[1:]]
runpy.run_module("fixpack.cli", run_name="__main__", alter_sys=True)
"""


def test_abort_after_a_continue_killed_inside_a_write_leaves_no_temp_file_nor_the_folder_it_made(conflicting):  # noqa: F811
    """Found by a fresh user: a `--continue` SIGKILLed while it wrote the new variant's variant.toml, then `--abort`:
    the files were put back, but the write's temp file (.variant.toml.fixpack-tmp) and the variant folder the
    rebase made stayed in the pack. The abort takes them away too: the pack is as before the rebase, byte for byte,
    folders and hidden files included."""
    b, old, new = conflicting
    work = b.base / "W"
    before = {k: v for k, v in world(b.pack).items() if k.startswith(("fixes", "profiles"))}
    assert rebase.start(req(b, old, new, work=work, name="v2.0-mine")).status == "conflicts"
    (work / "first" / MOD).write_text(RESOLVED)
    git(work / "first", "add", MOD)
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_TEST_DIES_AT": "variant.toml"}
    p = subprocess.run([sys.executable, "-c", DIES_IN_A_WRITE, "rebase", "--continue", "--work", str(work),
                        "--allow-unproven", "--pack", str(b.pack)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
    assert (b.pack / "fixes/first/v2.0-mine/.variant.toml.fixpack-tmp").is_file()
    p = cli(b, "--abort", "--work", str(work))
    assert p.returncode == 0, p.stderr
    # what it took away is said (it said "0 pack file(s) restored or removed" and named none)
    assert "fixes/first/v2.0-mine/.variant.toml.fixpack-tmp" in p.stdout, p.stdout
    assert "rebase aborted; 0 pack file(s)" not in p.stdout, p.stdout
    after = {k: v for k, v in world(b.pack).items() if k.startswith(("fixes", "profiles"))}
    assert after == before, sorted(set(after) ^ set(before))


def test_abort_refuses_to_overwrite_a_pack_file_changed_after_a_killed_start(pack):  # noqa: F811
    """Found by a fresh user: a start SIGKILLed while it wrote the pack, a file it had written then edited by hand,
    and `--abort` put the bytes from before the rebase back over the edit. The state now records what the rebase
    is about to write (sha256, state key 'planned'; the lock's just before it is written): `--abort` refuses (exit
    2, the file named with what to do, nothing written) where a file holds neither those bytes nor its bytes from
    before, and so does a `--continue` that would write over it (it overwrote the edit, a second reviewer found);
    a lock made by hand where the rebase had not written one yet is refused too (it was taken as the rebase's).
    Once the edits are taken away `--abort` puts the pack back as it was."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})  # no conflict: it writes
    before = world(b.pack)
    p = cli(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", sig="SIGKILL")
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
    (state_path,) = (b.pack / ".rebase").glob("*/state.json")
    state = json.loads(state_path.read_text())
    assert state["phase"] == "writing" and state["planned"], state
    written = [r for r, shas in state["planned"].items() if rebase_state.written_sha(b.pack / r) in shas]
    assert written, state["planned"]  # the first write landed, the second was cut
    edited, lock = b.pack / written[0], b.pack / f"profiles/{state['to']}.lock"
    assert not lock.exists()
    ours = edited.read_bytes()
    edited.write_bytes(ours + b"# an edit by hand\n")
    lock.write_text("a lock made by hand\n")
    kept = world(b.pack)
    for step in (("--abort",), ("--continue", "--allow-unproven")):
        refused = cli(b, *step)
        assert refused.returncode == 2, (step, refused.returncode, refused.stderr)
        said = " ".join(refused.stderr.split())
        assert "2 pack file(s) changed by hand since the rebase to" in said and "nothing was written" in said, said
        assert f"{written[0]} (not there before the rebase" in said, said  # a new variant's file
        assert f"profiles/{state['to']}.lock (not there before the rebase)" in said and "move each away" in said
        assert world(b.pack) == kept  # every byte, the state and the edits included
    edited.write_bytes(ours)  # the edit taken away: the file as the rebase left it, and the lock moved away
    elsewhere = b.base / "mine.lock"
    lock.rename(elsewhere)
    assert cli(b, "--abort").returncode == 0
    assert world(b.pack) == before and elsewhere.read_text() == "a lock made by hand\n"


def test_a_file_holding_what_an_earlier_cut_write_put_there_is_the_rebases(tmp_path):
    """A second reviewer's case: a `--continue` cut while it wrote, then another that plans other bytes for the same
    file and is cut before it writes it: the file holds the first run's bytes, which are the rebase's too ('planned'
    keeps each run's, at most rebase_state.MAX_PLANNED), so neither `--abort` nor `--continue` refuses it."""
    from fixpack.rebase_putback import planned, refuse_changed
    f = tmp_path / "fixes/first/v2/0001-change.patch"
    f.parent.mkdir(parents=True)
    state = {"backups": {"fixes/first/v2/0001-change.patch": None}}
    state["planned"] = planned(state, tmp_path, {f: b"first run\n"})
    f.write_bytes(b"first run\n")
    state["planned"] = planned(state, tmp_path, {f: b"second run\n"})
    assert len(state["planned"]["fixes/first/v2/0001-change.patch"]) == 2
    refuse_changed(state, tmp_path, "v2", "abort", "fixpack rebase --abort")  # no refusal
    f.write_bytes(b"by hand\n")
    with pytest.raises(rebase.BadInputError, match="1 pack file") as made:
        refuse_changed(state, tmp_path, "v2", "abort", "fixpack rebase --abort")
    assert "fixes/first/v2/0001-change.patch (not there before the rebase)" in str(made.value)
    profile = tmp_path / "profiles/v2.toml"  # a file there before the rebase: its bytes are in the backups
    profile.parent.mkdir()
    profile.write_bytes(b"edited\n")
    state["backups"]["profiles/v2.toml"] = base64.b64encode(b"before\n").decode()
    f.write_bytes(b"first run\n")
    with pytest.raises(rebase.BadInputError, match="1 pack file") as there:
        refuse_changed(state, tmp_path, "v2", "continue", "fixpack rebase --continue")
    assert "profiles/v2.toml (there before the rebase); move each away to keep your changes" in str(there.value) \
        and "which --continue would overwrite" in str(there.value)
    profile.write_bytes(b"before\n")
    refuse_changed(state, tmp_path, "v2", "continue", "fixpack rebase --continue")


def test_a_release_copy_changed_by_hand_is_refused_at_the_start_and_at_continue(conflicting):  # noqa: F811
    """Found by a maintainer: a new release copy changed by hand (fetch's marker still there) was taken at the start,
    and refused only once the conflicts were resolved, at the lock, with a `fetch --profile NEW` of a profile not
    written yet; `--continue --root` was taken without a word and did nothing. The start refuses the changed copy
    (exit 3, nothing written, the fetch of a clean copy of that version by the old profile); --continue refuses a
    copy changed since the start the same way before anything runs, with the way on; --root with --continue is a
    usage error; the copy put back, --continue finishes the rebase."""
    from fixpack.errors import MismatchError
    from fixpack.progname import command
    from fixpack.release import MARKER, SDIST_KEY, TREE_KEY, tree_digest

    b, old, new = conflicting
    (new / MARKER).write_text(f"sdist.tar.gz\n{SDIST_KEY}{'0' * 64}\n{TREE_KEY}{tree_digest(new)}\n")  # as fetch's
    clean = (new / MOD).read_bytes()
    fetch = f"`{command('fetch', '--profile', 'p1', '--target', 'demo', '--version', '2.0', '--pack', str(b.pack))}`"
    before = pack_files(b)
    (new / MOD).write_bytes(b"# an edit\n" + clean)
    work = b.base / "W"
    with pytest.raises(MismatchError, match=r"cannot rebase p1 with --root of target demo: .* is no longer the release "
                                            r"copy fetch unpacked") as exc:
        rebase.start(req(b, old, new, work=work, name="v2.0-mine"))
    assert fetch in str(exc.value) and "give --root a clean copy" in str(exc.value), str(exc.value)
    assert pack_files(b) == before and not work.exists()
    (new / MOD).write_bytes(clean)
    r = rebase.start(req(b, old, new, work=work, name="v2.0-mine"))
    assert r.status == "conflicts"
    (work / "first" / MOD).write_text(RESOLVED)
    git(work / "first", "add", MOD)
    (new / MOD).write_bytes(b"# an edit\n" + clean)
    cont = ("--continue", "--work", str(work), "--allow-unproven")
    p = cli(b, *cont)
    said = " ".join(p.stderr.split())
    assert p.returncode == 3 and "cannot continue the rebase to v2.0-mine on target demo" in said, said
    assert fetch in said and "rebase --abort" in said and "nothing was written" in said, said
    assert pack_files(b) == before
    p = cli(b, *cont, "--root", f"demo={new}")
    assert p.returncode == 2 and "--root: the release copies a rebase works on are given when it starts" in p.stderr
    (new / MOD).write_bytes(clean)
    p = cli(b, *cont)
    assert p.returncode == 0, p.stderr
