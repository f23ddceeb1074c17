"""A rebase's --work folder and its report folder (found by a fresh user): `--work` naming a folder that holds
files (the pack's own checkout) was taken, and `--abort` then removed the whole folder, .git and all; a planted
`report_dir` in state.json had `--continue` write the reports outside the pack. Now a --work folder must be new
or empty (exit 2, nothing written), the start marks it, --continue/--abort refuse one without the mark (exit 3)
and drop only what the rebase made there; the report goes to <pack>/reports unless --report is given again."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git
from test_rebase import BASE, MOD, conflicting, pack, req  # noqa: F401 (fixtures)
from test_rebase_trust import planted, run, state, world  # noqa: F401 (fixtures)

from fixpack import rebase
from fixpack.errors import FixpackError


@pytest.mark.parametrize("where", ["a user's folder", "the pack's checkout"])
def test_a_work_folder_that_holds_files_is_refused_up_front(conflicting, where):  # noqa: F811
    b, old, new = conflicting
    work = b.pack if where == "the pack's checkout" else b.base / "wk"
    work.mkdir(exist_ok=True)
    (work / "keep.txt").write_text("precious\n")
    before = world(b.base)
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=work))
    said = str(err.value)
    if where == "the pack's checkout":  # (inside the pack: refused as such, before its files are listed)
        assert err.value.exit_code == 2 and f"--work {work}: the folder is inside the pack" in said, said
    else:
        assert err.value.exit_code == 2 and f"--work {work}: the folder already holds files" in said, said
        assert "keep.txt" in said
    assert "nothing was written" in said and world(b.base) == before and (b.pack / ".git").is_dir()


@pytest.mark.parametrize("where", ["a user's folder", "the pack's checkout"])
def test_abort_and_continue_remove_nothing_in_a_folder_the_rebase_did_not_make(planted, where):  # noqa: F811
    """The tester's repro, as a planted state: `--abort --work <pack>` removed the checkout, .git included."""
    b, outside = planted
    work = b.pack if where == "the pack's checkout" else outside
    (work / "state.json").write_text(json.dumps(state(b)))
    before = world(b.base)
    for args in (["--abort"], ["--continue", "--allow-unproven"]):
        code, out = run(b, *args, "--work", str(work))
        assert code == 3 and f"{work / '.fixpack-rebase'} is damaged" in out, (args, out)
        assert f"{work} is no work folder a rebase made" in out and "nothing was written" in out
        assert world(b.base) == before and (b.pack / ".git").is_dir() and (outside / "victim.txt").is_file()


@pytest.mark.parametrize("given", ["missing", "empty"])
def test_abort_drops_only_what_the_rebase_made_in_its_work_folder(conflicting, given):  # noqa: F811
    b, old, new = conflicting
    work = b.base / "w" / "v2.0"
    work.parent.mkdir()  # a --work's parent must exist (never made: --abort would leave it)
    work.mkdir() if given == "empty" else None
    result = rebase.start(req(b, old, new, work=work))
    assert result.status == "conflicts" and (work / "first" / ".git").is_dir()
    assert (work / ".fixpack-rebase").read_text() == ("made\n" if given == "missing" else "given\n")
    code, out = run(b, "--abort", "--work", str(work))
    assert code == 0, out
    assert not work.exists() if given == "missing" else list(work.iterdir()) == []
    rebase.start(req(b, old, new, work=work))  # and once more, with notes of the user's beside its files
    (work / "notes.txt").write_text("mine\n")
    code, out = run(b, "--abort", "--work", str(work))
    assert code == 0 and sorted(p.name for p in work.iterdir()) == ["notes.txt"], out


def test_the_default_work_folder_is_dropped_as_before(conflicting):  # noqa: F811
    b, old, new = conflicting
    assert rebase.start(req(b, old, new)).status == "conflicts"
    assert not (b.pack / ".rebase/v2.0/.fixpack-rebase").exists()
    code, out = run(b, "--abort")
    assert code == 0 and not (b.pack / ".rebase").exists(), out


