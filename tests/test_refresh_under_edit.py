"""A refresh from an edit's work tree writes over nothing that came into the pack since the edit began, and a
version it gives names one change: found by a fresh maintainer, whose refresh from an older work tree wiped out
another maintainer's committed change to the same fix and gave that change's version to its own (a lock that
`fixpack lock` then refused against git HEAD's)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git, snapshot
from test_authoring import MOD, pack3  # noqa: F401 (a fixture)

from fixpack import engine
from fixpack.editrefresh import refresh_from_work
from fixpack.editwork import start
from fixpack.errors import BadInputError, ConflictError
from fixpack.loader import load_pack, load_profile
from fixpack.lockfile import read_lock
from fixpack.patchtext import normalize_text


def _commit_pack(pack: Path, message: str) -> None:
    git(pack, "add", "-A", "fixes", "profiles")
    git(pack, "commit", "-qm", message)


def _amend(work: Path, old: str, new: str) -> None:
    text = (work / MOD).read_text()
    assert old in text
    (work / MOD).write_text(text.replace(old, new, 1))
    git(work, "commit", "-qa", "--amend", "--no-edit")


def _version(pack: Path, fix: str = "b") -> int:
    return int(re.search(r"^version = (\d+)$", (pack / f"fixes/{fix}/fix.toml").read_text(), re.M).group(1))


@pytest.fixture
def in_git(pack3):  # noqa: F811
    builder, clean = pack3
    git(builder.pack, "init", "-q")
    _commit_pack(builder.pack, "the pack")
    return builder, clean


def _another_maintainer_changes_b(builder, clean) -> None:
    """Fix b's comment reworded by someone else, version 2, locked and committed (a pull brings the same)."""
    patch = builder.pack / "fixes/b/0001-change.patch"
    patch.write_text(patch.read_text().replace("+# a comment\n", "+# B's comment\n"))
    toml = builder.pack / "fixes/b/fix.toml"
    toml.write_text(toml.read_text().replace("version = 1\n", "version = 2\n"))
    fix = load_pack(builder.pack).fixes["b"]
    patch.write_text(normalize_text(fix, patch.read_text()))
    builder.lock(clean)
    _commit_pack(builder.pack, "b v2")


def _run_steps(said: str, work: Path, builder, clean: Path, fix: str = "b",  # type: ignore[no-untyped-def]
               new: bool = False) -> None:
    """Run the steps a refusal ``said`` gives, each as written: the first three from a shell in the work tree, as
    `refresh` is run there (the second removes it: found by a fresh maintainer, the third then found no pack, exit 5);
    the cherry-pick (``new``: git am, one commit a patch) must merge cleanly (the pack's change and this edit's are on
    other lines)."""
    steps = re.findall(r"`([^`]*)`", said.partition("Keep your commits" if new else "Keep your change")[2])
    assert (" am -3 " if new else "cherry-pick") in steps[3] and "rebase -i" in steps[6], steps
    env = {**os.environ, "PYTHONPATH": str(REPO), "GIT_EDITOR": "true",
           "GIT_SEQUENCE_EDITOR": "sed -i '2s/^pick/fixup/'", "FIXPACK_CACHE": str(builder.base / "cache")}
    root = f" --root demo={shlex.quote(str(clean))}"
    first = [step + (root if f" edit {fix} --profile p1" in step or f" new {fix} --profile p1" in step else "")
             for step in steps[:3]]
    r = subprocess.run(" && ".join(first), shell=True, cwd=work, env=env, capture_output=True, text=True)
    assert r.returncode == 0, (first, r.stdout, r.stderr)
    for step in (steps[3], *steps[6:]):  # (4-6: what to do on a conflict)
        r = subprocess.run(step, shell=True, cwd=builder.base, env=env, capture_output=True, text=True)
        assert r.returncode == 0, (step, r.stdout, r.stderr)


