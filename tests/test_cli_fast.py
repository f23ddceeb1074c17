"""The image's fast entry (fixpack.cli_fast): a plain apply/status/revert command line runs without click and
prints byte for byte what the click command prints, with the same exit code; anything else is left to click.
Its option table is the one the click commands are built from."""

import os
import shutil
import subprocess
import sys

import click
import pytest
from conftest import REPO, numbered, snapshot

from fixpack import cli_fast
from fixpack.cli import main

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("opt", {MOD: base}, {MOD: base.replace("line 15\n", "fifteen\n")}, opt_in=True)
    builder.profile(["one"], ["opt"])
    builder.lock(clean)
    return builder, clean


def both(capsys, command, argv, target):
    """(exit code, stdout, stderr, tree after) of the fast entry, then of click, each from the same tree."""
    keep = target.parent / f"{target.name}.before"
    shutil.copytree(target, keep)
    code = cli_fast.run(command, argv)
    assert code is not None, f"the fast entry declined {argv}"
    fast = (code, *capsys.readouterr(), snapshot(target))
    shutil.rmtree(target)  # back to where the fast run started
    shutil.move(keep, target)
    with pytest.raises(SystemExit) as exc:
        main.main(args=[command, *argv], standalone_mode=True)
    slow = (exc.value.code, *capsys.readouterr(), snapshot(target))
    return fast, slow


@pytest.mark.parametrize("command, extra", [
    ("apply", ["--dry-run"]), ("apply", ["opt", "--json"]), ("apply", ["--all-opt-in", "--strict"]),
    ("status", []), ("status", ["--json", "--lock-wait", "0"]), ("status", ["opt"]), ("revert", ["--dry-run", "--json"]),
    ("apply", ["nosuchfix"]), ("status", ["--json", "--target", "nosuch"]), ("apply", ["--color", "never", "opt"]),
])
def test_the_fast_entry_says_and_does_what_click_does(setup, capsys, command, extra):
    b, _clean = setup
    target = b.tree("image", {MOD: numbered(20)})
    common = ["-p", "p1", f"--pack={b.pack}", "--root", f"demo={target}"]
    fast, slow = both(capsys, command, [*common, *extra], target)
    assert fast == slow
    if command == "apply" and "--dry-run" not in extra and fast[0] == 0:
        assert fast[3] != snapshot(b.tree("fresh", {MOD: numbered(20)}))  # it did write


def test_revert_after_apply_and_the_environment_defaults(setup, capsys, monkeypatch):
    b, _clean = setup
    target = b.tree("image", {MOD: numbered(20)})
    monkeypatch.setenv("FIXPACK_PACK", str(b.pack))
    monkeypatch.setenv("FIXPACK_LOCK_WAIT", "3")
    assert cli_fast.run("apply", ["-p", "p1", "--root", f"demo={target}", "opt"]) == 0
    capsys.readouterr()
    fast, slow = both(capsys, "revert", ["-p", "p1", "--root", f"demo={target}"], target)
    assert fast == slow and fast[0] == 0 and "reverted" in fast[1]


@pytest.mark.parametrize("argv", [
    ["--help"], ["-p", "p1", "--reject", "/tmp/x"], ["-p", "p1", "--profile", "p2"], ["-p", "p1", "--root", "demo"],
    ["-p", "p1", "--lock-wait", "soon"], ["-p", "p1", "--color", "always"], ["-p", "p1", "--", "opt"], ["--json"],
    ["-p", "p1", "--no-such-option"], ["-pp1"], ["-p", "p1", "--dry-run=yes"],
])
def test_what_is_not_a_plain_command_line_is_left_to_click(setup, argv):
    b, clean = setup
    assert cli_fast.run("apply", [*argv, "--pack", str(b.pack), "--root", f"demo={clean}"]) is None