def test_continue_refuses_a_planted_report_dir(conflicting):  # noqa: F811
    """`"report_dir": "/any/folder"` in state.json: --continue wrote rebase-*.md and .json there."""
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    outside = b.base / "elsewhere"
    outside.mkdir()
    path = b.pack / ".rebase/v2.0/state.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"report_dir": str(outside)}))
    before = world(b.base)
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 3 and f"the state in {path} is damaged: key 'report_dir' is {str(outside)!r}" in out, out
    assert "give --report DIR again" in out and world(b.base) == before
    code, out = run(b, "--continue", "--allow-unproven", "--report", str(outside))  # given: the user's choice
    assert code == 4 and sorted(p.name for p in outside.iterdir()) == ["rebase-p1-to-v2.0.json",
                                                                       "rebase-p1-to-v2.0.md"], out


def test_a_report_folder_of_the_start_is_given_again(conflicting):  # noqa: F811
    b, old, new = conflicting
    reports = b.base / "my reports"
    reports.mkdir()
    result = rebase.start(req(b, old, new, report_dir=reports))
    assert result.continue_flags == ("--allow-unproven", "--report", str(reports))
    assert f"--continue --allow-unproven --report '{reports}'" in "\n".join(result.next_steps)
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 3 and "key 'report_dir'" in out, out
    code, out = run(b, "--continue", "--allow-unproven", "--report", str(reports))
    assert code == 4 and f"--report '{reports}'" in out, out


# --- found by a fresh user on the change above --------------------------------------------------------------------

@pytest.mark.parametrize("how", ["a folder in .rebase that holds files", "a new folder in .rebase",
                                 ".rebase a link to the folder's parent"])
def test_a_work_folder_under_the_packs_rebase_is_the_users(conflicting, how):  # noqa: F811
    """`--work` whose parent resolved to <pack>/.rebase counted as the tool's own folder: no emptiness or marker
    check, and --abort removed it whole (through a linked .rebase, the folder it points at too)."""
    b, old, new = conflicting
    big = b.base / "big"
    (big / "proj").mkdir(parents=True)
    (big / "proj/thesis.txt").write_text("precious\n")
    if how.startswith(".rebase a link"):
        (b.pack / ".rebase").symlink_to(big)
        work = big / "proj"
    else:
        work = b.pack / ".rebase" / ("keep" if "holds" in how else "mine")
        work.parent.mkdir()
        if "holds" in how:
            work.mkdir()
            (work / "data").write_text("mine\n")
    before = world(b.base)
    code, out = run(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", "--name", "m2",
                    "--work", str(work))
    if how == "a new folder in .rebase":  # taken, and the user's: marked, and --abort drops only what it made
        assert code == 4 and (work / ".fixpack-rebase").read_text() == "made\n", out
        (work.parent / "other.txt").write_text("beside\n")
        code, out = run(b, "--abort", "--work", str(work))
        assert code == 0 and not work.exists() and (b.pack / ".rebase/other.txt").is_file(), out
        return
    assert code == (3 if "link" in how else 2), out
    assert ("is a symbolic link to" if "link" in how else "the folder already holds files") in out, out
    assert world(b.base) == before
    (work / "state.json").write_text(json.dumps(state(b)))  # and a marked state there: never the folder whole
    (work / ".fixpack-rebase").write_text("given\n")
    before = world(b.base)
    code, out = run(b, "--abort", "--work", str(work))
    if "link" in how:  # the linked .rebase is refused: nothing removed
        assert code == 3 and "is a symbolic link to" in out and world(b.base) == before, out
    else:  # the rebase's files only
        assert code == 0 and [p.name for p in work.iterdir()] == ["data"] and (b.pack / ".rebase").is_dir(), out


def test_dropping_a_work_folder_removes_only_the_repositories_its_state_records(conflicting):  # noqa: F811
    """--abort removed every entry of the --work folder named like a fix of the pack, the user's too."""
    b, old, new = conflicting
    work = b.base / "wk"
    assert rebase.start(req(b, old, new, work=work)).status == "conflicts"
    assert json.loads((work / "state.json").read_text())["repos"] == ["first"]
    (work / "second").mkdir()
    (work / "second/notes.txt").write_text("mine\n")
    (work / "third").write_text("mine too\n")
    code, out = run(b, "--abort", "--work", str(work))
    assert code == 0 and sorted(p.name for p in work.iterdir()) == ["second", "third"], out
    assert (work / "second/notes.txt").read_text() == "mine\n"


