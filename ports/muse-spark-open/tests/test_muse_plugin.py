"""The plugin package: pip installs it, vLLM finds its entry point and registers the port."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import shutil
import subprocess
import sys

import pytest

pytest.importorskip("vllm")

from muse_testutil import PORT, subprocess_env  # noqa: E402

CHECK = r"""
import importlib.metadata as md, json
eps = [(e.name, e.value) for e in md.entry_points(group="vllm.general_plugins")]
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.model_executor.models import ModelRegistry
from vllm.model_executor.models.config import MODELS_CONFIG_MAP
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.transformers_utils.config import _CONFIG_REGISTRY
import muse_spark_open.plugin as plugin
plugin.register(); plugin.register()  # vLLM may load a plugin more than once a process
print("RESULT " + json.dumps({
    "eps": eps,
    "arch": "MuseSparkForConditionalGeneration" in ModelRegistry.get_supported_archs(),
    "hook": "MuseSparkForConditionalGeneration" in MODELS_CONFIG_MAP,
    "config": _CONFIG_REGISTRY["muse_spark"].__module__,
    "reasoning": ReasoningParserManager.get_reasoning_parser("muse").__name__,
    "tool": ToolParserManager.get_tool_parser("muse").__name__,
    "glimmer_untouched": ToolParserManager.get_tool_parser("muse_glimmer").__module__,
    "plugin_file": plugin.__file__,
}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("setuptools", reason="pip builds the plugin with the Python's own setuptools")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "muse_spark_open"):
        (shutil.copytree if (PORT / name).is_dir() else shutil.copy)(PORT / name, src / name)
    target = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-input",
                        "--disable-pip-version-check", "-q", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return target


def run(site, **env):
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300, cwd=str(site),
                       env=subprocess_env(PYTHONPATH=str(site), **env))
    return r


def test_entry_point_registers_architecture_config_and_parsers(site):
    import json

    r = run(site)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, r.stderr[-3000:]
    got = json.loads(line[7:])
    assert ("muse_spark", "muse_spark_open.plugin:register") in [tuple(e) for e in got["eps"]]
    assert got["arch"] and got["hook"]
    assert got["config"] == "muse_spark_open.config"
    assert (got["reasoning"], got["tool"]) == ("MuseReasoningParser", "MuseToolParser")
    assert got["glimmer_untouched"] == "vllm.tool_parsers.muse_glimmer_tool_parser"
    assert got["plugin_file"].startswith(str(site))  # the installed copy, not the source tree


def test_a_bad_switch_stops_the_plugin_naming_the_variable(monkeypatch):
    """vLLM calls the entry point without catching (vllm/plugins/__init__.py), so this stops the server."""
    from muse_spark_open import env, plugin

    monkeypatch.setenv("MUSE_SPARK_MXFP4_KERNELS", "fast")
    with pytest.raises(env.SwitchError, match="MUSE_SPARK_MXFP4_KERNELS='fast' is not valid"):
        plugin.register()


def test_entry_point_gate_says_when_the_plugin_is_not_installed(monkeypatch):
    import importlib.metadata

    from muse_spark_open import buildcheck

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    with pytest.raises(AssertionError, match="plugin is not installed"):
        buildcheck.gate_entry_point()
