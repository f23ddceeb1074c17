"""Found by an attacker: a fix's patch edited without a version bump, its lock entry's ``patch_bytes_sha256`` set to
the new bytes and the lock sealed again (its digest is a plain sha256). On an image applied with the original patch,
`apply --dry-run` and `apply` refused (exit 2: the lock is stale, the patch's change is not the one it records), but
`status` said "already applied", exit 0: its fast path took the lock's word for the change of those bytes, though they
are not the bytes the image was applied from. Apply records them in the manifest (each fix entry's
``patch_bytes_sha256``); status parses a fix whose bytes are not those (or whose entry, from an older manifest, has
none) and holds it to the lock as a dry run does: the same refusal, exit 2; nothing written."""

from __future__ import annotations

import json

import pytest
from conftest import snapshot
from test_lock_bump import fixpack
from test_lock_shape import pack  # noqa: F401 (a fixture)

from fixpack import engine, model
from fixpack.loader import load_pack
from fixpack.records import dumps, lock_digest


def _run(b, image, *args: str):
    """The CLI on ``image``, with the image's every byte and mode before and after (status writes nothing)."""
    before = snapshot(image)
    r = fixpack(*args, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}")
    assert snapshot(image) == before, (args, "changed the image")
    return r


def _as_json(b, image, *args: str) -> dict:
    doc = json.loads(_run(b, image, *args, "--json").stdout)
    return {k: doc[k] for k in ("exit_code", "ok", "error", "fixes", "targets")}


def _edit_patch_and_reseal(b) -> None:
    """Fix two's added line edited in its patch (version 1 kept), its lock entry's patch_bytes_sha256 set to the new
    bytes (its change fingerprint left) and the lock sealed again."""
    patch = b.pack / "fixes/two/0001-change.patch"
    patch.write_text(patch.read_text().replace("+nine\n", "+nine()\n"))
    lock = b.pack / "profiles/p1.lock"
    data = json.loads(lock.read_text())
    assert data["fixes"][1]["id"] == "two"
    data["fixes"][1]["patch_bytes_sha256"] = load_pack(b.pack).fixes["two"].bytes_sha256
    data["digest"] = lock_digest(data)
    lock.write_bytes(dumps(data))


def _drop_recorded_bytes(image) -> None:
    """The manifest as a fixpack from before the key wrote it: no fix entry has patch_bytes_sha256."""
    path = image / ".fixpack/demo.manifest.json"
    data = json.loads(path.read_text())
    for entry in data["fixes"]:
        entry.pop("patch_bytes_sha256", None)
    path.write_bytes(dumps(data))


def _status_agrees_with_the_dry_run(b, image) -> None:
    """status and apply --dry-run on the forged lock: both exit 2 with the same words (the lock is stale at fix two's
    entry), in text and in JSON; neither writes a byte."""
    lock = b.pack / "profiles/p1.lock"
    status, dry = _run(b, image, "status"), _run(b, image, "apply", "--dry-run")
    said = " ".join(status.stderr.split())
    assert status.returncode == dry.returncode == 2, (status.stdout + status.stderr, dry.stdout + dry.stderr)
    assert status.stderr == dry.stderr and status.stdout == dry.stdout == "", (status.stderr, dry.stderr)
    assert f"{lock} is stale: two: its change fingerprint (patch_sha256) is not its patch's" in said, said
    toml = b.pack / "fixes/two/fix.toml"  # (a fresh user: it said only "regenerate it", which lock then refuses)
    line = toml.read_text().splitlines().index("version = 1") + 1
    assert (f"or its patch_bytes_sha256, set to a patch edited under the same version 1: if that edit is meant, bump "
            f"version in {toml}:{line} before locking, else put the patch back as it was locked)") in said, said
    assert "already applied" not in status.stdout + status.stderr
    assert _as_json(b, image, "status") == _as_json(b, image, "apply", "--dry-run")
    assert _run(b, image, "apply").returncode == 2
    out = b.base / "sbom.json"  # (the SBOM tells what status vouches for: not the edited patch as applied)
    r = _run(b, image, "sbom", "--out", str(out))
    assert r.returncode == 2 and not out.exists(), r.stdout + r.stderr
    assert f"{lock} is stale: two: its change fingerprint" in " ".join(r.stderr.split()), r.stderr