def test_abort_refuses_a_forged_record_of_a_committed_file_as_made(planted):  # noqa: F811
    """A planted marker and state.json whose backups say the rebase made profiles/p1.toml and .lock (null):
    --abort deleted both committed files."""
    b, outside = planted
    (outside / ".fixpack-rebase").write_text("given\n")
    made = {"profiles/p1.toml": None, "profiles/p1.lock": None}
    (outside / "state.json").write_text(json.dumps(state(b, to="p1", backups=made)))
    before = world(b.base)
    code, out = run(b, "--abort", "--work", str(outside))
    assert code == 3 and "backups['profiles/p1.lock'] is null" in out, out
    assert "but git tracks profiles/p1.lock" in out and world(b.base) == before


def test_abort_refuses_forged_bytes_for_a_committed_file_and_touches_no_index(planted):  # noqa: F811
    """A planted state whose backups hold other bytes for the committed, unchanged profiles/p1.toml: --abort wrote
    them over it ('1 pack file(s) restored'). And a refused --abort must not rewrite .git/index (git's diff
    refreshed it where the file's times had changed: a copied pack)."""
    import base64
    import os

    b, outside = planted
    (outside / ".fixpack-rebase").write_text("given\n")
    (outside / "state.json").write_text(json.dumps(state(b, to="p1", backups={
        "profiles/p1.toml": base64.b64encode(b"hello").decode()})))
    os.utime(b.pack / "profiles/p1.toml", (1, 1))  # the index's stat data of it is stale now
    before, index = world(b.base), (b.pack / ".git/index").read_bytes()  # (world leaves .git out)
    code, out = run(b, "--abort", "--work", str(outside))
    assert code == 3 and "backups['profiles/p1.toml'] holds bytes profiles/p1.toml never had" in out, out
    assert world(b.base) == before and (b.pack / ".git/index").read_bytes() == index


def test_a_second_rebase_in_a_busy_work_folder_names_the_one_there(conflicting):  # noqa: F811
    b, old, new = conflicting
    work = b.base / "wk"
    rebase.start(req(b, old, new, work=work, name="m5"))
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=work, name="m6"))
    assert "a rebase to m5 is in progress" in str(err.value) and "m6" not in str(err.value), str(err.value)


def test_a_work_folder_whose_parent_is_missing_is_refused(conflicting):  # noqa: F811
    """--work /x/a/b made the parents, and --abort removed b only."""
    b, old, new = conflicting
    work = b.base / "newp/a/b"
    before = world(b.base)
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=work))
    assert err.value.exit_code == 2 and f"the folder {work.parent} does not exist" in str(err.value), str(err.value)
    assert world(b.base) == before


def test_abort_says_the_report_it_keeps(conflicting):  # noqa: F811
    """--abort said '0 pack file(s) restored or removed' and left reports/rebase-*.{md,json} unsaid."""
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    code, out = run(b, "--abort")
    report = b.pack / "reports/rebase-p1-to-v2.0"
    assert code == 0 and "its report is kept" in out and f"{report}.md" in out and f"{report}.json" in out, out
    rebase.start(req(b, old, new))
    code, out = run(b, "--abort", "--json")
    assert code == 0 and json.loads(out)["reports_kept"] == [f"{report}.md", f"{report}.json"], out


def test_a_finished_rebase_drops_the_repositories_it_resolved_in_a_work_folder(conflicting):  # noqa: F811
    """A resolved conflict's record stays until the rebase is done; its repository is the rebase's ("repos") and
    goes with the rest."""
    b, old, new = conflicting
    work = b.base / "wk"
    rebase.start(req(b, old, new, work=work))
    (work / "first" / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    git(work / "first", "add", MOD)
    (work / "notes.txt").write_text("mine\n")
    done = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, work=work, allow_unproven=True))
    assert done.status == "done" and [p.name for p in work.iterdir()] == ["notes.txt"], done.markdown


# --- a --work folder with a state.json of another's, and one inside the pack -----------------------------------------

@pytest.mark.parametrize("name", ["", "m9"])  # (a --name is checked before the release copies are read)
@pytest.mark.parametrize("case", ["a rebase's state, no marker", "another program's state.json, marked",
                                  "a state.json that is no JSON, marked", "another schema's state, marked"])
