"""The rebase engine on small real trees and git repositories, with crafted upstream drift: moved lines,
changed context, a conflicting edit (resolved with git, then --continue), an upstreamed fix, a renamed
file, a deleted file; a rebase with nothing to do, a dirty pack, an interrupted rebase."""

import json
import shutil

import pytest
from click.testing import CliRunner
from conftest import git, make_diff, numbered, snapshot

from fixpack import engine, rebase, rebase_session
from fixpack.cli_rebase import rebase_cmd
from fixpack.errors import BadInputError, EnvironmentProblem
from fixpack.loader import load_pack, load_profile
from fixpack.pack_tools import stale_patches
from fixpack.progname import program

MOD = "demo_pkg/mod.py"
OTHER = "demo_pkg/other.py"
BASE = numbered(40)
OTHER_BASE = numbered(30, "other")


def new_release(b, files, name="new"):
    """A release copy of version 2.0 (commit fedcba9876) holding ``files``."""
    b.version, b.commit = "2.0", "fedcba9876"
    try:
        return b.tree(name, files)
    finally:
        b.version, b.commit = "1.0", "abcdef1234"


def commit_pack(b):
    if not (b.pack / ".git").is_dir():
        git(b.pack, "init", "-q", "-b", "main")
        (b.pack / ".gitignore").write_text("/reports/\n/.rebase/\n")
    git(b.pack, "add", "-A")
    git(b.pack, "commit", "-qm", "pack", "--allow-empty")


def pack_files(b):
    """fixes/ and profiles/ with bytes and modes (what a rebase may write)."""
    return {k: v for k, v in snapshot(b.pack).items() if k.startswith(("fixes/", "profiles/"))}


def req(b, old, new, **kw):
    return rebase.RebaseRequest(pack_root=b.pack, profile="p1", roots={"demo": new}, old_roots={"demo": old}, **kw)


def outcomes(result):
    return {o.id: o.outcome for o in result.fixes}


def apply_new(b, new, name="v2.0"):
    """Apply the new profile to a copy of the new release copy: the rebased pack must work there."""
    image = b.base / f"image-{name}"
    shutil.copytree(new, image)
    return engine.apply(b.request(image, name=name)), image


@pytest.fixture
def pack(builder):
    b = builder
    old = b.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    b.add_fix("first", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    b.add_fix("second", {OTHER: OTHER_BASE}, {OTHER: OTHER_BASE.replace("other 20\n", "twenty\n")})
    b.profile(["first", "second"])
    b.lock(old)
    commit_pack(b)
    return b, old


def test_nothing_to_do_writes_no_variant_and_reruns_without_diff(pack):
    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    r = rebase.start(req(b, old, new))
    assert r.status == "done" and r.exit_code == 0
    assert outcomes(r) == {"first": "exact", "second": "exact"}
    assert {o.patch for o in r.fixes} == {"unchanged"}
    assert not list((b.pack / "fixes").glob("*/v2.0"))  # no variant
    loaded = load_pack(b.pack)
    p_old, p_new = load_profile(loaded, "p1"), load_profile(loaded, "v2.0")
    assert (p_new.default, p_new.opt_in) == (p_old.default, p_old.opt_in)
    t_old, t_new = p_old.target("demo"), p_new.target("demo")
    assert (t_new.package, t_new.distribution) == (t_old.package, t_old.distribution)
    assert (t_new.pin.version, t_new.pin.commit) == ("2.0", "fedcba9876")
    lock = json.loads((b.pack / "profiles/v2.0.lock").read_text())
    assert [f["id"] for f in lock["fixes"]] == ["first", "second"]
    # the work folder goes once the rebase is done; only what --undo needs stays
    assert [p.name for p in (b.pack / ".rebase").iterdir()] == ["v2.0.undo.json"]
    commit_pack(b)
    again = rebase.start(req(b, old, new, replace=True))  # the same rebase again: byte for byte the same pack
    assert again.status == "done"
    assert git(b.pack, "status", "--porcelain", "--", "fixes", "profiles") == ""
    applied, _ = apply_new(b, new)
    assert applied.ok


def test_moved_lines_regenerate_the_patch_with_new_numbers(pack):
    b, old = pack
    new = new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})
    r = rebase.start(req(b, old, new))
    first = r.fixes[0]
    assert first.outcome == "exact" and first.patch == "moved" and first.new_version == 1
    assert any("offset +3" in e for e in first.evidence)
    assert "-@@ -2,7 +2,7 @@" in first.interdiff and "+@@ -5,7 +5,7 @@" in first.interdiff
    variant = b.pack / "fixes/first/v2.0"
    assert (variant / "variant.toml").read_text().endswith('version = 1\nrebased_from = "p1"\n')
    assert "@@ -5,7 +5,7 @@" in (variant / "0001-change.patch").read_text()
    assert not (b.pack / "fixes/second/v2.0").exists()  # unchanged: no variant
    loaded = load_pack(b.pack)
    # written in the deterministic form (`fixpack format --check`); the builder's own patches are not
    assert [p for p in stale_patches(loaded) if "v2.0" in p.parts] == []
    assert loaded.for_profile("v2.0").fixes["first"].version == 1
    md = r.report_md.read_text()
    assert "| first | exact | **not proven** | 1 | moved |" in md and "## Interdiffs" in md
    data = json.loads(r.report_json.read_text())
    assert data["status"] == "done" and data["fixes"][0]["outcome"] == "exact"
    applied, image = apply_new(b, new)
    assert applied.ok and "five\n" in (image / MOD).read_text()


