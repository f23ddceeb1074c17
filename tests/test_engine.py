"""The engine on real trees: every state, idempotence, revert, offsets, opt-ins, missing targets."""

import json
import os
import shutil

import pytest
from conftest import numbered, snapshot, within

from fixpack import engine
from fixpack.errors import BadInputError, FixpackError, MismatchError, PackError, StaleLockError, UnknownNameError

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(40)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/old.py": "old\n" * 5})
    builder.add_fix("first", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    mid = base.replace("line 5\n", "five\n")
    builder.add_fix("second", {MOD: mid, "demo_pkg/old.py": "old\n" * 5},
                    {MOD: mid.replace("line 30\n", "thirty\n"), "demo_pkg/new.py": "new\n", "demo_pkg/old.py": None})
    builder.add_fix("extra", {"demo_pkg/x.py": None}, {"demo_pkg/x.py": "x = 1\n"}, opt_in=True)
    builder.profile(["first", "second"], ["extra"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base, "demo_pkg/old.py": "old\n" * 5})
    return builder, clean, target


def states(report):
    return {f.id: f.state for f in report.fixes}


def test_apply_then_idempotent_then_revert(setup):
    b, clean, target = setup
    original = snapshot(target)
    r = engine.apply(b.request(target))
    assert r.ok and states(r) == {"first": "absent", "second": "absent"}
    assert [f.action for f in r.fixes] == ["applied", "applied"]
    text = (target / MOD).read_text()
    assert "five\n" in text and "thirty\n" in text and not (target / "demo_pkg/old.py").exists()
    after = snapshot(target)
    r2 = engine.apply(b.request(target))
    assert r2.ok and states(r2) == {"first": "applied", "second": "applied"}
    assert all(f.action == "none" for f in r2.fixes)
    assert snapshot(target) == after  # a second run writes nothing
    r3 = engine.revert(b.request(target))
    assert r3.ok and [f.action for f in r3.fixes] == ["reverted", "reverted"]
    assert snapshot(target) == original and not (target / ".fixpack").exists()


def test_manifest_records_fixes(setup):
    b, _, target = setup
    engine.apply(b.request(target, opt_ins=("extra",)))
    m = json.loads((target / ".fixpack" / "demo.manifest.json").read_text())
    assert [f["id"] for f in m["fixes"]] == ["first", "second", "extra"]
    assert m["profile"] == "p1" and m["pin"]["commit"] == "abcdef12" and m["tool_version"]
    assert set(m["files"]) == {MOD, "demo_pkg/new.py", "demo_pkg/old.py", "demo_pkg/x.py"}
    assert m["files"]["demo_pkg/old.py"] is None


def test_dry_run_writes_nothing(setup):
    b, _, target = setup
    before = snapshot(target)
    r = engine.apply(b.request(target, dry_run=True))
    assert r.ok and [f.action for f in r.fixes] == ["would-apply", "would-apply"]
    assert snapshot(target) == before and not (target / ".fixpack").exists()


def test_opt_in_added_later(setup):
    b, _, target = setup
    engine.apply(b.request(target))
    r = engine.apply(b.request(target, opt_ins=("extra",)))
    assert states(r) == {"first": "applied", "second": "applied", "extra": "absent"}
    assert (target / "demo_pkg/x.py").read_text() == "x = 1\n"
    r = engine.apply(b.request(target))  # not named again: kept, reported
    assert r.fix("extra").state == "applied" and not r.fix("extra").selected


def test_a_default_fix_a_profile_offers_as_opt_in_is_reported_as_its_opt_in(builder):
    """A fix whose fix.toml says default, listed under opt_in by the profile: the run selects it only when named,
    and reports it as the profile has it (an opt-in), not as "a default fix" named on the command line."""
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("plain", {"demo_pkg/x.py": None}, {"demo_pkg/x.py": "x = 1\n"})
    builder.profile(["one"], ["plain"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base})
    r = engine.apply(builder.request(target))
    assert r.ok and [f.id for f in r.fixes] == ["one"] and not (target / "demo_pkg/x.py").exists()
    r = engine.apply(builder.request(target, opt_ins=("plain",)))
    assert r.ok and r.fix("plain").opt_in and r.fix("plain").action == "applied", r.fix("plain")
    assert not any("a default" in m for m in r.fix("plain").messages), r.fix("plain").messages
    assert r.as_dict()["fixes"][1]["opt_in"] is True and not r.fix("one").opt_in


def test_the_change_put_in_at_the_pin_by_hand_is_applied_not_upstream_s(setup):
    """The target is at the pin, whose release the lock found first's pre-image in: first's change there (by hand, in
    a file that was edited elsewhere too: not our bytes) is no upstream change. It was said upstreamed and revert
    left it; now it is recorded as applied and revert takes it out (and leaves the other edit)."""
    b, _, target = setup
    (target / MOD).write_text((target / MOD).read_text().replace("line 5\n", "five\n").replace("line 38\n", "up 38\n"))
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("first").state == "applied" and "not upstream's" in r.fix("first").messages[0]
    # the file was edited, so the next fix's pre-image differs from the lock's: drifted, still applied
    assert r.fix("second").state == "drifted" and "differs from the lock" in r.fix("second").messages[0]
    assert engine.revert(b.request(target)).ok
    text = (target / MOD).read_text()
    assert "line 5\n" in text and "five\n" not in text and "up 38\n" in text


def test_drifted_applies_with_offset_and_strict_refuses(setup):
    b, _, target = setup
    (target / MOD).write_text("# local header\n" + (target / MOD).read_text())
    before = snapshot(target)
    strict = engine.apply(b.request(target, strict=True))
    assert strict.exit_code == 3 and snapshot(target) == before
    # a refused fix does not say it would apply (it did): both touch the edited file, both drifted
    assert [(f.id, f.state.value, f.action.value) for f in strict.fixes] == [("first", "drifted", "none"),
                                                                             ("second", "drifted", "none")]
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("first").state == "drifted"
    assert r.fix("first").offsets[0]["offset"] == 1
    assert any("offset +1" in m for m in r.fix("first").messages)


def test_a_fix_laid_on_a_drifted_file_stays_drifted_under_strict_once_applied(setup):
    """Applied without --strict on a drifted file, a fix is in, but not as the lock has it: status --strict said
    "already applied" and exit 0, so a CI check of the image passed what apply --strict had refused. Now status and
    apply under --strict report it drifted (an image mismatch, exit 3, nothing written) with the way back; without
    --strict it is applied and says where it was laid. The way back, followed, makes status --strict pass."""
    b, clean, target = setup
    (target / MOD).write_text("# local header\n" + (target / MOD).read_text())
    assert engine.apply(b.request(target)).ok
    before = snapshot(target)
    for run in (engine.status, engine.apply):
        strict = run(b.request(target, strict=True))
        assert strict.exit_code == 3 and snapshot(target) == before, strict.error
        assert [(f.id, f.state.value, f.action.value) for f in strict.fixes[:2]] == [("first", "drifted", "none"),
                                                                                     ("second", "drifted", "none")]
        said = " ".join(strict.fix("first").messages)
        assert "already applied laid on a drifted file" in said and "offset +1" in said
        assert "revert first" in said and "without --strict, which " + (
            "keeps it as it is" if run is engine.apply else "reports it as applied, not a mismatch") in said
    for run in (engine.status, engine.apply):
        r = run(b.request(target))
        assert r.exit_code == 0 and r.fix("first").state.value == "applied" and snapshot(target) == before
        assert "laid on a drifted file" in r.fix("first").messages[1]
    assert engine.revert(b.request(target)).ok
    shutil.copyfile(clean / MOD, target / MOD)  # the put-back the message names
    assert engine.apply(b.request(target, strict=True)).ok
    assert engine.status(b.request(target, strict=True)).exit_code == 0


def test_a_fix_laid_on_a_drifted_file_with_its_manifest_lost_is_drifted_under_strict_still(setup):
    """The same image with its state folder removed: status --strict said the fixes applied ("not as this profile's
    chain leaves it, and not recorded"), exit 0, and apply --strict wrote the manifest (a fresh user's finding).
    Under --strict they are drifted (exit 3, nothing written), the way on the put-back of the file and apply; without
    it, applied, and apply records them."""
    b, clean, target = setup
    (target / MOD).write_text("# local header\n" + (target / MOD).read_text())
    assert engine.apply(b.request(target)).ok
    shutil.rmtree(target / ".fixpack")
    before = snapshot(target)
    for run in (engine.status, engine.apply):
        strict = run(b.request(target, strict=True))
        assert strict.exit_code == 3 and snapshot(target) == before, strict.error
        assert [(f.id, f.state.value) for f in strict.fixes[:2]] == [("first", "drifted"), ("second", "drifted")]
        said = " ".join(strict.fix("first").messages)
        assert "applied, though not as this profile's chain leaves it" in said, said
        # every file of the fixes so found that share the file: second's too (its created new.py removed)
        assert f"demo_pkg/mod.py, demo_pkg/new.py, demo_pkg/old.py differ from the release the lock pins. If they " \
               f"were changed after the release, put them back: rm -f -- {target / 'demo_pkg/new.py'} && " in said, said
        assert "revert first" not in said  # (revert refuses a fix found with no record: it is not the way)
        assert ("records it as applied" if run is engine.apply else "reports it as applied, not a mismatch") in said
    assert engine.status(b.request(target)).exit_code == 0 and snapshot(target) == before
    (target / "demo_pkg/new.py").unlink()  # the put-back the message names
    for path in (MOD, "demo_pkg/old.py"):
        shutil.copyfile(clean / path, target / path)
    assert engine.apply(b.request(target, strict=True)).ok
    assert engine.status(b.request(target, strict=True)).exit_code == 0


def test_conflict_changes_nothing(setup):
    b, _, target = setup
    (target / MOD).write_text((target / MOD).read_text().replace("line 4\n", "LINE FOUR\n"))
    before = snapshot(target)
    r = engine.apply(b.request(target))
    assert r.exit_code == 4 and r.fix("first").state == "conflict"
    assert "hunk #1 missing" in " ".join(r.fix("first").messages)
    assert snapshot(target) == before


def test_partial_is_refused_with_hunks(builder):
    base = numbered(60)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("two", {MOD: base}, {MOD: base.replace("line 5\n", "five\n").replace("line 50\n", "fifty\n")})
    builder.profile(["two"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base.replace("line 5\n", "five\n")})
    before = snapshot(target)
    r = engine.apply(builder.request(target))
    assert r.exit_code == 4 and r.fix("two").state == "partial"
    msg = r.fix("two").messages[0]
    assert "present: demo_pkg/mod.py hunk #1" in msg and "not present: demo_pkg/mod.py hunk #2" in msg
    assert snapshot(target) == before
    # the JSON's refused hunks are those it cannot apply: the one in already, said so (it read as a missing hunk)
    refused = r.as_dict()["fixes"][0]["refused"]
    assert [(h["hunk"], h["placement"], h["reason"]) for h in refused] == \
        [(1, "missing", "its post-image is in the file: this part of the fix is in already")], refused


def test_tampered(setup):
    b, _, target = setup
    engine.apply(b.request(target))
    (target / MOD).write_text((target / MOD).read_text() + "# local edit\n")
    before = snapshot(target)
    r = engine.apply(b.request(target))
    assert r.exit_code == 3 and r.fix("first").state == "tampered"
    rv = engine.revert(b.request(target))
    assert rv.exit_code == 3 and snapshot(target) == before
    st = engine.status(b.request(target))
    assert st.fix("first").state == "tampered"


def test_status_lists_every_fix(setup):
    b, _, target = setup
    engine.apply(b.request(target))
    st = engine.status(b.request(target))
    assert states(st) == {"first": "applied", "second": "applied", "extra": "skipped"}  # not named: not selected
    assert st.ok and not st.fix("extra").selected
    st = engine.status(b.request(target, opt_ins=("extra",)))
    assert states(st) == {"first": "applied", "second": "applied", "extra": "absent"}
    assert st.fix("extra").selected and st.fix("extra").action == "would-apply"


def test_pin_mismatch_stops_before_writing(setup):
    b, _, target = setup
    (target / "demo_pkg/_version.py").write_text("__version__ = '1.0'\n__commit_id__ = 'g1111111111'\n")
    before = snapshot(target)
    r = engine.apply(b.request(target))
    assert r.exit_code == 3 and r.targets[0].status == "mismatch"
    assert "1111111111" in r.targets[0].message and "abcdef12" in r.targets[0].message
    assert snapshot(target) == before
    # a fix named for it: skipped, the target's own line says why; no hint to give --target, which it was
    r = engine.apply(b.request(target, opt_ins=("extra",), only_targets=("demo",)))
    assert r.exit_code == 3 and snapshot(target) == before
    (said,) = r.fix("extra").messages
    assert said == "named on the command line, but its target demo is not in this run (not at the profile's pin, " \
                   "as said above)", said  # (the mismatch once, on the target's line: a fresh user saw it twice)


@pytest.mark.parametrize("damage", ["missing", "latin-1", "not python", "no commit", "a FIFO"])
def test_a_version_module_that_says_nothing_is_named_in_the_mismatch(setup, damage):
    """found by a fresh user: a missing or undecodable version module showed as "commit (unknown) != pinned"
    without naming the file the commit is read from."""
    b, _, target = setup
    mod = target / "demo_pkg/_version.py"
    kept = mod.read_text()
    if damage in ("missing", "a FIFO"):  # found by a fresh user: a FIFO hung the run (and a device, /dev/zero, was
        mod.unlink()  # read until memory ran out: the same read of a regular file only, not tried here for that)
        if damage == "a FIFO":
            os.mkfifo(mod)
    else:
        mod.write_bytes({"latin-1": kept.encode() + b"# caf\xe9\n", "not python": kept.encode() + b"x = (\n",
                         "no commit": b"__version__ = '1.0'\n"}[damage])
    before = snapshot(target) if damage != "a FIFO" else None
    with within(60):  # a read that blocks, or never ends, fails the test rather than hanging it
        r = engine.apply(b.request(target))
    said = r.targets[0].message
    assert r.exit_code == 3 and r.targets[0].status == "mismatch"
    assert before is None or snapshot(target) == before
    assert "commit (unknown) != pinned" in said and f"{mod}: " in said, said
    why = {"missing": "no such file", "latin-1": "not UTF-8 (byte ", "not python": "not Python (line ",
           "no commit": "assigns no __commit_id__", "a FIFO": "cannot be read (not a regular file)"}[damage]
    assert f"{mod}: {why}" in said, said


def test_a_root_that_is_a_git_repository_of_its_own_says_both_commits(setup):
    """found by a fresh user: a site-packages folder made a git repository showed its HEAD's commit only, the
    version module's (the pinned one) no longer in the evidence."""
    from conftest import git

    b, _, target = setup
    git(target, "init", "-q")
    git(target, "add", "-A")
    git(target, "commit", "-qm", "site-packages")
    r = engine.status(b.request(target))
    said = r.targets[0].message
    assert r.exit_code == 3 and "git HEAD of " in said, said
    assert "_version.py: __commit_id__ = " in said and "not git HEAD's (the root is a git repository" in said, said


def test_pin_mismatch_names_the_profile_that_pins_the_release_found(setup):
    """The mismatch's next step names this pack's profile for the release found (version and commit), not
    one pinned to another commit of it; a profile that does not read, a FIFO and a link are passed over."""
    b, _, target = setup
    (target / "demo_pkg/_version.py").write_text("__version__ = '1.0'\n__commit_id__ = 'g1111111111'\n")
    p1 = (b.pack / "profiles" / "p1.toml").read_text()
    pin = f'version = "{b.version}"\ncommit = "{b.commit[:8]}"'
    assert pin in p1
    (b.pack / "profiles" / "p2.toml").write_text(p1.replace('"p1"', '"p2"').replace(
        pin, 'version = "1.0"\ncommit = "11111111"'))
    (b.pack / "profiles" / "p3.toml").write_text(p1.replace('"p1"', '"p3"').replace(
        pin, 'version = "1.0"\ncommit = "2222222"'))
    (b.pack / "profiles" / "p0.toml").write_text("name = [unclosed\n")
    os.mkfifo(b.pack / "profiles" / "p4.toml")  # planted: a read would block for ever; passed over, as a link
    (b.pack / "profiles" / "p5.toml").symlink_to(b.pack / "profiles" / "p2.toml")
    before = snapshot(b.pack), snapshot(target)
    r = engine.apply(b.request(target))
    assert r.exit_code == 3 and r.targets[0].status == "mismatch"
    assert r.targets[0].message.endswith("Profile p2 pins this release: --profile p2.")
    assert (snapshot(b.pack), snapshot(target)) == before


def test_missing_target_is_said_plainly(builder):
    base = numbered(10)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("first", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    builder.profile(["first"], extra_targets='[targets.other]\npackage = "other_pkg_not_installed"\ncommit = "1234567"\n')
    builder.lock(clean)
    r = engine.apply(builder.request(clean, dry_run=True))
    assert r.exit_code == 3
    other = next(t for t in r.targets if t.name == "other")
    assert other.status == "missing" and "--target" in other.message
    r = engine.apply(builder.request(clean, dry_run=True, only_targets=("demo",)))
    assert r.ok and next(t for t in r.targets if t.name == "other").status == "skipped"


def test_unknown_fix_and_profile_names(setup):
    b, _, target = setup
    with pytest.raises(UnknownNameError, match="close matches: extra"):
        engine.apply(b.request(target, opt_ins=("extr",)))
    with pytest.raises(UnknownNameError, match="close matches: p1"):
        engine.apply(b.request(target, name="p2"))


def test_a_profile_name_cut_short_suggests_the_profile_it_begins_first():
    """``v0.30`` scores alike against every v0.3x.0 profile: difflib's three left v0.30.0 out (a new user's run)."""
    from conftest import REPO

    from fixpack.loader import load_pack, load_profile

    pack = load_pack(REPO)
    with pytest.raises(UnknownNameError, match=r"close matches: v0\.30\.0[,;) ]"):
        load_profile(pack, "v0.30")
    # a digit short (v0.3.0): as near every v0.3x.0 profile; all are named, none cut from a tie (v0.30.0 was)
    with pytest.raises(UnknownNameError, match=r"close matches: v0\.30\.0, v0\.31\.0, v0\.32\.0, v0\.33\.0;"):
        load_profile(pack, "v0.3.0")
    # a fresh user: another case, or the profile's file as a path, was "no close match" (or every profile alike)
    for given in ("V0.30.0", "profiles/v0.30.0.toml", "../profiles/v0.30.0"):
        with pytest.raises(UnknownNameError, match=r"close matches: v0\.30\.0[,;) ]"):
            load_profile(pack, given)
    from fixpack.closenames import close_names

    assert close_names("TOPK-SUBSET-SAMPLER", list(pack.series)).startswith("close matches: topk-subset-sampler")


def test_stale_lock(setup):
    b, clean, target = setup
    patch = b.pack / "fixes/first/0001-change.patch"
    patch.write_text(patch.read_text().replace("+five\n", "+FIVE\n"))  # a diff line: the change itself
    with pytest.raises(StaleLockError, match="first: patch or version changed"):
        engine.apply(b.request(target))
    with pytest.raises(StaleLockError):
        engine.check_lock_fresh(b.request(clean))
    b.lock(clean)
    engine.check_lock_fresh(b.request(clean))


def test_lock_records_chain_hashes(setup):
    b, clean, _ = setup
    lock = json.loads((b.pack / "profiles/p1.lock").read_text())
    first, second = lock["fixes"][0], lock["fixes"][1]
    f1 = next(f for f in first["files"] if f["path"] == MOD)
    f2 = next(f for f in second["files"] if f["path"] == MOD)
    assert f1["post"] == f2["pre"]  # along the chain
    assert lock["targets"]["demo"]["commit"] == "gabcdef1234"
    assert first["hunks"][0]["pre"] and first["hunks"][0]["post"]


def test_fix_touching_file_deleted_by_earlier_fix(builder):
    base = numbered(10)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/old.py": "old\n"})
    builder.add_fix("deleter", {"demo_pkg/old.py": "old\n"}, {"demo_pkg/old.py": None})
    builder.add_fix("toucher", {"demo_pkg/old.py": "old\n"}, {"demo_pkg/old.py": "new\n"})
    builder.profile(["deleter", "toucher"])
    before = snapshot(clean)
    with pytest.raises(BadInputError, match="which fix 'deleter' deletes"):
        engine.apply(builder.request(clean))
    assert snapshot(clean) == before


def test_rename_and_mode_change(builder, tmp_path):
    from conftest import git
    base = numbered(10)
    clean = builder.tree("clean", {"demo_pkg/a.py": base, "demo_pkg/run.sh": "echo\n"})
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "demo_pkg").mkdir()
    (repo / "demo_pkg/a.py").write_text(base)
    (repo / "demo_pkg/run.sh").write_text("echo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "b")
    git(repo, "mv", "demo_pkg/a.py", "demo_pkg/b.py")
    (repo / "demo_pkg/b.py").write_text(base.replace("line 3\n", "three\n"))
    (repo / "demo_pkg/run.sh").chmod(0o755)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "-M")
    assert "rename from" in diff and "new mode 100755" in diff
    builder.add_fix("mv", {}, {}, diff=diff)
    builder.profile(["mv"])
    builder.lock(clean)
    original = snapshot(clean)
    assert engine.apply(builder.request(clean)).ok
    assert not (clean / "demo_pkg/a.py").exists() and "three" in (clean / "demo_pkg/b.py").read_text()
    assert (clean / "demo_pkg/run.sh").stat().st_mode & 0o777 == 0o755
    assert engine.revert(builder.request(clean)).ok
    assert snapshot(clean) == original


def test_stale_pycache_is_removed(setup):
    b, _, target = setup
    cache = target / "demo_pkg/__pycache__"
    cache.mkdir()
    (cache / "mod.cpython-311.pyc").write_bytes(b"stale")
    (cache / "other.cpython-311.pyc").write_bytes(b"keep")
    engine.apply(b.request(target))
    assert not (cache / "mod.cpython-311.pyc").exists() and (cache / "other.cpython-311.pyc").exists()


def test_stacked_fixes_stay_applied(builder):
    """A later fix edits a line in an earlier fix's context: status and a second apply still see
    both applied (the recorded fixes are unwound last first, not checked against the final tree)."""
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    one = base.replace("line 9\n", "line 9\ninserted\n")
    builder.add_fix("fix1", {MOD: base}, {MOD: one})
    builder.add_fix("fix2", {MOD: one}, {MOD: one.replace("line 11\n", "eleven\n")})
    builder.profile(["fix1", "fix2"])
    builder.lock(clean)
    original = snapshot(clean)
    assert engine.apply(builder.request(clean)).ok
    after = snapshot(clean)
    st = engine.status(builder.request(clean))
    assert st.ok and states(st) == {"fix1": "applied", "fix2": "applied"}
    again = engine.apply(builder.request(clean))
    assert again.ok and snapshot(clean) == after
    assert engine.revert(builder.request(clean)).ok and snapshot(clean) == original


def test_opt_in_between_applied_fixes(builder):
    """An opt-in that sits between two applied fixes in the series is replayed into its place."""
    base = numbered(40)
    clean = builder.tree("clean", {MOD: base})
    a = base.replace("line 3\n", "three\n")
    builder.add_fix("a", {MOD: base}, {MOD: a})
    m = a.replace("line 20\n", "twenty\n")
    builder.add_fix("mid", {MOD: a}, {MOD: m}, opt_in=True)
    builder.add_fix("z", {MOD: m}, {MOD: m.replace("line 37\n", "thirty-seven\n")})
    builder.profile(["a", "z"], ["mid"])
    builder.lock(clean)
    assert engine.apply(builder.request(clean)).ok
    r = engine.apply(builder.request(clean, opt_ins=("mid",)))
    assert r.ok and states(r) == {"a": "applied", "mid": "absent", "z": "applied"}
    text = (clean / MOD).read_text()
    assert "three\n" in text and "twenty\n" in text and "thirty-seven\n" in text
    assert engine.status(builder.request(clean)).ok


def test_lost_manifest_is_recognised_as_ours(setup):
    """Files equal to this pack's post-images (lock hashes) are ours, not upstream's: recorded again,
    and revert still restores the original bytes."""
    b, _, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    (target / ".fixpack" / "demo.manifest.json").unlink()
    before = snapshot(target)
    st = engine.status(b.request(target))  # reports it and writes nothing (it said "recorded again")
    assert states(st)["first"] == states(st)["second"] == "applied" and snapshot(target) == before
    assert "apply records it again, status and a dry run only report it" in st.fix("first").messages[0]
    assert not (target / ".fixpack" / "demo.manifest.json").exists()
    r = engine.apply(b.request(target))
    assert r.ok and states(r) == {"first": "applied", "second": "applied"}
    assert "manifest entry was lost" in r.fix("first").messages[0]
    assert (target / ".fixpack" / "demo.manifest.json").exists()
    assert r.targets[0].notes == ["no file of the target changed; its manifest .fixpack/demo.manifest.json was "
                                  "written again, to record what is there"]  # (every fix said already applied)
    assert engine.revert(b.request(target)).ok and snapshot(target) == original


def test_a_lost_manifest_with_an_opt_in_applied_is_recorded_whole(setup):
    """An image applied with an opt-in whose manifest is lost, applied again without naming it: the opt-in's
    code is found (our post-images), reported applied and recorded, so revert gives the release back; before,
    revert removed only the selected fixes and said the image was the release, the opt-in's code left in."""
    b, _, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target, opt_ins=("extra",))).ok
    shutil.rmtree(target / ".fixpack")
    st = engine.status(b.request(target))
    assert st.fix("extra").state.value == "applied", st.fix("extra").messages
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("extra").state.value == "applied" and not r.fix("extra").selected
    assert "manifest entry was lost" in r.fix("extra").messages[0]
    assert "kept (revert removes it)" in r.fix("extra").messages[-1]
    assert engine.revert(b.request(target)).ok and snapshot(target) == original
    # a first run on the release finds nothing of the opt-in: apply does not name it, status lists it skipped
    r = engine.apply(b.request(target))
    assert r.ok and "extra" not in {f.id for f in r.fixes}
    assert engine.status(b.request(target)).fix("extra").state.value == "skipped"


