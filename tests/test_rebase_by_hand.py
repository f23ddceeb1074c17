"""A rebase's pack files changed by hand while it is in progress (a third fresh user's findings on the put-back's
check, rebase_putback): a file that was empty before the rebase locked --abort, --continue and --undo out for good
(its backup, "", was read as "no backup"); following the refusal's advice (git checkout) did not get a file past it;
a symbolic link where the rebase writes was exit 1 (a traceback) at --continue or exit 3 ("the state is damaged")
after a killed write; a file edited while --continue wrote, then Ctrl-C, was put back over the edit, and the undo
record took an edit made before it was saved as the rebase's own bytes. Now: a file that is gone loses nothing (the
way past a refusal is to move the file away), an empty backup is an empty file, a link is the pack's (exit 2,
named, nothing written), a put-back after a Ctrl-C keeps a file changed by hand and names it, and the undo record
holds the sha256 of what the rebase wrote."""

import base64
import hashlib
import json
import os
import signal

import pytest
from test_rebase import (  # noqa: F401
    BASE,
    MOD,
    OTHER,
    OTHER_BASE,
    conflicting,
    new_release,
    pack,
    pack_files,
    req,
)
from test_rebase_interrupt import cli, resolved  # noqa: F401
from test_rebase_trust import world

from fixpack import rebase, rebase_session, rebase_state, rebase_undo
from fixpack.errors import BadInputError, EnvironmentProblem
from fixpack.rebase_putback import changed_by_hand, planned, refuse_changed
from fixpack.rebase_session import Session, keep_undo

REL = "fixes/first/v2/0001-change.patch"


def test_an_empty_file_from_before_and_a_file_moved_away_are_no_edits(tmp_path):
    f = tmp_path / REL
    f.parent.mkdir(parents=True)
    lock = tmp_path / "profiles/v2.lock"
    lock.parent.mkdir()
    lock.write_bytes(b"")  # empty before the rebase: its backup is ""
    state = {"backups": {REL: None, "profiles/v2.lock": ""}}
    state["planned"] = planned(state, tmp_path, {f: b"the rebase's\n", lock: b"a lock\n"})
    assert changed_by_hand(state, tmp_path) == []  # nothing written yet: both as before
    f.write_bytes(b"by hand\n")
    lock.write_bytes(b"by hand\n")
    assert changed_by_hand(state, tmp_path) == [(REL, True), ("profiles/v2.lock", False)]
    f.unlink()  # moved away, as the refusal says: nothing of the user's is lost any more
    lock.write_bytes(b"")  # its bytes from before
    assert changed_by_hand(state, tmp_path) == []
    f.write_bytes(b"by hand\n")
    with pytest.raises(BadInputError, match=rf"1 pack file.*{REL} \(not there before the rebase\); move each away"):
        refuse_changed(state, tmp_path, "v2", "abort", "fixpack rebase --abort")
    f.unlink()
    os.symlink(tmp_path / "elsewhere", f)  # a link in its place is never looked through: refused as the pack's
    assert changed_by_hand(state, tmp_path) == []
    with pytest.raises(BadInputError, match=f"{f} is a symbolic link"):
        rebase_state.check_pack_paths(tmp_path / "state.json", "backups", state["backups"], tmp_path, "v2", "")


