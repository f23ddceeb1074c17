"""A tampered or conflicting fix says what to do next, with a command that runs as written and leads back to a
state the engine handles (a stale manifest, or a file the fix applies to)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git, numbered, snapshot

from fixpack import engine
from fixpack.advice import restore_how
from fixpack.progname import program
from fixpack.run import prepare

MOD = "demo_pkg/mod.py"


@pytest.fixture
def checkout(builder):
    """The release as a git checkout, pinned at its HEAD and locked there; the image is that checkout."""
    base = numbered(30)
    root = builder.tree("clean", {MOD: base, "demo_pkg/b.py": base})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release")
    builder.commit = git(root, "rev-parse", "HEAD").strip()
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {"demo_pkg/b.py": base}, {"demo_pkg/b.py": base.replace("line 9\n", "nine\n")})
    builder.profile(["one", "two"])
    builder.lock(root)
    return builder, root


def _next(report, fix_id: str) -> str:
    said = [m for m in report.fix(fix_id).messages if m.startswith("next: ")]
    assert len(said) == 1, report.fix(fix_id).messages
    return said[0]


def _run_as_written(command: str, cwd: Path) -> None:
    subprocess.run(["bash", "-c", command], cwd=cwd, check=True, capture_output=True)


def test_a_tampered_fix_says_how_to_get_back_and_the_way_works(checkout, tmp_path):
    b, root = checkout
    clean = snapshot(root)
    assert engine.apply(b.request(root)).ok
    (root / MOD).write_text((root / MOD).read_text().replace("line 7\n", "seven, by hand\n"))
    restore = f"git -C {root} checkout HEAD -- demo_pkg/b.py {MOD}"
    for run, again in ((engine.status, "apply again: it then replaces the stale manifest"),
                       (engine.apply, "apply again: it then replaces the stale manifest"),
                       (engine.revert, "revert again: it then removes the stale manifest")):
        r = run(b.request(root))
        assert r.exit_code == 3 and r.fix("one").state == "tampered"
        said = _next(r, "one")
        assert said == (f"next: undo that change, or put every file the manifest lists back to the clean release: "
                        f"{restore}; then run {again}" + (" and applies the fixes afresh" if "apply" in again else ""))
    _run_as_written(restore, tmp_path)
    assert engine.revert(b.request(root)).ok and snapshot(root) == clean


def _one_creates(builder, new: str, text: str, as_git: bool = True):  # type: ignore[no-untyped-def]
    """Fix "one" changes ``line 3`` of MOD (30 numbered lines) and creates ``new`` with ``text``, locked on the release
    (a git checkout pinned at its HEAD where ``as_git``), which it is applied to: (the release, its bytes before,
    the request)."""
    base = numbered(30)
    root = builder.tree("clean", {MOD: base})
    if as_git:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "release")
        builder.commit = git(root, "rev-parse", "HEAD").strip()
    builder.add_fix("one", {MOD: base, new: None}, {MOD: base.replace("line 3\n", "three\n"), new: text})
    builder.profile(["one"])
    builder.lock(root)
    clean = snapshot(root)
    req = builder.request(root)
    assert engine.apply(req).ok
    return root, clean, req


@pytest.mark.parametrize("as_git", [True, False])
def test_a_tampered_fix_that_created_a_file_gets_a_step_that_removes_it(builder, tmp_path, as_git):
    """The manifest lists a file a fix created, which the release lacks: the step removes it (a copy or a git
    checkout of it would fail and stop the step), and the fixes apply afresh after it."""
    new, base = "demo_pkg/new.py", numbered(30)
    root, clean, b_req = _one_creates(builder, new, "NEW = 1\n", as_git)
    (root / MOD).write_text((root / MOD).read_text().replace("line 7\n", "seven, by hand\n"))
    r = engine.status(b_req)
    assert r.fix("one").state == "tampered"
    said = _next(r, "one")
    step = said.split("back to the clean release: ", 1)[1].split("; then run ", 1)[0]
    assert step.startswith(f"rm -f -- {root / new} && ") and step.count(new) == 1, step
    if as_git:  # (a plain tree's copy step: test_restore_commands_for_a_site_packages_folder_and_a_plain_tree)
        _run_as_written(step, tmp_path)
        assert not (root / new).exists() and (root / MOD).read_text() == base
        assert engine.apply(b_req).ok and (root / new).read_text() == "NEW = 1\n"
        assert engine.revert(b_req).ok and snapshot(root) == clean


@pytest.mark.parametrize("made", ["a file", "nothing"])
def test_a_created_file_whose_folder_became_a_file_or_went_is_said_gone_and_the_step_leads_out(builder, tmp_path, made):
    """found by a fresh user: a fix's created file whose folder was replaced by a file was said both to differ from
    the manifest's sha256 and to be "no such file", and the step's `rm -f -- .../new/c.py` failed (Not a
    directory), stopping the steps after it. Now it is said gone (the file in its folder's place named), the step
    removes that file, and apply then goes through."""
    new, base = "demo_pkg/new/c.py", numbered(30)
    root, clean, b_req = _one_creates(builder, new, "C = 1\n")
    (root / new).unlink()
    (root / "demo_pkg/new").rmdir()
    if made == "a file":
        (root / "demo_pkg/new").write_text("in the folder's place\n")
    for run in (engine.status, engine.apply, engine.revert):
        r = run(b_req)
        said = " ".join(r.fix("one").messages)
        assert r.exit_code == 3 and r.fix("one").state == "tampered", said
        gone = "demo_pkg/new is no folder now" if made == "a file" else "removed since it was applied"
        assert f"{new}: gone ({gone})" in said and "sha256" not in said and "no such file" not in said, said
    step = _next(r, "one").split("back to the clean release: ", 1)[1].split("; then run ", 1)[0]
    _run_as_written(step, tmp_path)
    assert not (root / "demo_pkg/new").exists() and (root / MOD).read_text() == base
    assert engine.apply(b_req).ok and (root / new).read_text() == "C = 1\n"
    assert engine.revert(b_req).ok and snapshot(root) == clean


def test_a_conflict_names_the_file_and_how_to_put_it_back(checkout, tmp_path):
    b, root = checkout
    (root / MOD).write_text((root / MOD).read_text().replace("line 2\n", "line two, by hand\n"))
    r = engine.apply(b.request(root))
    assert r.exit_code == 4 and r.fix("one").state == "conflict" and "next: " not in " ".join(r.fix("two").messages)
    said = _next(r, "one")
    restore = f"git -C {root} checkout HEAD -- {MOD}"
    assert said.startswith(f"next: {MOD} differs from the release where the fix goes; if it was changed after the "
                           f"release, put it back: {restore}; then run "), said
    again = said.split("; then run ", 1)[1].split(" (apply --reject DIR", 1)[0]
    assert again.endswith(f" apply --profile p1 --pack {b.pack} --root demo={root}"), again  # the run's own command
    for word in ("status", "apply"):
        said = _next(engine.status(b.request(root)) if word == "status" else engine.apply(b.request(root, dry_run=True)),
                     "one")
        assert said.split(" (apply --reject DIR", 1)[0].endswith(
            f" {word} --profile p1 --pack {b.pack} --root demo={root}{' --dry-run' if word == 'apply' else ''}"), said
    _run_as_written(restore, tmp_path)
    _run_as_written(again, tmp_path)
    assert engine.status(b.request(root, strict=True)).ok


def _strict_said(report, fix_id: str) -> str:
    said = [m for m in report.fix(fix_id).messages if m.startswith("--strict: ")]
    assert len(said) == 1, report.fix(fix_id).messages
    return said[0]


def test_a_drifted_fix_under_strict_says_both_ways_on_and_both_work(checkout, tmp_path):
    """--strict refuses a drifted fix (a line added below its hunk, staged in git: not the lock's pre-image; exit
    3, nothing written); the message names the file, the command that puts it back (from HEAD: the staged edit
    too; after it the same --strict run passes) and the run's own command without --strict (a dry run's stays a
    dry run; status's reports instead of applying), each run as written."""
    b, root = checkout
    drifted = (root / MOD).read_text().replace("line 20\n", "line 20\n# a local line\n")
    (root / MOD).write_text(drifted)
    git(root, "add", MOD)
    before = snapshot(root)
    restore = f"git -C {root} checkout HEAD -- {MOD}"
    unstricts = {}
    for run, dry in ((engine.status, True), (engine.apply, True), (engine.apply, False)):
        r = run(b.request(root, strict=True, dry_run=dry))
        assert r.exit_code == 3 and r.fix("one").state == "drifted" and snapshot(root) == before
        said = _strict_said(r, "one")
        again = said.split("; then run ", 1)[1].split(". If the image is meant", 1)[0]
        assert said.startswith(f"--strict: a drifted fix is an image mismatch: {MOD} differs from the release the "
                               f"lock pins. If it was changed after the release, put it back: {restore}; then run "), said
        assert f" {r.command} --profile p1 --pack {b.pack} --root demo={root} --strict" in again
        assert again.endswith(" --dry-run") == (r.command == "apply" and dry), again
        takes = "applies it as reported above" if r.command == "apply" else "reports it as drifted, not a mismatch"
        unstrict = said.split(f"run without --strict, which {takes}: ", 1)[1].split(". If it is the release's", 1)[0]
        assert unstrict == again.replace(" --strict", ""), (unstrict, again)
        unstricts[r.command, dry] = unstrict
    done = subprocess.run(["bash", "-c", unstricts["apply", True]], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and snapshot(root) == before, done.stderr + done.stdout  # a dry run's: a dry run
    done = subprocess.run(["bash", "-c", unstricts["apply", False]], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and (root / MOD).read_text() == drifted.replace("line 3\n", "three\n"), done.stderr
    assert engine.revert(b.request(root)).ok and (root / MOD).read_text() == drifted
    _run_as_written(restore, tmp_path)
    assert engine.apply(b.request(root, strict=True)).ok


def test_two_drifted_fixes_under_strict_name_one_put_back_of_both_files_which_then_passes(builder, tmp_path):
    """Two fixes, each drifted in its own file: each message put back its own file only, so the run it named after
    that put-back was refused for the other (two rounds; a fresh user's finding). Each names both files in one
    put-back; run as written (git checkout from HEAD), the --strict apply then passes."""
    base, other = numbered(30), "demo_pkg/other.py"
    root = builder.tree("clean", {MOD: base, other: base})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release")
    builder.commit = git(root, "rev-parse", "HEAD").strip()
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {other: base}, {other: base.replace("line 5\n", "five\n")})
    builder.profile(["one", "two"])
    builder.lock(root)
    for path in (MOD, other):
        (root / path).write_text(base.replace("line 20\n", "line 20\n# a local line\n"))
    before = snapshot(root)
    r = engine.apply(builder.request(root, strict=True))
    assert r.exit_code == 3 and snapshot(root) == before
    restore = f"git -C {root} checkout HEAD -- {MOD} {other}"
    for fid in ("one", "two"):
        said = _strict_said(r, fid)
        assert f"{MOD}, {other} differ from the release the lock pins. If they were changed after the release, put " \
               f"them back: {restore}; then run " in said, said
    _run_as_written(restore, tmp_path)
    assert engine.apply(builder.request(root, strict=True)).ok


def test_strict_drift_from_a_lock_of_another_release_names_lock_check(builder, tmp_path):
    """Found by a fresh user: a lock made from another release's file (a line below the hunk differs) made every
    --strict run say the file differs and to put it back from the release; put back, it said the same again. The
    message also names ``lock --check`` of the target; run as written (with the clean copy as --root), it refuses
    the lock as stale, naming the fix, and the lock it regenerates makes the --strict run pass."""
    base = numbered(30)
    other = base.replace("line 20\n", "line 20 of another release\n")
    root = builder.tree("clean", {MOD: base})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release")
    builder.commit = git(root, "rev-parse", "HEAD").strip()
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"], [])
    builder.lock(builder.tree("other", {MOD: other}))  # the lock of another release
    for _ in range(2):  # the put-back changes nothing: the file is the release's, the same message again
        r = engine.apply(builder.request(root, strict=True))
        assert r.exit_code == 3 and r.fix("one").state == "drifted", r.fix("one")
        said = _strict_said(r, "one")
        _run_as_written(said.split("put it back: ", 1)[1].split("; then run ", 1)[0], tmp_path)
    check = said.split("the lock is not this release's: ", 1)[1].split(" compares it with a clean copy", 1)[0]
    assert " lock --check --profile p1 --pack " in check and check.endswith(" --target demo"), said
    assert said.endswith("names the entries that differ."), said  # this Python has the maintainer's libraries
    # an image's lean Python (no GitPython, pypi-simple, tomlkit, packaging) cannot run lock: the message says where
    # it runs, as the stale lock's does (a fresh user ran it through fixes/apply_all.py's lean venv: exit 5)
    blocked = "import sys, runpy\nfor m in ('git', 'pypi_simple', 'tomlkit', 'packaging'): sys.modules[m] = None\n" \
              "sys.argv = ['fixpack'] + sys.argv[1:]\nrunpy.run_module('fixpack.cli', run_name='__main__')"
    lean = subprocess.run([sys.executable, "-c", blocked, "apply", "--strict", "--pack", str(builder.pack), "-p", "p1",
                           "--root", f"demo={root}"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    words = " ".join((lean.stdout + lean.stderr).split())  # the report's messages: on stdout
    assert lean.returncode == 3 and "names the entries that differ; lock is a maintainer's command and this Python" \
        in words and "then bring the new lock here." in words, words
    done = subprocess.run(["bash", "-c", f"{check} --root demo={root}"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 2 and "is stale (differs for: one)" in done.stderr, done.stderr
    # which file and which side (a fix of three files said only that some fingerprint differed)
    assert (f"one: other fingerprints on the release copy than the lock records: {MOD}: its pre-image and "
            f"post-image;") in " ".join(done.stderr.split()), done.stderr
    redo = done.stderr.split("regenerate it from clean release copies: ", 1)[1].splitlines()[0]
    _run_as_written(redo, tmp_path)
    assert engine.apply(builder.request(root, strict=True)).ok


def test_strict_judges_a_later_fix_on_top_of_a_refused_one_on_the_same_file(builder):
    """A fresh user: under --strict, a fix refused as drifted (here: another file of its own drifted; the user had
    its lock entry's pre-image hash edited and the lock resealed, which is now named as such, tests/test_lock_seal.py)
    left the later fixes on the same file judged on the file without it, so each said its pre-image differs from
    the lock's, whose pre-image holds the refused fix's change: a drift of its own that is not there. The later fix
    is judged on top of it, as without --strict: it would apply exactly; only the first is named."""
    other = "demo_pkg/other.py"
    base = numbered(40)
    one = base.replace("line 3\n", "three\n")
    builder.add_fix("one", {MOD: base, other: base}, {MOD: one, other: base.replace("line 5\n", "five\n")})
    builder.add_fix("two", {MOD: one}, {MOD: one.replace("line 30\n", "thirty\n")})
    builder.profile(["one", "two"], [])
    builder.lock(builder.tree("clean", {MOD: base, other: base}))
    root = builder.tree("image", {MOD: base, other: base.replace("line 35\n", "LINE 35\n")})
    for run in (engine.status, engine.apply):
        r = run(builder.request(root, strict=True))
        assert r.exit_code == 3 and r.fix("one").state == "drifted", r.fix("one")
        assert r.fix("two").state == "absent", r.fix("two")
        assert not [m for m in r.fix("two").messages if m.startswith("--strict: ")], r.fix("two")


def test_strict_drift_under_applied_fixes_says_revert_first(builder, tmp_path):
    """An image applied as drifted (a local line), then run with --strict and an opt-in on the same file: putting
    the file back would take the applied fix's change out too (a tampered image), so the message says to revert
    first, with the command; its steps, run as written in order, end in a --strict run that passes."""
    base = numbered(30)
    root = builder.tree("clean", {MOD: base})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release")
    builder.commit = git(root, "rev-parse", "HEAD").strip()
    one = base.replace("line 3\n", "three\n")
    builder.add_fix("one", {MOD: base}, {MOD: one})
    builder.add_fix("four", {MOD: one}, {MOD: one.replace("line 26\n", "twenty-six\n")}, opt_in=True)
    builder.profile(["one"], ["four"])
    builder.lock(root)
    (root / MOD).write_text(base.replace("line 20\n", "line 20\n# a local line\n"))
    assert engine.apply(builder.request(root)).ok  # drifted, applied
    r = engine.apply(builder.request(root, strict=True, opt_ins=("four",)))
    # one, laid on the drifted file by the run without --strict, is drifted under --strict too (it said applied)
    assert r.exit_code == 3 and r.fix("one").state == "drifted" and r.fix("four").state == "drifted"
    said = _strict_said(r, "four")
    revert = said.split("revert first (", 1)[1].split(": it takes out every applied fix of target demo; the put-back "
                                                       "would take one out of it anyway)", 1)[0]
    restore = said.split("put it back (", 1)[1].split("), then apply again: ", 1)[0]
    again = said.split("then apply again: ", 1)[1].split(". If the image is meant", 1)[0]
    assert " revert " in revert and " --target demo" in revert, revert  # that target's fixes alone
    assert restore == f"git -C {root} checkout HEAD -- {MOD}" and again.endswith(" apply --profile p1 --pack "
                                                                                 f"{builder.pack} --root demo={root} "
                                                                                 "--strict four"), said
    for step in (revert, restore, again):
        _run_as_written(step, tmp_path)
    assert (root / MOD).read_text() == one.replace("line 26\n", "twenty-six\n")
    # edited after one was applied: one is tampered, a revert is refused; the message defers to one's, which
    # leads back, after which its --strict command passes
    assert engine.revert(builder.request(root)).ok
    assert engine.apply(builder.request(root)).ok
    (root / MOD).write_text((root / MOD).read_text().replace("line 20\n", "line 20\n# a local line\n"))
    for run in (engine.status, engine.apply):
        r = run(builder.request(root, strict=True, opt_ins=("four",)))
        assert r.exit_code == 3 and r.fix("one").state == "tampered" and r.fix("four").state == "drifted"
        said = _strict_said(r, "four")
        assert "and applied one on it is tampered: follow its message first (a revert is refused until then)" in said
        assert "revert first" not in said and "checkout" not in said, said
    way = _next(r, "one").split("back to the clean release: ", 1)[1].split("; then run ", 1)[0]
    _run_as_written(way, tmp_path)
    _run_as_written(said.split("then run ", 1)[1], tmp_path)
    assert (root / MOD).read_text() == one.replace("line 26\n", "twenty-six\n")


def test_strict_drift_of_an_opt_in_locked_on_an_opt_in_not_named_says_name_it(builder, tmp_path):
    """Opt-in five was locked on top of opt-in three (the same file): named alone, it drifts on the clean release.
    The message says so and names three, with the command that adds it (which passes --strict); it offers no
    put-back of a file that is the release's."""
    base = numbered(30)
    c = "demo_pkg/c.py"
    root = builder.tree("clean", {MOD: base, c: base})
    three = base.replace("line 4\n", "four\n")
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("three", {c: base}, {c: three}, opt_in=True)
    five = three.replace("line 25\n", "twenty-five\n")
    builder.add_fix("five", {c: three}, {c: five}, opt_in=True)
    builder.add_fix("six", {c: five}, {c: five.replace("line 26\n", "twenty-six\n")}, opt_in=True)
    builder.add_fix("seven", {"demo_pkg/new.py": None}, {"demo_pkg/new.py": "NEW = 7\n"}, opt_in=True)
    builder.profile(["one"], ["three", "five", "six", "seven"])
    builder.lock(root)
    before = snapshot(root)
    r = engine.status(builder.request(root, strict=True, opt_ins=("five",)))
    assert r.exit_code == 3 and r.fix("five").state == "drifted" and snapshot(root) == before
    said = _strict_said(r, "five")
    assert said.startswith(f"--strict: a drifted fix is an image mismatch: the lock placed five on top of opt-in three "
                           f"(before it in the pack, on {c}), which this run does not apply"), said
    assert "put it back" not in said
    name = said.split("Name it too: ", 1)[1].split("; or, if the image is meant without it", 1)[0]
    assert name.endswith(f" status --profile p1 --pack {builder.pack} --root demo={root} --strict five three"), name
    _run_as_written(name, tmp_path)
    assert engine.apply(builder.request(root, strict=True, opt_ins=("three", "five"))).ok
    assert engine.revert(builder.request(root)).ok and snapshot(root) == before
    # six's context holds five's change: a conflict on the release without five (and three); said the same way
    r = engine.apply(builder.request(root, opt_ins=("six",)))
    assert r.exit_code == 4 and r.fix("six").state == "conflict" and snapshot(root) == before
    said = _next(r, "six")
    assert said.startswith(f"next: the lock placed six on top of opt-in three, five (before it in the pack, on {c}), "
                           f"which this run does not apply; name them too: "), said
    _run_as_written(said.split("name them too: ", 1)[1], tmp_path)
    assert engine.status(builder.request(root, strict=True, opt_ins=("three", "five", "six"))).ok
    # a file a fix creates, there already (the release lacks it): move it aside, not a put-back that cannot run
    (root / "demo_pkg/new.py").write_text("mine\n")
    r = engine.apply(builder.request(root, opt_ins=("seven",)))
    assert r.exit_code == 4 and r.fix("seven").state == "conflict"
    said = _next(r, "seven")
    assert said.startswith("next: demo_pkg/new.py is there, though the release lacks it and the fix creates it: move "
                           "it aside ("), said
    (root / "demo_pkg/new.py.orig").write_text("an older backup\n")  # never overwritten
    said = _next(engine.apply(builder.request(root, opt_ins=("seven",))), "seven")
    _run_as_written(said.split("move it aside (", 1)[1].split("), then run ", 1)[0], tmp_path)
    assert (root / "demo_pkg/new.py.orig1").read_text() == "mine\n"
    assert (root / "demo_pkg/new.py.orig").read_text() == "an older backup\n"
    _run_as_written(said.split("), then run ", 1)[1], tmp_path)
    assert (root / "demo_pkg/new.py").read_text() == "NEW = 7\n"


def test_fixes_missing_different_opt_ins_each_give_a_command_naming_them_all(builder, tmp_path):
    """Five was locked on top of opt-in three (c.py), eleven on top of opt-in ten (d.py, which requires opt-in
    nine); named without those, each line named only its own: the command five's line gave failed again on eleven,
    and eleven's on five. Each command now names all of them (ten's requires too), says why the other is there,
    and runs: five drifted under --strict with eleven in conflict, the way on without --strict, the put-back of a
    file changed by hand (in a dry run and a status: the command keeps them), a file moved aside, and a revert
    first, whose apply after names the opt-in it took out."""
    base = numbered(30)
    c, d, e = "demo_pkg/c.py", "demo_pkg/d.py", "demo_pkg/e.py"
    root = builder.tree("clean", {MOD: base, c: base, d: base, e: base})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release")
    builder.commit = git(root, "rev-parse", "HEAD").strip()
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    three, ten = base.replace("line 4\n", "four\n"), base.replace("line 10\n", "ten\n")
    builder.add_fix("three", {c: base}, {c: three}, opt_in=True)
    builder.add_fix("five", {c: three}, {c: three.replace("line 25\n", "twenty-five\n")}, opt_in=True)
    builder.add_fix("nine", {e: base}, {e: base.replace("line 9\n", "nine\n")}, opt_in=True)
    builder.add_fix("ten", {d: base}, {d: ten}, opt_in=True, requires=["nine"])
    builder.add_fix("eleven", {d: ten}, {d: ten.replace("line 11\n", "eleven\n")}, opt_in=True)
    builder.add_fix("seven", {"demo_pkg/new.py": None}, {"demo_pkg/new.py": "NEW = 7\n"}, opt_in=True)
    builder.profile(["one"], ["three", "five", "nine", "ten", "eleven", "seven"])
    builder.lock(root)
    before = snapshot(root)
    r = engine.status(builder.request(root, strict=True, opt_ins=("five", "eleven")))
    assert r.exit_code == 3 and r.fix("five").state == "drifted" and r.fix("eleven").state == "conflict"
    said = _strict_said(r, "five")
    assert "Name it too (with nine, ten, which another fix's line names): " in said, said
    name = said.split("another fix's line names): ", 1)[1].split("; or, if the image is meant without it", 1)[0]
    assert name.endswith(f" status --profile p1 --pack {builder.pack} --root demo={root} --strict five eleven three "
                         f"nine ten"), name
    without = said.split("run without --strict, which reports it as drifted, not a mismatch: ", 1)[1]
    assert without.endswith(f" --root demo={root} five eleven nine ten"), without  # eleven's opt-ins still
    said = _next(r, "eleven")
    assert said.startswith(f"next: the lock placed eleven on top of opt-in ten (before it in the pack, on {d}), which "
                           f"this run does not apply; name it too (with nine, which that one needs in turn, and "
                           f"three, which another fix's line names): "), said
    assert said.endswith(" --strict five eleven nine ten three"), said
    for command in (name, without, said.split("line names): ", 1)[1]):
        _run_as_written(command, tmp_path)  # exit 0: the run it suggests goes through
    assert snapshot(root) == before
    # a hand edit where one goes: its put-back's "then run" names the other fixes' opt-ins as well, and is the
    # run's own command (a dry run's keeps --dry-run, a status's is a status)
    (root / MOD).write_text(base.replace("line 3\n", "line 3, by hand\n"))
    for run, kw, word in ((engine.apply, {"dry_run": True}, "apply"), (engine.status, {}, "status"),
                          (engine.apply, {}, "apply")):
        r = run(builder.request(root, opt_ins=("eleven",), **kw))
        assert r.exit_code == 4 and r.fix("one").state == "conflict" and r.fix("eleven").state == "conflict"
        said = _next(r, "one")
        again = said.split("; then run ", 1)[1].split(" (apply --reject DIR", 1)[0]
        assert again.endswith(f" {word} --profile p1 --pack {builder.pack} --root demo={root}"
                              f"{' --dry-run' if kw else ''} eleven nine ten"), again
    _run_as_written(said.split("put it back: ", 1)[1].split("; then run ", 1)[0], tmp_path)
    _run_as_written(again, tmp_path)
    assert (root / d).read_text() == ten.replace("line 11\n", "eleven\n")
    assert engine.revert(builder.request(root)).ok and snapshot(root) == before
    # a file a fix creates, there already: the run after the move names the other fix's opt-ins too
    (root / "demo_pkg/new.py").write_text("mine\n")
    r = engine.apply(builder.request(root, opt_ins=("seven", "eleven")))
    assert r.exit_code == 4 and r.fix("seven").state == "conflict"
    said = _next(r, "seven")
    assert said.endswith(f" --root demo={root} seven eleven nine ten (with nine, ten, which another fix's line "
                         f"names)"), said
    _run_as_written(said.split("move it aside (", 1)[1].split("), then run ", 1)[0], tmp_path)
    _run_as_written(said.split("), then run ", 1)[1].split(" (with nine", 1)[0], tmp_path)
    assert (root / "demo_pkg/new.py").read_text() == "NEW = 7\n"
    assert engine.revert(builder.request(root)).ok and not (root / "demo_pkg/new.py").exists()
    assert (root / "demo_pkg/new.py.orig").read_text() == "mine\n"
    (root / "demo_pkg/new.py.orig").unlink()
    assert snapshot(root) == before
    # c.py changed by hand, then three applied on it: --strict says revert first; the apply after names three again
    (root / c).write_text(base.replace("line 20\n", "line 20, by hand\n"))
    assert engine.apply(builder.request(root, opt_ins=("three",))).ok
    r = engine.status(builder.request(root, strict=True, opt_ins=("five", "eleven")))
    said = _strict_said(r, "five")
    steps = [said.split("revert first (", 1)[1].split(": it takes out", 1)[0],
             said.split(" back (", 1)[1].split("), then apply again: ", 1)[0],
             said.split("), then apply again: ", 1)[1].split(". If the image", 1)[0]]
    assert steps[2].endswith(f" --root demo={root} --strict five eleven three nine ten"), steps[2]
    for step in steps:
        _run_as_written(step, tmp_path)
    assert (root / c).read_text() == three.replace("line 25\n", "twenty-five\n")


def test_an_opt_in_two_failing_fixes_need_a_chain_of_them_a_file_there_and_requires(builder, tmp_path):
    """Five and eleven both locked on top of opt-in three: five's line offered "run without --strict" naming
    eleven alone, which failed on eleven (it needs three too); now it says eleven needs three too. Nine on
    eight on seven (on other files): the command names both at once (it named eight, then the run after asked for
    seven). Twelve creates a file that is there and was locked on top of three (five and eleven too): the run after
    the move names them (it did not: one more failing run). Three requires default fix one: not named (a default is selected anyway)."""
    base = numbered(30)
    c, e, f = "demo_pkg/c.py", "demo_pkg/e.py", "demo_pkg/f.py"
    root = builder.tree("clean", {MOD: base, c: base, e: base, f: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    three = base.replace("line 10\n", "ten\n")
    builder.add_fix("three", {c: base}, {c: three}, opt_in=True, requires=["one"])
    builder.add_fix("five", {c: three}, {c: three.replace("line 25\n", "twenty-five\n")}, opt_in=True)
    builder.add_fix("eleven", {c: three}, {c: three.replace("line 11\n", "eleven\n")}, opt_in=True)
    seven = base.replace("line 2\n", "two\n")
    builder.add_fix("seven", {e: base}, {e: seven}, opt_in=True)
    eight = {e: seven.replace("line 3\n", "three\n"), f: base.replace("line 20\n", "twenty\n")}
    builder.add_fix("eight", {e: seven, f: base}, eight, opt_in=True)
    builder.add_fix("nine", {f: eight[f]}, {f: eight[f].replace("line 21\n", "twenty-one\n")}, opt_in=True)
    builder.add_fix("twelve", {c: three, "demo_pkg/new.py": None},
                    {c: three.replace("line 7\n", "seven\n"), "demo_pkg/new.py": "NEW = 12\n"}, opt_in=True)
    builder.profile(["one"], ["three", "five", "eleven", "seven", "eight", "nine", "twelve"])
    builder.lock(root)
    before = snapshot(root)
    r = engine.status(builder.request(root, strict=True, opt_ins=("five", "eleven")))
    assert r.exit_code == 3 and r.fix("five").state == "drifted" and r.fix("eleven").state == "conflict"
    said = _strict_said(r, "five")
    assert said.endswith("; eleven does not apply without three either: the image cannot leave three out while "
                         "eleven is named"), said
    assert "run without --strict" not in said and " one" not in said.split("Name it too: ", 1)[1], said
    _run_as_written(said.split("Name it too: ", 1)[1].split("; eleven does not", 1)[0], tmp_path)
    r = engine.apply(builder.request(root, opt_ins=("nine",), dry_run=True))
    said = _next(r, "nine")
    assert said.startswith(f"next: the lock placed nine on top of opt-in eight (before it in the pack, on {f}), which "
                           f"this run does not apply; name it too (with seven, which that one needs in turn): "), said
    assert said.endswith(f" --root demo={root} --dry-run nine seven eight"), said
    _run_as_written(said.split("needs in turn): ", 1)[1], tmp_path)
    (root / "demo_pkg/new.py").write_text("mine\n")
    said = _next(engine.apply(builder.request(root, opt_ins=("twelve",))), "twelve")
    assert said.endswith(f" --root demo={root} twelve three five eleven (it names three, five, eleven too, which the "
                         f"lock placed twelve on top of)"), said  # on c.py, whichever its hunk needs
    _run_as_written(said.split("move it aside (", 1)[1].split("), then run ", 1)[0], tmp_path)
    _run_as_written(said.split("), then run ", 1)[1].split(" (it names", 1)[0], tmp_path)
    assert (root / "demo_pkg/new.py").read_text() == "NEW = 12\n"
    assert engine.revert(builder.request(root)).ok
    (root / "demo_pkg/new.py.orig").unlink()
    assert snapshot(root) == before


def test_requires_of_a_named_opt_in_bring_theirs_and_two_drifts_may_go_without_strict(builder, tmp_path):
    """x was locked on top of w, which requires v, which was locked on top of u: the command named x w v, and the run
    after it failed on v (one more run); it names u too now. Five and six both drift without three under --strict
    (neither conflicts): the way on without --strict is offered (it was withheld as if six could not go without
    three) and runs."""
    base = numbered(30)
    c, e, f = "demo_pkg/c.py", "demo_pkg/e.py", "demo_pkg/f.py"
    root = builder.tree("clean", {MOD: base, c: base, e: base, f: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    three = base.replace("line 10\n", "ten\n")
    builder.add_fix("three", {c: base}, {c: three}, opt_in=True)
    builder.add_fix("five", {c: three}, {c: three.replace("line 25\n", "twenty-five\n")}, opt_in=True)
    builder.add_fix("six", {c: three}, {c: three.replace("line 20\n", "twenty\n")}, opt_in=True)
    u = base.replace("line 5\n", "five\n")
    builder.add_fix("u", {e: base}, {e: u}, opt_in=True)
    builder.add_fix("v", {e: u}, {e: u.replace("line 6\n", "six\n")}, opt_in=True)
    w = base.replace("line 15\n", "fifteen\n")
    builder.add_fix("w", {f: base}, {f: w}, opt_in=True, requires=["v"])
    builder.add_fix("x", {f: w}, {f: w.replace("line 16\n", "sixteen\n")}, opt_in=True)
    xw = w.replace("line 16\n", "sixteen\n")
    builder.add_fix("t", {f: xw, "demo_pkg/new.py": None}, {f: xw.replace("line 12\n", "twelve\n"),
                                                            "demo_pkg/new.py": "T = 1\n"}, opt_in=True)
    builder.profile(["one"], ["three", "five", "six", "u", "v", "w", "x", "t"])
    builder.lock(root)
    said = _next(engine.apply(builder.request(root, opt_ins=("x",), dry_run=True)), "x")
    assert said.startswith(f"next: the lock placed x on top of opt-in w (before it in the pack, on {f}), which this run "
                           f"does not apply; name it too (with u, v, which that one needs in turn): "), said
    assert said.endswith(f" --root demo={root} --dry-run x u v w"), said
    _run_as_written(said.split("in turn): ", 1)[1], tmp_path)
    (root / "demo_pkg/new.py").write_text("mine\n")  # t creates it: the move, then t with what it was placed on
    said = _next(engine.apply(builder.request(root, opt_ins=("t",), dry_run=True)), "t")
    assert said.endswith(" --dry-run t u v w x (it names w, x too, which the lock placed t on top of; with u, v, which "
                         "those need in turn)"), said
    (root / "demo_pkg/new.py").unlink()
    r = engine.status(builder.request(root, strict=True, opt_ins=("five", "six")))
    assert r.exit_code == 3 and r.fix("five").state == r.fix("six").state == "drifted"
    for fid in ("five", "six"):
        said = _strict_said(r, fid)
        without = said.split("; or, if the image is meant without it, run without --strict, which reports it as "
                             "drifted, not a mismatch: ", 1)[1]
        assert without.endswith(f" --root demo={root} five six"), without
        _run_as_written(without, tmp_path)


def test_under_strict_a_conflict_names_the_opt_ins_of_its_other_files_too(builder, tmp_path):
    """x was locked on top of w (c.py: x conflicts without it) and of v (d.py: x only drifts without it). Under
    --strict the conflict named w alone; the run after it was refused for the drift on d.py, naming v (one more
    run). Both are named at once now, and only the files they are on (x's g.py has none)."""
    base = numbered(30)
    c, d, g = "demo_pkg/c.py", "demo_pkg/d.py", "demo_pkg/g.py"
    root = builder.tree("clean", {MOD: base, c: base, d: base, g: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    w, v = base.replace("line 10\n", "ten\n"), base.replace("line 4\n", "four\n")
    builder.add_fix("w", {c: base}, {c: w}, opt_in=True)
    builder.add_fix("v", {d: base}, {d: v}, opt_in=True)
    builder.add_fix("x", {c: w, d: v, g: base}, {c: w.replace("line 11\n", "eleven\n"),
                                                d: v.replace("line 25\n", "25\n"), g: base.replace("line 9\n", "9\n")},
                    opt_in=True)  # g.py: no opt-in there, not said
    builder.profile(["one"], ["w", "v", "x"])
    builder.lock(root)
    r = engine.status(builder.request(root, strict=True, opt_ins=("x",)))
    assert r.exit_code == 4 and r.fix("x").state == "conflict"
    said = _next(r, "x")
    assert said.startswith(f"next: the lock placed x on top of opt-in w, v (before it in the pack, on {c}, {d}), "), said
    assert said.endswith(f" --root demo={root} --strict x w v"), said
    _run_as_written(said.split("name them too: ", 1)[1], tmp_path)


def test_restore_commands_for_a_site_packages_folder_and_a_plain_tree(builder):
    base = numbered(10)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    site = builder.tree("site", {MOD: base})
    (site / "demo_pkg-1.0.dist-info").mkdir()
    for root in (site, clean):  # a site-packages install too: a reinstall from an index would replace the image's build
        want = (f"(src=$({program()} fetch --profile p1 --pack {builder.pack} --target demo | sed -n 's/^demo=//p') "
                f"&& [ -n \"$src\" ] && cd \"$src\" && cp --remove-destination --parents {MOD} {root})")
        ctx = prepare(builder.request(root), "status")
        assert restore_how(ctx, ctx.found["demo"], [MOD]) == want


def test_a_missing_file_names_and_puts_back_only_that_file(builder, tmp_path):
    base, other = numbered(30), "demo_pkg/b.py"
    root = builder.tree("clean", {MOD: base, other: base, "demo_pkg/c.py": base})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "release")
    builder.commit = git(root, "rev-parse", "HEAD").strip()
    files = (MOD, other, "demo_pkg/c.py")
    builder.add_fix("one", dict.fromkeys(files, base), {f: base.replace("line 3\n", "three\n") for f in files})
    builder.profile(["one"])
    builder.lock(root)
    (root / other).unlink()
    (root / MOD).write_text(base + "a local change the fix does not mind\n")
    r = engine.apply(b_req := builder.request(root))
    assert r.exit_code == 4 and r.fix("one").state == "conflict"
    restore = f"git -C {root} checkout HEAD -- {other}"
    assert _next(r, "one").startswith(f"next: {other} is missing or differs from the release where the fix goes; "
                                      f"if it was changed after the release, put it back: {restore}; then run ")
    _run_as_written(restore, tmp_path)
    assert engine.apply(b_req).ok and (root / MOD).read_text().endswith("a local change the fix does not mind\n")


def test_revert_of_an_image_whose_pack_patch_no_longer_parses_says_the_pack_it_was_applied_from(checkout, tmp_path):
    """Found by a fresh user: revert on an applied image, with one of the applied fixes' patches since broken in the
    pack, said only 'regenerate the patch'; the image was applied from the patch as it was then, so the pack put
    back as it was lets revert go on. Exit 2, nothing written; the command it names runs as written and revert then
    gives the clean release back."""
    import shlex
    import shutil

    from fixpack.errors import PackError

    b, root = checkout
    clean = snapshot(root)
    pack_root = tmp_path / "the pack 'q'"  # (the command quotes it: a fresh user)
    shutil.copytree(b.pack, pack_root)

    def request() -> engine.Request:
        return engine.Request(pack_root=pack_root, profile="p1", roots={b.target: root})

    git(pack_root, "init", "-q")
    git(pack_root, "add", "-A")
    git(pack_root, "commit", "-qm", "pack")
    assert engine.apply(request()).ok
    applied, pack = snapshot(root), snapshot(pack_root / "fixes")
    patch = next((pack_root / "fixes/one").glob("*.patch"))
    patch.write_text(patch.read_text().replace("@@ -", "@@ -x", 1))
    git(pack_root, "add", "-A")  # (staged: `checkout --` alone would put the staged bytes back)
    broken = snapshot(pack_root / "fixes")
    with pytest.raises(PackError) as exc:
        engine.revert(request())
    said = str(exc.value)
    restore = f"git -C {shlex.quote(str(pack_root))} checkout HEAD -- fixes/one"  # (a staged edit too: a fresh user)
    assert exc.value.exit_code == 2 and snapshot(root) == applied and snapshot(pack_root / "fixes") == broken
    assert (f"the image at {root} was applied from fix one's patches as they were then (their sha256 is in "
            f"{root / '.fixpack/demo.manifest.json'}), not from these: put fixes/one/ back as it was when the image "
            f"was applied (in a git checkout of the pack: {restore}, or the commit it was applied from) and run revert "
            f"again; nothing was written") in said and f"{patch}:" in said, said
    _run_as_written(restore, tmp_path)
    assert snapshot(pack_root / "fixes") == pack
    assert engine.revert(request()).ok and snapshot(root) == clean


@pytest.mark.parametrize(("key", "value", "says"), [
    ("version", '"1"', 'fix entry 2: two: its version "1" is not'),
    ("patch_bytes_sha256", '"ABC"', "fix entry 2: two: its patch_bytes_sha256 is not a sha256"),
    ("state", '"half"', 'fix entry 2: two: its state "half" is neither'),
])
def test_a_damaged_manifest_entry_is_named_at_its_line_and_its_removal_leads_back(checkout, key, value, says):
    """Found by a fresh user: a damaged fix entry of the manifest was named by its number, not its line, and 'remove
    it' did not say what (the entry? the file?). The line of the key is named; the file's removal, as said, leads to
    a run that finds the fixes applied by the lock's fingerprints, and apply records them again."""
    import json
    import re

    from fixpack.errors import DamagedStateError

    b, root = checkout
    clean = snapshot(root)
    assert engine.apply(b.request(root)).ok
    path = root / ".fixpack/demo.manifest.json"
    text = path.read_text()
    start = text.index('"id": "two"')
    entry_start = text.rindex("{", 0, start)
    found = re.compile(rf'"{key}": [^,\n]*').search(text, entry_start)
    assert found is not None
    path.write_text(text[:found.start()] + f'"{key}": {value}' + text[found.end():])
    line = text[:found.start()].count("\n") + 1
    applied = snapshot(root)
    for run in (engine.status, engine.apply, engine.revert):
        with pytest.raises(DamagedStateError) as exc:
            run(b.request(root))
        assert exc.value.exit_code == 3 and snapshot(root) == applied
        assert f"not a valid fixpack manifest: line {line}: {says}" in str(exc.value), str(exc.value)
        assert str(exc.value).endswith("; remove the file (apply then records again the fixes it finds applied, by "
                                       "the lock's fingerprints) or restore the image (nothing was written)"), str(
            exc.value)
    path.unlink()
    assert [f.state for f in engine.status(b.request(root)).fixes] == ["applied", "applied"]
    assert engine.apply(b.request(root)).ok
    assert [f["id"] for f in json.loads(path.read_text())["fixes"]] == ["one", "two"]
    assert engine.revert(b.request(root)).ok and snapshot(root) == clean


def _manifest_text(version_two: str = "1") -> str:
    """A manifest as fixpack lays it out (one key a line), fix two's version written as ``version_two``."""
    import json

    sha = "0" * 64
    data = {"files": {"a.py": sha, "b.py": sha, "version": sha}, "fixes": [
        {"files": {"a.py": sha}, "id": "one", "patch_sha256": sha, "state": "applied", "version": 1},
        {"files": {"b.py": sha, "version": sha}, "id": "two", "patch_sha256": sha, "state": "applied", "version": 1}],
        "profile": "p1", "schema": 1, "target": "demo"}
    return json.dumps(data, indent=2, sort_keys=True).replace('"version": 1\n    }\n  ]', f'"version": {version_two}\n'
                                                                                             f"    }}\n  ]")


@pytest.mark.parametrize(("case", "line"), [
    ("as written", "the line"),  # entry two's own version line, not its file named 'version'
    ("the list's first brace on its line", None),
    ("two entries on one line", None),
    ("one line", None),
])
def test_a_damaged_manifest_entry_s_line_is_its_key_s_or_none_never_another(tmp_path, case, line):
    """Found by a fresh user: a manifest laid out otherwise than fixpack writes it (the list's first brace on the
    "fixes" line, two entries on one line) had another entry's line named, and a file called "version" in an
    entry's files was taken for the entry's version. A line is named only where the layout is fixpack's."""
    import json

    from fixpack.errors import DamagedStateError
    from fixpack.records import Manifest

    text = _manifest_text('"1"')
    if case == "the list's first brace on its line":
        text = text.replace('"fixes": [\n    {', '"fixes": [{')
    elif case == "two entries on one line":
        text = text.replace("\n    },\n    {", "}, {")
    elif case == "one line":
        text = json.dumps(json.loads(text))
    path = tmp_path / "demo.manifest.json"
    with pytest.raises(DamagedStateError) as exc:
        Manifest.from_json(text.encode(), path)
    said = 'fix entry 2: two: its version "1" is not'
    if line:
        at = text.splitlines().index('      "version": "1"') + 1
        assert f"not a valid fixpack manifest: line {at}: {said}" in str(exc.value), str(exc.value)
    else:
        assert f"not a valid fixpack manifest: {said}" in str(exc.value), str(exc.value)
    Manifest.from_json(_manifest_text().encode(), path)  # (the same manifest, undamaged: read)


@pytest.mark.parametrize(("raw", "what"), [
    (b"", "not valid JSON (line 1: Expecting value)"),
    (b'{"fixes": [], "fixes": []}', 'the key "fixes" appears twice'),
    (b"\xff\xfe{}", "bytes that are not UTF-8 at byte offset 0"),
    (_manifest_text().replace('"state": "applied",\n      "version": 1\n    }\n  ]',
                              '"version": 1\n    }\n  ]').encode(), "fix entry 2: two: its state is missing"),
])
def test_every_damaged_manifest_says_what_removing_it_leads_to(tmp_path, raw, what):
    """Found by a fresh user: a manifest that is no JSON, or has a key twice, or bytes that are not UTF-8, said the
    old 'remove it' (the README gives every damaged manifest's words); a missing state read 'state None'."""
    from fixpack.errors import DamagedStateError
    from fixpack.records import REMOVE_MANIFEST, Manifest

    with pytest.raises(DamagedStateError) as exc:
        Manifest.from_json(raw, tmp_path / "demo.manifest.json")
    said = str(exc.value)
    assert what in said and said.endswith(f"; {REMOVE_MANIFEST} (nothing was written)") and "None" not in said, said