def test_an_image_run_loads_no_click(setup):
    b, _clean = setup
    target = b.tree("image", {MOD: numbered(20)})
    for entry in (["apply_all.py"], ["-m", "fixpack.cli", "status"]):
        p = subprocess.run([sys.executable, "-X", "importtime", *entry, "--pack", str(b.pack), "-p", "p1", "--root",
                            f"demo={target}"], capture_output=True, text=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        assert p.returncode == 0 and "OK:" in p.stdout, p.stdout + p.stderr
        assert " click" not in p.stderr, f"{entry} imported click"


def test_the_console_script_takes_the_fast_entry(setup):
    """``fixpack`` (setup.cfg's console script) runs a plain status without click, and hands --help to click."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert cfg["options.entry_points"]["console_scripts"].strip() == "fixpack = fixpack.console:main"
    b, _clean = setup
    target = b.tree("image", {MOD: numbered(20)})
    script = "import sys; from fixpack.console import main; sys.argv[0] = 'fixpack'; main()"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", script, "apply", "--pack", str(b.pack), "-p", "p1",
                        "--root", f"demo={target}"], capture_output=True, text=True, cwd=REPO, env=env)
    assert p.returncode == 0 and "OK: 1 applied" in p.stdout and " click" not in p.stderr, p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-c", script, "status", "--help"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "Usage: fixpack status" in p.stdout, p.stdout + p.stderr


def test_the_click_options_are_built_from_the_fast_entrys_table():
    ctx = click.Context(main)
    for command, params in cli_fast.COMMANDS.items():
        options = {p.name: p for p in main.get_command(ctx, command).params if isinstance(p, click.Option)}
        for name in params:
            flags, kind, env, default = cli_fast.OPTIONS[name]
            opt = options[name]
            assert tuple(opt.opts) == flags and opt.envvar == env and opt.multiple == (kind == "many")
            assert opt.is_flag == (kind == "flag") and (default is None or opt.default == default)
        assert set(params) <= set(options)


def test_a_command_name_among_the_fixes_says_the_command_that_runs_it(setup, tmp_path):
    """``apply_all.py ... status``: the hint runs as written (this interpreter, not the system python3, no
    literal ``...``), from another folder, with the --target and --root (made absolute) that were given."""
    b, _clean = setup
    target = b.tree("image", {MOD: numbered(20)})
    p = subprocess.run([sys.executable, str(REPO / "apply_all.py"), "--pack", str(b.pack), "-p", "p1", "--target",
                        "demo", "--root", f"demo={target.name}", "--lock-wait", "3", "status"], capture_output=True,
                       text=True, cwd=target.parent, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 2 and "names after the options are opt-in fixes" in p.stderr, p.stderr
    hint = p.stderr.partition("For 'status', run: ")[2].strip()
    assert f"--target demo --root demo={target}" in hint and "..." not in hint, hint
    assert "--lock-wait 3" in hint, hint  # found by a fresh user: it was dropped
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(["bash", "-c", hint], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "demo" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("entry", ["fast", "click"])
def test_a_ctrl_c_wrapped_by_python_while_a_module_imports_is_interrupted(setup, capsys, monkeypatch, entry):
    """Found while testing Ctrl-C: one that lands in a class's __set_name__ while a module is imported (the
    engine's dataclasses with a cached_property) reaches the command as Python 3.11's RuntimeError("Error
    calling __set_name__ ..."), which said "internal error" and exit 1. A KeyboardInterrupt among an error's
    causes is the interrupted error now: exit 5 with its one line."""
    import types

    b, target = setup

    class Engine(types.ModuleType):
        def __getattr__(self, name):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as exc:
                raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from exc

    monkeypatch.setitem(sys.modules, "fixpack.engine", Engine("fixpack.engine"))
    monkeypatch.setattr("fixpack.engine", sys.modules["fixpack.engine"], raising=False)
    args = ["status", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={target}"]
    if entry == "fast":
        code = cli_fast.run("status", args[1:])
    else:
        with pytest.raises(SystemExit) as caught:
            main.main(args=[*args, "--color", "never"])
        code = caught.value.code
    err = capsys.readouterr().err
    assert code == 5 and "fixpack: error: interrupted (Ctrl-C, SIGINT); status writes nothing" in err, (code, err)


def test_the_entry_guard_takes_a_wrapped_ctrl_c_while_the_tool_imports(capsys, monkeypatch):
    """The same disguised Ctrl-C before a command's own handling (the entry's imports): exit 5, its one line."""
    from fixpack import entry

    monkeypatch.setattr(entry, "_ignore_sigint", lambda: None)  # this test's process keeps its Ctrl-C
    monkeypatch.setattr(entry, "_term_as_interrupt", lambda: None)  # and its SIGTERM
    monkeypatch.setattr("fixpack.cli_plain.ENDED", [])  # no command has ended in this (pytest's) process

    def body():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from exc

    with pytest.raises(SystemExit) as caught:
        entry.guarded(body, ["status", "-p", "p1"])
    assert caught.value.code == 5 and "interrupted (Ctrl-C, SIGINT)" in capsys.readouterr().err

    def bug():
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):  # any other error is left as it is
        entry.guarded(bug, [])


def test_the_tool_s_own_error_after_an_interrupt_is_not_taken_for_one():
    """prove turns SIGTERM into a KeyboardInterrupt to unwind, then raises its Terminated (exit 143) with that
    interrupt as its suppressed context: the CLI took it for a disguised Ctrl-C and said 'interrupted', exit 5
    (the whole suite's SIGTERM-mid-proof test caught it). A FixpackError, or a context raised ``from None``, is
    never a Ctrl-C in disguise; a RuntimeError caused by one still is."""
    from fixpack.errors import Terminated, by_interrupt

    def raised(make):
        try:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as ki:
                make(ki)
        except BaseException as exc:  # the test looks at what was raised
            return exc
        raise AssertionError("nothing raised")

    def terminated(ki):
        raise Terminated("terminated (SIGTERM)") from None

    def suppressed(ki):
        raise ValueError("x") from None

    def wrapped(ki):
        raise RuntimeError("Error calling __set_name__") from ki

    def in_context(ki):
        raise RuntimeError("while handling")

    assert not by_interrupt(raised(terminated)) and not by_interrupt(raised(suppressed))
    assert by_interrupt(raised(wrapped)) and by_interrupt(raised(in_context))


@pytest.mark.parametrize("how", ["module", "apply_all", "fixes/apply_all", "a link to fixes/apply_all"])
def test_a_usage_error_s_try_line_runs_as_printed(tmp_path, how):
    """A fresh user: under `python -m fixpack.cli` a bad option printed click's "Try 'python -m fixpack.cli apply
    --help'", which fails outside the checkout (no module fixpack), and apply_all.py's "Try 'apply_all.py --help'" is
    no command either. The Try line is now the program as it runs here; run as printed, from another folder, it
    prints the help (exit 0). And (another fresh user) `fixes/apply_all.py --help` named the checkout's top-level
    apply_all.py, not the script that was run: each entry names itself, a link by its own path."""
    import re
    import shlex

    script = None
    if how == "module":
        cmd = [sys.executable, "-m", "fixpack.cli", "apply", "--bogus"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
    else:
        script = REPO / f"{how}.py"
        if how.startswith("a link"):
            script = tmp_path / "apply-fixes"
            script.symlink_to(REPO / "fixes/apply_all.py")
        cmd, env = [sys.executable, str(script), "--bogus"], dict(os.environ)
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 2 and "No such option '--bogus'" in r.stderr, r.stderr
    tried = re.search(r"Try '(.+)' for help", r.stderr)
    assert tried, r.stderr
    if script is not None:
        assert tried.group(1) == f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --help", r.stderr
        h = subprocess.run([*cmd[:2], "--help"], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert h.returncode == 0 and h.stdout.startswith(f"Usage: {shlex.quote(sys.executable)} {script} "), h.stdout
    again = subprocess.run(["bash", "-c", tried.group(1)], capture_output=True, text=True, cwd=tmp_path,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert again.returncode == 0 and "Usage: " in again.stdout and "--profile" in again.stdout, \
        (shlex.quote(tried.group(1)), again.stdout + again.stderr)
