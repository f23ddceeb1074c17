"""The placement rule on drifted trees: a hunk lands where the evidence is unique, or nowhere.

Four situations an image build and a maintainer meet, each on a small real tree: a twin inserted
above the hunk's block, an add-only fix already in a file that has a twin, a chain whose second fix
edits the first one's lines next to an older copy, and a rebase onto a release that added a twin.
In each, the default run refuses (exit 4, the candidate lines in the text and the JSON) and nothing on
disk changes; the rebase stops as a conflict and leaves the pack untouched.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, numbered, snapshot
from test_rebase import commit_pack, new_release, outcomes, pack_files, req

from fixpack import engine, rebase
from fixpack.errors import EXIT_CONFLICT

MOD = "demo_pkg/mod.py"
# a block longer than a hunk's context, so that a copy of it is a twin of the hunk's whole pre-image
BLOCK = ("def f(x):\n    x = int(x)\n    y = x\n    a = x + 1\n    b = a * 2\n    c = b - 3\n    d = c\n"
         "    e = d\n    f = e\n    g = f\n    return g\n")


def states(report):
    return {f.id: f.state for f in report.fixes}


def cli(b, root, *args):
    """The installed entry as a user runs it: (exit code, stdout)."""
    cmd = [sys.executable, "-m", "fixpack.cli", *args, "--profile", "p1", "--pack", str(b.pack),
           "--root", f"demo={root}"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    return p.returncode, p.stdout + p.stderr


def test_twin_inserted_above_is_refused_not_placed_at_its_line(builder):
    b = builder
    _one_block_fix(b)
    # upstream (or another install step) inserted a twin of the block above: line 11 now holds the twin
    drifted = numbered(10) + BLOCK + "# a twin\n" + BLOCK + numbered(10, "tail")
    image = b.tree("image", {MOD: drifted})
    before = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.exit_code == EXIT_CONFLICT and states(r) == {"one": "ambiguous"}
    refused = r.fix("one").refused
    assert refused[0]["placement"] == "ambiguous" and refused[0]["candidates"] == [12, 24]
    assert snapshot(image) == before
    code, out = cli(b, image, "apply", "--json")
    doc = json.loads(out)
    assert code == 4 and doc["exit_code"] == 4 and doc["fixes"][0]["state"] == "ambiguous"
    assert doc["fixes"][0]["refused"][0]["candidates"] == [12, 24]
    code, out = cli(b, image, "apply")
    assert code == 4 and "ambiguous" in out and "[12, 24]" in out and "which copy is the fix's cannot be told" in out
    assert f"cp --remove-destination --parents {MOD} " in out and "(fixpack refresh)" not in out  # next: put it back
    assert snapshot(image) == before
    # the status says the same, and so does a strict run
    assert states(engine.status(b.request(image))) == {"one": "ambiguous"}
    assert engine.apply(b.request(image, strict=True)).exit_code == EXIT_CONFLICT


def test_a_unique_block_on_a_drifted_file_still_applies_with_its_offset(builder):
    b = builder
    base = _one_block_fix(b)
    image = b.tree("image", {MOD: "# three\n# new\n# lines\n" + base})
    r = engine.apply(b.request(image))
    assert r.ok and states(r) == {"one": "drifted"}
    assert r.fix("one").offsets[0]["offset"] == 3
    assert (image / MOD).read_text() == "# three\n# new\n# lines\n" + base.replace("b = a * 2", "b = a * 20")


def test_every_hunk_moved_by_a_drift_above_says_offset(builder):
    """Found by a fresh user: of a two-hunk fix on a file with three lines inserted above it, the second hunk (found
    where the first one's offset led) was said `placement: exact` with `offset: 3`. GNU patch says each such hunk
    succeeded at its line with an offset; so does the report: both `offset`, 3 lines."""
    b = builder
    base = numbered(40)
    clean = b.tree("clean", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: base.replace("line 5\n", "five\n").replace("line 30\n", "thirty\n")})
    b.profile(["one"])
    b.lock(clean)
    image = b.tree("image", {MOD: "# three\n# new\n# lines\n" + base})
    r = engine.apply(b.request(image))
    assert r.ok and states(r) == {"one": "drifted"}
    assert [(h["hunk"], h["placement"], h["offset"]) for h in r.fix("one").offsets] == [(1, "offset", 3),
                                                                                        (2, "offset", 3)], r.as_dict()
    r = engine.status(b.request(image))
    assert r.ok and states(r) == {"one": "applied"}, r.as_dict()


def test_add_only_fix_already_in_a_file_with_a_twin_is_not_added_twice(builder):
    b = builder
    base = numbered(5) + BLOCK + numbered(5, "mid") + BLOCK + numbered(5, "tail")
    added = BLOCK.replace("    c = b - 3\n", "    log(b)\n    c = b - 3\n")
    clean = b.tree("clean", {MOD: base})
    patched = numbered(5) + added + numbered(5, "mid") + BLOCK + numbered(5, "tail")
    b.add_fix("one", {MOD: base}, {MOD: patched})
    b.profile(["one"])
    b.lock(clean)
    # the change is in already (an earlier image step, no manifest), its block moved to the end of the
    # file, and the unpatched twin now sits at the hunk's stated line: the forward side applies there
    image = b.tree("image", {MOD: numbered(5) + BLOCK + numbered(5, "mid") + numbered(5, "tail") + added})
    before = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.exit_code == EXIT_CONFLICT and states(r) == {"one": "ambiguous"}
    assert any("pre-image and its post-image" in m for m in r.fix("one").messages)
    assert snapshot(image) == before
    assert (image / MOD).read_text().count("log(b)") == 1


def test_chain_second_fix_is_not_placed_on_an_older_copy_of_the_first_fix_lines(builder):
    b = builder
    base = numbered(10) + BLOCK + numbered(10, "tail")
    after1 = base.replace("    c = b - 3\n", "    b = clamp(b)\n    c = b - 3\n")
    after2 = after1.replace("    d = c\n", "    d = c + 1\n")
    clean = b.tree("clean", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: after1})
    b.add_fix("two", {MOD: after1}, {MOD: after2})
    b.profile(["one", "two"])
    b.lock(clean)
    # an older copy of the first fix's lines sits where the second fix's stated line points, and
    # pushes the unpatched block down: the first fix lands with an offset
    older = BLOCK.replace("    c = b - 3\n", "    b = clamp(b)\n    c = b - 3\n").replace("y = x", "y = -x")
    image = b.tree("image", {MOD: numbered(10) + older + "# moved\n" + BLOCK + numbered(10, "tail")})
    before = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.exit_code == EXIT_CONFLICT
    assert states(r) == {"one": "drifted", "two": "ambiguous"}
    assert r.fix("one").offsets[0]["offset"] == len(older.splitlines()) + 1
    assert sorted(r.fix("two").refused[0]["candidates"]) == [15, 28]
    assert snapshot(image) == before


def test_rebase_onto_a_release_with_a_twin_stops_as_a_conflict(builder):
    b = builder
    base = numbered(10) + BLOCK + numbered(10, "tail")
    old = b.tree("old", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: base.replace("b = a * 2", "b = a * 20")})
    b.profile(["one"])
    b.lock(old)
    commit_pack(b)
    before = pack_files(b)
    # the new release inserted a twin of the block, with the same surroundings, above the original
    new = new_release(b, {MOD: numbered(10) + BLOCK + numbered(5, "gap") + BLOCK + numbered(10, "tail")})
    r = rebase.start(req(b, old, new))
    assert outcomes(r) == {"one": "conflict"} and r.status == "conflicts"
    evidence = " ".join(r.fixes[0].evidence)
    assert "ambiguous context" in evidence and "[12, 28]" in evidence
    assert pack_files(b) == before
    assert not (b.pack / "profiles" / "v2.0.toml").exists()
    # nothing is conflicted in git there (found by a fresh maintainer: the next step said "edit the conflicted
    # files ... `git add` them"): the step says to place the change, as the evidence does
    from fixpack.render import next_steps

    first = next_steps(r)[0]
    assert first.startswith("place one by hand: `cd ") and "`git cherry-pick base..fix`" in first, first
    assert "conflicted" not in first


def _one_block_fix(b) -> str:
    """Fix "one" (``b = a * 2`` -> ``* 20`` in BLOCK, between numbered lines) locked on a clean tree; the base text."""
    base = numbered(10) + BLOCK + numbered(10, "tail")
    clean = b.tree("clean", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: base.replace("b = a * 2", "b = a * 20")})
    b.profile(["one"])
    b.lock(clean)
    return base


def test_missing_hunk_diagnostics_and_reject_files(builder, tmp_path):
    b = builder
    base = _one_block_fix(b)
    image = b.tree("image", {MOD: base.replace("    a = x + 1\n", "    a = x + 2\n")})
    before = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.exit_code == EXIT_CONFLICT and states(r) == {"one": "conflict"}
    refused = r.fix("one").refused[0]
    assert refused["placement"] == "missing" and refused["searched"] == [1, 31]
    assert refused["closest"]["line"] == 12 and refused["closest"]["matching"] == 6
    assert refused["closest"]["differs"] == [{"line": 14, "expected": "    a = x + 1", "found": "    a = x + 2"}]
    message = " ".join(r.fix("one").messages)
    assert "closest: lines 12-18, 6 of 7 lines match" in message and "expected '    a = x + 1'" in message
    code, out = cli(b, image, "apply", "--reject", str(tmp_path / "rej"))
    assert code == 4 and snapshot(image) == before
    # the .rej files it names are written: "nothing was written" is the target's (a fresh user's finding)
    assert f"FAILED (exit 4): nothing was written in the target (1 reject file(s) under {tmp_path / 'rej'}); " in out
    rej = (tmp_path / "rej" / f"{MOD}.rej").read_text()
    assert rej.startswith(f"diff a/{MOD} b/{MOD}\t(rejected hunks)\n@@ -12,7 +12,7 @@")
    assert "-    b = a * 2\n+    b = a * 20\n" in rej
    code, out = cli(b, image, "apply", "--reject", str(image / "rej"))
    assert code == 2 and "inside the target" in out and snapshot(image) == before
    # a folder on the way that links into the target: refused, nothing written there (nor elsewhere)
    trap = tmp_path / "trap"
    (trap / MOD).parent.parent.mkdir(parents=True)
    (trap / MOD).parent.symlink_to(image / Path(MOD).parent)
    code, out = cli(b, image, "apply", "--reject", str(trap))
    assert code == 2 and "is a symbolic link" in out and snapshot(image) == before


def test_a_conflict_with_no_refused_hunk_does_not_point_at_rej_files(builder, tmp_path):
    """Found by a fresh user: a fix whose file is missing refuses no hunk (no .rej is written, and the run says so),
    yet its next step said the .rej files under DIR hold its refused hunks (or, without --reject, how to have them)."""
    b = builder
    _one_block_fix(b)
    image = b.tree("image", {"demo_pkg/__init__.py": ""})  # the fix's file is missing
    before = snapshot(image)
    for more in (["--reject", str(tmp_path / "rej")], []):
        code, out = cli(b, image, "apply", "--json", *more)
        doc = json.loads(out[:out.rindex("}") + 1])
        step = " ".join(" ".join(doc["fixes"][0]["messages"]).split())
        assert code == 4 and "is missing" in step and ".rej" not in step and "--reject" not in step, step
    assert snapshot(image) == before and not (tmp_path / "rej").exists()


def test_reject_files_are_listed_in_the_json_and_a_failed_one_says_the_target_was_left(builder, tmp_path):
    """Found by a fresh user: `apply --reject DIR --json` did not list the .rej files it wrote, and a .rej that
    could not be written (exit 5) did not say the target was left as it was (the run was refused)."""
    b = builder
    base = _one_block_fix(b)
    image = b.tree("image", {MOD: base.replace("    a = x + 1\n", "    a = x + 2\n")})
    before = snapshot(image)
    code, out = cli(b, image, "apply", "--json", "--reject", str(tmp_path / "rej"))
    doc = json.loads(out[:out.rindex("}") + 1])
    assert code == 4 and doc["rejects"] == [str(tmp_path / "rej" / f"{MOD}.rej")], out
    assert (tmp_path / "rej" / f"{MOD}.rej").is_file() and snapshot(image) == before
    next_step = " ".join(" ".join(doc["fixes"][0]["messages"]).split())  # (it said: apply --reject DIR writes ...)
    assert f"(the .rej files under {tmp_path / 'rej'} hold the refused hunks to compare)" in next_step and \
        "apply --reject DIR" not in next_step, next_step
    code, out = cli(b, image, "apply", "--json")
    assert code == 4 and "rejects" not in json.loads(out), out  # (no --reject: no key)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / Path(MOD).parent).write_text("a file where the .rej file's folder goes\n")
    code, out = cli(b, image, "apply", "--reject", str(tmp_path / "ro"))
    said = " ".join(out.split())
    assert code == 5 and f"cannot write {tmp_path / 'ro' / MOD}.rej: Not a directory (ENOTDIR); the run was " \
                         f"refused, and nothing was written in the target (no reject file under {tmp_path / 'ro'})" \
                         in said and "or give another --reject folder, and run again" in said, out
    code, out = cli(b, image, "apply", "--json", "--reject", str(tmp_path / "ro"))
    doc = json.loads(out[:out.rindex("}") + 1])
    assert code == 5 and doc["exit_code"] == 5 and doc["rejects"] == [] and doc["fixes"][0]["state"] == "conflict"
    assert snapshot(image) == before


@pytest.mark.parametrize("as_json", [False, True])
def test_a_file_where_a_rej_folder_must_be_made_is_named_with_what_to_do(builder, tmp_path, as_json):
    """Found by a user: `apply --reject DIR` with a plain file at DIR/demo_pkg, where the folder of the .rej file must
    be made, said "Remove the cause" (ENOTDIR's advice), not which file. The error and the fix's next step name the
    file in the way and say to move it away (exit 5 still, as a folder where the .rej goes is); the path is said as
    given, not lowered by a capitalized first word."""
    b = builder
    base = _one_block_fix(b)
    image = b.tree("image", {MOD: base.replace("    a = x + 1\n", "    a = x + 2\n")})
    before = snapshot(image)
    rej = tmp_path / "Rej"
    rej.mkdir()
    (rej / Path(MOD).parent).write_text("a file where the .rej file's folder goes\n")
    code, out = cli(b, image, "apply", "--reject", str(rej), *(["--json"] * as_json))
    doc = json.loads(out[:out.rindex("}") + 1]) if as_json else None
    error = doc["error"] if doc else " ".join(out.split()).split(" FAILED (exit 5): ", 1)[1]
    step = " ".join(doc["fixes"][0]["messages"][-1].split()) if doc else " ".join(out.split())
    todo = f"move {rej / Path(MOD).parent} away (a file where a folder on the way to the .rej file must be made)"
    assert code == 5 and error.startswith(f"cannot write {rej / MOD}.rej: Not a directory (ENOTDIR); the run was "
                                          f"refused, and nothing was written in the target"), error
    assert error.endswith(f". M{todo[1:]}, or give another --reject folder, and run again"), error
    assert f"{todo}, or give another --reject folder, and run again to have them" in step, step
    assert "remove the cause" not in (error + step).lower(), error
    assert (rej / Path(MOD).parent).read_text() == "a file where the .rej file's folder goes\n"
    assert snapshot(image) == before


def test_reject_on_a_run_that_refuses_no_hunk_says_so_and_writes_nothing_there(builder, tmp_path):
    """Found by a fresh user: `apply --reject DIR` that refused nothing said "0 reject file(s) under DIR"."""
    b = builder
    base = _one_block_fix(b)
    image = b.tree("image", {MOD: base})
    code, out = cli(b, image, "apply", "--reject", str(tmp_path / "rej"))
    assert code == 0 and f"no hunk was refused: no reject file (nothing written under {tmp_path / 'rej'})" in out
    assert "0 reject file" not in out and not (tmp_path / "rej").exists()


def test_lock_warns_of_a_hunk_whose_pre_image_occurs_twice_in_the_file_it_is_locked_on(builder, tmp_path):
    """Found by a fresh maintainer: a refresh that made a later fix's context occur twice said that fix 'exact' and
    locked it, silently: every drifted image would then refuse it as ambiguous. lock and refresh warn (the lock is
    written: at the lock's pre-image the hunk is placed at its stated line)."""
    b = builder
    base = numbered(10) + BLOCK + numbered(5, "gap") + BLOCK + numbered(10, "tail")
    clean = b.tree("clean", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: base.replace("b = a * 2", "b = a * 20", 1)})
    b.profile(["one"])
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "lock", "--profile", "p1", "--pack", str(b.pack),
                        "--root", f"demo={clean}"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and (b.pack / "profiles/p1.lock").is_file(), r.stderr
    line = (b.pack / "fixes/one/0001-change.patch").read_text().splitlines().index(next(
        ln for ln in (b.pack / "fixes/one/0001-change.patch").read_text().splitlines() if ln.startswith("@@"))) + 1
    assert (f"fixpack: warning: fix one: {MOD} hunk #1 (fixes/one/0001-change.patch:{line}): its pre-image occurs 2 "
            f"times in the file it is locked on: on "
            f"an image whose file differs from the lock's (a drift) it is refused as ambiguous; give the hunk more "
            f"context lines, so that it occurs once") in r.stderr, r.stderr
    j = subprocess.run([sys.executable, "-m", "fixpack.cli", "lock", "--profile", "p1", "--pack", str(b.pack),
                        "--root", f"demo={clean}", "--json"], capture_output=True, text=True, cwd=REPO)
    assert len(json.loads(j.stdout)["warnings"]) == 1
    unique = tmp_path / "unique"  # one block only: no warning
    b2 = type(b)(unique)
    clean2 = b2.tree("clean", {MOD: numbered(10) + BLOCK})
    b2.add_fix("one", {MOD: numbered(10) + BLOCK}, {MOD: (numbered(10) + BLOCK).replace("b = a * 2", "b = a * 20")})
    b2.profile(["one"])
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "lock", "--profile", "p1", "--pack", str(b2.pack),
                        "--root", f"demo={clean2}"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def _two_file_fix(b):
    """Fix "one" changing line 3 of demo_pkg/a.py and of demo_pkg/b.py; an image where line 4 of both differs (each
    hunk refused: two .rej files)."""
    base = numbered(20)
    files = ("demo_pkg/a.py", "demo_pkg/b.py")
    clean = b.tree("clean", dict.fromkeys(files, base))
    b.add_fix("one", dict.fromkeys(files, base), dict.fromkeys(files, base.replace("line 3\n", "three\n")))
    b.profile(["one"])
    b.lock(clean)
    return b.tree("image", dict.fromkeys(files, base.replace("line 4\n", "LINE 4\n")))


@pytest.mark.parametrize("blocked", ["demo_pkg/b.py", "demo_pkg/a.py"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_rej_file_that_cannot_be_written_is_named_in_the_fix_s_next_step(builder, tmp_path, blocked, as_json):
    """Found by a fresh user: `apply --reject DIR` whose second .rej file could not be written (a folder in its place)
    said, in the fix's next step, that "the .rej files under DIR hold the refused hunks". The step now names the .rej
    files written, the one that failed with its errno, those never reached, and what to do (exit 5 still); the .rej
    written stays, with the refused hunk, and the target is as it was."""
    b = builder
    image = _two_file_fix(b)
    before = snapshot(image)
    rej = tmp_path / "rej"
    (rej / f"{blocked}.rej").mkdir(parents=True)
    a_rej, b_rej = rej / "demo_pkg/a.py.rej", rej / "demo_pkg/b.py.rej"
    code, out = cli(b, image, "apply", "--reject", str(rej), *(["--json"] * as_json))
    if as_json:
        doc = json.loads(out[:out.rindex("}") + 1])
        step, error = " ".join(doc["fixes"][0]["messages"][-1].split()), doc["error"]
        assert doc["exit_code"] == 5 and doc["rejects"] == ([str(a_rej)] if blocked.endswith("b.py") else []), doc
    else:
        said = " ".join(out.split())
        step, error = said.split("; next: ", 1)[1].split(" FAILED (exit 5): ", 1)
    assert code == 5 and step.startswith("next: " if as_json else "demo_pkg/a.py, demo_pkg/b.py differ"), step
    todo = "move the folder there away, or give another --reject folder, and run again to have them)"
    if blocked.endswith("b.py"):
        assert step.endswith(f"(of its .rej files under {rej}, {a_rej} was written; cannot write {b_rej}: Is a "
                             f"directory (EISDIR); {todo}"), step
        assert a_rej.read_text().startswith("diff a/demo_pkg/a.py b/demo_pkg/a.py\t(rejected hunks)\n@@ -1,6 +1,6 @@")
    else:
        assert step.endswith(f"(no .rej file of its hunks was written under {rej}; cannot write {a_rej}: Is a "
                             f"directory (EISDIR); {b_rej} was not written (the run stopped at {a_rej}); {todo}"), step
        assert not b_rej.exists()
    assert "hold the refused hunks" not in step and (rej / f"{blocked}.rej").is_dir(), step
    assert not list((rej / f"{blocked}.rej").iterdir()) and not list(rej.rglob("*fixpack-tmp"))
    assert error.startswith(f"cannot write {rej / blocked}.rej: Is a directory (EISDIR); the run was refused, and "
                            f"nothing was written in the target ("), error
    assert error.endswith("Move the folder there away, or give another --reject folder, and run again"), error
    assert snapshot(image) == before


def test_a_fix_that_empties_a_file_on_a_drifted_tree_is_held_to_the_whole_file(builder):
    """A fresh user: a patch that only empties a file (git format-patch and diff -u both write one hunk
    ``@@ -1,N +0,0 @@``, no context) was refused as "ambiguous" on a file that was not the lock's pre-image, whether the
    fix was in or not: the empty post-image is "in" every file. Each side of such a hunk is now the whole file, as git
    apply reads it: a file with a line more is a conflict (exit 4, the rule in the message, nothing written; a fresh
    user: the advice names git diff -U0's patch of a file's first lines too, which reads so), and an emptied file
    filled again by hand is tampered (its post-image, the empty file, is not there)."""
    b = builder
    body = (f"diff --git a/{MOD} b/{MOD}\nindex 208f01a..e69de29 100644\n--- a/{MOD}\n+++ b/{MOD}\n"
            f"@@ -1,2 +0,0 @@\n-a\n-b\n")
    b.add_fix("one", {}, {}, diff=body)
    b.profile(["one"])
    b.lock(b.tree("clean", {MOD: "a\nb\n"}))
    grown = b.tree("grown", {MOD: "a\nb\nc\n"})
    before = snapshot(grown)
    code, out = cli(b, grown, "apply")
    said = " ".join(out.split())
    assert code == EXIT_CONFLICT and "one v1: conflict" in said, said
    assert (f"{MOD}: hunk #1 missing: its pre-image must be the whole file (2 lines), as git apply reads a file's "
            f"only hunk without context that empties the file, and this file holds 3 lines; a patch written without "
            f"context lines (git diff -U0) of a file's first lines reads so too: regenerate it with them (git diff, "
            f"format-patch); else the file is not the one the patch was written for") in said, said
    assert "ambiguous" not in said and snapshot(grown) == before
    image = b.tree("image", {MOD: "a\nb\n"})
    assert engine.apply(b.request(image)).ok and (image / MOD).read_bytes() == b""
    (image / MOD).write_text("x\n")
    r = engine.status(b.request(image))
    assert states(r) == {"one": "tampered"}
    assert any("its post-image is the empty file" in m for m in r.fix("one").messages), r.fix("one").messages


def test_a_file_created_or_deleted_keeps_its_own_whole_file_words(builder):
    """The whole-file rule of a lone hunk without context is for a file changed in place: a file the patch deletes
    that holds a line more is said as such ('does not match the content the patch deletes'), not as a hunk that
    'empties the file' (a fresh user), and one it created with lines added since as holding more than it creates."""
    b = builder
    b.add_fix("gone", {MOD: "a\nb\n"}, {MOD: None})
    b.profile(["gone"])
    b.lock(b.tree("clean", {MOD: "a\nb\n"}))
    grown = b.tree("grown", {MOD: "a\nb\nc\n"})
    before = snapshot(grown)
    r = engine.apply(b.request(grown))
    said = " ".join(r.fix("gone").messages)
    assert r.exit_code == EXIT_CONFLICT and snapshot(grown) == before
    assert "does not match the content the patch deletes" in said and "empties" not in said, said


def test_a_target_root_whose_name_holds_a_line_break_is_one_line_of_the_report(builder):
    """Found by an attacker: a --root whose folder name holds a line feed was printed raw in the target's line of the
    plain report, which a reader (or a script reading it line by line) took for two lines; it is shown as \\n there,
    as a control character is, and kept as it is in --json."""
    import shutil

    b = builder
    _one_block_fix(b)
    image = b.tree("image", {MOD: numbered(10) + BLOCK})
    odd = image.parent / "odd\nOK: 1 applied"
    shutil.copytree(image, odd)
    code, out = cli(b, odd, "status")
    assert code == 0, out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("target demo:")]
    assert line.endswith("odd\\nOK: 1 applied") and "\nOK: 1 applied\n" not in out, out
    code, out = cli(b, odd, "status", "--json")
    assert json.loads(out)["targets"][0]["root"] == str(odd)
    code, out = cli(b, odd, "apply")  # (a fix's message that quotes the root: one line too)
    assert code == 0, out
    (odd / MOD).write_text((odd / MOD).read_text() + "# tampered\n")
    code, out = cli(b, odd, "status")
    assert code == 3 and "one v1: tampered" in out and out.count("odd\\nOK: 1 applied") >= 2, out
    assert "odd\\nOK: 1 applied" in out and not [ln for ln in out.splitlines() if ln.startswith("OK: 1 applied")], out
