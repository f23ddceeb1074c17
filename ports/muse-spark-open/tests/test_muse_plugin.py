"""The plugin package: pip installs it, vLLM finds its entry point and registers the port."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import importlib.metadata as md
import json
import shutil
import subprocess
import sys

import pytest
from packaging.version import Version

pytest.importorskip("vllm")

from muse_testutil import PORT, subprocess_env  # noqa: E402

CHECK = r"""
import importlib.metadata as md, json, logging, os
eps = [(e.name, e.value) for e in md.entry_points(group="vllm.general_plugins")]
if os.environ.get("MUSE_TEST_PLATFORM") == "cuda":  # play a CUDA machine: upstream's model runs there
    from vllm.platforms import current_platform
    current_platform.__class__ = type("PlayedCuda", (type(current_platform),), {"is_cuda": lambda self: True})
from vllm.plugins import load_general_plugins  # configures vLLM's logging first, as in a server
logs = []
handler = logging.Handler()
handler.emit = lambda record: logs.append(record.getMessage())
logging.getLogger("vllm.muse_spark_open").addHandler(handler)
logging.getLogger("vllm.muse_spark_open").setLevel(logging.INFO)
load_general_plugins()
from vllm.model_executor.models import ModelRegistry
from vllm.model_executor.models.config import MODELS_CONFIG_MAP
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.transformers_utils.config import _CONFIG_REGISTRY
import muse_spark_open.plugin as plugin
plugin.register(); plugin.register()  # vLLM may load a plugin more than once a process
def model(arch):
    entry = ModelRegistry.models.get(arch)
    return getattr(entry, "module_name", None) or (entry and entry.model_cls.__module__)
def parser(manager, name):
    return manager.lazy_parsers[name][0] if name in manager.lazy_parsers else None
print("RESULT " + json.dumps({
    "eps": eps,
    "arch": model("MuseSparkForConditionalGeneration"),
    "hook": MODELS_CONFIG_MAP["MuseSparkForConditionalGeneration"].__module__
            if "MuseSparkForConditionalGeneration" in MODELS_CONFIG_MAP else None,
    "config": _CONFIG_REGISTRY["muse_spark"].__module__,
    "text_config": _CONFIG_REGISTRY["muse_spark_text"].__module__,
    "reasoning": parser(ReasoningParserManager, "muse"),
    "tool": parser(ToolParserManager, "muse"),
    "alias": [parser(ReasoningParserManager, "musespark1x"), parser(ToolParserManager, "musespark1x")],
    "drafter": [model("MuseSparkDSparkModel"), _CONFIG_REGISTRY["muse_spark_dspark"].__module__
                if "muse_spark_dspark" in _CONFIG_REGISTRY else None],
    "glimmer_untouched": ToolParserManager.get_tool_parser("muse_glimmer").__module__,
    "plugin_file": plugin.__file__,
    "logs": [m for m in logs if "Muse Spark port on this vLLM" in m],
}))
if not os.environ.get("MUSE_TEST_PLATFORM"):  # install.sh's build gates, in the same process (one vLLM start)
    import contextlib, io
    from muse_spark_open import buildcheck
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = buildcheck.run(json_out=True)
    print("GATES " + json.dumps({"rc": rc, "gates": json.loads(out.getvalue())}))
"""

# vLLM 0.33.0 ships Muse Spark (a release fact, read from the distribution's version: the plugin itself
# decides by what vLLM registers)
UPSTREAM_SHIPS = Version(md.version("vllm")) >= Version("0.33.0")


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


def check(site, **env) -> dict:
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300, cwd=str(site),
                       env=subprocess_env(PYTHONPATH=str(site), **env))
    found = {ln.split(" ", 1)[0]: json.loads(ln.split(" ", 1)[1]) for ln in r.stdout.splitlines()
             if ln.startswith(("RESULT ", "GATES "))}
    assert "RESULT" in found, r.stderr[-3000:]
    return {**found["RESULT"], "build": found.get("GATES")}


@pytest.fixture(scope="module")
def here(site) -> dict:
    """The registries and build gates after vLLM's plugin loader, on this machine (no CUDA, no ROCm)."""
    return check(site)


PORT_PARSERS = ["muse_spark_open.parsers.reasoning", "muse_spark_open.parsers.tool"]
UPSTREAM_PARSERS = ["vllm.reasoning.muse_reasoning_parser", "vllm.tool_parsers.muse_tool_parser"]