def test_a_lost_manifest_of_another_profile_s_chain_is_not_upstream_s(setup):
    """An image applied with profile p1 (first, second), its manifest lost, run with profile p2 (second only): the
    file holds second's post-image with first's change too, so it is none of p2's lock's post-images; the pinned
    release does not hold it (p2's lock found its pre-image there), so it is no upstream change. It was said
    upstreamed, recorded so, and revert left it ('not ours to revert'); revert before a record said nothing to do."""
    b, clean, target = setup
    b.profile(["second"], name="p2")
    b.lock(clean, name="p2")
    assert engine.apply(b.request(target)).ok
    shutil.rmtree(target / ".fixpack")
    before = snapshot(target)
    with pytest.raises(MismatchError, match=r"holds second \(its post-image is there\) but no manifest records it\. To revert: "):
        engine.revert(b.request(target, name="p2"))
    st = engine.status(b.request(target, name="p2"))
    assert st.fix("second").state.value == "applied" and snapshot(target) == before
    assert "not upstream's: apply records it as applied, and revert then takes it out" in st.fix("second").messages[0]
    assert engine.apply(b.request(target, name="p2")).ok
    m = json.loads((target / ".fixpack" / "demo.manifest.json").read_text())
    assert [(f["id"], f["state"]) for f in m["fixes"]] == [("second", "applied")]
    r = engine.revert(b.request(target, name="p2"))
    assert r.ok and r.fix("second").action.value == "reverted"
    text = (target / MOD).read_text()
    assert "line 30\n" in text and "five\n" in text and (target / "demo_pkg/old.py").exists()  # first's is p1's


