"""A fresh user's finds in `fixpack rebase` (round 11): a planted state.json's proof.python ran on --continue (it
is never run on the state's word now: --continue needs the start's --python given again, exit 2, and every printed
--continue gives it); a planted <name>.undo.json whose 'written' left out the files its backups name had --undo
write its bytes unchecked (exit 3 now, naming the key); a variant folder linked out of the pack was exit 1 with
.started and state.json left behind (exit 2 now, naming the link, nothing written); tools/rebase.py had no Ctrl-C
guard while it imports (exit 5 in one line now, as fixpack's); a state.json of another schema was accepted and a
FIFO was called "a symbolic link?". Every byte of the pack, its work folder and the folder beside it is compared
where something could be written."""

import json
import os
import stat
import sys

import pytest
from conftest import REPO, git
from test_cli import _sweep
from test_rebase import BASE, MOD, OTHER, OTHER_BASE, commit_pack, conflicting, new_release, pack, req  # noqa: F401
from test_rebase_trust import planted, run, state, world  # noqa: F401

from fixpack import rebase
from fixpack.progname import program


def evil_interpreter(folder):
    """A program a planted state names as the proof's interpreter: it leaves a file when it runs."""
    script = folder / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {folder / 'ran'}\nexit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_continue_never_runs_a_planted_states_interpreter(conflicting):  # noqa: F811
    """The repro: proof.python set to a script in the state of a rebase stopped at a conflict; --continue ran it
    (and blamed "--python X", never given). Now refused before anything runs, with the command to run."""
    b, old, new = conflicting
    assert rebase.start(req(b, old, new)).status == "conflicts"
    path = b.pack / ".rebase/v2.0/state.json"
    script = evil_interpreter(b.base)
    path.write_text(json.dumps(json.loads(path.read_text()) | {"proof": {"python": str(script), "clean": {}}}))
    before = world(b.base)
    for args in (["--continue"], ["--continue", "--allow-unproven"], ["--continue", "--name", "v2.0"]):
        code, out = run(b, *args)
        said = " ".join(out.split())
        assert code == 2 and f"{path}: the rebase to v2.0 was started with a --python (this state file names " \
            f"{script})" in said, (args, out)
        # the planted path is named as the state's word, never offered as a command to paste
        assert f"`{program()} rebase --continue --pack {b.pack} --name v2.0 --python PATH`" in said, said
        assert f"--python {script}`" not in said, said
        assert "nothing was run or written" in said and not (b.base / "ran").exists()
        assert world(b.base) == before


def test_the_printed_continue_gives_the_starts_python_and_runs_as_printed(conflicting):  # noqa: F811
    """A start given --python: its next steps' --continue carries it, and given again it is no refusal."""
    b, old, new = conflicting
    r = rebase.start(req(b, old, new, python=sys.executable, proof_site=new))
    assert r.status == "conflicts" and r.continue_flags == ("--python", sys.executable)
    assert any(f"rebase --continue --python {sys.executable}" in step for step in r.next_steps), r.next_steps
    again = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, python=sys.executable, proof_site=new))
    assert again.status == "conflicts"  # (the CLI has no --proof-site: its --python is a whole stand-in image)


