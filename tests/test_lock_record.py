"""A fresh user's report: a lock edited and sealed again (its seal is a plain sha256 over its content) where a fix's
``files`` list was emptied, its ``target`` changed or a hunk's ``pre_count`` changed passed `check`, `status` and
`apply` (exit 0); `lock --check` alone caught it. A fix's record in the lock is held to what the pack's patch gives,
as `lock --check` holds it, as far as that needs no release copy: its target (fix.toml's) everywhere, the files its
patch touches and its hunks wherever the patches are parsed anyway (`check`; a run's selected fixes, and each one a
status places), and a hunk's counts where the file it reads is byte for byte the one it was locked on (the counts
are that file's). Refused with exit 2 (a stale lock) at the lock's lines, naming the fix, with the command that
regenerates the lock; nothing written."""

from __future__ import annotations

import json

import pytest
from conftest import numbered, snapshot
from test_lock_bump import MOD, fixpack
from test_lock_seal import refused_by_all_three, two  # noqa: F401 (a fixture)
from test_lock_shape import OTHER, hunk_line, key_line, pack  # noqa: F401 (a fixture)

from fixpack.progname import program
from fixpack.records import dumps, lock_digest

EDITS = {
    "files emptied": lambda f: f.update(files=[]),
    "a file added": lambda f: f["files"].append({"path": "demo_pkg/other.py", "pre": None, "post": "1" * 64}),
    "target changed": lambda f: f.update(target="other"),
    "pre_count changed": lambda f: f["hunks"][0].update(pre_count=2),
}


def _reseal(lock, edit) -> None:
    """Fix one's entry edited, the lock sealed again (its digest recomputed) and written as `lock` writes one."""
    data = json.loads(lock.read_text())
    edit(data["fixes"][0])
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))


def _line(lock, key: str, nth: int = 1) -> int:
    """The 1-based line of the ``nth`` line that starts with ``key`` in fix one's entry (the first of "fixes")."""
    lines = lock.read_text().splitlines()
    start = lines.index('  "fixes": [')
    found = [n for n, ln in enumerate(lines[start:], start + 1) if ln.strip().startswith(f'"{key}": ')]
    return found[nth - 1]


def _said(b, lock, case: str) -> str:
    toml = b.pack / "fixes/one/fix.toml"
    edited = "the lock was edited by hand and sealed again"
    return {"files emptied": f"it records no file (line {_line(lock, 'files')} of the lock) where its patch touches "
                             f"{MOD}: {edited}",
            "a file added": f"it records files {MOD}, demo_pkg/other.py (line {_line(lock, 'files')} of the lock) "
                            f"where its patch touches {MOD}: {edited}",
            "target changed": f"its target (line {_line(lock, 'target')} of the lock) is \"other\", where {toml}:5 "
                              f"says \"demo\": {edited}, or the fix's target changed since the lock was made",
            "pre_count changed": f"its hunk #1 of {MOD} (line {_line(lock, 'pre_count')} of the lock) records "
                                 f"pre_count 2 where its pre-image in the file occurs 1 time(s), and that file is byte "
                                 f"for byte the one it was locked on: {edited}"}[case]


@pytest.mark.parametrize("case", list(EDITS))
def test_a_fix_record_edited_and_sealed_again_is_refused_before_anything_is_written(two, case):  # noqa: F811
    b, image = two
    lock = b.pack / "profiles/p1.lock"
    _reseal(lock, EDITS[case])
    what = f"one: {_said(b, lock, case)}"
    at = f"{lock}:{_line(lock, 'id')}"
    redo = f"regenerate it from clean release copies: {program()} lock --profile p1 --pack {b.pack}"
    before = snapshot(b.base)
    for said in refused_by_all_three(b, image):
        assert f"{lock} is stale: {what} (at {at}); {redo}" in said, said
    r = fixpack("check", "--pack", str(b.pack))
    said = " ".join((r.stdout + r.stderr).split())
    if case == "pre_count changed":  # a count is its file's: `check` has no release copy (lock --check has)
        assert "the lock is stale" not in said, said
    else:
        assert r.returncode == 2 and f"profiles/p1.lock:{at.rsplit(':', 1)[1]}: the lock is stale: {what} ({redo}" \
            in said, said
    assert snapshot(b.base) == before