def test_reinstalled_target_with_stale_manifest(setup, tmp_path):
    """The files were put back to the clean release (a reinstall) but .fixpack/ stayed: not tampered,
    the stale manifest is replaced."""
    import shutil
    b, clean, target = setup
    pristine = tmp_path / "pristine"
    shutil.copytree(target, pristine)
    assert engine.apply(b.request(target)).ok
    for rel in ("demo_pkg/mod.py", "demo_pkg/old.py"):
        shutil.copy2(pristine / rel, target / rel)
    (target / "demo_pkg/new.py").unlink()
    st = engine.status(b.request(target))
    assert st.ok and "stale" in st.targets[0].message
    assert {f.id: f.state for f in st.fixes if not f.opt_in} == {"first": "absent", "second": "absent"}
    r = engine.apply(b.request(target))
    assert r.ok and [f.action for f in r.fixes] == ["applied", "applied"]
    assert r.targets[0].message.count("is stale") == 1  # said once, though apply evaluates twice


def test_a_stale_manifest_is_said_and_handled_alike_by_status_apply_and_revert(setup, tmp_path):
    """A reinstalled target (the clean release) under the state of an earlier apply: revert has nothing to
    undo; it says the manifest is stale in status's and apply's words and removes it, exit 0, leaving every
    file of the release as it is (it called every fix tampered, exit 3, and advised a reinstall)."""
    import shutil
    b, clean, target = setup
    pristine = tmp_path / "pristine"
    shutil.copytree(target, pristine)
    assert engine.apply(b.request(target)).ok
    shutil.copytree(target / ".fixpack", tmp_path / "state")
    shutil.rmtree(target)
    shutil.copytree(pristine, target)
    shutil.copytree(tmp_path / "state", target / ".fixpack")
    before = snapshot(target)
    notes = {}
    for name, run in (("status", engine.status), ("apply --dry-run", lambda r: engine.apply(r)),
                      ("revert --dry-run", engine.revert), ("revert", engine.revert)):
        r = run(b.request(target, dry_run=name != "revert"))
        assert r.exit_code == 0, (name, r.error, [(f.id, f.state, f.messages) for f in r.fixes])
        notes[name] = r.targets[0].message
        if name.startswith("revert"):
            assert states(r) == {"first": "absent", "second": "absent"}
            assert all(f.action == "none" for f in r.fixes)
        if name != "revert":
            assert snapshot(target) == before
    stale = "the files it lists are the clean release's: the manifest at " + str(target / ".fixpack/demo.manifest.json")
    assert all(n.startswith(stale + " is stale") for n in notes.values()), notes
    assert "nothing to revert: this run removes it" in notes["revert"]
    assert snapshot(target) == snapshot(pristine) and not (target / ".fixpack").exists()