def test_a_ctrl_c_after_an_edit_by_hand_keeps_the_edit(pack, monkeypatch):  # noqa: F811
    """A file the write had put there, edited by hand before the write was cut by a Ctrl-C: the put-back keeps it
    (named, exit 5) and puts back every other file; --abort then refuses it until it is moved away, and puts the
    pack back as it was."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    before = world(b.pack)
    real, calls = rebase_session._write, []

    def edit_then_ctrl_c(path, data, *rest):
        calls.append(path)
        if len(calls) == 2:
            calls[0].write_bytes(calls[0].read_bytes() + b"# an edit by hand\n")
            raise KeyboardInterrupt
        real(path, data, *rest)
    monkeypatch.setattr(rebase_session, "_write", edit_then_ctrl_c)
    with pytest.raises(EnvironmentProblem) as err:
        rebase.start(req(b, old, new))
    monkeypatch.undo()
    edited = calls[0]
    key = edited.relative_to(b.pack).as_posix()
    said = " ".join(str(err.value).split())
    assert f"1 changed by hand meanwhile is kept as it is ({key})" in said and "could not be put back" not in said
    assert "move each file changed by hand away to keep your changes" in said and "rebase --abort" in said, said
    assert edited.read_bytes().endswith(b"# an edit by hand\n")
    now = world(b.pack)
    differ = {k for k in {*now, *before} if now.get(k) != before.get(k) and not k.startswith(".rebase")}
    assert key in differ and all(key.startswith(k) for k in differ), differ  # the file, the folder made for it
    abort = cli(b, "--abort")
    assert abort.returncode == 2 and f"{key} (not there before the rebase)" in abort.stderr, abort.stderr
    mine = b.base / "mine.patch"
    edited.rename(mine)
    assert cli(b, "--abort").returncode == 0
    assert world(b.pack) == before and mine.read_bytes().endswith(b"# an edit by hand\n")


def _killed_start(b, old):
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    p = cli(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", sig="SIGKILL")
    assert p.returncode == -signal.SIGKILL, (p.returncode, p.stderr)
    (state_path,) = (b.pack / ".rebase").glob("*/state.json")
    state = json.loads(state_path.read_text())
    first = next(r for r, shas in state["planned"].items()
                 if (b.pack / r).is_file() and hashlib.sha256((b.pack / r).read_bytes()).hexdigest() in shas)
    return state, first


def test_a_link_in_place_of_a_written_file_is_the_packs_not_a_damaged_state(pack):  # noqa: F811
    """After a killed write, a file it wrote replaced by a link to a copy of it outside the pack: --abort and
    --continue refuse it as the pack's (exit 2, the link named, nothing written; it was exit 3, "the state is
    damaged", with advice that threw the resolved rebase away); the link removed, --abort puts the pack back."""
    b, old = pack
    before = world(b.pack)
    state, first = _killed_start(b, old)
    outside = b.base / "copy"
    outside.write_bytes((b.pack / first).read_bytes())
    (b.pack / first).unlink()
    (b.pack / first).symlink_to(outside)
    kept = world(b.base)
    for step in (("--abort",), ("--continue", "--allow-unproven")):
        p = cli(b, *step)
        said = " ".join(p.stderr.split())
        assert p.returncode == 2 and f"{b.pack / first} is a symbolic link (to {outside})" in said, (step, said)
        assert "nothing was written" in said and "damaged" not in said, said
        assert world(b.base) == kept
    (b.pack / first).unlink()
    assert cli(b, "--abort").returncode == 0
    assert world(b.pack) == before


def test_an_edit_that_breaks_a_patch_is_said_as_an_edit_not_as_an_invalid_pack(pack):  # noqa: F811
    b, old = pack
    _state, first = _killed_start(b, old)
    (b.pack / first).write_text("not a patch any more\n")
    p = cli(b, "--continue", "--allow-unproven")
    said = " ".join(p.stderr.split())
    assert p.returncode == 2 and f"{first} (not there before the rebase" in said and "invalid" not in said, said
    folder = "/".join(first.split("/")[:3])
    assert f"move its variant folder {folder} away: its variant.toml names its patches" in said, said
    (b.pack / folder).rename(b.base / "mine")  # as told: the edit kept, and --continue writes the variant again
    done = cli(b, "--continue", "--allow-unproven")
    assert done.returncode == 0, done.stderr
    assert (b.base / "mine" / first.split("/")[-1]).read_text() == "not a patch any more\n"


@pytest.mark.parametrize("target", ["outside", "missing", "loop"])
def test_a_link_where_the_lock_goes_is_refused_at_continue(resolved, target):  # noqa: F811
    """A symbolic link at profiles/<name>.lock before --continue (to a file outside the pack, to nothing, to
    itself): exit 2 naming it, nothing written (it was exit 1: a ValueError or RuntimeError from resolving it)."""
    b, work, before = resolved
    lock = b.pack / "profiles/v2.0-mine.lock"
    outside = b.base / "outside.lock"
    outside.write_text("mine\n")
    lock.symlink_to({"outside": outside, "missing": b.base / "nothing", "loop": lock}[target])
    kept = world(b.base)
    p = cli(b, "--continue", "--work", str(work), "--allow-unproven")
    said = " ".join(p.stderr.split())
    assert p.returncode == 2 and f"{lock} is a symbolic link" in said and "nothing was written" in said, said
    assert world(b.base) == kept


