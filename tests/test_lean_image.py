"""The lean image path (issue #13): an environment holding only the image's dependencies (setup.cfg's
install_requires: unidiff, click; tomli on 3.10; no fixpack install, no maintainer extra) applies profile
v0.30.0 with both opt-ins to a scratch copy of the real vLLM 0.30.0 release through ``fixes/apply_all.py``,
re-applies writing nothing, shows ``status`` and reverts to the release's bytes, and no process of it ever
imports (or tries to import) a maintainer library.

The environment is built once per test session by tools/lean-venv.sh into $FIXPACK_TEST_CACHE (kept between
sessions, keyed by Python version and requirements; pip's cache beside it), so the test needs the package
registry only the first time. Marked ``release`` like the other tests on the release copy.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, snapshot

from fixpack import release
from fixpack.loader import load_pack, load_profile

pytestmark = pytest.mark.release

PROFILE = "v0.30.0"
MAINTAINER = ("git", "rich", "pypi_simple", "tomlkit", "packaging")
# and standard-library modules that cost more than a small run: dataclasses brings inspect, ast, dis and
# tokenize (the engine's records are fixpack.structs), shutil brings bz2, lzma and zlib; issue #13
FORBIDDEN = (*MAINTAINER, "dataclasses", "inspect", "ast", "shutil")  # shutil brings bz2, lzma and zlib

# Runs a command as `python SCRIPT ARGS` or `python -m MODULE ARGS` would, records every attempt to import a
# forbidden library (even one that fails: the lean venv has none of them) and, at the end, every module
# loaded; writes both as JSON to argv[1]. Imports nothing beyond what the interpreter starts with.
WRAPPER = r"""
import sys, runpy
FORBIDDEN = set(sys.argv[2].split(","))
attempts = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            attempts.append(name)
        return None
