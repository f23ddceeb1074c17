"""tools/demo.sh and tools/setup.sh under careless use: options, bad folders, two runs at once.

The scripts run in a stand-in checkout (a copy of the two scripts; a .venv/bin/python that plays fetch and
apply_all.py, or pip, and logs what it was asked), so nothing here sets up a real environment or fetches."""

import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import REPO

STUB_PYTHON = r"""#!/usr/bin/env bash
# stand-in for .venv/bin/python: fetch prints the release copy, apply_all.py succeeds (its Nth run fails with exit
# N + 2 when $STUB_APPLY_FAILS lists N), pip is slow
here=$(cd "$(dirname "$0")/../.." && pwd)
case "$*" in
  *"fixpack.cli fetch"*) [ -n "${STUB_FETCH_FAILS:-}" ] && { echo "fetch failed" >&2; exit 4; }
                         echo "vllm=$here/release" ;;
  *"-m pip install"*) echo "start $$" >>"$here/pip.log"; sleep 1.5; echo "end $$" >>"$here/pip.log" ;;
  "-I - "*) cat >/dev/null; exit "${STUB_NOT_READY:-0}" ;;  # (setup.sh's check of the install and its requirements)
  *--version*) echo "Python 3.x" ;;
  *apply_all.py*) n=$(( $(cat "$here/apply.count" 2>/dev/null || echo 0) + 1 )); echo "$n" >"$here/apply.count"
                  echo "apply run $n"
                  case " ${STUB_APPLY_FAILS:-} " in *" $n "*) echo "apply run $n refused" >&2; exit $((n + 2)) ;; esac ;;
  *) : ;;
esac
"""


