"""The lock fingerprints the change, not its words: a patch's mail header and fix.toml's metadata can
be reworded without a new lock; any diff line, hunk, file name or mode cannot."""

import json

import pytest
from conftest import numbered, snapshot

from fixpack import engine, lockfile
from fixpack.errors import ConflictError, StaleLockError
from fixpack.loader import load_pack, load_profile
from fixpack.progname import program

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")},
                    upstream={"status": "pending", "link": ""})
    builder.profile(["one"])
    builder.lock(clean)
    return builder, clean, builder.tree("image", {MOD: base})


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_metadata_and_mail_header_edits_keep_the_lock_fresh(setup):
    b, clean, target = setup
    folder = b.pack / "fixes/one"
    lock_before = (b.pack / "profiles/p1.lock").read_bytes()
    _edit(folder / "fix.toml", 'status = "pending"', 'status = "submitted"')
    _edit(folder / "fix.toml", 'summary = """fix one"""', 'summary = """fix one, reworded"""')
    _edit(folder / "fix.toml", 'why = """a test symptom"""', 'why = """another symptom"""')
    patch = folder / "0001-change.patch"
    _edit(patch, "From: t <t@invalid>", "From: J\u00f6rg Maintainer <jm@invalid>\nDate: Mon, 1 Jan 2024 00:00:00 +0000")
    _edit(patch, "Subject: [PATCH] one", "Subject: [PATCH v2] one, with a\n longer folded subject")
    _edit(patch, "\n---\n", "\nA new body paragraph.\n\nSigned-off-by: J <j@invalid>\nUpstream-Status: Submitted\n---\n")
    _edit(patch, "diff --git", "index 0123456..89abcde 100644\ndiff --git")  # churn before the first file
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("one").state == "absent"
    engine.check_lock_fresh(b.request(clean))  # lock --check: fresh
    b.lock(clean)
    # regenerating changes no fingerprint, only the shortcut to the new bytes (patch_bytes_sha256)
    before, after = (json.loads(x) for x in (lock_before, (b.pack / "profiles/p1.lock").read_bytes()))
    hint_before, hint_after = before["fixes"][0].pop("patch_bytes_sha256"), after["fixes"][0].pop("patch_bytes_sha256")
    assert hint_before != hint_after and before["fixes"] == after["fixes"] and before["targets"] == after["targets"]


@pytest.mark.parametrize("old, new", [
    ("+five\n", "+FIVE\n"),                        # an added line
    ("-line 5\n", "-line 5 \n"),                   # a removed line
    (" line 4\n", " line  4\n"),                   # a context line
    ("@@ -2,7 +2,7 @@", "@@ -3,7 +3,7 @@"),          # the hunk's place
    ("a/demo_pkg/mod.py", "a/demo_pkg/mod2.py"),   # a file name (all three spellings)
])
def test_a_change_to_the_diff_makes_the_lock_stale(setup, old, new):
    b, _, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    text = patch.read_text()
    if "mod.py" in old:
        text = text.replace("demo_pkg/mod.py", "demo_pkg/mod2.py")
    else:
        assert old in text, (old, text)
        text = text.replace(old, new, 1)
    patch.write_text(text)
    before = snapshot(target)
    with pytest.raises(StaleLockError, match="one: patch or version changed"):
        engine.apply(b.request(target))
    assert snapshot(target) == before


def test_a_mode_change_makes_the_lock_stale(setup):
    b, _, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    _edit(patch, "diff --git a/demo_pkg/mod.py b/demo_pkg/mod.py\n",
          "diff --git a/demo_pkg/mod.py b/demo_pkg/mod.py\nold mode 100644\nnew mode 100755\n")
    with pytest.raises(StaleLockError, match="one: patch or version changed"):
        engine.apply(b.request(target))


def test_the_manifest_still_sees_a_changed_change(setup):
    """An image applied with one change, then the pack's diff edited and re-locked: the manifest's
    record names the old change, so apply refuses rather than take it for this one."""
    b, clean, target = setup
    assert engine.apply(b.request(target)).ok
    _edit(b.pack / "fixes/one/0001-change.patch", "+five\n", "+FIVE\n")
    b.lock(clean)
    with pytest.raises(Exception, match="applied with another patch"):
        engine.apply(b.request(target))
    _edit(b.pack / "fixes/one/0001-change.patch", "+FIVE\n", "+five\n")
    _edit(b.pack / "fixes/one/0001-change.patch", "Subject: [PATCH] one", "Subject: [PATCH] one (reworded)")
    b.lock(clean)
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("one").state == "applied"  # a reworded header is the same change


