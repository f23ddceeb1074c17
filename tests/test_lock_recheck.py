"""A re-check of the bump refusal (a user's report). F1: a version moved back down got past it: HEAD's lock records
fix one version 1 with change A, the patch edited, bumped to 2 and locked, set back to 1 and locked: exit 0, the
lock recording v1 as change B. `lock` compares with the lock on disk and the one committed in git HEAD, and
refuses a version whose recorded change differs in either. F2: `lock --check` said only "stale (differs for:
one)" and a lock command that then stopped on the bump refusal: it names each stale entry at its lock line, and
the version line to bump before locking (one target or two). F3: a lock committed in HEAD that does not read as
this profile's (garbage, another profile's) was passed over silently: `lock` says so on stderr (exit 0)."""

from __future__ import annotations

import json
import re

from conftest import git, snapshot
from test_lock_bump import _change_patch, fixpack, one_fix
from test_lock_targets import lock, printed, run_printed, two_targets


def _committed(b) -> None:
    git(b.pack, "init", "-q")
    git(b.pack, "add", "-A")
    git(b.pack, "commit", "-qm", "pack")


def _set_version(b, fid: str, old: int, new: int) -> None:
    toml = b.pack / "fixes" / fid / "fix.toml"
    toml.write_text(toml.read_text().replace(f"version = {old}", f"version = {new}"))


def test_a_version_moved_back_down_is_refused_by_the_lock_committed_in_git_head(builder):
    b = builder
    clean = one_fix(b)
    _committed(b)
    _change_patch(b)
    args = ("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    _set_version(b, "one", 1, 2)
    r = fixpack(*args)
    assert r.returncode == 0 and r.stdout.startswith("wrote ") and "warning" not in r.stderr, r.stderr
    _set_version(b, "one", 2, 1)
    before = snapshot(b.pack)
    r = fixpack(*args)
    said = " ".join(r.stderr.split())
    lock, toml = b.pack / "profiles/p1.lock", b.pack / "fixes/one/fix.toml"
    assert r.returncode == 2, said
    assert f"fix one: its patch changed since the lock was made ({lock} as committed in git HEAD records version 1 " \
           "with change " in said, said
    assert f"(version 1 in the lock, 1 in {toml}:2); bump it there (version = 3), then lock again" in said, said
    assert snapshot(b.pack) == before
    assert json.loads(lock.read_text())["fixes"][0]["version"] == 2  # the lock on disk: as it was
    _set_version(b, "one", 1, 3)  # as printed
    r = fixpack(*args)
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr


def test_both_locks_recording_the_version_with_other_changes_are_each_named(builder):
    """The lock on disk and HEAD's record version 1 with two other changes: each is named, the one on disk at
    its line."""
    b = builder
    clean = one_fix(b)
    _committed(b)
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace("+three\n", "+Three\n"))
    lock = b.pack / "profiles/p1.lock"
    lock.unlink()
    b.lock(clean)  # (the engine: no refusal) the lock on disk records version 1 with a second change
    patch.write_text(patch.read_text().replace("+Three\n", "+THREE\n"))
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2, said
    line = next(n for n, ln in enumerate(lock.read_text().splitlines(), 1) if ln.strip() == '"id": "one",')
    assert re.search(rf"\({re.escape(str(lock))}:{line} records version 1 with change \w+; {re.escape(str(lock))} "
                     r"as committed in git HEAD records version 1 with change \w+, the pack's patch is change", said), said


def test_lock_check_names_the_stale_entry_at_its_line_and_the_version_to_bump_first(builder):
    """The printed lock command, after the bump the message names, runs as printed; the check is then fresh."""
    b = builder
    clean = one_fix(b)
    _change_patch(b)
    r = lock(b, "--check", "--root", f"demo={clean}")
    said = " ".join(r.stderr.split())
    lockfile, toml = b.pack / "profiles/p1.lock", b.pack / "fixes/one/fix.toml"
    line = next(n for n, ln in enumerate(lockfile.read_text().splitlines(), 1) if ln.strip() == '"id": "one",')
    assert r.returncode == 2, said
    assert f"is stale (differs for: one); {lockfile}:{line}: one: patch or version changed since the lock was " \
           f"generated (its patch changed under the same version 1: if the change is meant, bump version in {toml}:2 before locking; if not, put the patch back as it was locked); " \
           "regenerate it" in said, said
    cmd = printed(r)
    before = snapshot(b.pack)
    assert fixpack(*cmd.split()[cmd.split().index("lock"):]).returncode == 2  # unbumped: refused, as said
    assert snapshot(b.pack) == before
    _set_version(b, "one", 1, 2)
    run_printed(b, cmd)
    assert lock(b, "--check", "--root", f"demo={clean}").returncode == 0