def test_changed_context_merges_through_git(pack):
    b, old = pack
    new = new_release(b, {MOD: BASE.replace("line 7\n", "line seven\n"), OTHER: OTHER_BASE})
    r = rebase.start(req(b, old, new))
    first = r.fixes[0]
    assert first.outcome == "merged" and first.patch == "moved" and first.new_version == 1
    assert any("3-way merge" in e for e in first.evidence)
    patch = (b.pack / "fixes/first/v2.0/0001-change.patch").read_text()
    assert " line seven\n" in patch and "-line 5\n+five\n" in patch
    applied, image = apply_new(b, new)
    assert applied.ok and "five\n" in (image / MOD).read_text()


@pytest.fixture
def conflicting(builder):
    b = builder
    old = b.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    b.add_fix("first", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    b.add_fix("second", {OTHER: OTHER_BASE}, {OTHER: OTHER_BASE.replace("other 20\n", "twenty\n")})
    mid = BASE.replace("line 5\n", "five\n")
    b.add_fix("third", {MOD: mid}, {MOD: mid.replace("line 30\n", "thirty\n")})
    b.profile(["first", "second", "third"])
    b.lock(old)
    commit_pack(b)
    new = new_release(b, {MOD: BASE.replace("line 5\n", "line five (upstream)\n"), OTHER: OTHER_BASE})
    return b, old, new


def test_conflict_is_a_git_conflict_then_resolved_and_continued(conflicting):
    b, old, new = conflicting
    before = pack_files(b)
    r = rebase.start(req(b, old, new))
    assert r.status == "conflicts" and r.exit_code == 4
    assert outcomes(r) == {"first": "conflict", "second": "exact", "third": "blocked"}
    assert pack_files(b) == before  # nothing written while a fix conflicts
    repo = b.pack / ".rebase/v2.0/first"
    assert git(repo, "diff", "--name-only", "--diff-filter=U").split() == [MOD]
    conflicted = (repo / MOD).read_text()
    assert "<<<<<<<" in conflicted and "line five (upstream)" in conflicted and "five\n" in conflicted
    assert json.loads(r.report_json.read_text())["fixes"][0]["repo"] == str(repo)
    assert "rebase --continue" in r.markdown
    with pytest.raises(BadInputError, match="in progress") as busy:
        rebase.start(req(b, old, new))
    for action in ("continue", "abort"):  # as this program runs here, with the pack and the rebase's name
        flag = " --allow-unproven" if action == "continue" else ""  # started without --python: as it runs
        assert f"`{program()} rebase --{action} --pack {b.pack} --name v2.0{flag}`" in str(busy.value), busy.value
    still = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))  # not resolved yet
    assert still.status == "conflicts" and "unmerged" in " ".join(still.fixes[0].evidence)
    # the maintainer resolves it with ordinary git
    (repo / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    git(repo, "add", MOD)
    done = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert done.status == "done", done.markdown
    assert outcomes(done) == {"first": "resolved", "second": "exact", "third": "exact"}
    first = done.fixes[0]
    assert first.patch == "changed" and first.new_version == 2  # the change itself changed
    assert "+five (upstream wording kept)" in first.interdiff
    assert 'version = 2' in (b.pack / "fixes/first/v2.0/variant.toml").read_text()
    applied, image = apply_new(b, new)
    assert applied.ok and "thirty\n" in (image / MOD).read_text()
    assert not [p for p in (b.pack / ".rebase").glob("*") if not p.name.endswith(".undo.json")]


def test_conflict_left_unresolved_with_markers_is_refused(conflicting):
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    repo = b.pack / ".rebase/v2.0/first"
    git(repo, "add", MOD)  # markers still in the file
    r = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert r.status == "conflicts" and "conflict markers" in " ".join(r.fixes[0].evidence)


def test_a_resolution_that_adds_a_file_the_release_has_is_refused_with_the_way_on(conflicting):
    """Found by a fresh maintainer: the resolution also adapted another file of the release, copied into the work
    repository (which holds only the files the fix touched): --continue was an internal error (exit 1: "the
    regenerated patch does not apply exactly ... exists already (the patch creates it); this is a bug")."""
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    repo = b.pack / ".rebase/v2.0/first"
    (repo / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    (repo / OTHER).parent.mkdir(parents=True, exist_ok=True)
    (repo / OTHER).write_text("# adapted\n" + OTHER_BASE)
    git(repo, "add", "-A")
    r = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    said = " ".join(r.fixes[0].evidence)
    assert r.status == "conflicts" and f"the resolution adds {OTHER}, which the new release has" in said, said
    assert "(`git rm`, then `git commit --amend`), finish the rebase, then change it with `fixpack edit`" in said
    git(repo, "rm", "-q", OTHER)
    git(repo, "commit", "-q", "--amend", "--no-edit")
    done = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert done.status == "done", done.markdown


def test_abort_after_conflict_removes_the_work_folder(conflicting):
    b, old, new = conflicting
    before = pack_files(b)
    rebase.start(req(b, old, new))
    rebase.abort(rebase.RebaseRequest(pack_root=b.pack))
    assert not (b.pack / ".rebase/v2.0").exists() and pack_files(b) == before
    with pytest.raises(BadInputError, match="no rebase in progress"):
        rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))


