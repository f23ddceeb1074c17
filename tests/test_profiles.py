"""Every committed profile on its real vLLM release: the CI dry run of the whole chain, the lock's
freshness, apply / re-apply / revert on a copy, and each fix's proof on the image stand-in.

Needs $FIXPACK_TEST_CACHE (release copies are fetched there once: PyPI sdists, hash-checked) and,
for the image case, $FIXPACK_IMAGE_PYTHONS ("v0.30.0=/path/python v0.31.0=/path/python": a Python
with that profile's vLLM installed). tools/test.sh sets both; without them these tests are skipped
with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO

from fixpack import engine, release
from fixpack.loader import load_pack, load_profile
from fixpack.prove import prove, tree_digest

PACK = load_pack(REPO)
PROFILES = sorted(PACK.profiles)
pytestmark = pytest.mark.release


def image_python(profile: str) -> str | None:
    pairs = dict(p.split("=", 1) for p in os.environ.get("FIXPACK_IMAGE_PYTHONS", "").split() if "=" in p)
    return pairs.get(profile)


def release_root(profile: str) -> Path:
    """The profile's vLLM release copy, fetched once into $FIXPACK_TEST_CACHE (skips without it)."""
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to fetch the release copies")
    spec = load_profile(PACK, profile).target("vllm")
    return release.fetch(spec, Path(cache)).root


@pytest.fixture(scope="module", params=PROFILES)
def profile_copy(request) -> tuple[str, Path]:
    return request.param, release_root(request.param)


def req(profile: str, root: Path, **kw) -> engine.Request:
    return engine.Request(pack_root=REPO, profile=profile, roots={"vllm": root}, only_targets=("vllm",), **kw)


def test_release_copy_matches_pin(profile_copy):
    profile, root = profile_copy
    pin = load_profile(PACK, profile).target("vllm").pin
    v = (root / "vllm/_version.py").read_text()
    assert f"'{pin.version}'" in v and f"'g{pin.commit}" in v


def test_dry_run_whole_chain_strict(profile_copy):
    """Every fix of the profile, opt-ins included, applies exactly (no offset) to the release copy."""
    profile, root = profile_copy
    r = engine.apply(req(profile, root, dry_run=True, all_opt_in=True, strict=True))
    assert r.ok, r.error
    prof = load_profile(PACK, profile)
    assert {f.id for f in r.fixes} == {f for f in prof.default + prof.opt_in}
    assert all(f.state in ("absent", "upstreamed") and not f.offsets for f in r.fixes)


def test_lock_is_fresh(profile_copy):
    profile, root = profile_copy
    engine.check_lock_fresh(req(profile, root))


def test_apply_reapply_revert_on_a_copy(profile_copy, tmp_path):
    profile, root = profile_copy
    copy = tmp_path / "vllm-release"
    shutil.copytree(root / "vllm", copy / "vllm")
    before = tree_digest(copy, "vllm")
    r = engine.apply(req(profile, copy, all_opt_in=True))
    assert r.ok and all(f.action == "applied" or f.state == "upstreamed" for f in r.fixes)
    after = tree_digest(copy, "vllm")
    again = engine.apply(req(profile, copy, all_opt_in=True))
    assert again.ok and all(f.action == "none" for f in again.fixes)
    assert tree_digest(copy, "vllm") == after
    assert engine.revert(req(profile, copy)).ok
    assert tree_digest(copy, "vllm") == before and not (copy / ".fixpack").exists()


@pytest.mark.image
def test_each_fix_proven_on_the_image(profile_copy):
    """The image case: each fix's tests fail on the clean release and pass on the patched install."""
    profile, _ = profile_copy
    python = image_python(profile)
    if not python:
        pytest.skip(f"no image Python for {profile} in $FIXPACK_IMAGE_PYTHONS (tools/test.sh sets it)")
    run = prove(REPO, profile, python)
    lines = [f"{r.fix}: clean rc={r.clean_rc} [{r.clean_summary}] -> patched rc={r.patched_rc} "
             f"[{r.patched_summary}]" for r in run.results]
    print(f"\n{profile}:\n" + "\n".join(lines))
    assert run.results, "the profile has no fixes for vllm"
    assert all(r.ok for r in run.results), "\n".join(lines)
    assert run.reapply_wrote_nothing and run.revert_restored_bytes, run.notes


def test_v030_missing_gaudi_target_is_said_plainly():
    root = release_root("v0.30.0")
    assert "__commit_id__ = commit_id = 'gced6857af'" in (root / "vllm/_version.py").read_text()
    r = engine.apply(engine.Request(pack_root=REPO, profile="v0.30.0", roots={"vllm": root}, dry_run=True))
    gaudi = next(t for t in r.targets if t.name == "vllm-gaudi")
    assert r.exit_code == 3 and gaudi.status == "missing" and "--target" in gaudi.message


