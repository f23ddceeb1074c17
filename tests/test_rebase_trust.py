"""The rebase's own files under <pack>/.rebase/ are untrusted input (found by a fresh user): a planted or damaged
state.json or <name>.undo.json, or a symbolic link for .rebase or .rebase/<name>, is refused by --undo, --abort and
--continue with exit 3, naming the file (and key) and what to do, and nothing changes, inside or outside the pack.
A name too long for a file name is refused up front (exit 2); a work folder that cannot be made is exit 5."""

import base64
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_rebase import BASE, MOD, OTHER, OTHER_BASE, conflicting, new_release, pack, req  # noqa: F401 (fixtures)

from fixpack import rebase
from fixpack.cli_rebase import rebase_cmd
from fixpack.errors import FixpackError


def world(root: Path) -> dict[str, object]:
    """Every file (bytes, mode), folder and symbolic link under root, links never followed."""
    out: dict[str, object] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(top) / name
            key = p.relative_to(root).as_posix()
            if ".git" in key.split("/"):
                continue
            if p.is_symlink():
                out[key] = ("link", os.readlink(p))
            elif p.is_dir():
                out[key] = ("dir", p.stat().st_mode & 0o777)
            else:
                out[key] = (p.read_bytes(), p.stat().st_mode & 0o777)
    return out


@pytest.fixture
def planted(pack):  # noqa: F811
    """The pack, an outside folder beside it with a victim file, and the pack's .rebase/ folder."""
    b, _old = pack
    outside = b.base / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    (b.pack / ".rebase").mkdir()
    return b, outside


