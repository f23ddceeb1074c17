"""`lock --target X` on a profile of two targets (a fresh user's report): `lock --check --target X` said the lock
was stale, listing every entry of the other target, and `lock --target X` wrote a lock without the other
target's entries (exit 0). `--check --target X` compares the named targets' entries alone; `lock --target X`
keeps the other targets' entries of the lock on disk as they are when it is readable and matches the pack for
them, else refuses (exit 2, nothing written) naming those targets and the command that locks them too, which
runs as printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, PackBuilder, numbered, snapshot

from fixpack import engine

MOD = "demo_pkg/mod.py"
OTHER = "other_pkg/x.py"


def fixpack(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout, run from a folder without a ``fixpack`` package (the tmp folder)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=Path(os.environ["HOME"]).parent)


def two_targets(b: PackBuilder) -> tuple[Path, Path]:
    """Profile p1 of targets demo (default fix "one") and other (opt-in fix "two"), each a git release a fetch
    finds; locked on both. Returns the two release copies."""
    release, source = b.git_release({MOD: numbered(20)})
    b.add_fix("one", {MOD: numbered(20)}, {MOD: numbered(20).replace("line 3\n", "three\n")})
    other = PackBuilder(b.base / "other", target="other", package="other_pkg")
    other_release, other_source = other.git_release({OTHER: numbered(10, "x")})
    b.add_fix("two", {OTHER: numbered(10, "x")}, {OTHER: numbered(10, "x").replace("x 4\n", "four\n")},
              target="other", opt_in=True)
    profile = b.profile(["one"], ["two"], extra_targets=f'[targets.other]\npackage = "other_pkg"\n'
                                                        f'commit = "{other.commit[:8]}"\n{other_source}\n')
    profile.write_text(profile.read_text().replace("[targets.demo]\n", f"[targets.demo]\n{source}\n", 1))
    engine.write_lock(engine.Request(pack_root=b.pack, profile="p1", roots={"demo": release, "other": other_release}))
    return release, other_release


def lock(b: PackBuilder, *args: str) -> subprocess.CompletedProcess[str]:
    return fixpack("lock", "--pack", str(b.pack), "-p", "p1", *args)


def printed(r: subprocess.CompletedProcess[str]) -> str:
    """The lock command an error names (the end of its message, or before "(it fetches them")."""
    said = " ".join(r.stderr.split())
    (cmd,) = re.findall(r"regenerate it from clean release copies: (.*?)(?: \(it fetches them.*)?$", said)
    return cmd


def run_printed(b: PackBuilder, cmd: str) -> None:
    done = subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=b.base)
    assert done.returncode == 0 and done.stdout.startswith(("wrote ", "unchanged: ")), (cmd, done.stderr)


def _bump(b: PackBuilder, fid: str, old: str, new: str) -> None:
    """A new version of fix ``fid`` with another change (``old`` -> ``new`` in its patch)."""
    toml = b.pack / "fixes" / fid / "fix.toml"
    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    patch = b.pack / "fixes" / fid / "0001-change.patch"
    assert old in patch.read_text()
    patch.write_text(patch.read_text().replace(old, new))


def test_check_of_one_target_compares_that_targets_entries_alone(builder):
    """`--check --target other` said stale for every fix and component of demo, `--check --target demo` stale
    for two; each compares its own target's entries now: fresh. A change to the other target's fix is neither
    checked nor said stale by the check of the one."""
    release, other_release = two_targets(builder)
    both = ("--root", f"demo={release}", "--root", f"other={other_release}")
    assert lock(builder, "--check", *both).returncode == 0
    for name, root in (("other", other_release), ("demo", release)):
        r = lock(builder, "--check", "--target", name, "--root", f"{name}={root}")
        assert r.returncode == 0 and r.stdout.startswith("lock is fresh: "), (name, r.stderr)
    _bump(builder, "two", "+four\n", "+FOUR\n")
    r = lock(builder, "--check", "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 0 and "lock is fresh: " in r.stdout, r.stderr
    r = lock(builder, "--check", "--target", "other", "--root", f"other={other_release}")
    assert r.returncode == 2 and "is stale (differs for: two)" in r.stderr, r.stderr


def test_lock_of_one_target_keeps_the_other_targets_entries(builder):
    """`lock --target demo` wrote a lock without fix two's entry (the other target's), exit 0. It keeps the
    other target's entries (and pin) as they are: nothing to change is "unchanged", a change of demo's fix
    is locked beside them, and the whole lock is fresh."""
    release, other_release = two_targets(builder)
    path = builder.pack / "profiles/p1.lock"
    before = json.loads(path.read_text())
    r = lock(builder, "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 0 and r.stdout.startswith("unchanged: "), r.stdout + r.stderr
    _bump(builder, "one", "+three\n", "+THREE\n")
    r = lock(builder, "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr
    after = json.loads(path.read_text())
    assert [f["id"] for f in after["fixes"]] == ["one", "two"], after["fixes"]
    assert after["fixes"][1] == before["fixes"][1] and after["targets"] == before["targets"]
    assert after["fixes"][0]["version"] == 2
    r = lock(builder, "--check", "--root", f"demo={release}", "--root", f"other={other_release}")
    assert r.returncode == 0 and "lock is fresh: " in r.stdout, r.stderr


@pytest.mark.parametrize("lock_is", ["stale", "missing"])
def test_lock_of_one_target_refuses_when_the_others_entries_cannot_be_kept(builder, lock_is):
    """The other target's entries of the lock on disk do not match the pack (its fix's version bumped), or there
    is no lock: `lock --target demo` refuses (exit 2, nothing written), naming target other and the command
    that locks it too; run as printed, the lock is fresh for each target alone and for both."""
    release, other_release = two_targets(builder)
    _bump(builder, "two", "+four\n", "+FOUR\n")
    if lock_is == "missing":
        (builder.pack / "profiles/p1.lock").unlink()
    before = snapshot(builder.pack)
    r = lock(builder, "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "nothing was written: a lock of target demo keeps the entries of the profile's other target other " \
           "from its lock as they are, and cannot: " in r.stderr, r.stderr
    why = "is stale for them: two: patch or version changed" if lock_is == "stale" else "no lock for profile 'p1'"
    assert why in r.stderr and "; lock target other too: regenerate it from clean release copies: " in r.stderr
    assert snapshot(builder.pack) == before
    cmd = printed(r)
    assert cmd.endswith(f"lock --profile p1 --pack {builder.pack} --target demo --target other "
                        f"--root demo={release}"), cmd
    run_printed(builder, cmd)
    for name, root in (("demo", release), ("other", other_release)):
        r = lock(builder, "--check", "--target", name, "--root", f"{name}={root}")
        assert r.returncode == 0 and "lock is fresh: " in r.stdout, (name, r.stderr)
    assert lock(builder, "--check", "--root", f"demo={release}", "--root", f"other={other_release}").returncode == 0


@pytest.mark.parametrize("demo_too", [False, True])
def test_the_relock_command_check_of_one_target_prints_runs_as_printed(builder, demo_too):
    """`lock --check --target other` on a lock stale for other prints the lock command: for target other alone
    when the lock can keep demo's entries, for both when those are stale too; run as printed, `--check --target
    other` (and the whole check) is fresh."""
    release, other_release = two_targets(builder)
    _bump(builder, "two", "+four\n", "+FOUR\n")
    if demo_too:
        _bump(builder, "one", "+three\n", "+THREE\n")
    r = lock(builder, "--check", "--target", "other", "--root", f"other={other_release}")
    assert r.returncode == 2 and "is stale (differs for: two)" in r.stderr, r.stderr
    cmd = printed(r)
    targets = "--target demo --target other" if demo_too else "--target other"
    assert cmd.endswith(f"lock --profile p1 --pack {builder.pack} {targets} --root other={other_release}"), cmd
    run_printed(builder, cmd)
    r = lock(builder, "--check", "--target", "other", "--root", f"other={other_release}")
    assert r.returncode == 0 and "lock is fresh: " in r.stdout, r.stderr
    r = lock(builder, "--check", "--root", f"demo={release}", "--root", f"other={other_release}")
    assert r.returncode == 0 and "lock is fresh: " in r.stdout, r.stderr


@pytest.mark.parametrize("command", ["status", "apply"])
def test_a_named_fix_whose_target_the_run_leaves_out_is_said_skipped(builder, command):
    """`status --target demo two` (a fresh user's report): the named opt-in fix two, of target other, which
    --target leaves out, vanished from the report (exit 0, no word; the profile's other opt-ins get a skipped
    line). It is listed as skipped, saying that its target is not in this run and how to include it; the run's
    exit code and the image are unchanged."""
    release, _ = two_targets(builder)
    image = builder.tree("image", {MOD: numbered(20)})
    before = snapshot(image)
    r = fixpack(command, "--pack", str(builder.pack), "-p", "p1", "--target", "demo", "--root", f"demo={image}",
                "--json", "two")
    doc = json.loads(r.stdout)
    (two,) = [f for f in doc["fixes"] if f["id"] == "two"]
    assert two["state"] == "skipped" and two["target"] == "other" and two["opt_in"] is True, two
    assert "its target other is not in this run (not selected (--target))" in two["messages"][0], two
    assert "give --target other" in two["messages"][0]
    assert r.returncode == 0, r.stderr
    if command == "status":
        assert snapshot(image) == before
        # given with --target but found nowhere: --root is what includes it (a fresh user: it said --target again)
        r = fixpack(command, "--pack", str(builder.pack), "-p", "p1", "--target", "demo", "--target", "other",
                    "--root", f"demo={image}", "--json", "two")
        (two,) = [f for f in json.loads(r.stdout)["fixes"] if f["id"] == "two"]
        assert "give --root other=PATH (where it is) to include it" in two["messages"][0], two
        assert "--target other" not in two["messages"][0], two


def test_lock_of_one_target_records_no_release_for_a_target_left_without_fixes(builder):
    """`lock` records the release of the targets whose fixes it locks, and a lock with an entry for another is refused
    as hand-made (an attacker's: such an entry was compared with the profile's pin). ``lock --target demo`` keeps the
    other targets' entries of the targets the lock covers (lock_scope.others): with fix two, the other target's only
    fix, taken out of the profile, the lock it writes has no entry for it, and it is read."""
    release, _other_release = two_targets(builder)
    profile = builder.pack / "profiles/p1.toml"
    assert 'opt_in = ["two"]' in profile.read_text()
    profile.write_text(profile.read_text().replace('opt_in = ["two"]', "opt_in = []"))
    r = lock(builder, "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stdout + r.stderr
    data = json.loads((builder.pack / "profiles/p1.lock").read_text())
    assert list(data["targets"]) == ["demo"] and [f["id"] for f in data["fixes"]] == ["one"], data
    r = lock(builder, "--check", "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 0 and "lock is fresh: " in r.stdout, r.stdout + r.stderr
    r = fixpack("status", "--pack", str(builder.pack), "-p", "p1", "--target", "demo", "--root", f"demo={release}")
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_of_one_target_says_a_fix_entry_whose_target_was_edited_as_check_and_status_say_it(builder):
    """Found by a reviewer: fix one's entry in the lock edited to name target other, the lock sealed again (its digest
    is a plain sha256 over its content): `status` and `check` said the entry's target is not fix.toml's, but `lock
    --check --target demo` said "one: not in the lock" (its entry was left out as other's), `--target other` "in the
    lock but not in the profile", and the whole `lock --check` "other fingerprints on the release copy". Each says it
    as they do now: at the entry's line, the target line of the lock and of fix.toml, exit 2."""
    from fixpack.errors import StaleLockError
    from fixpack.records import dumps, lock_digest

    release, other_release = two_targets(builder)
    three = numbered(20).replace("line 3\n", "three\n")
    builder.add_fix("three", {MOD: three}, {MOD: three.replace("line 15\n", "fifteen\n")})  # demo keeps a fix
    profile = builder.pack / "profiles/p1.toml"
    profile.write_text(profile.read_text().replace('default = ["one"]', 'default = ["one", "three"]'))
    engine.write_lock(engine.Request(pack_root=builder.pack, profile="p1",
                                     roots={"demo": release, "other": other_release}))
    path = builder.pack / "profiles/p1.lock"
    data = json.loads(path.read_text())
    assert [f["id"] for f in data["fixes"]] == ["one", "two", "three"]
    data["fixes"][0]["target"] = "other"
    data["digest"] = lock_digest(data)
    path.write_bytes(dumps(data))
    lines = path.read_text().splitlines()
    at = lines.index('      "id": "one",') + 1
    target_line = next(n for n in range(at - 15, at + 15) if lines[n - 1].strip() == '"target": "other",')
    toml = builder.pack / "fixes/one/fix.toml"
    toml_line = next(n for n, ln in enumerate(toml.read_text().splitlines(), 1) if ln.startswith("target = "))
    what = (f'one: its target (line {target_line} of the lock) is "other", where {toml}:{toml_line} says "demo": the '
            f"lock was edited by hand and sealed again, or the fix's target changed since the lock was made")
    before = snapshot(builder.pack)
    r = fixpack("check", "--pack", str(builder.pack))
    assert r.returncode == 2 and f"profiles/p1.lock:{at}: the lock is stale: {what}" in \
        " ".join((r.stdout + r.stderr).split()), r
    r = fixpack("status", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={release}", "--root",
                f"other={other_release}")
    assert r.returncode == 2 and f"{path} is stale: {what} (at {path}:{at})" in " ".join(r.stderr.split()), r
    for args in (["--target", "demo", "--root", f"demo={release}"],
                 ["--target", "other", "--root", f"other={other_release}"],
                 ["--root", f"demo={release}", "--root", f"other={other_release}"]):
        r = lock(builder, "--check", *args)
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and f"{path} is stale (differs for: one); {path}:{at}: {what}; regenerate it" in said, \
            (args, said)
        r = lock(builder, "--check", "--json", *args)
        assert r.returncode == 2 and f"{path}:{at}: {what}" in json.loads(r.stdout)["error"], (args, r.stdout)
    for name, root in (("demo", release), ("other", other_release)):  # the engine's lock --check, as the CLI's
        with pytest.raises(StaleLockError, match=re.escape(f"{path}:{at}: {what}")) as exc:
            engine.check_lock_fresh(engine.Request(pack_root=builder.pack, profile="p1", roots={name: root},
                                                   only_targets=(name,)))
        assert exc.value.exit_code == 2
    assert snapshot(builder.pack) == before
