"""Shared by the tests: put kernels/mxfp4-moe on sys.path, run code under Triton's CPU interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PKG_ROOT = Path(__file__).resolve().parent.parent
if str(PKG_ROOT) not in sys.path:
    sys.path.insert(0, str(PKG_ROOT))


def has_module(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


def run_interpreted(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a Python script in a fresh process with TRITON_INTERPRET=1 (Triton kernels on the CPU).

    A separate process because Triton reads the variable when a kernel is defined, and vLLM decides at
    import whether Triton is usable."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(
        [str(PKG_ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