def test_undo_refuses_a_record_whose_written_leaves_out_its_backups(pack):  # noqa: F811
    """The repro: "written": {} in a finished rebase's record skipped the changed-since check, and --undo wrote the
    backups' bytes (any bytes) over the pack's files. A backup of a file not in 'written' is now exit 3 naming the
    key, unless it is a variant file the rebase removed (nothing there now)."""
    b, old = pack
    new = new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    record = b.pack / ".rebase/v2.0.undo.json"
    real = json.loads(record.read_text())
    evil = "cGxhbnRlZAo="  # b"planted\n"
    patch, lock, variant = "fixes/first/v2.0/0001-change.patch", "profiles/v2.0.lock", "fixes/first/v2.0/variant.toml"
    assert real["backups"][patch] is None  # a file the rebase made
    cases = [({}, {}, patch, f"{patch} is there now, and --undo would remove it without checking it is as the "
                             f"rebase left it"),
             ({k: v for k, v in real["written"].items() if k != lock}, {lock: evil}, lock,
              "the rebase writes the profile and its lock every time"),
             ({k: v for k, v in real["written"].items() if k != variant}, {variant: evil}, variant,
              f"{variant} is there now, and --undo would overwrite it")]
    for written, backups, key, why in cases:
        record.write_text(json.dumps(real | {"written": written, "backups": real["backups"] | backups}))
        before = world(b.base)
        code, out = run(b, "--undo")
        said = " ".join(out.split())
        assert code == 3 and f"the state in {record} is damaged: backups[{key!r}] names a file that 'written' " \
                              f"does not: {why}" in said, said
        assert world(b.base) == before
    record.write_text(json.dumps(real))
    code, out = run(b, "--undo")
    assert code == 0 and "rebase undone" in out, out


def test_undo_of_a_replace_that_removed_variant_files_puts_them_back(pack):  # noqa: F811
    """The backups of files the rebase removed are in no 'written' of a real record: --undo takes them."""
    b, old = pack
    assert rebase.start(req(b, old, new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE}))).status \
        == "done"
    commit_pack(b)
    before = world(b.pack / "fixes")
    assert (b.pack / "fixes/first/v2.0/variant.toml").is_file()
    r = rebase.start(req(b, old, new_release(b, {MOD: BASE, OTHER: OTHER_BASE}, "new2"), replace=True))
    assert r.status == "done" and not (b.pack / "fixes/first/v2.0").exists()
    code, out = run(b, "--undo")
    assert code == 0 and "fixes/first/v2.0/variant.toml" in out, out
    assert world(b.pack / "fixes") == before and git(b.pack, "status", "--porcelain", "--", "fixes", "profiles") == ""


@pytest.mark.parametrize("where", ["the variant folder", "a file in it"])
def test_a_variant_linked_out_of_the_pack_is_refused_before_anything_is_written(pack, where):  # noqa: F811
    """The repro: fixes/<fix>/<name> a link out of the pack (--allow-dirty) was exit 1 (ValueError ... not in
    the subpath) and left .started and state.json; a file in it linked out, the same."""
    b, old = pack
    outside = b.base / "outside"
    outside.mkdir()
    (outside / "0001-change.patch").write_text("keep me\n")
    if where == "the variant folder":
        link = b.pack / "fixes/first/v2.0"
        link.symlink_to(outside)
    else:
        (b.pack / "fixes/first/v2.0").mkdir()
        link = b.pack / "fixes/first/v2.0/0001-change.patch"
        link.symlink_to(outside / "0001-change.patch")
    new = new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})
    before = world(b.base)
    for name in ([], ["--name", "v2.0"]):  # the name known before the fetch, and once the release is read
        code, out = run(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", "--allow-dirty",
                        *name)
        said = " ".join(out.split())
        assert code == 2 and f"{link} is a symbolic link (to {os.readlink(link)})" in said, out
        assert f"rm {link}: never what it points at" in said and "nothing was written" in said
        assert world(b.base) == before


def test_continue_refuses_a_variant_linked_since_the_start(conflicting):  # noqa: F811
    b, old, new = conflicting
    assert rebase.start(req(b, old, new)).status == "conflicts"
    (b.base / "outside").mkdir()
    link = b.pack / "fixes/second/v2.0"
    link.symlink_to(b.base / "outside")
    before = world(b.base)
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 2 and f"{link} is a symbolic link" in " ".join(out.split()), out
    assert world(b.base) == before