def _applied_with_pristine(setup, tmp_path):
    """The demo target copied as it is (the release) to ``pristine``, then applied: (builder, target, pristine, the
    manifest's path, its JSON)."""
    import shutil

    b, _clean, target = setup
    pristine = tmp_path / "pristine"
    shutil.copytree(target, pristine)
    assert engine.apply(b.request(target)).ok
    path = target / ".fixpack" / "demo.manifest.json"
    return b, target, pristine, path, json.loads(path.read_text())


def test_a_manifest_recording_applied_fixes_on_the_release_bytes_is_stale(setup, tmp_path):
    """A planted (or hand-written) manifest records the fixes applied but every file at the clean release's own
    hash, and the files are the release: status and apply called every fix tampered (exit 3), revert a conflict
    (exit 4), and their advice (put the files back to the release, run again) changed nothing. No fix leaves each
    file it edits as the release has it: the manifest is stale, as one of a reinstalled target is."""
    import hashlib
    import shutil
    b, target, pristine, path, m = _applied_with_pristine(setup, tmp_path)
    own = {p: hashlib.sha256((pristine / p).read_bytes()).hexdigest() if (pristine / p).exists() else None
           for p in m["files"]}  # None: the release lacks the file (a fix creates it)
    m["files"] = own
    m.pop("removed_files", None)  # no fix removes a file it records at the release's hash
    for e in m["fixes"]:
        e["files"] = {p: own[p] for p in e["files"]}
    shutil.rmtree(target)
    shutil.copytree(pristine, target)
    path.parent.mkdir()
    path.write_text(json.dumps(m))
    before = snapshot(target)
    for run in (engine.status, engine.apply, engine.revert):
        r = run(b.request(target, dry_run=True))
        assert r.exit_code == 0, (run, r.error, [(f.id, f.state, f.messages) for f in r.fixes])
        assert "is stale" in r.targets[0].message and snapshot(target) == before
    r = engine.apply(b.request(target))
    assert r.ok and [f.action for f in r.fixes] == ["applied", "applied"]
    assert engine.revert(b.request(target)).ok and snapshot(target) == snapshot(pristine)


