"""Thin CLI checks: exit codes, JSON keys, plain output, the apply_all.py entries."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, numbered, snapshot

from fixpack.progname import program

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("opt", {MOD: base}, {MOD: base.replace("line 15\n", "fifteen\n")}, opt_in=True)
    builder.profile(["one"], ["opt"])
    builder.lock(clean)
    return builder, builder.tree("image", {MOD: base})


def run(*args, entry=("-m", "fixpack.cli")):
    return subprocess.run([sys.executable, *entry, *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize("entry", [("apply_all.py",), ("fixes/apply_all.py",)])
def test_apply_all_entries(setup, entry):
    b, target = setup
    args = ["--pack", str(b.pack), "--profile", "p1", "--root", f"demo={target}", "opt"]
    r = run(*args, entry=(str(REPO / entry[0]),))
    assert r.returncode == 0, r.stderr
    assert "one v1: absent, applied" in r.stdout and "opt v1 (opt-in): absent, applied" in r.stdout
    r2 = run(*args, entry=(str(REPO / entry[0]),))
    assert r2.returncode == 0 and "OK: 2 already applied" in r2.stdout


def test_json_document(setup):
    b, target = setup
    r = run("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "--dry-run", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["ok"] and doc["schema"] == 1 and doc["dry_run"]
    assert set(doc) >= {"profile", "targets", "fixes", "exit_code", "error", "tool_version", "command"}
    assert doc["fixes"][0]["state"] == "absent" and doc["fixes"][0]["action"] == "would-apply"
    assert doc["targets"][0]["pin"] == {"version": "1.0", "commit": "abcdef12"}


def test_exit_codes_and_no_change(setup):
    b, target = setup
    before = snapshot(target)
    r = run("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "nosuchfix")
    assert r.returncode == 2 and "unknown fix 'nosuchfix'" in r.stderr
    # `apply_all.py status`: a command where a fix name goes is told how to run that command
    r = run("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "status")
    assert r.returncode == 2 and f"{program()} status --profile p1 --pack" in r.stderr and snapshot(target) == before
    r = run("apply", "--pack", str(b.pack), "-p", "p1", "--root", "demo")
    assert r.returncode == 2 and "NAME=PATH" in r.stderr
    (target / MOD).write_text((target / MOD).read_text().replace("line 2\n", "LINE 2\n"))
    before = snapshot(target)
    r = run("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "--json")
    assert r.returncode == 4 and json.loads(r.stdout)["fixes"][0]["state"] == "conflict"
    assert snapshot(target) == before


def test_status_and_revert_commands(setup):
    b, target = setup
    original = snapshot(target)
    assert run("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}").returncode == 0
    st = run("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}")
    assert st.returncode == 0 and "one v1: applied" in st.stdout and "opt v1 (opt-in): skipped" in st.stdout
    rv = run("revert", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}")
    assert rv.returncode == 0 and snapshot(target) == original


def test_lock_check_command(setup):
    b, target = setup
    r = run("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}", "--check")
    assert r.returncode == 0 and "fresh" in r.stdout
    (b.pack / "profiles/p1.lock").write_text("{}")
    r = run("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}", "--check")
    assert r.returncode == 2 and "not a fixpack lock" in r.stderr and "regenerate" in r.stderr


def test_lock_leaves_an_unchanged_lock_alone(setup):
    """`lock` rewrote an unchanged lock (a new inode and time) and said "wrote" (found by a fresh user): an
    unchanged lock is left alone and said so; a changed one is written."""
    b, _ = setup
    args = ("lock", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={b.base / 'clean'}")
    lock = b.pack / "profiles/p1.lock"
    before = lock.read_bytes(), lock.stat()
    r = run(*args)
    assert r.returncode == 0 and r.stdout.startswith(f"unchanged: {lock} (") and "nothing written" in r.stdout, r.stdout
    after = lock.stat()
    assert lock.read_bytes() == before[0] and (after.st_ino, after.st_mtime_ns) == (before[1].st_ino, before[1].st_mtime_ns)
    doc = json.loads(run(*args, "--json").stdout)
    assert doc["ok"] and doc["written"] is False and lock.stat().st_ino == before[1].st_ino
    lock.write_bytes(before[0].replace(b'"version": 1', b'"version": 1 ', 1))  # other bytes, the same lock
    r = run(*args)
    assert r.returncode == 0 and r.stdout.startswith(f"wrote {lock}") and lock.read_bytes() == before[0], r.stdout


def test_missing_profile_duplicate_root_and_missing_package_are_said_plainly(setup, tmp_path):
    b, target = setup
    r = run("status", "--pack", str(b.pack), "--root", f"demo={target}")
    assert r.returncode == 2 and "Missing option '--profile'" in r.stderr
    r = run("status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "--root", f"demo={tmp_path}")
    assert r.returncode == 2 and "given twice" in r.stderr
    # an image Python without what apply needs: exit 5 and what to install, no traceback
    shim = tmp_path / "shim"
    (shim / "unidiff").mkdir(parents=True)
    (shim / "unidiff" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'unidiff'\", name='unidiff')\n")
    p = subprocess.run([sys.executable, str(REPO / "apply_all.py"), "--pack", str(b.pack), "-p", "p1", "--root",
                        f"demo={target}", "--dry-run"], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(shim)})
    assert p.returncode == 5 and "pip install unidiff click" in p.stderr and "Traceback" not in p.stderr


def test_json_failure_document_says_whether_the_run_was_a_dry_run(setup):
    """status is always a dry run, apply only with --dry-run: a failure's JSON document says so too
    (an engine error, bad input, and a usage error alike)."""
    b, target = setup
    # a target the profile does not have: every command fails with exit 2 before it looks at a file
    common = ["--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "--target", "nosuch", "--json"]
    for args, dry in ((["status"], True), (["apply", "--dry-run"], True), (["apply"], False),
                      (["revert", "--dry-run"], True), (["status", "--no-such-option"], True),
                      (["apply", "--dry-run", "--no-such-option"], True)):
        r = run(*args, *common)
        doc = json.loads(r.stdout)
        assert r.returncode == 2 and not doc["ok"] and doc["dry_run"] is dry, (args, doc)


ENTRIES = {"python -m fixpack.cli": ("-m", "fixpack.cli", "status"), "apply_all.py": (str(REPO / "apply_all.py"),),
           "fixes/apply_all.py": (str(REPO / "fixes/apply_all.py"),),
           "console script": ("-c", "import sys; sys.argv[0] = 'fixpack'; from fixpack.console import main; main()",
                              "status")}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_ctrl_c_while_the_tool_imports_is_exit_5_in_one_line(setup, entry):
    """Found by a fresh user: Ctrl-C in the first ~40 ms of `fixpack status` / `apply` (while Python imports
    the tool: cli_fast, the engine, click) printed a traceback and exited 1, or the process died by SIGINT
    (also after a run had ended). Now each entry point catches it (fixpack.entry): exit 5 with the one
    `interrupted` line, nothing written, and a Ctrl-C after the run keeps the run's exit code. Before fixpack's
    own code runs, a Ctrl-C lands in Python's start-up (site, runpy, compiling the script): that traceback has
    no line of ours, and before Python's own handler is in place the process dies by SIGINT, saying nothing."""
    import os
    import re
    import signal
    import time

    b, target = setup
    before = snapshot(target)
    args = [*ENTRIES[entry], "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "--dry-run"]
    if "status" in args:
        args.remove("--dry-run")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.monotonic()
    assert subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, env=env).returncode == 0
    whole = time.monotonic() - start  # a busy machine is slower: the delays span a whole run, whatever it takes
    ours = 0
    for i in range(48):
        proc = subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        time.sleep(whole * i / 40)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
        frames = re.findall(r'File "([^"]+)", line (\d+)', err)
        # line 0 of a script: the Ctrl-C came while Python compiled it, before its first line ran
        ours_frames = [f for f, line in frames if Path(f).parent.name == "fixpack"
                       or (Path(f).name == "apply_all.py" and line != "0")]
        assert not ours_frames, (entry, whole * i / 40, proc.returncode, err)
        started = not (proc.returncode == -signal.SIGINT and not out and not err)  # killed before Python's handler
        if started and not frames and not err.startswith("Fatal Python error"):  # it reached fixpack's code
            assert proc.returncode in (0, 5), (entry, whole * i / 40, proc.returncode, out, err)
            if proc.returncode == 5:
                ours += 1
                assert err.splitlines() == ["fixpack: error: interrupted (Ctrl-C, SIGINT); no write was under way "
                                            "(one under way rolls itself back and says so), so each target holds "
                                            "what it held before this run, or this run's completed writes "
                                            "(fixpack status shows which). Run again"] if "status" not in args else \
                    ["fixpack: error: interrupted (Ctrl-C, SIGINT); status writes nothing. Run again"], err
        assert snapshot(target) == before
    assert ours, "no run was interrupted in fixpack's own code: the delays missed it"