def test_a_state_json_no_rebase_of_this_tool_wrote_is_a_file_like_any(conflicting, case, name):  # noqa: F811
    """A --work folder holding a state.json the rebase did not write (no marker, or another document) was refused
    as 'a rebase ... is in progress', with --continue and --abort commands that then refuse that folder (exit 3):
    it is a folder that holds files, and the message says the folder must be new or empty."""
    b, old, new = conflicting
    work = b.base / "wk"
    work.mkdir()
    doc = {"a rebase's state, no marker": json.dumps(state(b, to="m9")),
           "another program's state.json, marked": json.dumps({"name": "my-app", "to": "prod", "window": [3, 4]}),
           "a state.json that is no JSON, marked": "window=3\n",
           "another schema's state, marked": json.dumps(state(b, to="m9", schema=99))}[case]
    (work / "state.json").write_text(doc)
    if "marked" in case:
        (work / ".fixpack-rebase").write_text("given\n")
    before = world(b.base)
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=work, name=name))
    said = str(err.value)
    assert err.value.exit_code == 2 and f"--work {work}: the folder already holds files" in said, said
    assert "state.json" in said and "must be new or empty" in said and "in progress" not in said, said
    assert world(b.base) == before


def test_a_rebase_in_progress_in_a_work_folder_is_still_named(conflicting):  # noqa: F811
    """The refusal above is for a state.json of another's: the start's own state and marker still say the
    rebase in progress there, with the commands that finish or drop it."""
    b, old, new = conflicting
    work = b.base / "wk"
    assert rebase.start(req(b, old, new, work=work, name="m7")).status == "conflicts"
    for name in ("", "m8"):
        code, out = run(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}",
                        *(["--name", name] if name else []), "--work", str(work))
        assert code == 2 and f"a rebase to m7 is in progress ({work / 'state.json'})" in out, out
        assert f"--continue --pack {b.pack} --work {work}" in out and "--abort" in out, out


INSIDE = {".git": ".git/wk", "fixes": "fixes/wk", "fixes, an empty folder": "fixes/first/wk",
          "profiles": "profiles/wk", "the pack itself": ".", "the pack's .rebase itself": ".rebase"}


@pytest.mark.parametrize("name", ["", "m9"])
@pytest.mark.parametrize("where", sorted(INSIDE) + ["a link into the pack", "a link to the pack's parent"])
def test_a_work_folder_inside_the_pack_is_refused(conflicting, where, name):  # noqa: F811
    """--work under <pack>/.git/ or <pack>/fixes/ (anywhere in the pack but its .rebase/) was taken: the work
    repositories became files of the pack (under .git, git's own folder). Refused (exit 2) naming the folder and
    the pack, whatever symbolic link leads there; nothing written."""
    b, old, new = conflicting
    (b.pack / ".rebase").mkdir()
    if where == "a link into the pack":
        (b.base / "lnk").symlink_to(b.pack / "fixes")
        given, real = b.base / "lnk" / "wk", b.pack / "fixes/wk"
    elif where == "a link to the pack's parent":
        (b.base / "up").symlink_to(b.base)
        given, real = b.base / "up" / b.pack.name / ".git" / "wk", b.pack / ".git/wk"
    else:
        given = real = (b.pack / INSIDE[where]).resolve()
        if where == "fixes, an empty folder":
            real.mkdir()
    before, gitdir = world(b.base), sorted(p.name for p in (b.pack / ".git").iterdir())
    with pytest.raises(FixpackError) as err:
        rebase.start(req(b, old, new, work=given, name=name))
    said = str(err.value)
    assert err.value.exit_code == 2 and f"--work {given}" in said, said
    assert f"the folder is inside the pack {b.pack.resolve()}" in said and "pick a folder outside the pack" in said
    assert (f"(that is {real})" in said) == (given != real) and "nothing was written" in said, said
    assert world(b.base) == before and sorted(p.name for p in (b.pack / ".git").iterdir()) == gitdir
    code, out = run(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", "--work", str(given),
                    *(["--name", name] if name else []))
    assert code == 2 and "is inside the pack" in out and world(b.base) == before, out


def test_a_work_folder_under_the_packs_rebase_or_outside_it_is_taken(conflicting):  # noqa: F811
    """The pack's own .rebase/ is left to the user (the default work folder lies there), and so is a folder
    beside the pack whose name starts like the pack's (a path prefix is no folder inside it)."""
    b, old, new = conflicting
    (b.pack / ".rebase").mkdir()
    for work in (b.pack / ".rebase/mine", b.base / f"{b.pack.name}-work"):
        assert rebase.start(req(b, old, new, work=work, name="m3")).status == "conflicts"
        code, out = run(b, "--abort", "--work", str(work))
        assert code == 0 and not work.exists(), out
    assert rebase.start(req(b, old, new, name="m3")).status == "conflicts"  # the default, as before
    assert (b.pack / ".rebase/m3/first/.git").is_dir()