COMPONENTS = ("muse-spark-open", "mxfp4-moe")


def site_state(root: Path) -> dict[str, tuple[str, int] | None]:
    """Every file (sha256, mode) and folder (None) under ``root``: the byte-for-byte check, in digests."""
    import hashlib

    return {p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode & 0o777)
            if p.is_file() else None for p in sorted(root.rglob("*"))}


def test_components_install_on_the_newest_release(tmp_path):
    """The port and the kernels' package on the newest profile's release (v0.33.0): apply installs both
    beside the default fixes into a site-packages-shaped root (the release copy's files that the chain
    touches and its version module under ``vllm/``, beside a ``vllm-*.dist-info``), a re-run writes
    nothing, status says applied, revert leaves every byte and folder as before. One profile only: its
    wheels are built on each run (about 3 s each); the other profiles carry the same tables
    (test_components.py checks that)."""
    def release(name: str) -> tuple[int, ...]:
        return tuple(int(x) for x in name.lstrip("v").split("."))

    with_them = [p for p in PROFILES if load_profile(PACK, p).components]  # test_components.py checks which
    profile = max(with_them, key=release)
    assert release(profile) >= (0, 33, 0), with_them
    version = load_profile(PACK, profile).target("vllm").pin.version
    site, release_copy = tmp_path / "site-packages", release_root(profile)
    lock = json.loads((REPO / "profiles" / f"{profile}.lock").read_text())
    for rel in {f["path"] for fix in lock["fixes"] for f in fix["files"]} | {"vllm/__init__.py", "vllm/_version.py"}:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)  # the files the chain touches, not all 4,000
        shutil.copy2(release_copy / rel, site / rel)
    (site / f"vllm-{version}.dist-info").mkdir()
    (site / f"vllm-{version}.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    before = site_state(site)

    r = engine.apply(req(profile, site, opt_ins=COMPONENTS))
    assert r.ok, r.error or [(f.id, f.state, f.messages) for f in r.fixes]
    comps = {f.id: f for f in r.fixes if f.kind == "component"}
    assert {c: (f.state, f.action) for c, f in comps.items()} == dict.fromkeys(COMPONENTS, ("absent", "applied"))
    port = REPO / "ports/muse-spark-open/muse_spark_open"
    assert (site / "muse_spark_open/plugin.py").read_bytes() == (port / "plugin.py").read_bytes()
    assert (site / "mxfp4_moe/__init__.py").read_bytes() == (REPO / "kernels/mxfp4-moe/mxfp4_moe/__init__.py").read_bytes()
    (dist,) = site.glob("muse_spark_open-*.dist-info")
    assert "muse_spark = muse_spark_open.plugin:register" in (dist / "entry_points.txt").read_text()
    applied = site_state(site)

    again = engine.apply(req(profile, site, opt_ins=COMPONENTS))
    assert again.ok and all(f.action == "none" for f in again.fixes) and site_state(site) == applied
    st = engine.status(req(profile, site, opt_ins=COMPONENTS))
    assert st.ok and {f.id: f.state for f in st.fixes if f.kind == "component"} == dict.fromkeys(COMPONENTS, "applied")

    rv = engine.revert(req(profile, site))
    assert rv.ok and {f.id: f.action for f in rv.fixes if f.kind == "component"} == dict.fromkeys(COMPONENTS, "reverted")
    assert site_state(site) == before


def test_a_lock_is_never_made_from_an_edited_release_copy(tmp_path):
    """A copy of the fetched release (its marker copied with it) edited outside every hunk: `lock --check` called
    the committed lock stale and `lock` wrote one recording the edit as the release (found by a fresh user). Both
    are a mismatch (exit 3) naming the copy and what changed, nothing written; the unedited copy locks as before."""
    from fixpack.errors import MismatchError

    root = tmp_path / "vllm"
    shutil.copytree(release_root("v0.30.0"), root, symlinks=True)
    engine.check_lock_fresh(req("v0.30.0", root))  # the copy as fetched: the lock is fresh
    target = root / "vllm/v1/sample/ops/topk_topp_sampler.py"
    lines = target.read_text().splitlines(keepends=True)
    lines[9] = lines[9].replace(" ", "  ", 1)
    target.write_text("".join(lines))
    lock = REPO / "profiles/v0.30.0.lock"
    before = lock.read_bytes()
    for run in (engine.check_lock_fresh, engine.write_lock):
        with pytest.raises(MismatchError) as exc:
            run(req("v0.30.0", root))
        said = str(exc.value)
        assert exc.value.exit_code == 3 and f"{root} is no longer the release copy fetch unpacked" in said, said
        assert "its files changed since it was unpacked" in said and "fetch --profile v0.30.0 --target vllm" in said
        assert lock.read_bytes() == before
