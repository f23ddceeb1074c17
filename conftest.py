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