def test_lock_check_of_two_targets_says_the_bump_for_the_fix_of_either(builder):
    """Both targets checked, then the other target alone: the bump named, then the printed command runs."""
    release, other_release = two_targets(builder)
    lockfile, toml = builder.pack / "profiles/p1.lock", builder.pack / "fixes/two/fix.toml"
    patch = builder.pack / "fixes/two/0001-change.patch"
    for version, new, scope in ((1, "+FOUR\n", ("--root", f"demo={release}", "--root", f"other={other_release}")),
                                (2, "+Four\n", ("--target", "other", "--root", f"other={other_release}"))):
        patch.write_text(re.sub(r"\+(four|FOUR)\n", new, patch.read_text()))  # the change, not the version
        r = lock(builder, "--check", *scope)
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and "is stale (differs for: two); " in said, said
        assert re.search(rf"{re.escape(str(lockfile))}:\d+: two: patch or version changed since the lock was generated "
                         rf"\(its patch changed under the same version {version}: if the change is meant, bump version in {re.escape(str(toml))}:2 "
                         r"before locking; if not, put the patch back as it was locked\); regenerate it", said), said
        _set_version(builder, "two", version, version + 1)
        run_printed(builder, printed(r))
        assert lock(builder, "--check", *scope).returncode == 0


def test_a_lock_committed_in_head_that_does_not_read_is_said_not_compared_with(builder):
    """Garbage, then another profile's lock, committed in HEAD with none on disk: lock writes (exit 0) and says
    on stderr which file it could not compare with and why."""
    b = builder
    clean = one_fix(b)
    lock = b.pack / "profiles/p1.lock"
    other = lock.read_text().replace('"profile": "p1"', '"profile": "p2"')
    assert other != lock.read_text()
    args = ("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")
    git(b.pack, "init", "-q")
    for text, why in (("not json {", "not valid JSON"), (other, "it is the lock of profile p2, not p1")):
        lock.write_text(text)
        git(b.pack, "add", "-A")
        git(b.pack, "commit", "-qm", "lock")
        lock.unlink()
        r = fixpack(*args)
        said = " ".join(r.stderr.split())
        assert r.returncode == 0 and r.stdout.startswith("wrote "), said
        assert f"fixpack: warning: {lock} as committed in git HEAD could not be compared with (" in said, said
        assert why in said.split("could not be compared with", 1)[1], said
        lock.unlink()


def test_another_profiles_lock_copied_to_this_profiles_lock_path_is_refused(builder):
    """profiles/p2.lock copied over profiles/p1.lock (the same fixes and pins, so nothing in it is stale) was read
    as p1's: status and apply went on with it. Refused (exit 2, nothing written), naming the file, the line of
    its "profile" field, both profiles and the command that regenerates p1's lock."""
    b = builder
    clean = one_fix(b)
    b.profile(["one"], name="p2")
    b.lock(clean, "p2")
    lock = b.pack / "profiles/p1.lock"
    lock.write_bytes((b.pack / "profiles/p2.lock").read_bytes())
    line = lock.read_text().splitlines().index('  "profile": "p2",') + 1
    image = b.tree("image", {"demo_pkg/mod.py": (clean / "demo_pkg/mod.py").read_text()})
    before = snapshot(b.base)
    for command in ("status", "apply", "lock --check", "check"):
        roots = () if command == "check" else \
            ("-p", "p1", "--root", f"demo={clean if command == 'lock --check' else image}")
        r = fixpack(*command.split(), "--pack", str(b.pack), *roots)
        said = " ".join(r.stderr.split())
        assert r.returncode == 2, (command, r.stdout, said)
        if command == "check":  # a finding of the pack lint, named from the pack
            said = " ".join(r.stdout.split()).replace("profiles/p1.lock", str(lock)).replace(" (regenerate", "; regenerate")
        assert f"{lock}:{line}: is the lock of profile 'p2', not 'p1' (copied from another profile's lock?); " \
               f"regenerate it from clean release copies: " in said and f" lock --profile p1 --pack {b.pack}" in said, \
            (command, said)
        assert snapshot(b.base) == before, command
    r = fixpack("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}")  # the way out
    assert r.returncode == 0 and json.loads(lock.read_text())["profile"] == "p1", r.stderr
    r = fixpack("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert r.returncode == 0, r.stdout + r.stderr