def test_status_of_an_image_applied_before_the_patch_was_edited_and_the_lock_resealed_is_the_dry_run_s(pack):  # noqa: F811
    b, clean, image = pack
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    honest = _run(b, image, "status")  # (unchanged: already applied, exit 0)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    assert "one v1: applied, none - already applied" in honest.stdout
    assert "two v1: applied, none - already applied" in honest.stdout
    assert [f["state"] for f in _as_json(b, image, "status")["fixes"]] == ["applied", "applied"]
    _edit_patch_and_reseal(b)
    _status_agrees_with_the_dry_run(b, image)
    check = _run(b, clean, "lock", "--check")  # (a fresh user: it said only "patch or version changed")
    toml = b.pack / "fixes/two/fix.toml"
    said = " ".join(check.stdout.split() + check.stderr.split())
    assert check.returncode == 2 and "two: its change fingerprint (patch_sha256) is not its patch's" in said, said
    assert f"bump version in {toml}:{toml.read_text().splitlines().index('version = 1') + 1} before locking" in said


def test_a_manifest_without_the_recorded_patch_bytes_is_parsed_and_holds(pack):  # noqa: F811
    """A manifest an older fixpack wrote (no patch_bytes_sha256): status parses the recorded fixes and holds them to the
    lock; with the honest lock, already applied (exit 0); with the forged one, the dry run's refusal."""
    b, _clean, image = pack
    assert fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}").returncode == 0
    _drop_recorded_bytes(image)
    r = _run(b, image, "status")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "one v1: applied, none - already applied" in r.stdout and "two v1: applied, none - already applied" in r.stdout
    assert _run(b, image, "apply").returncode == 0  # (a second apply: the manifest, the same state, not rewritten)
    assert "patch_bytes_sha256" not in (image / ".fixpack/demo.manifest.json").read_text()
    _edit_patch_and_reseal(b)
    _status_agrees_with_the_dry_run(b, image)


def test_apply_records_the_patch_bytes_of_each_fix(pack):  # noqa: F811
    b, _clean, image = pack
    assert engine.apply(b.request(image)).ok
    recorded = json.loads((image / ".fixpack/demo.manifest.json").read_text())["fixes"]
    fixes = load_pack(b.pack).fixes
    assert {e["id"]: e["patch_bytes_sha256"] for e in recorded} == {f: fixes[f].bytes_sha256 for f in ("one", "two")}


@pytest.mark.parametrize("older", [False, True])
def test_status_parses_only_the_fixes_whose_bytes_are_not_those_applied(monkeypatch, pack, older):  # noqa: F811
    """The fast path stays fast: with the bytes the manifest records, status parses no patch; with a manifest without
    them, or a patch reworded since (other bytes, the same change: the lock regenerated), it parses those fixes, and
    the image is still already applied."""
    b, clean, image = pack
    assert engine.apply(b.request(image)).ok
    if older:
        _drop_recorded_bytes(image)
    parsed: list[str] = []
    real = model.Fix.parsed_change

    def counted(self):
        parsed.append(self.id)
        return real(self)

    monkeypatch.setattr(model.Fix, "parsed_change", counted)
    before = snapshot(image)
    rep = engine.status(b.request(image))
    assert rep.exit_code == 0 and [f.state for f in rep.fixes] == ["applied", "applied"]
    assert sorted(set(parsed)) == (["one", "two"] if older else []), parsed
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace("Subject: [PATCH] one", "Subject: [PATCH] one, reworded"))
    b.lock(clean)
    parsed.clear()
    rep = engine.status(b.request(image))
    assert rep.exit_code == 0 and [f.state for f in rep.fixes] == ["applied", "applied"]
    assert sorted(set(parsed)) == (["one", "two"] if older else ["one"]), parsed
    assert snapshot(image) == before