def test_entry_point_registers_what_the_port_serves_here(site, here):
    """Without CUDA or ROCm (CPU here, HPU on Gaudi) the port's model and configs are registered, over vLLM's own
    on 0.33.0; the parsers are the port's only where vLLM has none; the drafter is never touched."""
    got = here
    assert ("muse_spark", "muse_spark_open.plugin:register") in [tuple(e) for e in got["eps"]]
    assert got["arch"] == "muse_spark_open.model"
    assert got["hook"] == "muse_spark_open.guard"
    assert (got["config"], got["text_config"]) == ("muse_spark_open.config", "muse_spark_open.config")
    assert [got["reasoning"], got["tool"]] == (UPSTREAM_PARSERS if UPSTREAM_SHIPS else PORT_PARSERS)
    assert got["alias"] == (UPSTREAM_PARSERS if UPSTREAM_SHIPS else [None, None])  # the port adds no alias
    assert got["drafter"] == (["vllm.models.muse_spark.common.dspark", "vllm.transformers_utils.configs.muse_spark"]
                              if UPSTREAM_SHIPS else [None, None])
    assert got["glimmer_untouched"] == "vllm.tool_parsers.muse_glimmer_tool_parser"
    assert got["plugin_file"].startswith(str(site))  # the installed copy, not the source tree
    assert len(got["logs"]) == 1, got["logs"]  # vLLM's loader and two more calls: the choice is logged once
    assert ("model and configs: port" in got["logs"][0]
            and ("no path on platform" if UPSTREAM_SHIPS else "registers no MuseSpark") in got["logs"][0])


def test_on_cuda_the_port_steps_aside_where_vllm_ships_muse_spark(site):
    """On a CUDA machine with vLLM 0.33.0 the plugin registers nothing of its own: vLLM's model, configs and
    parsers are used. Before 0.33.0 it registers the port there too (vLLM has none)."""
    got = check(site, MUSE_TEST_PLATFORM="cuda")
    if UPSTREAM_SHIPS:
        assert got["arch"] == "vllm.models.muse_spark" and got["hook"] is None
        assert (got["config"], got["text_config"]) == ("vllm.transformers_utils.configs.muse_spark",) * 2
        assert [got["reasoning"], got["tool"]] == UPSTREAM_PARSERS
        assert "model and configs: upstream (vLLM's own vllm.models.muse_spark runs on cuda)" in got["logs"][0]
    else:
        assert (got["arch"], got["hook"], got["config"]) == ("muse_spark_open.model", "muse_spark_open.guard",
                                                              "muse_spark_open.config")
        assert [got["reasoning"], got["tool"]] == PORT_PARSERS


def test_build_gates_pass_on_this_vllm(here):
    """install.sh's step 5 on this release: the supported-release gate, the registration as chosen, the parsers."""
    build = here["build"]
    gates = {g["gate"]: g for g in build["gates"]}
    assert build["rc"] == 0 and all(g["ok"] for g in gates.values()), gates
    assert f"vLLM {md.version('vllm')}" in gates["vllm"]["detail"]


def test_the_build_gate_refuses_a_release_the_port_is_not_tested_on(monkeypatch):
    import vllm

    from muse_spark_open import buildcheck

    monkeypatch.setattr(vllm, "__version__", "0.34.0", raising=False)
    with pytest.raises(AssertionError, match=r"vLLM 0.34.0: the port supports vLLM 0.30.0, 0.31.0, 0.32.0, 0.33.0"):
        buildcheck.gate_vllm()
    monkeypatch.setattr(vllm, "__version__", "0.33.0+cpu")
    assert buildcheck.gate_vllm().startswith("vLLM 0.33.0+cpu at ")


@pytest.mark.parametrize("facts, want", [
    ((None, "hpu", False, False), ("port", "port", "port")),        # 0.30.0-0.32.0 on Gaudi
    ((None, "cuda", False, False), ("port", "port", "port")),       # 0.30.0-0.32.0 anywhere
    (("vllm.models.muse_spark", "hpu", True, True), ("port", "upstream", "upstream")),     # 0.33.0 on Gaudi
    (("vllm.models.muse_spark", "", True, True), ("port", "upstream", "upstream")),        # 0.33.0, CPU stand-in
    (("vllm.models.muse_spark", "cuda", True, True), ("upstream", "upstream", "upstream")),
    (("vllm.models.muse_spark", "rocm", True, True), ("upstream", "upstream", "upstream")),
    ((None, "hpu", True, False), ("port", "upstream", "port")),     # each parser on its own
])
def test_the_rule(facts, want):
    from muse_spark_open import upstream

    c = upstream.choose(*facts)
    assert (c.model, c.reasoning_parser, c.tool_parser) == want
    if facts[0] and want[0] == "port":
        assert f"no path on platform {facts[1] or 'unspecified'!r}" in c.why_model


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