def run(b, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(rebase_cmd, [*args, "--pack", str(b.pack)])
    return res.exit_code, res.output


def state(b, **over) -> dict:
    s = {"schema": 1, "pack": str(b.pack), "from": "p1", "to": "x1", "to_version": "2.0",
         "report_dir": str(b.pack / "reports"), "phase": "writing", "targets": {}, "conflicts": {}, "backups": {}}
    return s | over


B64 = base64.b64encode(b"planted\n").decode()
UNDO = {
    "a '..' path": ({"../outside/victim.txt": None}, {}, "'..' segment"),
    "a '..' path restored": ({"../outside/victim.txt": B64}, {}, "'..' segment"),
    "an absolute path": ({"/etc/passwd": B64}, {}, "absolute path"),
    "a pack file no rebase writes": ({"fixes/first/fix.toml": None}, {}, "not a file a rebase to x1 writes"),
    "another profile's file": ({"profiles/p1.toml": None}, {}, "not a file a rebase to x1 writes"),
    "bytes not base64": ({"profiles/x1.toml": "%%%"}, {}, "not base64"),
    "bytes of a number": ({"profiles/x1.toml": 7}, {}, "its bytes are int"),
    "a written path outside": ({}, {"../outside/victim.txt": "0" * 64}, "'..' segment"),
    "a written sha that is none": ({}, {"profiles/x1.toml": "abc"}, "not a sha256"),
}


@pytest.mark.parametrize("case", sorted(UNDO))
def test_undo_refuses_a_planted_undo_file(planted, case):
    b, outside = planted
    backups, written, said = UNDO[case]
    undo = b.pack / ".rebase/x1.undo.json"
    undo.write_text(json.dumps({"to": "x1", "backups": backups, "written": written}))
    before = world(b.base)
    code, out = run(b, "--undo", "--name", "x1")
    assert code == 3, out
    assert str(undo) in out and said in out and "nothing was written" in out and f"rm {undo}" in out
    assert world(b.base) == before


def test_undo_refuses_a_path_through_a_link(planted):
    b, outside = planted
    (b.pack / "fixes/first/x1").symlink_to(outside)
    (b.pack / ".rebase/x1.undo.json").write_text(json.dumps(
        {"to": "x1", "backups": {"fixes/first/x1/victim.txt": None}, "written": {}}))
    before = world(b.base)
    code, out = run(b, "--undo", "--name", "x1")
    assert code == 2 and "fixes/first/x1 is a symbolic link" in out and "nothing was written" in out, out
    assert world(b.base) == before


@pytest.mark.parametrize("doc, said", [
    (b"{not json", "not JSON"), (b"[]", "a JSON list, not an object"), (b'{"backups": {}, "written": {}}', "'to'"),
    (b'{"to": "x2", "backups": {}, "written": {}}', "key 'to' is 'x2', not 'x1'"),
    (b'{"to": "x1", "backups": [], "written": {}}', "key 'backups' is list, not dict"),
    (b'{"to": "x1", "backups": {}}', "key 'written' is missing")])
def test_undo_refuses_a_damaged_undo_file(planted, doc, said):
    b, _outside = planted
    (b.pack / ".rebase/x1.undo.json").write_bytes(doc)
    before = world(b.base)
    code, out = run(b, "--undo")
    assert code == 3 and said in out and "x1.undo.json" in out, out
    assert world(b.base) == before


def test_abort_refuses_a_work_folder_that_is_a_link(planted):
    """The tester's repro: .rebase/x1 a link to an outside folder whose state.json restores ../victim: the
    outside file was overwritten and the link's target folder removed."""
    b, outside = planted
    (outside / "state.json").write_text(json.dumps(state(b, backups={"../outside/victim.txt": B64})))
    (b.pack / ".rebase/x1").symlink_to(outside)
    before = world(b.base)
    for args in (["--abort", "--name", "x1"], ["--abort"], ["--continue", "--name", "x1", "--allow-unproven"]):
        code, out = run(b, *args)
        assert code == 3 and "is a symbolic link" in out and f"rm {b.pack / '.rebase/x1'}" in out, (args, out)
        assert world(b.base) == before


def test_abort_refuses_a_rebase_folder_that_is_a_link(planted):
    b, outside = planted
    (b.pack / ".rebase").rmdir()
    (outside / "x1").mkdir()
    (outside / "x1/state.json").write_text(json.dumps(state(b)))
    (b.pack / ".rebase").symlink_to(outside)
    before = world(b.base)
    for args in (["--abort", "--name", "x1"], ["--abort"], ["--undo"]):
        code, out = run(b, *args)
        assert code == 3 and "the rebase work folder is a symbolic link" in out, (args, out)
        assert world(b.base) == before


@pytest.mark.parametrize("over, said", [
    ({"backups": {"../outside/victim.txt": B64}}, "backups['../outside/victim.txt']: a '..' segment"),
    ({"backups": {"fixes/first/0001-change.patch": None}}, "not a file a rebase to x1 writes"),
    ({"to": "x2"}, "key 'to' is 'x2', not 'x1'"),
    ({"to": "../../outside"}, "key 'to' is '../../outside'"),
    ({"phase": 3}, "key 'phase' is int, not str"),
    ({"schema": "1"}, "key 'schema' is str, not int"),
    ({"targets": {"demo": {"new": 5}}}, "targets.demo"),
    ({"conflicts": {"first": {"repo": "/tmp", "patches": []}}}, "conflicts.first"),
    ({"proof": {"python": 1}}, "key 'python' is int"),
    ({"proof": {"clean": {"first": {"rc": 1}}}}, "proof.clean.first"),
    ({"targets": {"demo": {"new": "/somewhere"}}}, "targets.demo"),
    ({"conflicts": {"first": {"repo": "REPO", "patches": ["0001-change.patch"]}}}, "conflicts.first"),
    ({"pack": None}, "key 'pack' is NoneType, not str"),
    ({"repos": ["first\n"]}, "key 'repos' is not a list of fix ids")])  # (re.match and "$" took a newline)
def test_abort_and_continue_refuse_a_damaged_state(planted, over, said):
    b, _outside = planted
    work = b.pack / ".rebase/x1"
    work.mkdir()
    (work / "state.json").write_text(json.dumps(state(b, **over)).replace("REPO", str(work / "first")))
    before = world(b.base)
    for args in (["--abort", "--name", "x1"], ["--continue", "--allow-unproven"]):
        code, out = run(b, *args)
        assert code == 3 and said in out and str(work / "state.json") in out, (args, out)
        assert f"rm -r {work}" in out and "nothing was written" in out
        assert world(b.base) == before


@pytest.mark.parametrize("doc, said", [(b"{", "not JSON"), (b'{"to": "x1"}', "key 'pack' is missing"),
                                       (b'"x"', "a JSON str, not an object"),
                                       (b"[" * 100000, "nested too deeply"),  # was RecursionError, exit 1
                                       (b'{"to": 1' + b"0" * 5000 + b"}", "an integer of more than 4300 digits")])
def test_abort_of_an_unreadable_state_says_which_file(planted, doc, said):
    """A state.json with a key missing was `internal error: KeyError('pack')`, exit 1."""
    b, _outside = planted
    (b.pack / ".rebase/x1").mkdir()
    (b.pack / ".rebase/x1/state.json").write_bytes(doc)
    before = world(b.base)
    code, out = run(b, "--abort")
    assert code == 3 and said in out and "state.json" in out, out
    assert world(b.base) == before


def test_a_state_of_another_pack_is_refused(planted, tmp_path):
    b, _outside = planted
    (b.pack / ".rebase/x1").mkdir()
    (b.pack / ".rebase/x1/state.json").write_text(json.dumps(state(b, pack=str(tmp_path))))
    before = world(b.base)
    code, out = run(b, "--abort")
    assert code == 2 and f"not {b.pack}" in out and f"--pack {tmp_path}" in out, out
    assert world(b.base) == before


LONG = "x" * 300


@pytest.mark.parametrize("args", [["--profile", "p1", "--to", "2.0", "--name", LONG], ["--abort", "--name", LONG],
                                  ["--undo", "--name", LONG], ["--profile", "p1", "--to", "2" * 300]])
def test_a_name_too_long_is_refused_up_front(pack, args):  # noqa: F811
    """`--name <300 characters>` was `internal error: OSError(36, 'File name too long')`, exit 1."""
    b, _old = pack
    before = world(b.base)
    code, out = run(b, *args)
    assert code == 2 and "more than the 100 a name may have" in out, out
    assert world(b.base) == before


def test_a_work_folder_under_a_file_is_refused(pack, tmp_path):  # noqa: F811
    """Its parent must be a folder that exists, as --report's (outputs.check_folder): exit 2, nothing written."""
    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    (tmp_path / "file").write_text("")
    before = world(b.pack)
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=tmp_path / "file/work"))
    assert err.value.exit_code == 2 and f"--work {tmp_path / 'file/work'}: {tmp_path / 'file'} is not a folder" in \
        str(err.value), str(err.value)
    assert world(b.pack) == before


