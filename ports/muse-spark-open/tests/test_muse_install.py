"""install.sh against the image stand-in: a virtual environment with vLLM 0.30.0 ($FIXPACK_VLLM_PYTHON).

The shared stand-in is never written to: the profile goes into copies of the vLLM 0.30.0 release
copy (--root vllm=COPY, $FIXPACK_TEST_CACHE) and the plugin into a side folder (--plugin-site).
vllm-gaudi is absent from the stand-in, so install.sh must say so and restrict to --target vllm.
"""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from muse_testutil import PORT, REPO, subprocess_env

PY = os.environ.get("FIXPACK_VLLM_PYTHON")
INSTALL = PORT / "install.sh"
pytestmark = pytest.mark.skipif(not PY, reason="set FIXPACK_VLLM_PYTHON to a Python with vLLM 0.30.0 (tools/test.sh does)")


def install(*args, timeout=600):
    r = subprocess.run(["bash", str(INSTALL), "--python", PY, *args], capture_output=True, text=True,
                       timeout=timeout, env=subprocess_env())
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def release_vllm():
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) for the vLLM 0.30.0 release copy")
    from fixpack import release
    from fixpack.loader import load_pack, load_profile

    spec = load_profile(load_pack(REPO), "v0.30.0").target("vllm")
    return release.fetch(spec, Path(cache)).root / "vllm"


@pytest.fixture(scope="module")
def lifecycle(release_vllm, tmp_path_factory):
    """--check on a clean copy, install into it, --check again: the runs and their output."""
    base = tmp_path_factory.mktemp("image")
    copy, site = base / "vllm-root", base / "plugin-site"
    shutil.copytree(release_vllm, copy / "vllm")
    runs = {"check-before": install("--check", "--root", f"vllm={copy}", "--plugin-site", str(site))}
    runs["install"] = install("--root", f"vllm={copy}", "--plugin-site", str(site))
    runs["check"] = install("--check", "--root", f"vllm={copy}", "--plugin-site", str(site))
    return copy, site, runs


def test_check_refuses_an_image_without_the_profile(lifecycle):
    rc, out = lifecycle[2]["check-before"]
    assert rc == 15 and "not in the profile's state" in out and "logprobs-decode-guard=absent" in out


def test_install_applies_installs_and_passes_the_build_gates(lifecycle):
    copy, site, runs = lifecycle
    rc, out = runs["install"]
    assert rc == 0, out
    assert "vllm-gaudi: ABSENT" in out and "(--target vllm)" in out  # said plainly
    assert "OK: 6 applied" in out  # 4 default fixes and the recipe's 2 opt-in fixes
    assert (copy / ".fixpack" / "vllm.manifest.json").is_file()
    assert list(site.glob("muse_spark_open-*.dist-info"))
    assert "step 4/5: kernels" in out and ("NO TOOLCHAIN" in out or "no build entry" in out)
    assert "build gates: 8/8 passed" in out and out.rstrip().endswith("install.sh: done")


def test_check_passes_against_the_stand_in(lifecycle):
    rc, out = lifecycle[2]["check"]
    assert rc == 0, out
    assert "every fix of the profile" in out and "build gates: 8/8 passed" in out and "(--check)" in out
    assert "kernels (skipped: --check)" in out


def test_dry_run_against_the_stand_in_itself(tmp_path):
    """The shared stand-in, found in the running Python: a dry run writes nothing to it."""
    rc, out = install("--dry-run", "--plugin-site", str(tmp_path / "site"), "--skip-kernels")
    assert rc == 0, out
    assert "apply profile v0.30.0 (dry run)" in out and "nothing written" in out and "vllm-gaudi: ABSENT" in out


def test_a_pin_mismatch_stops_at_step_one(release_vllm, tmp_path):
    bad = tmp_path / "bad" / "vllm"
    bad.mkdir(parents=True)
    text = (release_vllm / "_version.py").read_text().replace("gced6857af", "g0123456789")
    (bad / "_version.py").write_text(text)
    rc, out = install("--dry-run", "--root", f"vllm={bad.parent}")
    assert rc == 11 and "vllm does not match profile v0.30.0" in out and "step 2/5" not in out


def test_bad_arguments():
    rc, out = install("--frobnicate")
    assert rc == 10 and "unknown argument: --frobnicate" in out
    # an option's value missing: the next option is not taken as it (it said "unknown argument: vllm=x")
    rc, out = install("--profile", "--root", "vllm=x")
    assert rc == 10 and "--profile needs a name (got the option '--root'; put the value after --profile)" in out
    rc, out = install("--sbom")
    assert rc == 10 and "--sbom needs a file" in out and "unbound" not in out



def test_another_profile_is_checked_and_the_fitting_one_named():
    """--profile picks the fix pack's profile; on the 0.30.0 stand-in v0.31.0's pin does not match, and the
    refusal names the profile that pins this image's release."""
    rc, out = install("--profile", "v0.31.0", "--dry-run", "--skip-kernels")
    assert rc == 11 and "vllm does not match profile v0.31.0" in out, out
    assert "Profile v0.30.0 pins this release: --profile v0.30.0." in out and "step 2/5" not in out


def test_an_unknown_profile_is_a_bad_argument():
    rc, out = install("--profile", "v9.9.9")
    assert rc == 10 and "unknown profile 'v9.9.9'" in out and "(profiles: v0.30.0 v0.31.0" in out
    for path in ("../profiles/v0.30.0", ""):  # a path (though the file is there), or nothing
        rc, out = install(f"--profile={path}")
        assert rc == 10 and f"--profile takes a profile's name, not a path: '{path}'" in out, out