def test_an_entry_recording_its_fix_on_the_release_bytes_where_the_fixes_are_is_damaged(setup, tmp_path):
    """found by a fresh user: a manifest recording one fix applied with each of its files at the release's own hash,
    on a tree where the fixes are applied, was called tampered (status, apply: exit 3) or a conflict (revert: exit 4),
    and the advice put every file back to the release, throwing the good fixes away. It is damaged state at the
    entry's line (exit 3, nothing written), and removing the manifest, as said, lets apply record the fixes again."""
    import hashlib

    from fixpack.records import dumps

    b, target, pristine, path, m = _applied_with_pristine(setup, tmp_path)
    first = next(e for e in m["fixes"] if e["id"] == "first")
    later = {p for e in m["fixes"][m["fixes"].index(first) + 1:] if e["state"] == "applied" for p in e["files"]}
    for p in first["files"]:
        first["files"][p] = hashlib.sha256((pristine / p).read_bytes()).hexdigest()
        if p not in later:  # (the last applied fix on a file gives 'files' its sha256)
            m["files"][p] = first["files"][p]
    path.write_bytes(dumps(m))
    lines = path.read_text().splitlines()
    at = next(n for n, ln in enumerate(lines) if ln.strip() == '"id": "first",')  # (an entry's files above its id)
    line = max(n for n in range(at) if lines[n].strip().startswith(f'"{next(iter(first["files"]))}":')) + 1
    before = snapshot(target)
    for run in (engine.status, engine.apply, engine.revert):
        with pytest.raises(FixpackError) as exc:
            run(b.request(target))
        assert exc.value.exit_code == 3 and f"line {line}: fix first's entry records it applied with each of its " \
            "files at the clean release's own sha256" in str(exc.value) and "remove the file" in str(exc.value)
        assert snapshot(target) == before
    path.unlink()
    r = engine.apply(b.request(target))
    assert r.ok and {f.id: f.action for f in r.fixes if not f.opt_in} == {"first": "none", "second": "none"}
    assert engine.revert(b.request(target)).ok and snapshot(target) == snapshot(pristine)


