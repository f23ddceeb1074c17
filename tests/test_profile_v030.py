"""Profile v0.30.0 on the real vLLM v0.30.0 release: the CI dry run of the whole chain, the lock's
freshness, apply / re-apply / revert on a copy, and each fix's proof on the image stand-in.

Needs $FIXPACK_TEST_CACHE (the release copy is fetched there once: PyPI sdist, hash-checked) and,
for the image case, $FIXPACK_VLLM_PYTHON (a Python with vLLM 0.30.0 installed). tools/test.sh sets
both; without them these tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fixpack import engine, release
from fixpack.loader import load_pack, load_profile
from fixpack.prove import prove, tree_digest

from conftest import REPO

PROFILE = "v0.30.0"
pytestmark = pytest.mark.release


@pytest.fixture(scope="module")
def release_copy() -> Path:
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to fetch the vLLM 0.30.0 release copy")
    spec = load_profile(load_pack(REPO), PROFILE).target("vllm")
    return release.fetch(spec, Path(cache)).root


def req(root: Path, **kw) -> engine.Request:
    return engine.Request(pack_root=REPO, profile=PROFILE, roots={"vllm": root}, only_targets=("vllm",), **kw)


def test_release_copy_matches_pin(release_copy):
    v = (release_copy / "vllm/_version.py").read_text()
    assert "__commit_id__ = commit_id = 'gced6857af'" in v and "'0.30.0'" in v


def test_dry_run_whole_chain_strict(release_copy):
    """Every fix of the profile, opt-ins included, applies exactly (no offset) to the release copy."""
    r = engine.apply(req(release_copy, dry_run=True, all_opt_in=True, strict=True))
    assert r.ok, r.error
    prof = load_profile(load_pack(REPO), PROFILE)
    assert {f.id for f in r.fixes} == set(prof.default + prof.opt_in)
    assert all(f.state == "absent" and f.action == "would-apply" and not f.offsets for f in r.fixes)


def test_missing_gaudi_target_is_said_plainly(release_copy):
    r = engine.apply(engine.Request(pack_root=REPO, profile=PROFILE, roots={"vllm": release_copy}, dry_run=True))
    gaudi = next(t for t in r.targets if t.name == "vllm-gaudi")
    assert r.exit_code == 3 and gaudi.status == "missing" and "--target" in gaudi.message


def test_lock_is_fresh(release_copy):
    engine.check_lock_fresh(req(release_copy))


def test_apply_reapply_revert_on_a_copy(release_copy, tmp_path):
    copy = tmp_path / "vllm-0.30.0"
    shutil.copytree(release_copy / "vllm", copy / "vllm")
    before = tree_digest(copy, "vllm")
    r = engine.apply(req(copy, all_opt_in=True))
    assert r.ok and all(f.action == "applied" for f in r.fixes)
    after = tree_digest(copy, "vllm")
    assert after != before
    again = engine.apply(req(copy, all_opt_in=True))
    assert again.ok and all(f.state == "applied" and f.action == "none" for f in again.fixes)
    assert tree_digest(copy, "vllm") == after
    assert engine.revert(req(copy)).ok
    assert tree_digest(copy, "vllm") == before and not (copy / ".fixpack").exists()


@pytest.mark.image
def test_each_fix_proven_on_the_image():
    """The image case: each fix's tests fail on clean vLLM 0.30.0 and pass on the patched install."""
    python = os.environ.get("FIXPACK_VLLM_PYTHON")
    if not python:
        pytest.skip("set FIXPACK_VLLM_PYTHON to a Python with vLLM 0.30.0 installed (tools/test.sh does)")
    run = prove(REPO, PROFILE, python)
    lines = [f"{r.fix}: clean rc={r.clean_rc} [{r.clean_summary}] -> patched rc={r.patched_rc} "
             f"[{r.patched_summary}]" for r in run.results]
    print("\n".join(lines))
    assert run.results, "the profile has no fixes for vllm"
    assert all(r.ok for r in run.results), "\n".join(lines)
    assert run.reapply_wrote_nothing and run.revert_restored_bytes, run.notes
