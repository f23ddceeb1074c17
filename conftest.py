"""Collection across the repository: a test module of the port or the kernels that needs a package the
light environment does not hold (torch, transformers, triton, vLLM) is reported as skipped, with the
package named, instead of failing collection; any other import error still fails."""

from __future__ import annotations

import re
from typing import Any

import pytest

OPTIONAL = {"torch", "transformers", "triton", "vllm", "tokenizers", "numpy"}


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and isinstance(collector, pytest.Module):
        found = re.search(r"No module named '([\w.]+)'", str(rep.longrepr))
        if found and found.group(1).split(".")[0] in OPTIONAL:
            rep.outcome = "skipped"
            rep.longrepr = (str(collector.path), 0, f"Skipped: needs {found.group(1)}, which this environment lacks "
                                                    f"(bash tools/setup.sh installs the full one)")


# Parallel runs (pytest-xdist, --dist loadgroup): a proof patches its stand-in image's installed vLLM in place
# for the run (fixpack.prove), so every test that imports or runs the same installed vLLM goes to the same
# worker as that proof, one after another. The port's and the kernels' tests import vLLM from .venv, the
# image of profile v0.30.0; the port's release tests run on the image of their vLLM version.
_IMAGE_PROOF = re.compile(r"test_each_fix_proven_on_the_image\[(v[\d.]+)\]")
_PORT_ON_RELEASE = re.compile(r"test_port_tests_pass_on_the_release\[([\d.]+)\]")


def image_group(nodeid: str) -> str | None:
    """The stand-in image a test reads or patches (``image-vX.Y.Z``), or None for a test that uses none."""
    if found := _IMAGE_PROOF.search(nodeid):
        return f"image-{found.group(1)}"
    if found := _PORT_ON_RELEASE.search(nodeid):
        return f"image-v{found.group(1)}"
    if nodeid.startswith(("ports/", "kernels/")):
        return "image-v0.30.0"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = image_group(item.nodeid)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