def test_a_manifest_written_with_the_patch_bytes_hash_is_still_recognised(setup):
    """Manifests written before the change fingerprint recorded the sha256 over the patch files' bytes:
    an image applied then is still status'd, re-applied and reverted with the same pack."""
    import hashlib
    import json

    b, _clean, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    path = target / ".fixpack/demo.manifest.json"
    manifest = json.loads(path.read_text())
    data = (b.pack / "fixes/one/0001-change.patch").read_bytes()
    manifest["fixes"][0]["patch_sha256"] = hashlib.sha256(hashlib.sha256(data).hexdigest().encode()).hexdigest()
    path.write_text(json.dumps(manifest))
    assert engine.status(b.request(target)).fix("one").state == "applied"
    assert engine.revert(b.request(target)).ok and snapshot(target) == original


def _lock_check_parses(b) -> bool:
    """Whether checking the pack against its lock parsed fix one's patch (as every run does first)."""
    pack = load_pack(b.pack, profile="p1")  # as a run loads it: patches read, parsed on first use
    profile = load_profile(pack, "p1", check_paths=False)
    pack = pack.for_profile(profile.name)
    lockfile.check_lock_matches(pack, profile, lockfile.read_lock(profile))
    return any("files" in vars(pf) for pf in pack.fixes["one"].patches)


def test_the_lock_vouches_for_the_bytes_it_saw(setup):
    """The lock keeps each fix's patch bytes hash beside its change fingerprint: a pack with those very
    bytes is checked against the lock without parsing a patch (status on an image parses nothing); a
    reworded header (other bytes, same change) is parsed and still matches; a changed diff is stale."""
    b, clean, target = setup
    assert not _lock_check_parses(b)
    patch = b.pack / "fixes/one/0001-change.patch"
    _edit(patch, "Subject: [PATCH] one", "Subject: [PATCH] one, reworded")
    assert _lock_check_parses(b)  # other bytes: parsed, same change, fresh
    assert engine.apply(b.request(target)).ok
    assert engine.status(b.request(target)).fix("one").state == "applied"
    _edit(patch, "+five\n", "+FIVE\n")
    with pytest.raises(StaleLockError):
        engine.status(b.request(target))


def test_a_hunk_s_section_heading_is_not_part_of_the_change(setup):
    """The text after a hunk's ranges (git's section heading: the enclosing function, as its diff driver
    finds it; the engine neither places nor checks it) can change, or be junk, and the lock stays fresh,
    its fingerprints unchanged; only the shortcut to the bytes moves. The ranges themselves are the change."""
    b, clean, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    lock_before = json.loads((b.pack / "profiles/p1.lock").read_bytes())
    _edit(patch, "@@ -2,7 +2,7 @@ line 1\n", "@@ -2,7 +2,7 @@ def somewhere(): junk | @@ text\n")
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("one").state == "absent"
    engine.check_lock_fresh(b.request(clean))  # lock --check: fresh
    b.lock(clean)
    after = json.loads((b.pack / "profiles/p1.lock").read_bytes())
    assert before_and_after_differ_only_in_the_bytes_hash(lock_before, after)
    assert engine.status(b.request(target)).fix("one").state == "applied"


def before_and_after_differ_only_in_the_bytes_hash(before: dict, after: dict) -> bool:
    a, z = before["fixes"][0].pop("patch_bytes_sha256"), after["fixes"][0].pop("patch_bytes_sha256")
    return a != z and before["fixes"] == after["fixes"] and before["targets"] == after["targets"]