def test_upstreamed_fix_is_proposed_for_dropping_and_flagged(builder):
    b = builder
    old = b.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    b.add_fix("first", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")},
              upstream={"status": "accepted", "link": "https://example.invalid/pr/1", "fixed_in": "2.0"})
    b.add_fix("second", {OTHER: OTHER_BASE}, {OTHER: OTHER_BASE.replace("other 20\n", "twenty\n")})
    b.profile(["first", "second"])
    b.lock(old)
    commit_pack(b)
    new = new_release(b, {MOD: BASE.replace("line 5\n", "five\n"), OTHER: OTHER_BASE})
    r = rebase.start(req(b, old, new))
    assert r.status == "done" and outcomes(r) == {"first": "upstreamed", "second": "exact"}
    first = r.fixes[0]
    assert any(f.startswith("fixed_in = 2.0 <= 2.0") for f in first.flags)
    assert any("proposed for dropping" in f for f in first.flags)
    text = (b.pack / "profiles/v2.0.toml").read_text()
    assert '"first", # upstreamed in this release: proposed for dropping' in text  # kept, not removed
    assert load_profile(load_pack(b.pack), "v2.0").default == ("first", "second")
    applied, _ = apply_new(b, new)
    assert applied.ok and applied.fix("first").state == "upstreamed"


@pytest.mark.parametrize("drift", ["same", "context"])
def test_renamed_file_carries_the_fix_to_the_new_path(pack, drift):
    b, old = pack
    moved = "demo_pkg/core/mod.py"
    text = BASE if drift == "same" else BASE.replace("line 7\n", "line seven\n")
    new = new_release(b, {moved: text, OTHER: OTHER_BASE})
    r = rebase.start(req(b, old, new))
    first = r.fixes[0]
    assert r.status == "done" and first.renames == {MOD: moved}
    assert first.outcome == ("exact" if drift == "same" else "merged")
    assert any("renamed upstream to demo_pkg/core/mod.py" in e for e in first.evidence)
    patch = (b.pack / "fixes/first/v2.0/0001-change.patch").read_text()
    assert f"diff --git a/{moved} b/{moved}" in patch and first.new_version == 1
    applied, image = apply_new(b, new)
    assert applied.ok and "five\n" in (image / moved).read_text()