def test_a_change_that_came_in_under_the_edit_is_refused_and_its_steps_carry_the_commits_over(in_git):
    builder, clean = in_git
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    _another_maintainer_changes_b(builder, clean)
    _amend(work, "line 40\n", "forty\n")  # this maintainer's change, on the fix as it was
    before = snapshot(builder.base)
    with pytest.raises(ConflictError) as caught:
        refresh_from_work(builder.pack, "b")
    said = str(caught.value)
    assert snapshot(builder.base) == before  # nothing written: the pack, the edit's state, the work tree
    assert said.startswith(f"fix b changed in the pack since the edit began: {work} is on the fix as it was "
                           f"(version 1); the pack holds version 2 with another change")
    assert "nothing was written" in said
    _run_steps(said, work, builder, clean)
    patch = (builder.pack / "fixes/b/0001-change.patch").read_text()
    assert "+# B's comment\n" in patch and "+forty\n" in patch and "+# a comment\n" not in patch
    assert _version(builder.pack) == 3 and not (builder.pack / ".edit/.b.carry.git").exists()
    (builder.pack / "profiles/p1.lock").unlink()
    builder.lock(clean)  # the versions as `lock` would have them against git HEAD's lock: no refusal
    assert read_lock(load_profile(load_pack(builder.pack), "p1")).fix("b").version == 3


def test_a_version_counts_from_the_last_refresh_committed(in_git):
    builder, clean = in_git
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    seen = []
    for old, new, commit in [("line 40\n", "forty\n", False), ("forty\n", "FORTY\n", True),
                             ("FORTY\n", "Forty\n", False), ("Forty\n", "4O\n", False), ("4O\n", "FORTY\n", False)]:
        _amend(work, old, new)
        refresh_from_work(builder.pack, "b")  # never refused: the pack holds this edit's own last write
        seen.append(_version(builder.pack))
        if commit:
            _commit_pack(builder.pack, new)
    # v2 while uncommitted; committed, the next change is v3 (its own, uncommitted, stays v3); back to the
    # change committed as v2: v2 again
    assert seen == [2, 2, 3, 3, 2]
    (builder.pack / "profiles/p1.lock").unlink()
    builder.lock(clean)  # no "records version 2 with change ..." against git HEAD's lock


def test_a_refresh_killed_before_it_saved_the_edit_s_state_is_taken_by_the_next(in_git):
    builder, clean = in_git
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    state = builder.pack / ".edit/b.json"
    _amend(work, "line 40\n", "forty\n")
    kept = state.read_bytes()
    refresh_from_work(builder.pack, "b")
    state.write_bytes(kept)  # as a refresh killed after its pack write, before it saved the state
    assert refresh_from_work(builder.pack, "b") is not None and _version(builder.pack) == 2


def test_another_profile_s_release_copy_that_cannot_be_had_is_said_as_that_profile_s(pack3):  # noqa: F811
    """Found by a fresh maintainer: a refresh whose fix another profile reads too (its lock regenerated as well)
    said only that profile's fetch error ("vllm 0.30.1: no sdist on the index"), no profile, no way on."""
    builder, clean = pack3
    builder.profile(["a", "b", "c"], name="p2")  # the same patch files; its release copy: none to fetch from
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    _amend(work, "line 40\n", "forty\n")
    before = snapshot(builder.base)
    with pytest.raises(BadInputError) as caught:
        refresh_from_work(builder.pack, "b")
    said = str(caught.value)
    assert said.startswith("profile p2 reads b's patch files too (fixes/b), so this refresh regenerates its lock, on "
                           "its clean release copies, which could not be had: target demo has no "), said
    assert "nothing was written (fetch them where the index can be reached: `" in said and " fetch --profile p2 " in said
    assert snapshot(builder.base) == before


def test_a_refresh_that_makes_a_later_fix_s_context_occur_twice_warns(pack3, capsys):  # noqa: F811
    """Found by a fresh maintainer: the later fix was said 'exact' and locked, silently ambiguous on any drift."""
    from fixpack.cli_author import print_refreshed

    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "a", roots={"demo": clean}).work)
    text = (work / MOD).read_text()
    (work / MOD).write_text(text + "".join(f"line {n}\n" for n in range(26, 35)))  # a copy of b's pre-image
    git(work, "commit", "-qa", "--amend", "--no-edit")
    done = refresh_from_work(builder.pack, "a")
    assert done is not None and [f.state for f in done.outcome.later] == ["exact", "exact"]
    assert done.outcome.warnings == [f"profile p1: fix b: {MOD} hunk #1 (fixes/b/0001-change.patch:20): its "
                                     f"pre-image occurs 2 times in the file it "
                                     f"is locked on: on an image whose file differs from the lock's (a drift) it is "
                                     f"refused as ambiguous; give the hunk more context lines, so that it occurs once"]
    print_refreshed(done, False, "refresh")  # the CLI's words, on stderr
    assert capsys.readouterr().err == f"fixpack: warning: {done.outcome.warnings[0]}\n"


