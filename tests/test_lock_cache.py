"""``lock`` takes ``--cache DIR`` as fetch, check, edit and rebase do (a fresh user: `lock --check --cache DIR` was a
usage error, and lock always fetched into $XDG_CACHE_HOME/fixpack or ~/.cache/fixpack): a target without --root is
taken from (or fetched into) that folder."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("FIXPACK_TEST_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fixpack")


def test_lock_check_takes_the_release_copy_from_cache_dir(tmp_path):
    if not (CACHE / "vllm-0.30.0" / ".fixpack-complete").is_file():
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to a cache holding the vLLM 0.30.0 release copy")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy":
           "http://127.0.0.1:9"}  # no index: the copy must come from --cache (this test's $HOME has none)
    cmd = [sys.executable, "-m", "fixpack.cli", "lock", "--profile", "v0.30.0", "--target", "vllm", "--check",
           "--pack", str(REPO)]
    r = subprocess.run([*cmd, "--cache", str(CACHE)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "lock is fresh" in r.stdout, (r.returncode, r.stdout, r.stderr)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)  # without: this $HOME's, empty
    assert r.returncode == 5 and "cannot read the index page of 'vllm'" in r.stderr, (r.returncode, r.stderr)
    # a stale lock: the command it names to regenerate it is given the copy taken from --cache, not the default
    # cache's (a second fresh user: it named none, and fetched into ~/.cache/fixpack as printed)
    pack = tmp_path / "pack"
    for part in ("fixes", "profiles", "ports", "kernels"):  # (the profile names the components there)
        shutil.copytree(REPO / part, pack / part, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    lock = pack / "profiles/v0.30.0.lock"
    text = lock.read_text()
    at = text.index('"pre": "') + len('"pre": "')
    lock.write_text(text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1:])  # one hex digit of a file's hash
    r = subprocess.run([*cmd[:-1], str(pack), "--cache", str(CACHE)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 2 and "regenerate it from clean release copies" in r.stderr, (r.returncode, r.stderr)
    assert f"--root vllm={CACHE / 'vllm-0.30.0'}" in r.stderr and "(it fetches them" not in r.stderr, r.stderr