def test_a_manifest_of_a_profile_this_pack_lacks_on_the_release_is_stale(setup, tmp_path):
    """found by a fresh user: a reinstalled target under the manifest of a profile the pack does not have was exit 3
    ('revert it with the pack that has that profile, or restore the image'), and the image was the release already:
    the advice changed nothing. The files it lists are the release's, so it is stale, whoever wrote it."""
    import shutil

    from fixpack.records import dumps

    b, target, pristine, _path, m = _applied_with_pristine(setup, tmp_path)
    shutil.rmtree(target)
    shutil.copytree(pristine, target)
    (target / ".fixpack").mkdir()
    (target / ".fixpack/demo.manifest.json").write_bytes(dumps({**m, "profile": "v9.9.9"}))
    for run in (engine.status, engine.revert):
        r = run(b.request(target, dry_run=True))
        assert r.exit_code == 0 and "is stale" in r.targets[0].message, (r.error, r.targets[0].message)
    assert engine.apply(b.request(target)).ok
    assert json.loads((target / ".fixpack/demo.manifest.json").read_text())["profile"] == "p1"


def test_a_default_fix_named_as_an_opt_in_is_said_once(setup):
    """`apply_all.py --profile P <default fix>` was taken silently; it is applied anyway, and now said (exit 0).
    An unknown name stays an error (exit 2)."""
    b, _, target = setup
    said = "named on the command line, but a default fix of profile p1: selected whether named or not"
    for run in (engine.status, engine.apply):
        r = run(b.request(target, opt_ins=("first", "extra")))
        assert r.exit_code == 0 and r.fix("first").messages[0].startswith(said), r.fix("first").messages
        assert sum(said in m for f in r.fixes for m in f.messages) == 1
    assert not any(said in m for f in engine.apply(b.request(target)).fixes for m in f.messages)
    with pytest.raises(UnknownNameError) as exc:
        engine.apply(b.request(target, opt_ins=("frist",)))
    assert exc.value.exit_code == 2