@pytest.mark.parametrize("fault_at", range(1, 9))
def test_a_refresh_killed_at_any_write_is_not_taken_for_another_s_change(in_git, fault_at):
    """Found by a fresh maintainer: killed after its pack write, before it saved the edit's state, a refresh left the
    pack holding its own change, which the next refresh (the work tree amended since) refused as another's."""
    builder, clean = in_git
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    _amend(work, "line 40\n", "forty\n")
    env = {**os.environ, "FIXPACK_FAULT_AT": str(fault_at), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", "b", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode in (0, 137), r.stderr
    _amend(work, "forty\n", "FORTY\n")
    assert refresh_from_work(builder.pack, "b") is not None and _version(builder.pack) == 2
    assert "+FORTY\n" in (builder.pack / "fixes/b/0001-change.patch").read_text()
    (builder.pack / "profiles/p1.lock").unlink()
    builder.lock(clean)


def test_a_pull_of_the_change_the_work_tree_holds_keeps_its_committed_version(in_git):
    """Found by a fresh maintainer: the pack holding, at v3, the very change the work tree gives (pulled after the
    edit began at v1) was refreshed as v2, a version committed for another change."""
    builder, clean = in_git
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    state = builder.pack / ".edit/b.json"
    begun = state.read_bytes()  # the edit as it began, at v1
    for old, new in (("line 40\n", "forty\n"), ("forty\n", "FORTY\n")):  # v2, then v3, each committed
        _amend(work, old, new)
        refresh_from_work(builder.pack, "b")
        _commit_pack(builder.pack, new)
    assert _version(builder.pack) == 3
    state.write_bytes(begun)  # as another maintainer's edit begun at v1, whose work tree holds the change pulled
    assert refresh_from_work(builder.pack, "b") is not None and _version(builder.pack) == 3
    (builder.pack / "profiles/p1.lock").unlink()
    builder.lock(clean)


def test_a_refresh_on_fixes_that_changed_under_it_carries_its_change_by_the_steps(pack3):  # noqa: F811
    """Two edits at once: b refreshed with a line more moves c, whose work tree still has the old b; the refusal's
    steps carry c's change (one line of its own patch) onto c as the pack has it, on the new b."""
    from test_loop_edges import b_moved_under_c

    builder, clean = pack3
    work_c = b_moved_under_c(builder, clean)
    with pytest.raises(ConflictError) as caught:
        refresh_from_work(builder.pack, "c")
    _run_steps(str(caught.value), work_c, builder, clean, "c")
    patch = "".join(p.read_text() for p in sorted((builder.pack / "fixes/c").glob("*.patch")))
    assert "+FIFTY\n" in patch and "+fifty\n" not in patch and not (builder.pack / ".edit/.c.carry.git").exists()


def test_a_new_fix_whose_base_changed_under_it_carries_its_commits_by_the_steps(pack3):  # noqa: F811
    """The same for a fix `new` made (none in the pack to merge onto): its commits carried one by one."""
    builder, clean = pack3
    work_d = Path(start(builder.pack, "p1", "d", new=True, target="demo", roots={"demo": clean}).work)
    work_b = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work_b / MOD).write_text((work_b / MOD).read_text().replace("# a comment\n", "# a comment\n# on two lines\n"))
    git(work_b, "commit", "-qa", "--amend", "--no-edit")
    assert refresh_from_work(builder.pack, "b") is not None
    (work_d / MOD).write_text((work_d / MOD).read_text().replace("line 55\n", "fifty-five\n"))
    git(work_d, "commit", "-qam", "D: fifty-five")
    with pytest.raises(ConflictError) as caught:
        refresh_from_work(builder.pack, "d")
    _run_steps(str(caught.value), work_d, builder, clean, "d", new=True)
    patch = "".join(p.read_text() for p in sorted((builder.pack / "fixes/d").glob("*.patch")))
    assert "+fifty-five\n" in patch and "# on two lines" not in patch and not (builder.pack / ".edit/.d.commits").exists()


@pytest.mark.parametrize("stop", ["rebase -i at an edit step", "a cherry-pick at a conflict",
                                  "a cherry-pick of two commits, the first committed by hand"])