def test_tools_rebase_ctrl_c_while_it_imports_is_exit_5_in_one_line(tmp_path):
    """tools/rebase.py (the README's first rebase command) had no guard: a Ctrl-C while it imports printed a
    traceback (exit 1, or death by SIGINT). Now it goes through fixpack.entry as `fixpack` does."""
    hit = _sweep([str(REPO / "tools/rebase.py"), "--help"], tmp_path, (0,), lambda: True)
    assert {"click", "fixpack.cli_common"} <= set(hit), hit


def test_a_state_of_another_schema_is_refused(planted):  # noqa: F811
    b, _outside = planted
    work = b.pack / ".rebase/x1"
    work.mkdir()
    (work / "state.json").write_text(json.dumps(state(b, schema=2)))
    before = world(b.base)
    for args in (["--abort", "--name", "x1"], ["--continue", "--allow-unproven"]):
        code, out = run(b, *args)
        assert code == 3 and f"the state in {work / 'state.json'} is damaged: key 'schema' is 2, not 1" in \
            " ".join(out.split()), (args, out)
        assert world(b.base) == before


def fifo_world(root):
    """world(root), a FIFO told by its kind (reading it would block)."""
    fifos = {p.relative_to(root).as_posix(): "fifo" for p in root.rglob("*") if stat.S_ISFIFO(os.lstat(p).st_mode)}
    for rel in fifos:
        os.unlink(root / rel)
    try:
        return world(root) | fifos
    finally:
        for rel in fifos:
            os.mkfifo(root / rel)


def test_a_fifo_state_is_named_as_a_fifo(planted):  # noqa: F811
    b, _outside = planted
    work = b.pack / ".rebase/x1"
    work.mkdir()
    os.mkfifo(work / "state.json")
    before = fifo_world(b.base)
    for args in (["--abort", "--name", "x1"], ["--continue", "--allow-unproven"]):
        code, out = run(b, *args)
        said = " ".join(out.split())
        assert code == 3 and "state.json is damaged: a FIFO (named pipe), not a regular file" in said, (args, out)
        assert "symbolic link?" not in said and fifo_world(b.base) == before



def test_a_state_whose_planned_writes_are_not_pack_files_or_sha256_is_refused(planted):  # noqa: F811
    """The state's 'planned' (what the rebase is about to write, --abort's check against edits by hand) is held as
    its other keys are: a path out of the rebase's pack files, or a value not a list of 1 to 16 sha256 or null, is
    damaged state (exit 3, the key named), nothing written; so is a name too long to look at (it was exit 1, an
    internal error: an OSError from os.lstat, for 'backups' too), and an empty 'planned' (it listed every file as
    changed by hand, a fresh user found)."""
    b, _outside = planted
    work = b.pack / ".rebase/x1"
    work.mkdir()
    sha = "0" * 64
    for planned, said in (({"../outside/x": [None]}, "planned"),
                          ({"profiles/x1.toml": ["abc"]}, "planned['profiles/x1.toml'] is not a list of 1 to 16"),
                          ({"profiles/x1.toml": sha}, "is not a list"), ({"profiles/x1.toml": []}, "is not a list"),
                          ({"profiles/x1.toml": [sha + "\n"]}, "is not a list"),  # a sha256 is 64 digits, no newline
                          ({"profiles/x1.toml": [sha] * 17}, "is not a list"),
                          ({"fixes/first/x1/" + "a" * 300: [None]}, "cannot be looked at: File name too long"),
                          ({}, "key 'planned' is empty")):  # a write plans the profile at least
        (work / "state.json").write_text(json.dumps(state(b, planned=planned)))
        (b.pack / "fixes/first/x1").mkdir(parents=True, exist_ok=True)  # the long name is looked for in it
        before = world(b.base)
        code, out = run(b, "--abort", "--name", "x1")
        assert code == 3 and f"the state in {work / 'state.json'} is damaged" in " ".join(out.split()) and \
            said in " ".join(out.split()), (planned, out)
        assert world(b.base) == before