def test_hand_edited_lock_is_refused(setup):
    b, _, target = setup
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    pre = data["fixes"][0]["files"][0]["pre"]
    data["fixes"][0]["files"][0]["pre"] = ("0" if pre[0] != "0" else "1") + pre[1:]
    lock.write_text(json.dumps(data))
    before = snapshot(target)
    with pytest.raises(StaleLockError, match="does not match its seal"):
        engine.apply(b.request(target))
    assert snapshot(target) == before


def test_revert_with_a_hand_edited_lock_reverts_and_says_so(setup):
    """A broken lock does not keep revert from getting back to the release (status refuses, exit 2), and
    revert says in one line that the lock is broken and how to regenerate it (with the run's --target)."""
    b, clean, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    lock = b.pack / "profiles/p1.lock"
    good = lock.read_text()
    lock.write_text(good.replace('"digest": "', '"digest": "0', 1))
    with pytest.raises(StaleLockError):
        engine.status(b.request(target))
    r = engine.revert(b.request(target, only_targets=("demo",)))
    assert r.ok and {f.action for f in r.fixes} == {"reverted"} and snapshot(target) == original
    said = [n for n in r.target("demo").notes if "lock" in n]
    assert len(said) == 1 and "\n" not in said[0], said
    assert said[0].startswith("revert went on without the lock (it places every hunk by search): "), said
    assert f"{lock}" in said[0] and " lock --profile p1 --pack " in said[0] and "--pack" in said[0]
    assert "does not match its seal" in said[0] and " --target demo (it fetches them" in said[0], said
    lock.write_text(good)
    assert not [n for n in engine.revert(b.request(target)).target("demo").notes if "lock" in n]