def test_a_manifest_recorded_with_the_section_headings_is_still_recognised(setup):
    """Manifests written while the change fingerprint hashed each hunk's section heading: an image applied
    then is still status'd and reverted with the same pack."""
    from fixpack.diff import parse_patch
    from fixpack.patchmodel import change_sha256, sha256_text

    b, clean, target = setup
    patch = b.pack / "fixes/one/0001-change.patch"
    _edit(patch, "@@ -2,7 +2,7 @@ line 1\n", "@@ -2,7 +2,7 @@ def somewhere():\n")
    b.lock(clean)
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    path = target / ".fixpack/demo.manifest.json"
    manifest = json.loads(path.read_text())
    headed = sha256_text(change_sha256(parse_patch(patch.read_bytes()).files, section_headings=True))
    assert headed != manifest["fixes"][0]["patch_sha256"]
    manifest["fixes"][0]["patch_sha256"] = headed
    path.write_text(json.dumps(manifest))
    assert engine.status(b.request(target)).fix("one").state == "applied"
    assert engine.revert(b.request(target)).ok and snapshot(target) == original


def test_lock_check_names_a_reworded_patch(setup):
    """A reworded header keeps the lock fresh (same change), but the lock's byte shortcut no longer names the
    patch, so apply parses it: `lock --check` says fresh and names the fix and the command that renews it."""
    from click.testing import CliRunner

    from fixpack import cli

    b, clean, _ = setup
    args = ["lock", "--check", "--profile", "p1", "--pack", str(b.pack), "--root", f"{b.target}={clean}"]
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == 0 and "lock is fresh" in res.output and "reworded" not in res.output, res.output
    _edit(b.pack / "fixes/one/0001-change.patch", "Subject: [PATCH] one", "Subject: [PATCH] one, reworded")
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == 0 and "lock is fresh" in res.output, res.output
    assert "reworded since the lock (same change, other patch bytes): one;" in res.output
    assert f"lock --profile p1 --pack {b.pack}" in res.output
    res = CliRunner().invoke(cli.main, [*args, "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["reworded"] == ["one"], res.output
    b.lock(clean)
    res = CliRunner().invoke(cli.main, args)
    assert res.exit_code == 0 and "reworded" not in res.output, res.output


def test_lock_check_names_a_lock_entry_without_its_patch_bytes_hash(setup):
    """A reviewer: with a fix entry's patch_bytes_sha256 removed (the lock sealed again), `lock --check` said the patch
    was "reworded since the lock". It says the key is missing, at the entry's line, and the command that regenerates
    the lock (--json: unrecorded, not reworded); the lock is fresh all the same (the key is a shortcut)."""
    from click.testing import CliRunner

    from fixpack import cli
    from fixpack.records import dumps, lock_digest

    b, clean, _ = setup
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    del data["fixes"][0]["patch_bytes_sha256"]
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    line = next(n for n, ln in enumerate(lock.read_text().splitlines(), 1) if ln.strip() == '"id": "one",')
    args = ["lock", "--check", "--profile", "p1", "--pack", str(b.pack), "--root", f"{b.target}={clean}"]
    res = CliRunner().invoke(cli.main, args)
    said = " ".join(res.output.split())
    assert res.exit_code == 0 and "lock is fresh" in said and "reworded" not in said, said
    assert (f"{lock}:{line}: fix one's entry has no \"patch_bytes_sha256\" (the hash of the patch bytes it was made "
            f"from: the key was removed, or the lock is older than it); apply parses its patch until `") in said, said
    assert f"lock --profile p1 --pack {b.pack} --root {b.target}={clean}` regenerates the lock" in said, said
    res = CliRunner().invoke(cli.main, [*args, "--json"])
    got = json.loads(res.stdout)
    assert res.exit_code == 0 and (got["reworded"], got["unrecorded"]) == ([], ["one"]), res.output


def test_lock_refuses_a_patched_copy_whose_manifest_was_removed(setup):
    """A copy the fixes were applied to, its .fixpack folder removed, is not the release: lock and
    lock --check refuse it (exit 3, the fix, the file and `fixpack fetch` named) and write nothing."""
    import shutil
    import subprocess
    import sys

    b, clean, image = setup
    engine.apply(b.request(image))
    shutil.rmtree(image / ".fixpack")
    before = snapshot(b.pack)
    for extra in ((), ("--check",)):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "lock", "--pack", str(b.pack), "-p", "p1",
                            "--root", f"demo={image}", *extra], capture_output=True, text=True)
        assert r.returncode == 3, r.stderr
        assert "fix one is already applied there" in r.stderr and MOD in r.stderr and " fetch --profile p1 --target demo --pack " in r.stderr
        assert snapshot(b.pack) == before
    # a copy changed where the fix goes does not place it: a conflict that says a clean copy may be wanted
    (image / MOD).write_text(numbered(20).replace("line 6\n", "six\n"))
    with pytest.raises(ConflictError) as exc:  # the fetch command as this program runs (`fixpack` was not on PATH)
        engine.write_lock(b.request(image))
    said = str(exc.value).split("if that copy is not the clean release, give one: ", 1)[1]
    assert said.startswith(program()) and f" fetch --profile p1 --target demo --pack {b.pack} prints it)" in said, said
    engine.write_lock(b.request(clean))