def test_deleted_file_conflicts_and_can_be_dropped(pack):
    b, old = pack
    new = new_release(b, {MOD: BASE, "demo_pkg/unrelated.py": "x = 1\n"})
    r = rebase.start(req(b, old, new))
    assert outcomes(r) == {"first": "exact", "second": "conflict"}
    second = r.fixes[1]
    assert any("deleted upstream" in e for e in second.evidence)
    assert any("modify/delete" in e for e in second.evidence)
    repo = b.pack / ".rebase/v2.0/second"
    assert git(repo, "diff", "--name-only", "--diff-filter=U").split() == [OTHER]
    git(repo, "rm", "-q", OTHER)  # the maintainer drops the change
    done = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert done.status == "done" and outcomes(done) == {"first": "exact", "second": "dropped"}
    text = (b.pack / "profiles/v2.0.toml").read_text()
    assert '# "second",  # dropped' in text
    assert load_profile(load_pack(b.pack), "v2.0").default == ("first",)


def test_dirty_pack_is_refused(pack):
    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    (b.pack / "fixes/first/fix.toml").write_text((b.pack / "fixes/first/fix.toml").read_text() + "\n")
    (b.pack / "profiles/notes.txt").write_text("untracked\n")
    with pytest.raises(BadInputError, match="fixes/first/fix.toml.*profiles/notes.txt"):
        rebase.start(req(b, old, new))
    assert not [p for p in (b.pack / ".rebase").glob("*") if not p.name.endswith(".undo.json")]
    assert rebase.start(req(b, old, new, allow_dirty=True)).status == "done"


def ctrl_c_at_second_write(monkeypatch) -> list:
    """rebase_session._write raises KeyboardInterrupt at its second pack file (a Ctrl-C while the pack is
    written); returns the list of the paths it was asked to write."""
    real, calls = rebase_session._write, []

    def dies_on_second_write(path, data, *rest):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(path, data, *rest)
    monkeypatch.setattr(rebase_session, "_write", dies_on_second_write)
    return calls


def test_interrupted_write_is_put_back(pack, monkeypatch):
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    before = pack_files(b)
    ctrl_c_at_second_write(monkeypatch)
    with pytest.raises(EnvironmentProblem, match="nothing written to the pack.*left no trace"):
        rebase.start(req(b, old, new))
    assert pack_files(b) == before and not (b.pack / ".rebase/v2.0").exists()


class Killed(BaseException):
    """A death no handler sees (SIGKILL): nothing is put back."""


def test_interrupted_write_resumes_to_the_same_result(pack, monkeypatch, tmp_path):
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: "# header\n" + OTHER_BASE})
    reference = tmp_path / "reference"
    shutil.copytree(b.pack, reference)
    rebase.start(rebase.RebaseRequest(pack_root=reference, profile="p1", roots={"demo": new},
                                      old_roots={"demo": old}))
    pristine, (real, calls) = pack_files(b), (rebase_session._write, [])

    def dies_on_third_write(path, data, *rest):
        calls.append(path)
        if len(calls) == 3:
            raise Killed
        real(path, data, *rest)
    monkeypatch.setattr(rebase_session, "_write", dies_on_third_write)
    with pytest.raises(Killed):
        rebase.start(req(b, old, new))
    assert pack_files(b) != pristine
    with pytest.raises(BadInputError, match="in progress"):
        rebase.start(req(b, old, new))
    restored, _kept = rebase.abort(rebase.RebaseRequest(pack_root=b.pack))  # --abort puts it back
    assert restored and pack_files(b) == pristine and not (b.pack / ".rebase/v2.0").exists()
    calls.clear()
    with pytest.raises(Killed):
        rebase.start(req(b, old, new))
    monkeypatch.setattr(rebase_session, "_write", real)
    r = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, allow_unproven=True))
    assert r.status == "done"
    want = {k: v for k, v in snapshot(reference).items() if k.startswith(("fixes/", "profiles/"))}
    assert pack_files(b) == want