# --- a dirty pack while a --work rebase under <pack>/.rebase is in progress ---------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout in a child process (its printed commands name it so), from a folder without a
    ``fixpack`` package."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=Path(os.environ["HOME"]).parent)


@pytest.mark.parametrize("action", ["continue", "abort"])
def test_a_dirty_pack_names_a_work_rebase_under_the_packs_rebase_folder_by_its_work(conflicting, action):  # noqa: F811
    """A rebase started with `--work <pack>/.rebase/mine`, then a change in fixes/: a new start found the dirty
    pack, took any `<pack>/.rebase/*/state.json` for the default folder's and printed --continue/--abort with
    --name, which look for `<pack>/.rebase/<name>`, not this folder: they failed. They name its --work now and
    run as printed: --continue finishes it, --abort drops it."""
    b, old, new = conflicting
    work = b.pack / ".rebase" / "mine"
    (b.pack / ".rebase").mkdir()
    assert rebase.start(req(b, old, new, work=work)).status == "conflicts"
    (work / "first" / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    git(work / "first", "add", MOD)
    (b.pack / "fixes" / "notes.txt").write_text("a note of the user's\n")  # the pack is dirty
    r = _cli("rebase", "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", "--pack", str(b.pack))
    assert r.returncode == 2 and f"a rebase to v2.0 is in progress ({work / 'state.json'})" in r.stderr, r.stderr
    printed = dict(zip(("continue", "abort"), r.stderr.split("`")[1::2][:2]))
    assert all(f"--{a} --pack {b.pack} --work {work}" in c for a, c in printed.items()), printed
    done = subprocess.run(printed[action], shell=True, capture_output=True, text=True)
    assert done.returncode == 0, (printed[action], done.stdout, done.stderr)
    assert not (work / "state.json").exists()
    if action == "continue":
        assert (b.pack / "profiles/v2.0.toml").is_file()


def test_the_hand_steps_for_a_damaged_state_run_as_printed_in_a_folder_with_a_space(tmp_path):
    """A damaged state.json is refused with the steps that undo a rebase by hand: `rm -r WORK` and
    `cd PACK && git checkout ...`, their paths unquoted: a pack in `my packs/` had `rm -r` remove `my` beside it
    (and fail), and `cd` fail. The paths are quoted for the shell: run as printed, they remove the work folder
    and nothing else, and put the pack back, an edit staged there too (`git checkout -- fixes profiles` put back
    the index's copy: the hint now checks out from HEAD)."""
    import re

    from conftest import PackBuilder
    from test_rebase import BASE, OTHER, OTHER_BASE, commit_pack, new_release

    b = PackBuilder(tmp_path / "my packs")
    old = b.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    b.add_fix("first", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    mid = BASE.replace("line 5\n", "five\n")
    b.add_fix("third", {MOD: mid}, {MOD: mid.replace("line 30\n", "thirty\n")})
    b.profile(["first", "third"])
    b.lock(old)
    commit_pack(b)
    new = new_release(b, {MOD: BASE.replace("line 5\n", "line five (upstream)\n"), OTHER: OTHER_BASE})
    decoy = tmp_path / "my"  # what `rm -r <tmp>/my packs/...` unquoted removes
    decoy.mkdir()
    (decoy / "keep.txt").write_text("keep me\n")
    assert rebase.start(req(b, old, new)).status == "conflicts"
    work = b.pack / ".rebase/v2.0"
    data = json.loads((work / "state.json").read_text())
    del data["phase"]
    (work / "state.json").write_text(json.dumps(data))
    pack_before = {k: v for k, v in world(b.pack).items() if not k.startswith(".rebase")}
    series = b.pack / "fixes/series"  # a staged edit: `git checkout -- fixes profiles` (the hint before) kept it
    series.write_text(series.read_text() + "# staged\n")
    subprocess.run(["git", "-C", str(b.pack), "add", "fixes/series"], check=True, capture_output=True)
    r = _cli("rebase", "--abort", "--pack", str(b.pack))
    assert r.returncode == 3 and "key 'phase' is missing" in r.stderr, r.stderr
    said = " ".join(r.stderr.split())
    steps = [re.search(r"\((rm -r .*?)\) and put", said), re.search(r"back with git \((cd .*? fixes profiles)\)", said)]
    assert all(steps), said
    for step in steps:
        done = subprocess.run(step.group(1), shell=True, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, (step.group(1), done.stderr)
    assert not work.exists() and (decoy / "keep.txt").read_text() == "keep me\n"
    assert {k: v for k, v in world(b.pack).items() if not k.startswith(".rebase")} == pack_before


@pytest.mark.parametrize("given", [False, True])
def test_continue_without_its_release_copy_prints_an_abort_that_runs(conflicting, given):  # noqa: F811
    """--continue when a release copy the rebase started from is gone names the --abort that drops the rebase;
    run as printed (with the --work the rebase was given, else the default folder's --name), it does."""
    import shutil

    b, old, new = conflicting
    work = b.base / "wk" if given else b.pack / ".rebase/v2.0"
    assert rebase.start(req(b, old, new, **({"work": work} if given else {}))).status == "conflicts"
    shutil.rmtree(new)
    r = _cli("rebase", "--continue", "--allow-unproven", "--pack", str(b.pack), *(["--work", str(work)] if given else []))
    assert r.returncode == 3 and "is gone or no longer reads as one" in r.stderr, r.stderr
    abort = " ".join(r.stderr.split()).split("or drop the rebase with `", 1)[1].split("`", 1)[0]
    assert ("--work" in abort) == given, abort
    done = subprocess.run(abort, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, (abort, done.stderr)
    assert not (work / "state.json").exists()


@pytest.mark.parametrize("action", ["continue", "abort"])
def test_continue_or_abort_by_name_of_a_rebase_started_with_work_names_its_work(conflicting, action):  # noqa: F811
    """`rebase --continue --name m7` (or --abort, or either without --name) of a rebase started with `--work DIR`
    said "no rebase in progress under <pack>/.rebase/m7", not where it is. The pack's entry of it knows DIR: it says the rebase was
    started with --work DIR (exit 2, nothing written) and the command with --work DIR, which runs as printed."""
    b, old, new = conflicting
    work = b.base / "wk"
    assert rebase.start(req(b, old, new, work=work, name="m7")).status == "conflicts"
    (work / "first" / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    git(work / "first", "add", MOD)
    before = world(b.base)
    for named in (["--name", "m7"], []):  # without --name too: the only rebase in progress
        r = _cli("rebase", f"--{action}", *named, "--pack", str(b.pack),
                 *(["--allow-unproven"] if action == "continue" else []))
        assert r.returncode == 2 and world(b.base) == before, r.stderr
        assert f"rebase m7 was started with --work {work.resolve()}; run: `" in r.stderr, r.stderr
    printed = r.stderr.split("`")[1]
    assert f"--{action} --pack {b.pack} --work {work.resolve()}" in printed, printed
    done = subprocess.run(printed, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, (printed, done.stdout, done.stderr)
    assert not (work / "state.json").exists()


def test_a_work_folder_without_its_marker_gives_steps_that_put_the_pack_back(conflicting):  # noqa: F811
    """--work W whose marker is gone: refused (exit 3) with the steps that drop the rebase by hand: `rm` of its
    state.json and `git checkout HEAD -- fixes profiles && git clean -fd fixes profiles` (it had neither HEAD, so an
    edit staged in the pack stayed, nor `git clean`, so a file the rebase wrote stayed and the next rebase was refused
    as uncommitted changes). Run as printed, they put the pack back to its commit."""
    import re

    from test_rebase import pack_files
    b, old, new = conflicting
    committed = pack_files(b)
    work = b.base / "wk"
    assert rebase.start(req(b, old, new, work=work)).status == "conflicts"
    (work / ".fixpack-rebase").unlink()
    (b.pack / "fixes/first/v2.0.patch").write_text("a file the rebase wrote\n")
    series = b.pack / "fixes/series"
    series.write_text(series.read_text() + "# staged\n")
    git(b.pack, "add", "fixes/series")
    code, out = run(b, "--abort", "--work", str(work))
    said = " ".join(out.split())
    assert code == 3 and "is no work folder a rebase made" in said, out
    steps = [re.search(r"\((rm \S*state\.json)\)", said), re.search(r"back with git \((cd .*? fixes profiles)\)", said)]
    assert all(steps), said
    assert steps[1].group(1).endswith("git checkout HEAD -- fixes profiles && git clean -fd fixes profiles"), said
    for step in steps:
        done = subprocess.run(step.group(1), shell=True, capture_output=True, text=True)
        assert done.returncode == 0, (step.group(1), done.stderr)
    assert pack_files(b) == committed and not (work / "state.json").exists()