def test_a_lock_conflict_names_the_patch_file_and_its_hunk_line(setup):
    """lock on a copy where a hunk does not apply named the target's file and the hunk's number in it, not the
    patch to change: it names the patch file and the line of the hunk's @@ header there."""
    b, _clean, image = setup
    (image / MOD).write_text(numbered(20).replace("line 6\n", "six\n"))
    patch = b.pack / "fixes/one/0001-change.patch"
    at = patch.read_text().splitlines().index(next(ln for ln in patch.read_text().splitlines() if ln.startswith("@@"))) + 1
    before = snapshot(b.pack)
    with pytest.raises(ConflictError) as exc:
        engine.write_lock(b.request(image))
    assert f"; {MOD} hunk #1 is {patch}:{at}. Rebase it before locking" in str(exc.value), str(exc.value)
    assert f"{MOD}: hunk #1 missing" in str(exc.value)
    assert snapshot(b.pack) == before


def test_a_stale_lock_is_named_with_the_line_of_each_stale_entry(setup):
    """apply refused a stale lock naming the lock without a line: each stale entry is named at its line, the
    fix's "id" line in the lock (or where the profile lists a fix the lock lacks); a hand-edited lock at its
    digest's line."""
    b, _clean, image = setup
    lock = b.pack / "profiles/p1.lock"
    _edit(b.pack / "fixes/one/0001-change.patch", "+five\n", "+FIVE\n")
    line = lock.read_text().splitlines().index('      "id": "one",') + 1
    before = snapshot(image)
    for run in (engine.apply, engine.status):
        with pytest.raises(StaleLockError) as exc:
            run(b.request(image))
        assert (f"{lock} is stale: one: patch or version changed since the lock was generated (its patch changed "
                f"under the same version 1: if the change is meant, bump version in {b.pack / 'fixes/one/fix.toml'}:2 before "
                f"locking; if not, put the patch back as it was locked) (at "
                f"{lock}:{line}); regenerate it") in str(exc.value), str(exc.value)
    _edit(b.pack / "fixes/one/0001-change.patch", "+FIVE\n", "+five\n")
    good = lock.read_text()
    lock.write_text(good.replace('"digest": "', '"digest": "0'))
    digest = lock.read_text().splitlines().index(next(ln for ln in good.splitlines() if '"digest"' in ln)
                                                 .replace('"digest": "', '"digest": "0')) + 1
    with pytest.raises(StaleLockError) as exc:
        engine.apply(b.request(image))
    assert str(exc.value).startswith(f"{lock}:{digest}: its content does not match its seal (its \"digest\"): it was "
                                      f"edited by hand"), str(exc.value)
    assert snapshot(image) == before