def _checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    for name in ("demo.sh", "setup.sh"):
        shutil.copy2(REPO / "tools" / name, repo / "tools" / name)
    (repo / ".venv" / "bin").mkdir(parents=True)
    stub = repo / ".venv" / "bin" / "python"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    (repo / "release" / "vllm").mkdir(parents=True)
    (repo / "release" / "vllm" / "__init__.py").write_text("# the release\n")
    (repo / "setup.cfg").write_text("[metadata]\nname = vllm-gaudi-fixpack\n")
    (repo / "pyproject.toml").write_text("[build-system]\n")
    (repo / "fixpack").mkdir()
    (repo / "fixpack" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    return repo


def _demo(repo: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    run_env = {**os.environ, **(env or {})}
    return subprocess.run(["bash", str(repo / "tools" / "demo.sh"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env=run_env)


def test_demo_help_and_bad_arguments_touch_nothing(tmp_path):
    repo = _checkout(tmp_path)
    for flag in ("--help", "-h"):
        r = _demo(repo, flag, cwd=tmp_path)
        assert r.returncode == 0 and "Usage: bash tools/demo.sh [DIR]" in r.stdout, r.stderr
        assert "of two runs given one folder the second is refused" in r.stdout
    r = _demo(repo, "-x", cwd=tmp_path)
    assert r.returncode == 2 and "unknown option '-x'" in r.stderr and "./-x" in r.stderr
    r = _demo(repo, "a", "b", cwd=tmp_path)
    assert r.returncode == 2 and "one folder at most" in r.stderr
    r = _demo(repo, "", cwd=tmp_path)
    assert r.returncode == 2 and "an empty folder name" in r.stderr
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    r = _demo(repo, "dangling", cwd=tmp_path)
    assert r.returncode == 2 and "is a link to nothing" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "repo"]
    assert not (repo / "pip.log").exists(), "setup ran before the arguments were checked"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permissions")
def test_demo_refuses_an_unwritable_folder_before_setup(tmp_path):
    repo = _checkout(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        for given in ("locked", "locked/new"):
            r = _demo(repo, given, cwd=tmp_path)
            assert r.returncode == 2 and "give another folder" in r.stderr, r.stderr
            assert not (repo / "pip.log").exists()
    finally:
        locked.chmod(0o755)
    assert list(locked.iterdir()) == []


def test_two_demos_given_one_new_folder(tmp_path):
    """Both passed the 'empty' check and the second copy nested inside the first: now the folder is claimed
    (an atomic mkdir of its vllm-0.30.0) before setup, so exactly one run copies and the other is refused."""
    repo = _checkout(tmp_path)
    results: list[subprocess.CompletedProcess[str]] = []
    runs = [threading.Thread(target=lambda: results.append(_demo(repo, "shared", cwd=tmp_path))) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    codes = sorted(r.returncode for r in results)
    assert codes == [0, 2], [(r.returncode, r.stderr) for r in results]
    refused = next(r for r in results if r.returncode == 2)
    assert "is being used by another run" in refused.stderr, refused.stderr  # (a fresh user: "not an empty folder")
    copy = tmp_path / "shared" / "vllm-0.30.0"
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == ["vllm", "vllm/__init__.py"]


def test_a_failed_demo_leaves_no_scratch_folder(tmp_path):
    repo = _checkout(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    r = _demo(repo, cwd=tmp_path, env={"STUB_FETCH_FAILS": "1", "TMPDIR": str(temp)})
    assert r.returncode != 0 and "fetch failed" in r.stderr
    assert list(temp.iterdir()) == []
    r = _demo(repo, "new/dir", cwd=tmp_path, env={"STUB_FETCH_FAILS": "1"})
    assert r.returncode != 0 and not (tmp_path / "new" / "dir").exists()
    (tmp_path / "empty").mkdir()
    r = _demo(repo, "empty", cwd=tmp_path, env={"STUB_FETCH_FAILS": "1"})
    assert r.returncode != 0 and (tmp_path / "empty").is_dir() and list((tmp_path / "empty").iterdir()) == []


@pytest.mark.skipif(shutil.which("flock") is None, reason="no flock(1) here")
def test_two_setups_in_one_checkout_take_turns(tmp_path):
    """Two demos started at once on a new clone both ran pip into one .venv; setup.sh now holds a lock on the
    checkout for its whole run, so the two pip runs never overlap."""
    repo = _checkout(tmp_path)
    procs = [subprocess.Popen(["bash", str(repo / "tools" / "setup.sh"), "--light"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    log = (repo / "pip.log").read_text().split()
    events = [(log[i], log[i + 1]) for i in range(0, len(log), 2)]
    # (the second finds the install the first made: pip ran once, not twice into one .venv at the same time)
    assert [e[0] for e in events] == ["start", "end"] and events[0][1] == events[1][1], events
    assert any("another setup is running" in out for out, _ in outs)
    assert sum("holds this checkout's install already" in out for out, _ in outs) == 1, outs
    assert sorted(p.name for p in repo.iterdir()) == [".venv", "fixpack", "pip.log", "pyproject.toml", "release",
                                                      "setup.cfg", "tools"]


def test_setup_leaves_an_install_it_made_alone(tmp_path):
    """Found by a fresh user: every demo ran pip install -e again into a ready .venv (seconds of resolving, and
    the install pointed at whichever checkout ran it last). It runs again only when setup.cfg or pyproject.toml
    changed since, a requirement is missing or at a version they do not allow, or another checkout made it."""
    repo = _checkout(tmp_path)

    def setup(**env: str) -> int:
        before = (repo / "pip.log").read_text().count("start") if (repo / "pip.log").exists() else 0
        r = subprocess.run(["bash", str(repo / "tools" / "setup.sh"), "--light"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60, env={**os.environ, **env})
        assert r.returncode == 0, r.stderr
        ran = (repo / "pip.log").read_text().count("start") - before
        assert ("holds this checkout's install already" in r.stdout) == (ran == 0), r.stdout
        return ran

    assert [setup(), setup(), setup()] == [1, 0, 0]
    (repo / "setup.cfg").write_text((repo / "setup.cfg").read_text() + "version = 2\n")
    assert [setup(), setup()] == [1, 0]
    (repo / "fixpack" / "__init__.py").write_text('__version__ = "0.1.1"\n')  # (the version pip show says)
    assert [setup(), setup()] == [1, 0]
    # (a requirement uninstalled by hand, or the install pointed at another checkout since: the stand-in's check fails)
    assert [setup(STUB_NOT_READY="1"), setup()] == [1, 0]
    other = tmp_path / "other"
    shutil.copytree(repo, other, symlinks=True)  # (the same stamp file, in a checkout at another path)
    stamp = (other / ".venv" / ".fixpack-setup").read_text()
    assert str(repo) in stamp
    r = subprocess.run(["bash", str(other / "tools" / "setup.sh"), "--light"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "holds this checkout's install already" not in r.stdout, r.stdout
    assert str(other) in (other / ".venv" / ".fixpack-setup").read_text()


def test_the_printed_clean_up_command_is_quoted_and_comes_first(tmp_path):
    """The scratch folder is printed before setup and fetch, and its `rm -rf` runs as printed: a name with
    spaces is quoted (unquoted, copying it removed ./b and ./c), a link is followed to the folder it names."""
    repo = _checkout(tmp_path)
    (tmp_path / "real dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real dir")
    for given, folder in (("a b c", tmp_path / "a b c"), ("link", tmp_path / "real dir")):
        r = _demo(repo, given, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"== scratch folder: {folder} (remove it when done: rm -rf -- "), first
        command = first.split("remove it when done: ", 1)[1].rstrip(")")
        subprocess.run(["bash", "-c", command], cwd=tmp_path, check=True)
        assert not folder.exists()


@pytest.mark.parametrize("fails", ["1", "2", "1 2"])
def test_a_demo_whose_run_fails_exits_with_its_code_and_runs_no_second_after_a_failed_first(tmp_path, fails):
    """A fresh user: the demo exited with its second run's code only, so a refused first run could end in exit 0;
    and then it ran the second after a failed first (after a Ctrl-C too: the next test). A failed first run stops
    the demo with its code, saying so, the second not started; a failed second run stops it with its own."""
    repo = _checkout(tmp_path)
    r = _demo(repo, "scratch", cwd=tmp_path, env={"STUB_APPLY_FAILS": fails})
    if "1" in fails.split():
        assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
        assert "apply run 1\n" in r.stdout and "second run" not in r.stdout and "apply run 2" not in r.stdout, r.stdout
        assert "tools/demo.sh: the first run failed (exit 3; see its output above); the second run was not started" \
            in r.stderr, r.stderr
    else:
        assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
        assert "apply run 1\n== second run: the same command\napply run 2\n" in r.stdout, r.stdout
        assert "tools/demo.sh: the second run failed (exit 4; see its output above)" in r.stderr, r.stderr
    r = _demo(repo, "again", cwd=tmp_path)  # (the counter goes on: the next two runs pass)
    assert r.returncode == 0 and "failed" not in r.stderr, r.stderr


def _int_default() -> None:
    """The demo's SIGINT as a terminal's shell gives it: default. A test run started in the background (``cmd &``, as
    nohup runs are) has SIGINT ignored, which a child inherits and a non-interactive bash can then neither trap nor
    take: the stand-in's Ctrl-C would never arrive."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_demo_interrupted_in_its_first_run_stops_with_exit_5(tmp_path):
    """A fresh user pressed Ctrl-C in the first apply run: fixpack exits 5 when interrupted, bash went on (a child
    that handles SIGINT does not stop the script), and the second run started. The demo now stops there with exit 5,
    saying the first run failed and the second was not started. Ctrl-C as a terminal sends it: SIGINT to the
    demo's whole process group while the first run waits."""
    import signal
    import time

    repo = _checkout(tmp_path)
    stub = repo / ".venv" / "bin" / "python"
    stub.write_text(stub.read_text().replace(
        '  *apply_all.py*)',
        '  *apply_all.py*) [ -n "${STUB_APPLY_WAITS:-}" ] && [ ! -e "$here/apply.count" ] && {\n'
        '                    trap \'echo "apply interrupted"; exit 5\' INT; touch "$here/waiting"; sleep 30; }\n'
        '                 ;;&\n  *apply_all.py*)'))
    p = subprocess.Popen(["bash", str(repo / "tools" / "demo.sh"), "scratch"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "STUB_APPLY_WAITS": "1"},
                         start_new_session=True, preexec_fn=_int_default)
    try:
        for _ in range(300):
            if (repo / "waiting").exists() or p.poll() is not None:
                break
            time.sleep(0.1)
        assert (repo / "waiting").exists(), p.communicate(timeout=5)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 5, (p.returncode, out, err)
    assert "apply interrupted" in out and "second run" not in out, out
    assert not (repo / "apply.count").exists()  # (the stand-in counts a run that got past its wait: none did)
    assert "tools/demo.sh: the first run failed (exit 5: interrupted, or an environment problem; see its output " \
           "above); the second run was not started" in err, err


def test_setup_s_check_of_an_install_reads_the_real_one(tmp_path):
    """setup.sh's own check (its Python, run here against this environment): the editable install of the folder its
    direct_url.json names, with every requirement met, is ready; the same install asked for from another folder is
    not (pip would point it there)."""
    import json
    import re
    import sys
    from urllib.parse import unquote, urlsplit

    read = ("import importlib.metadata as md\ntry:\n    print(md.distribution('vllm-gaudi-fixpack').read_text("
            "'direct_url.json') or '{}')\nexcept md.PackageNotFoundError:\n    print('{}')")
    url = json.loads(subprocess.run([sys.executable, "-I", "-c", read], capture_output=True, text=True,
                                    timeout=60).stdout or "{}").get("url", "")  # (-I: as setup.sh reads it)
    if not url.startswith("file://"):
        pytest.skip("the project is not installed from a folder here")
    script = re.search(r"<<'PY'[^\n]*\n(.*?)\nPY\n", (REPO / "tools" / "setup.sh").read_text(), re.S).group(1)
    check = tmp_path / "check.py"
    check.write_text(script)
    here = unquote(urlsplit(url).path)
    for folder, code in ((here, 0), (str(tmp_path), 1)):
        r = subprocess.run([sys.executable, "-I", str(check), folder], capture_output=True, text=True, timeout=60)
        assert r.returncode == code, (folder, r.stderr)