sys.meta_path.insert(0, Spy())
out, mode, what, args = sys.argv[1], sys.argv[3], sys.argv[4], sys.argv[5:]
code = 0
try:
    if mode == "-m":
        sys.path.insert(0, "")  # as `python -m` from the working folder does
        sys.argv = [what, *args]
        runpy.run_module(what, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [what, *args]
        runpy.run_path(what, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
finally:
    mods = sorted(sys.modules)
    sys.stdout.flush()
    import json
    with open(out, "w") as fh:
        json.dump({"modules": mods, "attempts": attempts}, fh)
sys.exit(code)
"""


def requirements() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return [line.strip() for line in cfg["options"]["install_requires"].splitlines() if line.strip()]


def cache_dir() -> Path:
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to fetch the release copy and keep the lean venv")
    return Path(cache)


def clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH (the entry must find its own checkout), no user site, nothing from the test's venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    env.update(PYTHONNOUSERSITE="1", **extra)
    return env


@pytest.fixture(scope="session")
def lean_python() -> Path:
    """The lean venv's python, built once (tools/lean-venv.sh) and cached under $FIXPACK_TEST_CACHE."""
    cache = cache_dir()
    base = Path(getattr(sys, "_base_executable", sys.executable))
    key = hashlib.sha256("\n".join([sys.version, *requirements()]).encode()).hexdigest()[:12]
    venv = cache / "lean-venv" / f"py{sys.version_info[0]}.{sys.version_info[1]}-{key}"
    res = subprocess.run(["bash", str(REPO / "tools" / "lean-venv.sh"), str(venv)], capture_output=True, text=True,
                         env=clean_env(PYTHON=str(base), PIP_CACHE_DIR=str(cache / "pip")))
    assert res.returncode == 0, f"tools/lean-venv.sh failed:\n{res.stdout}\n{res.stderr}"
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def release_vllm() -> Path:
    cache = cache_dir()
    spec = load_profile(load_pack(REPO), PROFILE).target("vllm")
    return release.fetch(spec, cache).root


def test_lean_venv_holds_only_the_image_dependencies(lean_python):
    """The premise of the test below: none of the maintainer libraries can be imported there."""
    names = [r.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in requirements()]
    assert {"unidiff", "click"} <= set(names) and not {"rich", "gitpython", "pypi-simple", "tomlkit",
                                                         "packaging"} & set(names), names
    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    res = subprocess.run([str(lean_python), "-c", probe, *MAINTAINER, "fixpack", "unidiff", "click"],
                         capture_output=True, text=True, cwd="/", env=clean_env())
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.replace("'", '"')) == ["unidiff", "click"]


def run_lean(python: Path, tmp: Path, name: str, mode: str, what: str, *args: str) -> tuple[int, str, str, dict]:
    """(exit code, stdout, stderr, {modules, attempts}) of one process of the lean venv, from the checkout."""
    out = tmp / f"{name}.json"
    wrapper = tmp / "lean_wrapper.py"
    wrapper.write_text(WRAPPER)
    res = subprocess.run([str(python), str(wrapper), str(out), ",".join(FORBIDDEN), mode, what, *args],
                         cwd=REPO, capture_output=True, text=True, env=clean_env(), timeout=120)
    report = json.loads(out.read_text()) if out.exists() else {"modules": [], "attempts": []}
    return res.returncode, res.stdout, res.stderr, report


def test_lean_apply_reapply_status_revert(lean_python, release_vllm, tmp_path):
    copy = tmp_path / "vllm-release"
    shutil.copytree(release_vllm / "vllm", copy / "vllm")
    clean = snapshot(copy)
    prof = load_profile(load_pack(REPO), PROFILE)
    assert prof.opt_in, "profile v0.30.0 has no opt-in fixes"
    fixes = [*prof.default, *prof.opt_in]
    entry = str(REPO / "fixes" / "apply_all.py")
    sel = ["--profile", PROFILE, "--root", f"vllm={copy}", "--target", "vllm"]
    runs = {}

    # the image build: plain lines on a pipe
    rc, out, err, runs["apply"] = run_lean(lean_python, tmp_path, "apply", "script", entry, *sel, *prof.opt_in)
    assert rc == 0, out + err
    assert f"OK: {len(fixes)} applied" in out, out + err
    applied = snapshot(copy)
    assert applied != clean

    rc, out, err, runs["reapply"] = run_lean(lean_python, tmp_path, "reapply", "script", entry, *sel,
                                             *prof.opt_in, "--json")
    assert rc == 0, out + err
    rep = json.loads(out)
    assert [(f["id"], f["state"], f["action"]) for f in rep["fixes"]] == [(f, "applied", "none") for f in fixes], rep
    assert snapshot(copy) == applied, "the second run wrote something"

    rc, out, err, runs["status"] = run_lean(lean_python, tmp_path, "status", "-m", "fixpack.cli", "status", *sel,
                                            "--json")
    assert rc == 0, out + err
    rep = json.loads(out)
    # status lists every fix and component of the profile; the components were not selected (not installed):
    # skipped, as apply would leave them
    assert {f["id"]: f["state"] for f in rep["fixes"] if f.get("kind", "fix") == "fix"} == dict.fromkeys(fixes, "applied"), rep
    assert {(f["state"], f["selected"]) for f in rep["fixes"] if f.get("kind") == "component"} <= {("skipped", False)}, rep
    assert snapshot(copy) == applied, "status wrote something"

    rc, out, err, runs["revert"] = run_lean(lean_python, tmp_path, "revert", "-m", "fixpack.cli", "revert", *sel,
                                            "--json")
    assert rc == 0, out + err
    assert sorted(f["id"] for f in json.loads(out)["fixes"] if f["action"] == "reverted") == sorted(fixes), out
    assert snapshot(copy) == clean, "revert did not restore the release's bytes"
    assert not (copy / ".fixpack").exists()

    # the lock vouches for the pack's patch bytes, and the manifest, files and lock agree: nothing parsed
    assert not {"unidiff", "fixpack.diff"} & set(runs["status"]["modules"]), runs["status"]["modules"]
    # a run whose lock is fine renders no command to regenerate it (that looks up the program on PATH)
    assert not any("fixpack.progname" in mods["modules"] for mods in runs.values())
    for name, mods in runs.items():
        assert "fixpack.engine" in mods["modules"], f"{name}: the wrapper did not see the run"
        loaded = sorted(m for m in mods["modules"] if m.split(".")[0] in FORBIDDEN)
        assert not loaded and not mods["attempts"], (
            f"{name} imported or tried to import maintainer libraries or costly modules: loaded {loaded}, attempted {mods['attempts']}")


def test_port_install_script_runs_on_the_image_dependencies(lean_python, release_vllm, tmp_path):
    """ports/muse-spark-open/install.sh asks of the image's Python only what status and apply_all.py import:
    with the lean venv its environment step passes and it goes on to check the image (a clean release copy:
    the profile is not applied, which ``--check`` says, exit 15), rather than asking for GitPython and rich."""
    copy = tmp_path / "vllm-release"
    shutil.copytree(release_vllm / "vllm", copy / "vllm")
    res = subprocess.run(["bash", str(REPO / "ports" / "muse-spark-open" / "install.sh"), "--python", str(lean_python),
                          "--root", f"vllm={copy}", "--check", "--plugin-site", str(tmp_path / "site")],
                         capture_output=True, text=True, env=clean_env(), timeout=300)
    assert "lacks the fix pack's dependencies" not in res.stderr, res.stderr
    assert "step 1/5" in res.stdout and "vllm 0.30.0" in res.stdout, res.stdout + res.stderr
    assert res.returncode == 15 and "is not in the profile's state" in res.stderr, res.stdout + res.stderr


def test_lean_entry_refuses_a_closed_stdout(lean_python, release_vllm, tmp_path):
    """The image's entry in the lean venv with stdout closed (`>&-`) wrote the image, then died on a None
    sys.stdout with exit 1 (exit 0 and the report lost with --json): it refuses first, exit 5, one line on
    stderr, the release copy byte-identical; a closed stderr as well is exit 5 too."""
    import shlex

    copy = tmp_path / "vllm-release"
    shutil.copytree(release_vllm / "vllm", copy / "vllm")
    clean = snapshot(copy)
    sel = ["--profile", PROFILE, "--root", f"vllm={copy}", "--target", "vllm"]
    for extra, tail in (([], ">&-"), (["--json"], ">&-"), ([], ">&- 2>&-")):
        cmd = shlex.join([str(lean_python), str(REPO / "fixes" / "apply_all.py"), *sel, *extra])
        res = subprocess.run(["bash", "-c", f"{cmd} {tail}"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                             env=clean_env(), timeout=120)
        assert res.returncode == 5 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr == "" if "2>&-" in tail else "stdout is closed" in res.stderr, res.stderr
        assert snapshot(copy) == clean