CLICK_PATH = {"check": ["check"], "check --json": ["check", "--json"], "export": ["export", "-p", "p1", "--out", "X"],
              "export --json": ["export", "-p", "p1", "--out", "X", "--json"],
              "status --color always": ["status", "--color", "always", "-p", "p1", "--root", "demo=T"],
              "status --color always --json": ["status", "--color", "always", "-p", "p1", "--root", "demo=T", "--json"]}


@pytest.mark.parametrize("command", sorted(CLICK_PATH))
def test_ctrl_c_on_the_click_path_is_exit_5_in_one_line(setup, tmp_path, command):
    """Found by a fresh user: Ctrl-C some 50-100 ms into `fixpack check`, `export`, `fetch` or `status --color
    always` (the commands that go through click, while click parses or a maintainer's command is imported)
    landed in click's own handling: "Aborted!" and exit 1 (with --json `{"error": "aborted", "exit_code": 1}`).
    Now it is exit 5 with the one `interrupted` line (the error document with --json), as everywhere else."""
    import os
    import re
    import signal
    import time

    b, target = setup
    args = ["-m", "fixpack.cli", *[str(tmp_path / "out") if a == "X" else f"demo={target}" if a == "demo=T" else a
                                   for a in CLICK_PATH[command]], "--pack", str(b.pack)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def launch() -> subprocess.Popen[str]:
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        return subprocess.Popen([sys.executable, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    start = time.monotonic()
    proc = launch()
    proc.communicate()
    full = proc.returncode  # check: 2, the builder's fixes have no proofs
    assert full in (0, 2), command
    whole = time.monotonic() - start
    ours = 0
    for i in range(40):
        proc = launch()
        time.sleep(whole * i / 32)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
        frames = re.findall(r'File "([^"]+)", line (\d+)', err)
        assert not [f for f, _line in frames if Path(f).parent.name == "fixpack"], (command, proc.returncode, err)
        started = not (proc.returncode == -signal.SIGINT and not out and not err)
        if started and not frames and not err.startswith("Fatal Python error"):
            assert proc.returncode in (full, 5) and "Aborted" not in err, (command, whole * i / 32, proc.returncode, err)
            if proc.returncode == 5:
                ours += 1
                said = [ln for ln in err.splitlines() if ln.startswith("fixpack: error:") or not ln.strip()]
                if "--json" in args:
                    doc = json.loads(out)
                    assert doc["exit_code"] == 5 and doc["error"].startswith("interrupted (Ctrl-C, SIGINT)"), out
                    assert not said, err
                else:
                    assert len(said) == 1 and said[0].startswith("fixpack: error: interrupted (Ctrl-C, SIGINT)"), err
    assert ours, "no run was interrupted in fixpack's own code: the delays missed it"