def test_multi_patch_fix_moved_and_second_patch_conflicts(builder):
    b = builder
    old = b.tree("old", {MOD: BASE})
    folder = b.add_fix("two", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    mid = BASE.replace("line 5\n", "five\n")
    second = make_diff({MOD: mid}, {MOD: mid.replace("line 30\n", "thirty\n")}, b.base / "diffs")
    (folder / "0002-more.patch").write_text((folder / "0001-change.patch").read_text().split("diff --git")[0] + second)
    toml = (folder / "fix.toml").read_text().replace('patches = ["0001-change.patch"]',
                                                       'patches = ["0001-change.patch", "0002-more.patch"]')
    (folder / "fix.toml").write_text(toml)
    b.profile(["two"])
    b.lock(old)
    commit_pack(b)
    moved = new_release(b, {MOD: "# a\n# b\n" + BASE}, "moved")
    r = rebase.start(req(b, old, moved))
    assert r.status == "done" and r.fixes[0].patch == "moved"
    assert sorted(p.name for p in (folder / "v2.0").iterdir()) == ["0001-change.patch", "0002-more.patch",
                                                                   "variant.toml"]
    applied, image = apply_new(b, moved)
    assert applied.ok and "thirty\n" in (image / MOD).read_text()
    commit_pack(b)
    clash = new_release(b, {MOD: BASE.replace("line 30\n", "line 30 upstream\n")}, "clash")
    r = rebase.start(req(b, old, clash, name="v3.0"))
    assert r.status == "conflicts"
    repo = b.pack / ".rebase/v3.0/two"
    assert git(repo, "log", "--format=%s", "upstream..HEAD").split("\n")[0] == "two: 0001-change.patch"
    (repo / MOD).write_text(BASE.replace("line 5\n", "five\n").replace("line 30\n", "thirty upstream\n"))
    git(repo, "add", MOD)
    done = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, name="v3.0", allow_unproven=True))
    assert done.status == "done" and done.fixes[0].outcome == "resolved" and done.fixes[0].new_version == 2
    assert "+thirty upstream" in (folder / "v3.0/0002-more.patch").read_text()
    assert "-line 5\n+five\n" in (folder / "v3.0/0001-change.patch").read_text()


def test_old_copy_must_match_the_old_pin(pack):
    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    from fixpack.errors import MismatchError
    with pytest.raises(MismatchError, match="pin"):
        rebase.start(rebase.RebaseRequest(pack_root=b.pack, profile="p1", roots={"demo": new},
                                          old_roots={"demo": new}))
    assert not [p for p in (b.pack / ".rebase").glob("*") if not p.name.endswith(".undo.json")]


def test_new_copy_with_fixes_applied_is_refused(pack):
    b, old = pack
    image = b.base / "applied"
    shutil.copytree(old, image)
    assert engine.apply(b.request(image)).ok
    with pytest.raises(BadInputError, match="manifest"):
        rebase.start(rebase.RebaseRequest(pack_root=b.pack, profile="p1", roots={"demo": image},
                                          old_roots={"demo": old}, name="v9"))


def test_cli_prints_the_report_and_maps_exit_codes(conflicting):
    b, old, new = conflicting
    runner = CliRunner()
    args = ["--pack", str(b.pack), "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}"]
    res = runner.invoke(rebase_cmd, args)
    assert res.exit_code == 4, res.output
    assert "# Rebase of profile p1 onto demo 2.0 (profile v2.0)" in res.output
    assert "| first | conflict | - |" in res.output and "rebase --continue" in res.output
    said = f"`{program()} rebase --continue --pack {b.pack} --name v2.0 --allow-unproven`"  # runs as written
    assert said in res.output and "`fixpack rebase --continue" not in res.output, res.output
    report = list((b.pack / "reports").glob("*.md"))
    assert report and all("`fixpack rebase --continue --allow-unproven`" in p.read_text() and said not in p.read_text()
                          for p in report)
    res = runner.invoke(rebase_cmd, ["--pack", str(b.pack), "--abort"])
    assert res.exit_code == 0 and "aborted" in res.output
    res = runner.invoke(rebase_cmd, ["--pack", str(b.pack), "--continue"])
    assert res.exit_code == 2 and "no rebase in progress" in res.output