def test_the_undo_record_holds_what_the_rebase_wrote_not_an_edit_made_since(tmp_path):
    """And --undo's way past a file changed since is the same as --abort's: move it away (it was git checkout,
    which after an --allow-dirty start loses the uncommitted bytes, and moving away did not help)."""
    f, toml = tmp_path / REL, tmp_path / "profiles/v2.toml"
    f.parent.mkdir(parents=True)
    toml.parent.mkdir()
    state = {"backups": {REL: None, "profiles/v2.toml": base64.b64encode(b"before\n").decode()}}
    state["planned"] = planned(state, tmp_path, {f: b"the rebase's\n", toml: b"the rebase's profile\n"})
    f.write_bytes(b"the rebase's\n# an edit by hand before the record was saved\n")
    toml.write_bytes(b"the rebase's profile\n# edited\n")
    session = Session(tmp_path, "p1", "v2", "", {}, tmp_path / ".rebase/v2", tmp_path, state)
    record = keep_undo(session, [REL, "profiles/v2.toml"])
    assert json.loads(record.read_text())["written"] == {
        REL: hashlib.sha256(b"the rebase's\n").hexdigest(),
        "profiles/v2.toml": hashlib.sha256(b"the rebase's profile\n").hexdigest()}
    with pytest.raises(BadInputError, match=f"changed since the rebase to v2 wrote them: {REL}, profiles/v2.toml; "
                                            "move each away to keep your changes"):
        rebase_undo.undo(tmp_path, "v2")
    assert f.read_bytes().endswith(b"before the record was saved\n") and toml.read_bytes().endswith(b"# edited\n")
    f.rename(tmp_path / "mine.patch")
    toml.rename(tmp_path / "mine.toml")
    assert rebase_undo.undo(tmp_path, "v2") == ["profiles/v2.toml"]
    assert toml.read_bytes() == b"before\n" and not f.exists() and not record.exists()
    assert (tmp_path / "mine.toml").read_bytes().endswith(b"# edited\n")


@pytest.mark.parametrize("to, ctrl_c", [("outside", False), ("nowhere", False), ("outside", True)])
def test_a_link_put_in_while_the_rebase_writes_is_never_written_through(pack, monkeypatch, to, ctrl_c):  # noqa: F811
    """A fresh user's case: a variant folder the write had begun replaced by a link (to a folder outside the pack, or
    to another variant), then the write went on and a Ctrl-C's put-back removed files through the link (a committed
    patch of another profile among them) and said nothing was written. Now each write and each put-back looks for a
    link on the way first: the next write stops there (exit 5, ELOOP, the link named), the put-back writes nothing
    through it, nothing is said as changed by hand through it (a second fresh user: the advice to move such a file
    would have moved a file outside the pack), a dangling link is named too (it was "every pack file put back"), and
    --abort names it (exit 2) until it is removed."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    before = world(b.pack)
    real, calls = rebase_session._write, []
    moved = b.base / "moved"

    def swap_after_first(path, data, *rest):
        calls.append(path)
        real(path, data, *rest)
        if len(calls) == 1:  # the folder it writes in becomes a link to a folder outside, holding what it held
            path.parent.rename(moved)
            path.parent.symlink_to(moved if to == "outside" else b.base / "nowhere")
            if ctrl_c:
                raise KeyboardInterrupt
    monkeypatch.setattr(rebase_session, "_write", swap_after_first)
    with pytest.raises(EnvironmentProblem) as err:
        rebase.start(req(b, old, new))
    monkeypatch.undo()
    said = " ".join(str(err.value).split())
    folder = calls[0].parent.relative_to(b.pack).as_posix()
    assert f"{folder} is a symbolic link (never written through: remove it) (ELOOP)" in said, said
    assert "remove the link, then" in said and "changed by hand" not in said and "every pack file" not in said, said
    assert sorted(p.name for p in moved.iterdir()) == [calls[0].name] and len(calls) == 1  # nothing more through it
    assert (b.pack / folder).is_symlink()
    p = cli(b, "--abort")
    assert p.returncode == 2 and f"{b.pack / folder} is a symbolic link" in " ".join(p.stderr.split()), p.stderr
    (b.pack / folder).unlink()
    assert cli(b, "--abort").returncode == 0
    assert world(b.pack) == before and sorted(p.name for p in moved.iterdir()) == [calls[0].name]


@pytest.mark.parametrize("made", ["lock", "profile"])
def test_a_file_made_by_hand_while_the_rebase_writes_is_kept(pack, monkeypatch, made):  # noqa: F811
    """A lock made by hand after the variants were written and before the lock was: it was overwritten, exit 0 (and
    so was a profile made by hand just before the rebase wrote it, a second fresh user found). Now the write stops
    at such a file (exit 2), the pack is put back but for it, kept and named."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    before = world(b.pack)
    real, calls = rebase_session._write, []

    def by_hand(path, data, *rest):
        calls.append(path)
        real(path, data, *rest)
        profile = b.pack / "profiles" / f"{calls[0].parent.name}.toml"  # (the variants' folder: the new name)
        if made == "lock" and path == profile:  # the new profile, written last before its lock
            path.with_suffix(".lock").write_text("mine\n")
        if made == "profile" and len(calls) == 1:
            profile.write_text("mine\n")
    monkeypatch.setattr(rebase_session, "_write", by_hand)
    with pytest.raises(BadInputError) as err:
        rebase.start(req(b, old, new))
    monkeypatch.undo()
    said = " ".join(str(err.value).split())
    mine = b.pack / "profiles" / f"{calls[0].parent.name}.{'lock' if made == 'lock' else 'toml'}"
    assert f"{mine} was made or changed by hand while the rebase wrote the pack" in said, said
    assert f"1 changed by hand meanwhile is kept as it is (profiles/{mine.name})" in said, said
    assert mine.read_text() == "mine\n"
    now = world(b.pack)
    assert {k for k in {*now, *before} if now.get(k) != before.get(k) and not k.startswith(".rebase")} == \
        {f"profiles/{mine.name}"}