def test_a_real_undo_and_abort_still_work(pack):  # noqa: F811
    """The checks refuse nothing this tool writes: a finished rebase undone, another one aborted."""
    b, old = pack
    before = world(b.pack)
    new = new_release(b, {MOD: "new head\n" + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    code, out = run(b, "--undo")
    assert code == 0 and "rebase undone" in out, out
    assert {k: v for k, v in world(b.pack).items() if not k.startswith((".rebase", "reports"))} == \
        {k: v for k, v in before.items() if not k.startswith((".rebase", "reports"))}


def test_continue_refuses_a_release_copy_gone_since_the_start(conflicting):  # noqa: F811
    """Read as an empty tree, a release copy removed since the start had --continue report every fix as a
    conflict against nothing (and a resolution to no change would drop it)."""
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    shutil.rmtree(new)
    before = world(b.base)
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 3 and f"the release copy of target demo this rebase started from, {new}, is gone" in out, out
    assert f"rebase --abort --pack {b.pack} --name v2.0`" in out
    assert world(b.base) == before
    code, out = run(b, "--abort")
    assert code == 0 and not (b.pack / ".rebase/v2.0").exists(), out


def test_a_rebase_with_its_own_work_folder_can_be_undone(pack, tmp_path):  # noqa: F811
    """With --work elsewhere, the undo file went next to that folder, where --undo never looks: 'no finished
    rebase to undo', and a stray v2.0.undo.json in the user's folder."""
    b, old = pack
    before = world(b.pack)
    new = new_release(b, {MOD: "new head\n" + BASE, OTHER: OTHER_BASE})
    (tmp_path / "w").mkdir()
    assert rebase.start(req(b, old, new, work=tmp_path / "w" / "v2.0")).status == "done"
    assert not (tmp_path / "w" / "v2.0.undo.json").exists()
    code, out = run(b, "--undo")
    assert code == 0 and "rebase undone" in out, out
    assert {k: v for k, v in world(b.pack).items() if not k.startswith((".rebase", "reports"))} == \
        {k: v for k, v in before.items() if not k.startswith((".rebase", "reports"))}


def test_a_rebase_does_not_start_through_a_linked_rebase_folder(pack, tmp_path):  # noqa: F811
    """A new rebase would make its work folder, and drop it, through the link."""
    b, old = pack
    (tmp_path / "elsewhere").mkdir()
    (b.pack / ".rebase").symlink_to(tmp_path / "elsewhere")
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    before = world(b.base)
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new))
    assert err.value.exit_code == 3 and "the rebase work folder is a symbolic link" in str(err.value)
    assert world(b.base) == before


@pytest.mark.parametrize("which", ["state.json", "x1.undo.json"])
def test_a_rebase_file_too_large_is_refused_unread(planted, which):
    """A rebase's state.json or <name>.undo.json was read whole whatever its size: past the state's cap
    (documents.MAX_STATE_BYTES, the manifest's and journal's) it is damaged state, exit 3 naming it, unread."""
    from fixpack.documents import MAX_STATE_BYTES

    b, _outside = planted
    path = b.pack / ".rebase" / ("x1/state.json" if which == "state.json" else which)
    path.parent.mkdir(exist_ok=True)
    with path.open("wb") as f:  # (sparse: only its size is big)
        f.truncate(MAX_STATE_BYTES + 1)
    before = world(b.base)
    runs = [["--abort", "--name", "x1"], ["--continue", "--name", "x1", "--allow-unproven"]] \
        if which == "state.json" else [["--undo", "--name", "x1"]]
    for args in runs:
        code, out = run(b, *args)
        assert code == 3 and f"{path} is damaged: {MAX_STATE_BYTES + 1} bytes, more than any state" in out, out
        assert world(b.base) == before
