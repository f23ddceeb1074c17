"""The port's vLLM-facing tests on the later vLLM releases it supports, each in its stand-in image.

tools/test.sh runs the port's tests in .venv (vLLM 0.30.0) and sets $FIXPACK_IMAGE_PYTHONS
("v0.30.0=/path/python v0.31.0=/path/python ...": a Python with each profile's vLLM). This module runs the
port's tests with each of those Pythons but the running one: on vLLM 0.33.0, which ships Muse Spark itself,
every test that touches vLLM (registration and build gates, parsers, config, the recipe's arguments, the
model built, loaded and compared with the reference); on 0.31.0 and 0.32.0 the registration and the build
gates (install.sh's step 5, a parser smoke test included). Skipped without the variable. 3 minutes on a
2-core machine (31 s each for 0.31.0 and 0.32.0, 125 s for 0.33.0: each release starts vLLM a few times).
"""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import os
import subprocess
import sys
from pathlib import Path

import pytest

from muse_testutil import PORT, REPO  # noqa: E402

pytestmark = pytest.mark.image  # needs the stand-in images (tools/image-venv.sh)
NEWEST = "0.33.0"  # ships Muse Spark upstream: the port's choice differs there, so all of it runs
EVERY = ["test_muse_plugin.py", "test_muse_parsers.py", "test_muse_config.py", "test_muse_recipe.py",
         "test_muse_model.py"]
REGISTRATION = ["test_muse_plugin.py", "-k", "not on_cuda"]  # before 0.33.0 a played CUDA changes nothing


def image_pythons() -> dict[str, str]:
    """vLLM version -> image Python, from $FIXPACK_IMAGE_PYTHONS (profile vX.Y.Z = vLLM X.Y.Z)."""
    pairs = (p.split("=", 1) for p in os.environ.get("FIXPACK_IMAGE_PYTHONS", "").split() if "=" in p)
    return {name.removeprefix("v"): python for name, python in pairs}


# a venv's python links to the base interpreter: the running one is told by its prefix, not by resolving links
OTHERS = {v: p for v, p in image_pythons().items() if Path(p).absolute().parent.parent != Path(sys.prefix).absolute()}


@pytest.mark.skipif(not OTHERS, reason="no other image Python in $FIXPACK_IMAGE_PYTHONS (tools/test.sh sets it)")
@pytest.mark.parametrize("version", sorted(OTHERS))
def test_port_tests_pass_on_the_release(version):
    files = EVERY if version == NEWEST else REGISTRATION
    env = {k: v for k, v in os.environ.items() if k != "FIXPACK_IMAGE_PYTHONS"}
    r = subprocess.run([OTHERS[version], "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        *(str(PORT / "tests" / f) if f.endswith(".py") else f for f in files)],
                       capture_output=True, text=True, timeout=900, cwd=str(REPO), env=env)
    tail = (r.stdout + r.stderr)[-4000:]
    assert r.returncode == 0, f"the port's tests on vLLM {version} ({OTHERS[version]}):\n{tail}"
    assert " passed" in tail and " skipped" not in tail.splitlines()[-1], tail  # nothing skipped: vLLM is there