def test_a_link_put_in_between_the_look_and_the_write_is_not_written_through(pack, monkeypatch):  # noqa: F811
    """A second fresh user's race: the variant folder replaced by a link to another folder right after the write's
    look for links and before the write. The write opens each folder without following a link (nofollow.write_under):
    an OSError (ELOOP), the pack put back, the other folder as it was."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    real, looked = rebase_session.refuse_made_meanwhile, []
    other = b.base / "other"

    def look_then_swap(state, root, path):
        real(state, root, path)
        looked.append(path)
        if len(looked) == 2 and path.parent == looked[0].parent:  # the variant's second file: its folder swapped
            path.parent.rename(other)
            path.parent.symlink_to(other)
    monkeypatch.setattr(rebase_session, "refuse_made_meanwhile", look_then_swap)
    held = None
    with pytest.raises(EnvironmentProblem) as err:
        try:
            rebase.start(req(b, old, new))
        finally:
            held = world(other)
    monkeypatch.undo()
    said = " ".join(str(err.value).split())
    folder = looked[0].parent.relative_to(b.pack).as_posix()
    assert f"cannot write {folder}/{looked[1].name}: {folder} is a symbolic link (never written through: remove " \
           f"it) (ELOOP)" in said and "remove the link, then" in said, said  # (Linux's open says ENOTDIR there)
    assert sorted(held) == [looked[0].name], held  # only what was written before the swap: nothing through the link


def test_a_file_made_by_hand_between_the_look_and_the_write_is_not_written_over(pack, monkeypatch):  # noqa: F811
    """The new profile made by hand right after the write's look for it and before the write: the write makes a file
    that must not be there with a hard link of its temp file, not a rename (EEXIST: refused, exit 2); the pack put
    back but for that file, kept and named (a third fresh user: it was overwritten, exit 0)."""
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    real = rebase_session.refuse_made_meanwhile
    made = []

    def look_then_make(state, root, path):
        real(state, root, path)
        if path.parent.name == "profiles" and path.suffix == ".toml":
            path.write_text("mine\n")
            made.append(path)
    monkeypatch.setattr(rebase_session, "refuse_made_meanwhile", look_then_make)
    with pytest.raises(BadInputError) as err:
        rebase.start(req(b, old, new))
    monkeypatch.undo()
    said = " ".join(str(err.value).split())
    (mine,) = made
    assert f"{mine} was made by hand while the rebase wrote the pack" in said, said
    assert f"1 changed by hand meanwhile is kept as it is (profiles/{mine.name})" in said, said
    assert mine.read_text() == "mine\n"


def test_check_names_a_rebase_killed_while_writing_the_pack_and_the_way_on(pack):  # noqa: F811
    """Found by a maintainer: after a rebase killed while it wrote the pack, `fixpack check` named only a variant folder
    "for profile NAME, which the pack does not have ... never used", not the rebase, nor --continue or --abort. It says
    the rebase was stopped while writing, with both commands, runnable as printed; --abort then puts the pack back."""
    import shlex

    from fixpack.pack_check import check_pack

    b, old = pack
    before, found_before = world(b.pack), check_pack(b.pack)[0]  # (this pack's fixes have no proofs: said as such)
    state, _first = _killed_start(b, old)
    findings, _profiles = check_pack(b.pack)
    name = state["to"]
    assert len(findings) == 1, [str(f) for f in findings]
    said = str(findings[0])
    assert said.startswith(f".rebase/.{name}.started: a rebase to {name} was stopped while writing the pack"), said
    abort = shlex.split(said.split("put the pack back with `")[1].split("`")[0])
    assert "rebase --continue" in said and "--allow-unproven" in said, said
    assert abort[abort.index("rebase"):] == ["rebase", "--abort", "--pack", str(b.pack), "--name", name], abort
    p = cli(b, "--abort", "--name", name)  # (cli adds --pack)
    assert p.returncode == 0, p.stderr
    assert world(b.pack) == before and check_pack(b.pack)[0] == found_before