def test_a_done_rebase_names_its_prove_step_as_this_program_runs_it(pack):
    """The terminal's (and a pipe's) next steps render every fixpack command they name as this program runs it,
    with the pack; the committed report keeps plain `fixpack` (no local interpreter's path)."""
    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    res = CliRunner().invoke(rebase_cmd, ["--pack", str(b.pack), "--profile", "p1", "--root", f"demo={new}",
                                          "--old-root", f"demo={old}"])
    assert res.exit_code == 0, res.output
    said = f"`{program()} prove --profile v2.0 --pack {b.pack} --python <a venv with the new release>`"
    assert said in res.output and "`fixpack prove" not in res.output, res.output
    report = (b.pack / "reports/rebase-p1-to-v2.0.md").read_text()
    assert "`fixpack prove --profile v2.0 --python <a venv with the new release>`" in report and said not in report


def test_change_lines_ignore_context_and_numbers():
    a = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n d\n"
    moved = b"diff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -9,3 +9,3 @@\n z\n-b\n+c\n d\n"
    assert rebase.change_lines(a) == rebase.change_lines(moved) == ["diff", "-b", "+c"]
    assert rebase.version_le("0.31.0", "0.31.0") and rebase.version_le("v0.30.1", "0.31.0")
    assert not rebase.version_le("0.32.0", "0.31.0")


def test_regenerated_patch_text_is_a_fixed_point_of_format(pack):
    """format_patch's own output (a "---" right above "diff --git") must normalize to itself."""
    from fixpack.patchtext import normalize_text
    b, old = pack
    new = new_release(b, {MOD: "# header\n" + BASE, OTHER: OTHER_BASE})
    rebase.start(req(b, old, new))
    fix = load_pack(b.pack).fixes["first"]
    text = (b.pack / "fixes/first/v2.0/0001-change.patch").read_text()
    assert normalize_text(fix, text) == text
    assert "\n\nfirst\n\nUpstream-Status: Pending\nForwarded: no\nFix-Id: first\n---\ndiff --git" in text


def test_progress_tells_each_fix_as_it_is_carried(pack):
    from fixpack.progress import Progress

    class Notes(Progress):
        def __init__(self) -> None:
            self.lines: list[str] = []

        def note(self, message: str) -> None:
            self.lines.append(message)

    b, old = pack
    new = new_release(b, {MOD: "new head\n" + BASE, OTHER: OTHER_BASE})
    notes = Notes()
    r = rebase.start(req(b, old, new, progress=notes))
    assert r.status == "done"
    assert [n.split(" (")[0] for n in notes.lines] == ["first: exact, proof not proven", "second: exact, proof not proven"]
    assert all(n.endswith(" s)") for n in notes.lines)