def test_a_refresh_while_a_git_operation_is_stopped_half_way_is_refused(pack3, stop):  # noqa: F811
    """Found by a fresh maintainer: `git rebase -i fixpack-base` stopped at an `edit` step (as the README suggests
    for splitting commits), then refresh: it wrote the commits HEAD held (one of two), exit 0, and a later `edit
    --abort` deleted the only copy of the other. It is refused (exit 2), nothing written, with how to finish."""
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    text = (work / MOD).read_text()
    (work / MOD).write_text(text.replace("line 40\n", "forty\n"))
    git(work, "commit", "-qam", "second")
    if stop.startswith("rebase"):
        env = {**os.environ, "GIT_SEQUENCE_EDITOR": "sed -i 1s/^pick/edit/"}
        subprocess.run(["git", "-C", str(work), "rebase", "-i", "fixpack-base"], env=env, check=True,
                       capture_output=True)
        how = "git rebase --continue"
    else:
        git(work, "branch", "side")
        git(work, "reset", "-q", "--hard", "HEAD~1")
        (work / MOD).write_text(text.replace("line 40\n", "FORTY\n"))
        git(work, "commit", "-qam", "other")
        subprocess.run(["git", "-C", str(work), "cherry-pick", "side"], capture_output=True)  # conflicts
        if stop.startswith("a cherry-pick of two"):  # (found by a fresh user: .git/sequencer alone tells it)
            git(work, "cherry-pick", "--abort")
            (work / "demo_pkg" / "other.py").write_text("x = 1\n")
            git(work, "checkout", "-q", "side")
            git(work, "add", "-A")
            git(work, "commit", "-qm", "third")
            git(work, "checkout", "-q", "-")
            subprocess.run(["git", "-C", str(work), "cherry-pick", "side~1", "side"], capture_output=True)
            (work / MOD).write_text(text.replace("line 40\n", "Forty\n"))
            git(work, "add", "-A")
            git(work, "commit", "-qm", "resolved")  # (not --continue: the sequence is still under way)
            assert (work / ".git" / "sequencer").is_dir() and not (work / ".git" / "CHERRY_PICK_HEAD").exists()
            how = "git cherry-pick --continue or git revert --continue"
        else:
            subprocess.run(["git", "-C", str(work), "checkout", "HEAD", "--", MOD], check=True)  # (clean, stopped)
            how = "git cherry-pick --continue"
    before = snapshot(builder.pack)
    with pytest.raises(BadInputError, match=rf"under way there \(stopped half way\): finish it \({how}"):
        refresh_from_work(builder.pack, "b")
    assert snapshot(builder.pack) == before


