"""The README runs as written: every ```bash block is either run here (marked ``<!-- readme-test: run -->``)
or marked ``<!-- readme-test: skip (reason) -->`` with its reason, so that no command block escapes.
The run blocks go through bash on the release copy of vLLM 0.30.0 (cached; ``release`` marker), with
the checkout's .venv, as a user who followed ``bash tools/setup.sh --light`` would run them."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

README = REPO / "README.md"
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<mark>run|skip \([^)]*(?:\([^)]*\)[^)]*)*\)) -->\n)?```bash\n(?P<body>.*?)```",
                   re.S)
# the release copy cache: $FIXPACK_TEST_CACHE (tools/test.sh sets it to <cache home>/fixpack), else the
# machine's, read before the tests isolate $HOME and $XDG_CACHE_HOME
_CACHE = Path(os.environ.get("FIXPACK_TEST_CACHE") or
              Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fixpack")
CACHE_HOME = str(_CACHE.parent) if _CACHE.name == "fixpack" else str(_CACHE)


def blocks():
    return [(m["mark"] or "", m["body"]) for m in BLOCK.finditer(README.read_text())]


def test_every_bash_block_is_run_or_says_why_not():
    found = blocks()
    assert found, "no bash blocks in the README"
    unmarked = [body.splitlines()[0] for mark, body in found if not mark]
    assert not unmarked, f"README bash blocks with no readme-test mark: {unmarked}"
    assert any(mark == "run" for mark, _ in found)
    assert all(len(mark) > len("skip ()") + 10 for mark, _ in found if mark.startswith("skip")), "a skip needs a reason"


@pytest.mark.release
@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "fixpack").exists(), reason="no .venv (bash tools/setup.sh --light)")
@pytest.mark.parametrize("index", [i for i, (mark, _) in enumerate(blocks()) if mark == "run"])
def test_readme_block_runs_as_written(index, tmp_path):
    body = blocks()[index][1]
    env = {**os.environ, "TMPDIR": str(tmp_path), "XDG_CACHE_HOME": CACHE_HOME, "COLUMNS": "100"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("FIXPACK_PACK", None)
    # a block ends where it began, with no FIXPACK_PACK of its own, so that the next runs as written in the same shell
    # (a fresh user: the maintainers' block left the shell in its scratch pack, which the next block then patched)
    ends = 'printf "\\nREADME-BLOCK-END %s|%s\\n" "$PWD" "${FIXPACK_PACK-}"'
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{body}\n{ends}"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"README block {index} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr
    assert f"README-BLOCK-END {REPO}|" == r.stdout.rstrip().splitlines()[-1], r.stdout[-500:]


def test_tools_rebase_runs_from_a_python_without_the_libraries(tmp_path):
    """``python3 tools/rebase.py`` from a Python without unidiff runs again in .venv (or says how to make it)."""
    bare = sys.base_prefix + "/bin/python3"
    if not Path(bare).exists():
        pytest.skip("no base interpreter")
    r = subprocess.run([bare, "-I", str(REPO / "tools/rebase.py"), "--help"], capture_output=True, text=True, cwd=tmp_path)
    if (REPO / ".venv/bin/python").exists():
        assert r.returncode == 0 and "Usage: tools/rebase.py" in r.stdout, r.stderr
    else:
        assert r.returncode == 5 and "tools/setup.sh --light" in r.stderr


def test_scratch_folders_are_fresh_per_run():
    """Two users on one machine do not overwrite each other: tools/demo.sh and the README's runnable blocks make
    their scratch folder with mktemp -d (they used fixed ${TMPDIR:-/tmp}/fixpack-* paths after an rm -rf)."""
    scripts = {f"README block {i}": body for i, (mark, body) in enumerate(blocks()) if mark == "run"}
    scripts["tools/demo.sh"] = (REPO / "tools/demo.sh").read_text()
    for name, text in scripts.items():
        # the one removal allowed: demo.sh takes back the copy it claimed when it fails before the copy is done
        kept = text.replace("remove it when done: rm -rf", "").replace('rm -rf -- "$scratch/vllm-0.30.0"', "")
        assert "rm -rf" not in kept, name
        fixed = [m.start() for m in re.finditer(r"\$\{TMPDIR:-/tmp\}/", text)
                 if not text[:m.start()].endswith('mktemp -d "')]
        assert "mktemp -d" in text and not fixed, f"{name}: a scratch path not made by mktemp -d"


def test_demo_refuses_a_scratch_folder_that_is_not_empty(tmp_path):
    """`bash tools/demo.sh DIR` takes a new or empty folder: another one (someone's files, or another run's
    copy) is refused, exit 2, before anything is set up or fetched, and left as it was."""
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("someone's\n")
    (tmp_path / "a-file").write_text("x\n")
    for given in ("busy", "a-file"):
        r = subprocess.run(["bash", str(REPO / "tools/demo.sh"), given], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and f"{tmp_path / given} is not an empty folder" in r.stderr, r.stderr
        assert not r.stdout
    assert (tmp_path / "busy" / "keep.txt").read_text() == "someone's\n" and (tmp_path / "a-file").read_text() == "x\n"


def test_tools_rebase_without_its_libraries_or_a_venv_is_an_environment_error(tmp_path):
    """In a checkout without .venv, a Python lacking the libraries gets what to run, exit 5 (it was exit 1,
    which fixpack keeps for bugs)."""
    bare = sys.base_prefix + "/bin/python3"
    if not Path(bare).exists():
        pytest.skip("no base interpreter")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "rebase.py").write_text((REPO / "tools/rebase.py").read_text())
    r = subprocess.run([bare, "-I", str(tmp_path / "tools/rebase.py"), "--help"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 5 and "bash tools/setup.sh --light" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "fixpack").exists(), reason="no .venv (bash tools/setup.sh --light)")
def test_a_run_block_that_fails_part_way_stops_there(tmp_path):
    """A fresh user: the maintainers' block pasted into a shell without `set -e`, its fetch failing (no network, no
    cache), went on past the failed `fixpack edit` and `cd` into the user's checkout, where `git commit -qa --amend`
    took the user's uncommitted edit into HEAD and `git reset --hard HEAD~1` dropped it. Each run block stops at its
    first failing line: run with plain bash, in a clone with an uncommitted edit, the clone is as it was."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    (clone / ".venv").symlink_to(REPO / ".venv")
    (clone / "LICENSE").write_text((clone / "LICENSE").read_text() + "an edit of the user's own\n")

    def state() -> list[str]:
        return [subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True).stdout
                for args in (["rev-parse", "HEAD"], ["status", "--porcelain"], ["diff"], ["config", "--local", "-l"])]

    before = state()
    env = {**os.environ, "TMPDIR": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "empty-cache"),
           "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "PIP_NO_INDEX": "1"}
    for name in ("VIRTUAL_ENV", "FIXPACK_PACK", "FIXPACK_TEST_CACHE"):
        env.pop(name, None)
    failed = False
    for mark, body in blocks():
        if mark == "run":
            r = subprocess.run(["bash", "-c", body], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
            assert state() == before, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
            failed = failed or r.returncode != 0
    assert failed  # (the fetch failed: the case this is about was met)
