"""Thin CLI checks: exit codes, JSON keys, plain output, the apply_all.py entries."""

import json
import os
import re
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


@pytest.mark.parametrize("entry", ["apply_all.py", "fixes/apply_all.py"])
def test_apply_all_on_an_older_python_or_away_from_its_checkout_says_so(setup, tmp_path, entry):
    """Found by a fresh user: Python 3.8 gave a TypeError traceback, 3.6, 3.7 and 2.7 a SyntaxError (exit 1), and a copy
    of apply_all.py outside the checkout a ModuleNotFoundError traceback. Each is exit 5 with what to do, the
    version check in syntax every Python reads (checked here as far as ast can: /root's python2.7 gave exit 5)."""
    import shutil

    b, target = setup
    before = snapshot(target)
    old = ("import runpy, sys; sys.version_info = (3, 8, 18, 'final', 0); "
           f"runpy.run_path({str(REPO / entry)!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", old, "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}"],
                       capture_output=True, text=True)
    assert r.returncode == 5 and "fixpack needs Python 3.10 or newer" in r.stderr and "Python 3.8" in r.stderr, r.stderr
    copy = tmp_path / "elsewhere" / "apply_all.py"
    copy.parent.mkdir()
    shutil.copy(REPO / entry, copy)
    r = subprocess.run([sys.executable, str(copy), "-p", "p1", "--root", f"demo={target}"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 5 and "this script runs from the fix pack's checkout" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert snapshot(target) == before
    import ast  # (no annotation, no "raise ... from": Python 2 reads neither; f-strings and the rest ast checks)

    src = (REPO / entry).read_text()
    ast.parse(src, feature_version=(3, 4))
    assert " -> " not in src and "from None" not in src and not re.search(r"def \w+\([^)]*:", src)
    assert not re.search(r"[(,]\s*print\s*\)", src)  # (print as a value: Python 2's statement)


def test_apply_all_json_on_an_older_python_or_away_from_its_checkout_is_the_failure_document(setup, tmp_path):
    """`apply_all.py --json` refused an old Python, or a copy away from its checkout, with a line on stderr and nothing
    on stdout: a caller parsing the document got no JSON. It is the document fixpack's own error_document writes
    (fixpack cannot be imported there: the script builds it), exit 5."""
    import shutil

    from fixpack import __version__
    from fixpack.cli_plain import argv_profile, error_document

    b, target = setup
    old = ("import runpy, sys; sys.version_info = (3, 8, 18, 'final', 0); "
           f"runpy.run_path({str(REPO / 'apply_all.py')!r}, run_name='__main__')")
    args = ["--json", "--pack", str(b.pack), "--profile=p1", "--dry-run", "--root", f"demo={target}"]
    r = subprocess.run([sys.executable, "-c", old, *args], capture_output=True, text=True)
    doc = json.loads(r.stdout)
    assert r.returncode == 5 and "fixpack needs Python 3.10 or newer" in doc["error"] and not r.stderr, r
    assert doc == error_document("apply", "p1", doc["error"], 5, True) and doc["tool_version"] == __version__
    copy = tmp_path / "elsewhere" / "apply_all.py"
    copy.parent.mkdir()
    shutil.copy(REPO / "apply_all.py", copy)
    inner = tmp_path / "other" / "fixes" / "apply_all.py"  # the recipes' entry, copied away with its folder
    inner.parent.mkdir(parents=True)
    shutil.copy(REPO / "fixes" / "apply_all.py", inner)
    for script in (copy, inner):  # (a fresh user: the inner one's --json printed no document)
        for words in (["-p", "p1"], ["--profile=p1", "--dry-run"], ["--profile=", "--dry-run"]):
            r = subprocess.run([sys.executable, str(script), *words, "--json"], capture_output=True, text=True,
                               cwd=tmp_path)
            doc = json.loads(r.stdout)
            assert r.returncode == 5 and "this script runs from the fix pack's checkout" in doc["error"], r
            assert doc == {**error_document("apply", argv_profile(words), doc["error"], 5, "--dry-run" in words),
                           "tool_version": ""}, (script, words)
        r = subprocess.run([sys.executable, str(script), "-p", "p1"], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 5 and not r.stdout and "this script runs from the fix pack's checkout" in r.stderr


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
    (shim / "click").mkdir()
    (shim / "click" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'click'\", name='click')\n")
    (shim / "unidiff" / "__init__.py").unlink()
    (shim / "unidiff").rmdir()
    j = subprocess.run([sys.executable, str(REPO / "apply_all.py"), "--pack", str(b.pack), "-p", "p1", "--root",
                        f"demo={target}", "--dry-run", "--json", "--lock-wait", "x"], capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(shim)})  # (not a plain line: click parses)
    doc = json.loads(j.stdout)  # (--json: the error document, not a plain line: a fresh user's finding)
    assert j.returncode == 5 and doc["exit_code"] == 5 and "pip install unidiff click" in doc["error"], j.stdout


def test_a_module_of_fixpack_itself_that_cannot_be_imported_is_not_said_as_a_package_to_install(tmp_path):
    """Found by a fresh user: the working folder removed while a `rebase --continue` ran (fixpack run from it, its
    next module imported then) was said as "the Python package 'fixpack....' is not installed ... pip install
    unidiff click": nothing to install. A module of fixpack itself that cannot be imported is said as what it is
    (exit 5, as before): the folder it was run from gone, or its files not all there."""
    code = ("import os, sys; from fixpack.cli_plain import exit_code, failure_text\n"
            "exc = ModuleNotFoundError(\"No module named 'fixpack.rebase_proof'\", name='fixpack.rebase_proof')\n"
            "d = sys.argv[1]\n"
            "if d: os.chdir(d); os.rmdir(d)\n"
            "print(exit_code(exc), failure_text(exc))")
    gone = tmp_path / "gone"
    gone.mkdir()
    for where, says in ((str(gone), "the folder it was run from was removed while it ran"), ("", "its files are not "
                                                                                               "all there")):
        r = subprocess.run([sys.executable, "-c", code, where], capture_output=True, text=True,
                           env={**__import__("os").environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("5 fixpack's own module 'fixpack.rebase_proof' cannot be imported from ") and \
            says in r.stdout and "pip install" not in r.stdout, r.stdout


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


# A Ctrl-C at a chosen import (tests only): this sitecustomize, first on PYTHONPATH, sends the process SIGINT
# when Python first looks for the module $FIXPACK_TEST_SIGINT_AT, and records that it did. The KeyboardInterrupt
# then comes inside that import, as a Ctrl-C landing there would: the same place every run, whatever the load.
SIGINT_HOOK = """
import os, signal, sys

class _SigintAt:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("FIXPACK_TEST_SIGINT_AT"):
            sys.meta_path.remove(self)
            open(os.environ["FIXPACK_TEST_SIGINT_FIRED"], "w").close()
            os.kill(os.getpid(), signal.SIGINT)
        return None

if os.environ.get("FIXPACK_TEST_SIGINT_AT"):
    sys.meta_path.insert(0, _SigintAt())
"""
# modules the runs import once fixpack's own code runs: plain lines (cli_fast, the engine), click's path, output
# (not fixpack.cli: `python -m` looks for it in runpy, before any code of ours)
AT = ("json", "fixpack.errors", "fixpack.cli_fast", "fixpack.model", "fixpack.engine", "unidiff", "click",
      "fixpack.cli_common", "fixpack.cli_render", "fixpack.cli_maint", "fixpack.pack_check", "fixpack.exchange", "rich")
CLICK_PATH = {"check": ["check"], "check --json": ["check", "--json"], "export": ["export", "-p", "p1", "--out", "X"],
              "export --json": ["export", "-p", "p1", "--out", "X", "--json"],
              "status --color always": ["status", "--color", "always", "-p", "p1", "--root", "demo=T"],
              "status --color always --json": ["status", "--color", "always", "-p", "p1", "--root", "demo=T", "--json"]}


def _interrupted_at(args: list[str], at: str, tmp_path: Path) -> tuple[bool, int, str, str]:
    """Run ``python ARGS`` with a Ctrl-C at the first import of ``at``: (it fired, exit code, stdout, stderr)."""
    import os
    import signal

    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SIGINT_HOOK)
    fired = tmp_path / "fired"
    fired.unlink(missing_ok=True)
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{REPO}", "FIXPACK_TEST_SIGINT_AT": at,
           "FIXPACK_TEST_SIGINT_FIRED": str(fired)}
    p = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return fired.exists(), p.returncode, p.stdout, p.stderr


def _said_interrupted(args: list[str], code: int, out: str, err: str) -> None:
    """Exit 5 and the one ``interrupted`` line (the JSON error document with --json), no traceback, no blank
    line (progress lines, "fixpack: checking the pack ...", may come before it)."""
    assert "Traceback" not in err and "Aborted" not in err and code == 5, (args, code, out, err)
    said = [ln for ln in err.splitlines() if ln.startswith("fixpack: error:") or not ln.strip()]
    if "--json" in args:
        doc = json.loads(out)
        assert doc["exit_code"] == 5 and doc["error"].startswith("interrupted (Ctrl-C, SIGINT)") and not said, (out, err)
        return
    assert len(said) == 1 and said[0].startswith("fixpack: error: interrupted (Ctrl-C, SIGINT)"), err
    if "status" in args:
        assert said[0].endswith("status writes nothing. Run again"), err


def _sweep(args: list[str], tmp_path: Path, finished: tuple[int, ...], unchanged) -> list[str]:
    """Run ``python ARGS`` once with a Ctrl-C at each import of AT: where it fired, exit 5 in one line; where the
    run does not import that module, the run's own exit code (one of ``finished``); ``unchanged()`` after each.
    The modules it fired at."""
    hit = []
    for at in AT:
        fired, code, out, err = _interrupted_at(args, at, tmp_path)
        if fired:
            hit.append(at)
            _said_interrupted(args, code, out, err)
        else:
            assert code in finished and "Traceback" not in err, (at, code, err)
        assert unchanged(), at
    return hit


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_ctrl_c_while_the_tool_imports_is_exit_5_in_one_line(setup, tmp_path, entry):
    """Found by a fresh user: Ctrl-C in the first ~40 ms of `fixpack status` / `apply` (while Python imports
    the tool: cli_fast, the engine, click) printed a traceback and exited 1, or the process died by SIGINT.
    Now each entry point catches it (fixpack.entry): exit 5 with the one `interrupted` line, nothing written.
    The Ctrl-C comes at each of the imports the run makes (SIGINT_HOOK), not after a delay, so that the test
    does not depend on the machine's load. (Before fixpack's own code runs, in Python's start-up, nothing of
    ours can catch it: README.)"""
    b, target = setup
    before = snapshot(target)
    args = [*ENTRIES[entry], "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}", "--dry-run"]
    if "status" in args:
        args.remove("--dry-run")
    hit = _sweep(args, tmp_path, (0,), lambda: snapshot(target) == before)
    assert {"fixpack.errors", "fixpack.cli_fast", "fixpack.engine", "unidiff"} <= set(hit), hit


@pytest.mark.parametrize("command", sorted(CLICK_PATH))
def test_ctrl_c_on_the_click_path_is_exit_5_in_one_line(setup, tmp_path, command):
    """Found by a fresh user: Ctrl-C some 50-100 ms into `fixpack check`, `export`, `fetch` or `status --color
    always` (the commands that go through click, while click parses or a maintainer's command is imported)
    landed in click's own handling: "Aborted!" and exit 1 (with --json `{"error": "aborted", "exit_code": 1}`).
    Now it is exit 5 with the one `interrupted` line (the error document with --json), as everywhere else; the
    Ctrl-C comes at each import the run makes (SIGINT_HOOK)."""
    b, target = setup
    args = ["-m", "fixpack.cli", *[str(tmp_path / "out") if a == "X" else f"demo={target}" if a == "demo=T" else a
                                   for a in CLICK_PATH[command]], "--pack", str(b.pack)]
    hit = _sweep(args, tmp_path, (0, 2), lambda: True)  # check: 2, the builder's fixes have no proofs
    assert {"click", "fixpack.cli_common", "fixpack.cli_render"} <= set(hit), hit


def _in_a_removed_folder(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` run from a working folder removed before it starts."""
    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, subprocess, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
            "sys.exit(subprocess.call(sys.argv[2:]))")
    return subprocess.run([sys.executable, "-c", code, str(gone), sys.executable, *args], capture_output=True,
                          text=True, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("as_json", [False, True])
def test_a_removed_working_folder_is_exit_5_where_a_path_needs_it(setup, entry, tmp_path, as_json):
    """Found by a fresh user: run from a folder removed under the shell, a relative path or the pack the working
    folder would name was an internal error (exit 1: FileNotFoundError from Path.cwd()). They are exit 5 now, saying
    what to give; a command given absolute paths and --pack runs on (the README's authoring block goes on from a
    work tree `edit --abort` removed)."""
    b, target = setup
    before = snapshot(b.base)
    said = ("the working folder cannot be found (removed while the shell was in it?): give absolute paths and --pack "
            "DIR (or $FIXPACK_PACK), or cd to a folder that exists, and run it again")
    json_flag = ["--json"] * as_json
    cases = [["--pack", str(b.pack), "-p", "p1", "--root", "demo=image", *json_flag]]
    if "apply_all" not in entry:  # (apply_all.py's pack is the one it lies in, wherever it is run)
        cases.append(["-p", "p1", "--root", f"demo={target}", *json_flag])
    for args in cases:
        r = _in_a_removed_folder(tmp_path, *ENTRIES[entry], *args)
        assert r.returncode == 5 and "Traceback" not in r.stderr, r.stderr
        if as_json:
            doc = json.loads(r.stdout)
            assert doc["exit_code"] == 5 and said in doc["error"] and not doc["ok"], doc
        else:
            assert said in r.stderr and r.stdout == "", r.stderr
        assert snapshot(b.base) == before
        shutil.rmtree(tmp_path / "gone", ignore_errors=True)
    r = _in_a_removed_folder(tmp_path, *ENTRIES[entry], "--pack", str(b.pack), "-p", "p1", "--root",
                             f"demo={target}", *json_flag)
    assert r.returncode == 0, r.stderr


def test_check_builds_the_components_wheels_from_a_removed_working_folder(tmp_path):
    """pip reads its working folder: the wheel build of `check` (and lock, apply of a component) said the running
    Python needed pip when the caller's folder was gone."""
    r = _in_a_removed_folder(tmp_path, "-m", "fixpack.cli", "check", "--pack", str(REPO))
    assert r.returncode == 0 and "pack is clean" in r.stdout, r.stderr


def test_edit_and_new_given_the_pack_run_from_a_removed_working_folder(setup, tmp_path):
    """Found by a fresh maintainer: the commands they print after making the work tree asked for the default pack,
    which a removed working folder cannot name: exit 1 with a traceback, the work tree made."""
    b, _target = setup
    clean = b.base / "clean"
    for args in (["edit", "one"], ["new", "two", "--target", "demo"]):
        r = _in_a_removed_folder(tmp_path, "-m", "fixpack.cli", *args, "--profile", "p1", "--pack", str(b.pack),
                                 "--root", f"demo={clean}")
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert f"--pack {b.pack}" in r.stdout + r.stderr, r.stdout + r.stderr  # its refresh names the pack
        shutil.rmtree(tmp_path / "gone", ignore_errors=True)


def test_a_folder_with_fixes_and_profiles_of_its_own_is_told_of_pack(tmp_path):
    """A fresh user: run from a project with fixes/ and profiles/ folders of its own (common names), fixpack takes it
    for a pack without a series (exit 2, "no series file: list the pack's fix ids"), and said nothing of --pack DIR or
    $FIXPACK_PACK, the way to name the real pack."""
    (tmp_path / "fixes").mkdir()
    (tmp_path / "profiles").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "FIXPACK_PACK"}
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "status", "-p", "v0.30.0"], capture_output=True, text=True,
                       cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)})
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "no series file" in said and "give --pack DIR or set $FIXPACK_PACK" in said, said