@pytest.mark.parametrize("lock_on_disk", ["none", "another pin"])
def test_lock_refuses_a_patched_copy_without_a_lock_for_its_pin(setup, lock_on_disk):
    """With no lock, or one made for another pin, a patched copy (its .fixpack removed) was locked with
    pre = post, as if upstream held the fix: lock and lock --check refuse it (exit 3), naming the file and the
    fix, both readings (a patched copy: fetch; a release that took the fix: rebase, drop it or fixed_in), and
    write nothing."""
    import shutil
    import subprocess
    import sys

    from fixpack.structs import replace

    b, clean, image = setup
    engine.apply(b.request(image))
    shutil.rmtree(image / ".fixpack")
    lock = b.pack / "profiles/p1.lock"
    if lock_on_disk == "none":
        lock.unlink()
    else:
        profile = load_profile(load_pack(b.pack), "p1")
        have = lockfile.read_lock(profile)
        lockfile.write(profile, replace(have, targets={"demo": {"version": "0.9", "commit": "g0123456789"}}))
    before = snapshot(b.pack)
    with pytest.raises(Exception) as exc:
        engine.write_lock(b.request(image))
    said = str(exc.value)
    assert exc.value.exit_code == 3, said
    assert said.startswith(f"{image / MOD}: holds fix one's post-image, not its pre-image"), said
    assert " fetch --profile p1 --target demo --pack " in said and "If release 1.0 took the fix upstream: a rebase " \
        "onto it reports the fix as upstreamed, proposed for dropping" in said, said
    assert f"drop one from {b.pack / 'profiles/p1.toml'}" in said and 'fixed_in = "1.0"' in said, said
    assert said.endswith("nothing was written"), said
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "lock", "--check", "--pack", str(b.pack), "-p", "p1",
                        "--root", f"demo={image}"], capture_output=True, text=True)
    assert r.returncode == 3 and "holds fix one's post-image" in r.stderr, r.stderr
    assert snapshot(b.pack) == before
    engine.write_lock(b.request(clean))  # the clean copy locks
    lock.unlink()
    older = b.pack / "profiles/p0.toml"  # a profile pinned to an older release: the rebase to run is named
    older.write_text((b.pack / "profiles/p1.toml").read_text().replace('name = "p1"', 'name = "p0"')
                     .replace('version = "1.0"', 'version = "0.9"'))
    with pytest.raises(Exception) as exc:
        engine.write_lock(b.request(image))
    assert (f" rebase --profile p0 --to 1.0 --target demo --pack {b.pack} --name p1-rebased`: a new profile beside "
            "it) reports the fix as upstreamed") in str(exc.value), str(exc.value)


def test_a_copy_holding_a_fix_moved_by_a_line_above_is_refused_as_patched(builder):
    """A copy that holds a fix's post-image a line lower than its patch says (a tree it was applied to, a line added
    above since, its .fixpack removed): lock places a hunk on a release copy at its stated lines only, so it said the
    fix was a conflict there (exit 4, "rebase it"); it is a copy holding the post-image, not the pre-image, refused as
    one (exit 3, both readings named, nothing written), and locked as found where the fix is declared upstreamed."""
    base = numbered(30)
    after = base.replace("line 10\n", "ten\n")
    builder.add_fix("one", {MOD: base}, {MOD: after})
    builder.profile(["one"])
    moved = builder.tree("moved", {MOD: "# a line added above\n" + after})
    before = snapshot(builder.pack)
    with pytest.raises(Exception, match="holds fix one's post-image, not its pre-image") as exc:
        builder.lock(moved)
    assert exc.value.exit_code == 3 and str(exc.value).endswith("nothing was written"), str(exc.value)
    assert snapshot(builder.pack) == before
    engine.write_lock(builder.request(moved, upstreamed=("one",)))
    (entry,) = lockfile.read_lock(load_profile(load_pack(builder.pack), "p1")).fixes
    assert all(f.pre == f.post for f in entry.files)
    conflict = builder.tree("conflict", {MOD: base.replace("line 10\n", "line X\n")})  # neither side: a conflict
    (builder.pack / "profiles/p1.lock").unlink()
    with pytest.raises(ConflictError) as exc:
        builder.lock(conflict)
    assert exc.value.exit_code == 4


def test_a_fix_declared_upstreamed_is_locked_as_found(builder):
    """A release that took the fix, with fixed_in at or below it (or a rebase that found it so), is locked as
    found (pre = post), as a rebase keeps such a fix listed; without either it is refused."""
    base = numbered(20)
    upstream = builder.tree("upstream", {MOD: base.replace("line 5\n", "five\n")})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    builder.profile(["one"])
    with pytest.raises(Exception, match="holds fix one's post-image, not its pre-image") as exc:
        builder.lock(upstream)
    assert exc.value.exit_code == 3
    engine.write_lock(builder.request(upstream, upstreamed=("one",)))
    (entry,) = lockfile.read_lock(load_profile(load_pack(builder.pack), "p1")).fixes
    assert all(f.pre == f.post for f in entry.files)
    builder.lock(upstream)  # the lock on disk records it as found, for this pin and these bytes
    (builder.pack / "profiles/p1.lock").unlink()
    toml = builder.pack / "fixes/one/fix.toml"
    toml.write_text(toml.read_text() + '[upstream]\nstatus = "accepted"\nfixed_in = "1.0"\n')
    builder.lock(upstream)
