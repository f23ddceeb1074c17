"""Test helpers of the Muse Spark Open port: CPU only, offline, the port on sys.path.

Not a conftest.py: the checkout's tests/conftest.py is imported as `conftest` by its tests, and a
second top-level conftest module would shadow it when both folders are collected together. Test
modules import what they need from here (fixtures included) before importing the port."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PORT = Path(__file__).resolve().parent.parent
REPO = PORT.parent.parent
for p in (str(PORT), str(Path(__file__).resolve().parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_stray_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without MUSE_SPARK_* variables from the caller's shell."""
    for k in list(os.environ):
        if k.startswith("MUSE_SPARK_"):
            monkeypatch.delenv(k)


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from muse_spark_open.tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny-muse"), seed=0)


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUSE_SPARK_")}
    env.update(HF_HUB_OFFLINE="1", VLLM_TARGET_DEVICE="cpu", VLLM_LOGGING_LEVEL="WARNING")
    env.update(extra)
    return env