def test_a_lock_with_two_entries_for_one_fix_is_refused(setup):
    """Resealed after the edit: the lock check read the last entry and the evaluation the first."""
    from fixpack.records import lock_digest

    b, _, target = setup
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    data["fixes"].append(dict(data["fixes"][0], patch_sha256="0" * 64))
    data["digest"] = lock_digest(data)
    lock.write_text(json.dumps(data))
    before = snapshot(target)
    with pytest.raises(StaleLockError, match="has more than one entry"):
        engine.apply(b.request(target))
    assert snapshot(target) == before


def test_revert_after_a_lost_manifest_says_how_instead_of_nothing_to_do(setup):
    b, clean, target = setup
    assert engine.apply(b.request(target)).ok
    (target / ".fixpack" / "demo.manifest.json").unlink()
    patched = snapshot(target)
    with pytest.raises(MismatchError, match="no manifest records them. To revert: record them with: "):
        engine.revert(b.request(target))
    assert snapshot(target) == patched
    assert engine.apply(b.request(target)).ok  # records them again
    assert engine.revert(b.request(target)).ok and not (target / "demo_pkg/new.py").exists()


def test_revert_needs_only_the_patches_it_reverts(setup):
    """A malformed patch of an opt-in fix the image does not hold used to stop revert (exit 2), leaving the
    image patched: revert parses only the patches its manifest records. A run that selects that fix still
    refuses it with the patch's file and line."""
    b, clean, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    patch = b.pack / "fixes/extra/0001-change.patch"
    patch.write_text(patch.read_text().replace("@@ -0,0 +1 @@", "@@ -0,0 +1 @"))
    r = engine.revert(b.request(target))
    assert r.ok and [f.action for f in r.fixes] == ["reverted", "reverted"]
    assert snapshot(target) == original
    # the lock is not what is wrong: the pack could not be checked against it (found by a fresh user)
    assert any(n.startswith("revert went on without the lock (it places every hunk by search): the pack could not "
                            "be checked against it: ") for n in r.targets[0].notes), r.targets[0].notes
    with pytest.raises(PackError) as exc:
        engine.apply(b.request(target, opt_ins=("extra",), dry_run=True))
    assert f"{patch}:" in str(exc.value) and "malformed hunk header" in str(exc.value)


def test_revert_names_a_tampered_fix_as_status_does_with_the_hunks_line(setup):
    """revert said only 'FILE: changed since it was applied'; status names the hunk that no longer reverses, at
    its line. Both now say the same words."""
    b, _clean, target = setup
    assert engine.apply(b.request(target)).ok
    (target / MOD).write_text((target / MOD).read_text().replace("thirty\n", "thirty, by hand\n"))
    said = {run.__name__: [m for m in run(b.request(target)).fix("second").messages if not m.startswith("next: ")]
            for run in (engine.status, engine.revert)}
    assert said["status"] == said["revert"], said
    assert said["revert"][0].startswith(f"the manifest records it as applied, but {MOD}: differs from the manifest's "
                                        f"sha256 (changed since it was applied); "), said
    assert "(expected at line " in said["revert"][0] and "line 30: expected 'thirty', found 'thirty, by hand'" in \
        said["revert"][0], said