@pytest.mark.parametrize("case", ["files emptied", "target changed"])
def test_status_of_an_applied_image_holds_the_record_to_the_patches_it_parses(two, case):  # noqa: F811
    """On an image the fixes were applied to, the lock's record no longer vouches for its files (the files list) or
    is no target's (the target): status evaluates the fixes, parsing them, and refuses the record all the same."""
    b, image = two
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    lock = b.pack / "profiles/p1.lock"
    _reseal(lock, EDITS[case])
    before = snapshot(b.base)
    r = fixpack("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and snapshot(b.base) == before, said
    assert f"{lock} is stale: one: {_said(b, lock, case)} (at {lock}:{_line(lock, 'id')})" in said, said


def test_the_lock_as_lock_writes_it_is_taken(two):  # noqa: F811
    """Sealed again without an edit: nothing is said, the fixes apply."""
    b, image = two
    _reseal(b.pack / "profiles/p1.lock", lambda f: None)
    for args in (["status"], ["apply", "--dry-run"], ["apply"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        assert r.returncode == 0, (args, r.stderr)


REVERT_EDITS = {
    "files emptied": lambda f: f[0].update(files=[]),
    "a path renamed": lambda f: f[0]["files"][0].update(path="demo_pkg/renamed.py"),
    "one of two files dropped": lambda f: f[0]["files"].pop(1),
    "a hunk's pre-image": lambda f: f[0]["hunks"][0].update(pre="0" * 64),
}


@pytest.mark.parametrize("case", list(REVERT_EDITS))
def test_revert_goes_on_without_a_lock_whose_record_was_edited(pack, case):  # noqa: F811
    """A fresh user: the fixes applied with the honest lock, then a fix's record edited and sealed again (its files
    emptied, a path renamed, one of its two files dropped): revert was refused, exit 2 "the lock is stale ...
    regenerate it", nothing reverted (before the record was held to the patch, exit 3 "manifest damaged"). A missing,
    stale or hand-edited lock must not keep an image from its release: revert holds the record of each fix the
    manifest records to its patch (parsed anyway) and, where it is not the patch's, goes on without the lock, from
    the manifest and its backups, and says so; the image is the release byte for byte."""
    b, _clean, image = pack
    release = snapshot(image)
    lock = b.pack / "profiles/p1.lock"
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    assert snapshot(image) != release
    data = json.loads(lock.read_text())
    REVERT_EDITS[case](data["fixes"])
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    _reverted_without_the_lock(b, image, lock, release)


def test_status_dry_run_and_apply_agree_on_a_fix_whose_hunk_record_was_edited(pack):  # noqa: F811
    """A fresh user: applied with the honest lock, then fix one's first hunk's pre-image sha256 edited and sealed
    again: status said "already applied" (exit 0: on an applied image it takes the lock's word) where a dry run and
    apply refused it (exit 2: they held every selected fix's record to its patch). The record is held to the patch
    for a fix a run lays (absent, drifted), by all three; one applied already and not laid again is taken on the
    lock's word by all three."""
    b, _clean, image = pack
    lock = b.pack / "profiles/p1.lock"
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    data = json.loads(lock.read_text())
    data["fixes"][0]["hunks"][0]["pre"] = "0" * 64
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    fresh = b.tree("fresh", {MOD: numbered(20), OTHER: numbered(20)})
    before = snapshot(b.base)
    at = key_line(lock, 0, "pre", hunk_line(lock, 0, 0))
    refused = f"{lock} is stale: one: its hunk #1 of {MOD} (line {at} of the lock) records its pre-image as sha256 {'0' * 12}"
    for args in (["status"], ["apply", "--dry-run"], ["apply"]):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 0 and "one v1: applied, none - already applied" in said, (args, said)
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={fresh}")  # one it lays: held
        said = " ".join(r.stderr.split())
        assert r.returncode == 2 and refused in said, (args, said)
    assert snapshot(b.base) == before


def test_apply_holds_a_laid_fix_record_again_before_it_writes(pack, monkeypatch):  # noqa: F811
    """The check apply makes before it writes (every fix it lays, held to its parsed patches) stands on its own: with
    the one made as each fix is laid (replay.post_checked) taken out, an edited hunk record is still refused there,
    nothing written."""
    from fixpack import engine, lock_seal
    from fixpack.errors import StaleLockError

    b, _clean, image = pack
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    data["fixes"][0]["hunks"][0]["pre"] = "0" * 64
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    monkeypatch.setattr(lock_seal, "record_edited", lambda *args: [])  # (post_checked's: lockfile keeps its own)
    before = snapshot(image)
    with pytest.raises(StaleLockError, match=r"one: its hunk #1 of demo_pkg/mod.py .* records its pre-image as "):
        engine.apply(b.request(image))
    assert snapshot(image) == before


def test_a_change_fingerprint_edited_in_the_lock_is_said_as_the_lock_and_revert_goes_on(pack):  # noqa: F811
    """A fresh user: applied with the honest lock, then fix one's ``patch_sha256`` edited (its
    ``patch_bytes_sha256`` left, so the lock vouches for the edited change over the very bytes) and sealed again.
    revert refused (exit 2) saying the manifest recorded fix one "applied with another patch than this pack's", and
    so did status, though the pack's patch never changed: the lock was edited. status, a dry run and apply now name
    the lock at the fix's line (exit 2, the pack's patch worked out from its bytes agrees with the manifest), and
    revert goes on without the lock, from the manifest and its backups; the image is the release byte for byte."""
    b, _clean, image = pack
    release = snapshot(image)
    lock = b.pack / "profiles/p1.lock"
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    data = json.loads(lock.read_text())
    assert data["fixes"][0]["id"] == "one" and data["fixes"][0]["patch_bytes_sha256"]
    data["fixes"][0]["patch_sha256"] = "3" * 64
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))
    applied = snapshot(image)
    for args in (("status",), ("apply", "--dry-run"), ("apply",)):
        r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2, (args, said)
        assert f"{lock} is stale: one: its change fingerprint (patch_sha256) is not its patch's" in said, (args, said)
        assert "applied with another patch" not in said, (args, said)
        assert snapshot(image) == applied
    _reverted_without_the_lock(b, image, lock, release)


def _reverted_without_the_lock(b, image, lock, release) -> None:
    """revert of profile p1 on ``image`` goes on without ``lock`` (stale for fix one), says so, and leaves the image
    the release (``release``: its snapshot) byte for byte."""
    r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, said
    assert f"revert went on without the lock (it places every hunk by search): {lock} is stale: one: " in said, said
    assert "one v1: applied, reverted" in said and "two v1: applied, reverted" in said, said
    assert snapshot(image) == release


def test_revert_of_a_fix_whose_patch_was_edited_and_its_bytes_sealed_again_is_another_patch_not_a_conflict(pack):  # noqa: F811
    """A fresh user: applied with the honest lock, then fix two's added line edited in its patch (version 1 kept), its
    entry's ``patch_bytes_sha256`` set to the new bytes and the lock sealed again (its change fingerprint left: the
    lock then vouches for the old change over the new bytes). revert parsed the patch, found the lock stale and went
    on without it, yet kept the change the lock had vouched for as the patch's: it took the manifest's entry for this
    patch and stopped on its hunk, "two: conflict", exit 4, with no ways out. The change worked out from the patches is
    theirs from then on: the image holds another patch than this pack's v1, exit 2 with the ways out, as with the
    honest (stale) lock; nothing written."""
    from fixpack.loader import load_pack

    b, _clean, image = pack
    lock = b.pack / "profiles/p1.lock"
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    patch = b.pack / "fixes/two/0001-change.patch"
    assert patch.read_text().count("+nine\n") == 1
    patch.write_text(patch.read_text().replace("+nine\n", "+nine()\n"))
    applied, honest = snapshot(image), lock.read_bytes()
    said = {}
    for name in ("honest", "sealed again"):
        if name == "sealed again":
            data = json.loads(lock.read_text())
            data["fixes"][1]["patch_bytes_sha256"] = load_pack(b.pack).fixes["two"].bytes_sha256
            data["digest"] = lock_digest(data)
            lock.write_bytes(dumps(data))
            assert lock.read_bytes() != honest
        r = fixpack("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
        said[name] = " ".join((r.stdout + r.stderr).split())
        assert r.returncode == 2 and snapshot(image) == applied, (name, said[name])
        assert "records two v1 on target demo, applied with another patch than this pack's v1" in said[name], said
        assert "Revert with the pack that applied it" in said[name] and "conflict" not in said[name], said
    assert said["honest"].split(" (the lock at ")[0] == said["sealed again"].split(" (the lock at ")[0], said