def test_sigterm_during_a_refresh_leaves_no_staging_copy(pack3, tmp_path, monkeypatch):  # noqa: F811
    """Found by a fresh maintainer: SIGTERM (a CI timeout) during a refresh ended it with no message, exit 143, and
    left $TMPDIR/fixpack-stage-* (a whole copy of the pack). It unwinds as Ctrl-C does: the copy goes, the edit's state
    is as before, nothing in the pack is written, exit 143 with what happened."""
    import signal
    import tempfile
    import time

    from fixpack import packupdate
    from fixpack.errors import Terminated

    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    _amend(work, "line 40\n", "forty\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))

    def stopped(*args, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        pytest.fail("SIGTERM did not stop the refresh")

    monkeypatch.setattr(packupdate, "check_later", stopped)
    before = snapshot(builder.base)
    with pytest.raises(Terminated, match=r"terminated \(SIGTERM\) while staging the refresh of b; its staging copy"):
        refresh_from_work(builder.pack, "b")
    assert list(temp.iterdir()) == [] and snapshot(builder.base) == before
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("path", ["top.txt", "other_pkg/x.py"])
def test_a_commit_changing_a_file_outside_the_package_is_named_at_the_commit(pack3, path):  # noqa: F811
    """Found by a fresh maintainer: the refusal named the pack's current patch file at a line of the text the refresh
    had not written (line 15 of 0001-change.patch); it names the commit and the file."""
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text("x\n")
    git(work, "add", path)
    git(work, "commit", "-qm", "Stray file")
    before = snapshot(builder.pack)
    with pytest.raises(BadInputError, match=rf"commit [0-9a-f]{{12}} \('Stray file'\) changes '{path}', outside the "
                                            rf"target's package folder demo_pkg/: take that file out of the commit"):
        refresh_from_work(builder.pack, "b")
    assert snapshot(builder.pack) == before


def test_a_folder_at_a_pack_file_s_temp_path_is_named_in_the_pack(pack3):  # noqa: F811
    """Found by a fresh user: a folder at profiles/.p1.lock.fixpack-tmp made refresh fail in its staging copy (exit 5,
    naming a temporary folder already gone, "free space there"); it is refused at the pack's own path (exit 3)."""
    from fixpack.errors import MismatchError

    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work)
    _amend(work, "line 40\n", "forty\n")
    folder = builder.pack / "profiles" / ".p1.lock.fixpack-tmp"
    folder.mkdir()
    before = snapshot(builder.pack)
    with pytest.raises(MismatchError, match=rf"{re.escape(str(folder))} is a folder where fixpack writes"):
        refresh_from_work(builder.pack, "b")
    assert snapshot(builder.pack) == before


@pytest.mark.parametrize("new", [False, True])
def test_sigterm_while_an_edit_makes_its_work_tree_removes_it(pack3, monkeypatch, new):  # noqa: F811
    """Found by an attacker: SIGTERM (a CI timeout) during `fixpack edit` (or `new`) ended the process where it stood
    and left .edit/FIX half made, with no .git in it (a `git commit` typed there went into the pack's own repository)
    and no state beside it: the next edit refused it as no edit's, and `edit --abort` as damaged. It unwinds as Ctrl-C
    does: the work tree goes, nothing is written, exit 143 with what happened."""
    import signal
    import time

    from fixpack import editwork
    from fixpack.errors import Terminated

    builder, clean = pack3
    before = snapshot(builder.base)

    def stopped(*args, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        pytest.fail("SIGTERM did not stop the edit")

    monkeypatch.setattr(editwork, "init_work", stopped)  # (the release files are copied by then; no .git yet)
    with pytest.raises(Terminated, match=r"terminated \(SIGTERM\) while making the work tree of (b|n1); it was "
                                         r"removed, and nothing was written") as exc:
        start(builder.pack, "p1", "n1" if new else "b", new=new, target="demo" if new else "", roots={"demo": clean})
    assert exc.value.exit_code == 143
    assert snapshot(builder.base) == before and not (builder.pack / ".edit").exists()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    monkeypatch.undo()
    assert Path(start(builder.pack, "p1", "b", roots={"demo": clean}).work).is_dir()  # the next edit is not refused


def test_commits_reordered_in_the_work_tree_keep_their_names_with_their_changes(pack3):  # noqa: F811
    """Found by a maintainer: after `git rebase -i fixpack-base` swapped a fix's two commits, refresh kept the names by
    position, so 0001-add-a-new-file.patch held "Make logger executable" and the other the other. The files are
    numbered again in the new order, each named after its own commit's subject; a refresh with the same order keeps
    the names. (Names not made from the subjects, an imported fix's, stay by position.)"""
    builder, clean = pack3
    work = Path(start(builder.pack, "p1", "n1", new=True, target="demo", roots={"demo": clean}).work)
    (work / "demo_pkg/new.py").write_text("x = 1\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "Add a new file")
    _edit = (work / MOD).read_text()
    (work / MOD).write_text(_edit.replace("line 40\n", "forty\n"))
    git(work, "commit", "-qam", "Change line 40")
    refresh_from_work(builder.pack, "n1")
    folder = builder.pack / "fixes/n1"
    first = ["0001-add-a-new-file.patch", "0002-change-line-40.patch"]
    assert sorted(p.name for p in folder.glob("*.patch")) == first
    env = {**os.environ, "GIT_SEQUENCE_EDITOR": "sed -i '1{h;d};2G'"}  # (the todo's two picks swapped)
    subprocess.run(["git", "rebase", "-q", "-i", "fixpack-base"], cwd=work, env=env, check=True, capture_output=True)
    refresh_from_work(builder.pack, "n1")
    names = sorted(p.name for p in folder.glob("*.patch"))
    assert names == ["0001-change-line-40.patch", "0002-add-a-new-file.patch"], names
    assert "Subject: [PATCH] Add a new file" in (folder / "0002-add-a-new-file.patch").read_text()
    assert "demo_pkg/new.py" not in (folder / "0001-change-line-40.patch").read_text()
    assert re.findall(r'"(\d{4}-[a-z0-9-]+\.patch)"', (folder / "fix.toml").read_text()) == names
    refresh_from_work(builder.pack, "n1")
    assert sorted(p.name for p in folder.glob("*.patch")) == names
    engine.check_lock_fresh(builder.request(clean))