def test_a_finished_rebase_can_be_undone_and_only_when_unchanged(pack):
    b, old = pack
    before = pack_files(b)
    new = new_release(b, {MOD: "new head\n" + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    written = pack_files(b)
    assert written != before and (b.pack / "profiles/v2.0.toml").is_file()
    (b.pack / "profiles/v2.0.toml").write_text((b.pack / "profiles/v2.0.toml").read_text() + "# edited\n")
    with pytest.raises(BadInputError, match="changed since the rebase"):
        rebase.undo(b.pack)
    (b.pack / "profiles/v2.0.toml").write_bytes(written["profiles/v2.0.toml"][0])
    res = CliRunner().invoke(rebase_cmd, ["--undo", "--pack", str(b.pack)])
    assert res.exit_code == 0 and "rebase undone" in res.output
    assert pack_files(b) == before
    with pytest.raises(BadInputError, match="no finished rebase to undo"):
        rebase.undo(b.pack)


def test_components_are_carried_and_named_in_the_report(builder, tmp_path):
    """The old profile's components go into the new profile and its lock as they are; the report names
    each one as carried but not proven on the new release, with a next step (nothing says a component
    supports a release it was not tested on)."""
    from test_components import component_table, make_plugin

    b = builder
    old = b.tree("old", {MOD: BASE})
    b.add_fix("one", {MOD: BASE}, {MOD: BASE.replace("line 5\n", "five\n")})
    b.profile(["one"])
    make_plugin(b.pack / "plug")
    prof = b.pack / "profiles" / "p1.toml"
    prof.write_text(prof.read_text() + component_table("plug"))
    b.lock(old)
    commit_pack(b)
    r = rebase.start(req(b, old, new_release(b, {MOD: BASE})))
    assert r.status == "done"
    new = load_profile(load_pack(b.pack), "v2.0")
    assert [(c.id, c.version, c.target, c.requires, c.opt_in, c.path) for c in new.components] == \
        [("tiny-plug", "0.3.0", "demo", ("one",), True, (b.pack / "plug").resolve())]
    lock = json.loads((b.pack / "profiles/v2.0.lock").read_text())
    assert [c["id"] for c in lock["components"]] == ["tiny-plug"] and lock["components"][0]["files"]
    assert r.as_dict()["components"] == [{"id": "tiny-plug", "version": "0.3.0", "target": "demo", "path": "plug"}]
    assert "## Components (carried as they are)" in r.markdown and "**not proven** on demo 2.0" in r.markdown
    assert any("component tiny-plug 0.3.0 supports this release" in s for s in r.next_steps)


def test_a_rebase_onto_an_existing_profile_is_refused_without_replace(pack):
    """A rebase named after a profile the pack has (v0.31.0 rebased again from v0.30.0) replaced it and
    its hand-made variants without a word: refused now before anything is fetched or written."""
    b, old = pack
    new = new_release(b, {MOD: BASE.replace("line 1\n", "line one\n"), OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    hand = (b.pack / "profiles/v2.0.toml").read_text() + "# a maintainer's note\n"
    (b.pack / "profiles/v2.0.toml").write_text(hand)
    commit_pack(b)
    before = pack_files(b)
    with pytest.raises(BadInputError, match="profile v2.0 exists .* Pass --replace"):
        rebase.start(req(b, old, new))
    assert pack_files(b) == before
    r = CliRunner().invoke(rebase_cmd, ["--pack", str(b.pack), "-p", "p1", "--root", f"demo={new}", "--old-root",
                                        f"demo={old}", "--to", "2.0"])
    assert r.exit_code == 2 and "--replace" in r.output and pack_files(b) == before
    assert rebase.start(req(b, old, new, replace=True)).status == "done"
    assert "# a maintainer's note" not in (b.pack / "profiles/v2.0.toml").read_text()  # replaced, as asked


def test_every_cell_of_the_components_table_is_escaped(tmp_path):
    """A '|' in any cell of the report's components table (not only the path's) split the row."""
    import re

    from fixpack.rebase_session import RebaseResult
    from fixpack.render import render_markdown

    comp = {"id": "plug|in", "version": "1.0|x", "target": "t|u", "path": "ports/a|b"}
    md = render_markdown(RebaseResult("p1", "v2|0", "done", [], [], tmp_path, components=[comp]))
    rows = [ln for ln in md.split("\n## Components")[1].splitlines() if ln.startswith("| ")]
    assert len(rows) == 3  # heading, rule, the component
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 6 for row in rows), rows
    assert rows[2].startswith("| plug\\|in | 1.0\\|x | t\\|u | ports/a\\|b | ")


def test_the_printed_continue_command_runs_as_printed(conflicting):
    """A rebase started without --python stops at a conflict; the continue command it prints (next steps, and
    the refusal of a second start) runs as written once the conflict is resolved."""
    import re
    import shlex
    import subprocess

    b, old, new = conflicting
    args = ["rebase", "--pack", str(b.pack), "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}"]
    cli = f"{program()} {shlex.join(args)}"  # as a shell runs what the terminal shows
    started = subprocess.run(cli, shell=True, capture_output=True, text=True)
    assert started.returncode == 4, started.stderr
    said = re.search(r"`([^`]* rebase --continue [^`]*)`", started.stdout).group(1)
    again = subprocess.run(cli, shell=True, capture_output=True, text=True)
    assert again.returncode == 2 and f"`{said}`" in again.stderr, again.stderr
    repo = b.pack / ".rebase/v2.0/first"
    (repo / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    git(repo, "add", MOD)
    done = subprocess.run(said, shell=True, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (b.pack / "profiles/v2.0.lock").is_file()


def test_a_release_older_than_the_pin_is_refused_unless_allowed(pack):
    """`rebase --to` (or a --root) older than the profile's pin is refused, exit 2, naming both versions
    (PEP 440: 0.10 < 1.0), before anything is fetched or written; --allow-older carries the fixes back."""
    b, old = pack
    b.version, b.commit = "0.9", "0123456789"
    older = b.tree("older", {MOD: BASE, OTHER: OTHER_BASE})
    b.version, b.commit = "1.0", "abcdef1234"
    before = pack_files(b)
    args = ["--pack", str(b.pack), "--profile", "p1", "--root", f"demo={older}", "--old-root", f"demo={old}"]
    res = CliRunner().invoke(rebase_cmd, args)
    assert res.exit_code == 2 and "0.9 is older than 1.0" in res.output and "--allow-older" in res.output, res.output
    assert pack_files(b) == before and not (b.pack / ".rebase").exists()
    b.profile(["first", "second"], extra_targets='source = { pypi = "demo" }')  # --to: refused before any fetch
    with pytest.raises(BadInputError, match="0.10 is older than 1.0"):  # compared as versions, not text
        rebase.start(rebase.RebaseRequest(pack_root=b.pack, profile="p1", to_version="0.10", allow_dirty=True))
    b.profile(["first", "second"])
    done = CliRunner().invoke(rebase_cmd, [*args, "--allow-older"])
    assert done.exit_code == 0 and (b.pack / "profiles/v0.9.toml").is_file(), done.output


def test_a_report_folder_that_is_missing_or_unwritable_is_named_not_a_crash(pack, tmp_path, monkeypatch):
    """Noticed while fixing a fresh user's findings: --report under a missing folder was made, parents and all
    (other outputs name it), and a report that could not be written was an OSError, exit 1."""
    import errno

    from fixpack.errors import EnvironmentProblem
    b, old = pack
    new = new_release(b, {MOD: BASE, OTHER: OTHER_BASE})
    before = pack_files(b)
    with pytest.raises(BadInputError, match=r"--report .*the folder .*no/such does not exist"):
        rebase.start(req(b, old, new, report_dir=tmp_path / "no/such/reports"))
    assert not (tmp_path / "no").exists() and pack_files(b) == before
    real = rebase_session.atomic_write

    def full(path, data, *a, **kw):
        if path.suffix in (".md", ".json") and path.parent.name == "reports":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data, *a, **kw)

    monkeypatch.setattr(rebase_session, "atomic_write", full)
    with pytest.raises(EnvironmentProblem, match=r"--report .*ENOSPC.*pack files are written, but the rebase to v2.0 "
                                                 r"is not finished.*rebase --continue"):
        rebase.start(req(b, old, new, report_dir=tmp_path / "reports"))


def test_an_append_at_the_file_s_end_upstream_is_upstreamed_not_ambiguous(builder):
    """A carried gap: a fix that only appends after its context (a line at a file's end) finds its pre-image again
    inside its own post-image, which is no second place for it (evaluate.pre_inside_post): decided for apply and
    lock, and by the same rule for a rebase, untested there. The new release ends with the fix's line: upstreamed
    (proposed for dropping), never ambiguous; one that does not is carried exactly."""
    b = builder
    old = b.tree("old", {MOD: BASE, OTHER: OTHER_BASE})
    b.add_fix("tail", {MOD: BASE}, {MOD: BASE + "NEW = 1\n"})
    b.add_fix("second", {OTHER: OTHER_BASE}, {OTHER: OTHER_BASE.replace("other 20\n", "twenty\n")})
    b.profile(["tail", "second"])
    b.lock(old)
    commit_pack(b)
    new = new_release(b, {MOD: BASE + "NEW = 1\n", OTHER: OTHER_BASE})
    r = rebase.start(req(b, old, new))
    assert r.status == "done" and outcomes(r) == {"tail": "upstreamed", "second": "exact"}, r.as_dict()
    applied, image = apply_new(b, new)
    assert applied.ok and applied.fix("tail").state == "upstreamed" and (image / MOD).read_text().count("NEW") == 1
