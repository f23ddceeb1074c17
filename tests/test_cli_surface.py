"""The CLI's surface: help on every option, an example on every command, completion of profile names and
fix ids, --color and $NO_COLOR, narrow terminals (messages in full below the tables), progress lines."""

import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from conftest import REPO, numbered

from fixpack.cli import main

MOD = "demo_pkg/mod.py"
SCRIPT = Path(sys.executable).parent / "fixpack"


def commands():
    ctx = click.Context(main)
    return {name: main.get_command(ctx, name) for name in main.list_commands(ctx)}


def run(*args, env=None, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_has_help_and_every_command_an_example(name):
    cmd = commands()[name]
    missing = [p.name for p in cmd.params if isinstance(p, click.Option) and not p.help]
    assert not missing, f"{name}: options without help: {missing}"
    assert cmd.epilog and "fixpack " in cmd.epilog, f"{name}: no example"
    assert cmd.short_help and len(cmd.short_help) <= 50, f"{name}: summary would be cut"


def test_top_level_help_is_not_cut():
    r = run("--help", env={"COLUMNS": "80"})
    listing = r.stdout.split("Commands:")[1].split("Examples")[0]
    assert r.returncode == 0 and "..." not in listing and "_FIXPACK_COMPLETE" in r.stdout


@pytest.mark.skipif(not SCRIPT.exists(), reason="the fixpack console script is not installed")
@pytest.mark.parametrize(("words", "cword", "expected"), [
    ("fixpack apply --profile v0.3", 3, {"v0.30.0", "v0.31.0", "v0.32.0"}),
    ("fixpack apply -p v0.30.0 topk", 4, {"topk-subset-sampler"}),
    ("fixpack refresh -p v0.30.0 --root vllm=x seeded", 6, {"seeded-sampling"}),
])
def test_completion_of_profiles_and_fix_ids(words, cword, expected):
    r = subprocess.run([str(SCRIPT)], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "_FIXPACK_COMPLETE": "bash_complete", "COMP_WORDS": words,
                            "COMP_CWORD": str(cword)})
    assert {line.split(",", 1)[1] for line in r.stdout.splitlines()} >= expected


@pytest.fixture
def mismatch(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    builder.version = "1.1"
    return builder, builder.tree("other", {MOD: base})


def test_narrow_terminal_prints_the_error_in_full_below_the_tables(mismatch):
    b, image = mismatch
    r = run("--color", "always", "apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}",
            env={"COLUMNS": "80"})
    assert r.returncode == 3
    plain = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout)
    message = next(line for line in plain.splitlines() if line.startswith("demo ") and "1.1" in line)
    assert len(message) > 80, message  # one line, not folded into a 13-character cell


@pytest.mark.parametrize("columns", ["0", "-3"])
def test_a_columns_of_zero_or_less_still_prints_the_report(mismatch, columns):
    """Found by a fresh user: with $COLUMNS=0 rich drew at width 0 and nothing came out, the error's line, next step
    and FAILED line included (exit 3 and no word why). It draws at the terminal's width then, else at 80."""
    b, image = mismatch
    r = run("--color", "always", "apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}",
            env={"COLUMNS": columns})
    plain = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)
    assert r.returncode == 3 and "1.1" in plain and "FAILED (exit 3)" in plain, (r.stdout, r.stderr)


def test_color_never_and_no_color_give_plain_lines(mismatch):
    b, image = mismatch
    args = ["apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}"]
    plain = run("--color", "never", *args, env={"COLUMNS": "80"})
    assert plain.stdout.startswith("apply profile p1") and "\x1b[" not in plain.stdout
    no_color = run("--color", "auto", *args, env={"NO_COLOR": "1"})
    assert no_color.stdout == plain.stdout
    forced = run(*args[:1], "--color", "always", *args[1:])
    assert "\x1b[" in forced.stdout and "┃" in forced.stdout


def test_an_empty_fix_table_is_not_printed(builder):
    base = numbered(5)
    clean = builder.tree("clean", {MOD: base})
    builder.write_series()
    builder.profile([])
    builder.lock(clean)
    r = run("--color", "always", "status", "--pack", str(builder.pack), "-p", "p1", "--root", f"demo={clean}")
    assert r.returncode == 0 and r.stdout.count("┏") == 1, r.stdout


def test_waiting_for_the_run_lock_is_shown(mismatch):
    b, _image = mismatch
    b.version = "1.0"
    image = b.tree("image", {MOD: numbered(20)})
    fd = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = run("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "--lock-wait", "0.5")
    finally:
        os.close(fd)
    assert r.returncode == 5
    assert f"waiting for another fixpack run that holds the lock on {image} (up to 0.5 s" in r.stderr


def test_an_installed_copy_without_its_pack_says_how_to_name_one(tmp_path):
    """What a non-editable ``pip install .`` gives: the package without fixes/ beside it."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(REPO / "fixpack", site / "fixpack", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("FIXPACK_PACK", None)
    args = [sys.executable, "-m", "fixpack.cli", "status", "-p", "v0.30.0", "--target", "vllm", "--root",
            f"vllm={tmp_path}"]
    r = subprocess.run(args, capture_output=True, text=True, cwd=elsewhere, env=env)
    assert r.returncode == 2 and "no fix pack found" in r.stderr and "--pack DIR" in r.stderr, r.stderr
    r = subprocess.run([*args, "--pack", str(REPO)], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert "no fix pack found" not in r.stderr


def test_prove_names_an_unknown_fix_before_touching_the_image():
    r = run("prove", "-p", "v0.30.0", "--python", sys.executable, "no-such-fix", "--json")
    assert r.returncode == 2 and "not a fix of profile v0.30.0 on vllm: no-such-fix" in r.stdout


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling link", "missing"])
def test_a_working_folder_with_a_broken_series_is_the_pack_and_says_so(mismatch, kind):
    """Found by a fresh user: in a pack whose fixes/series was a FIFO, a folder or a dangling link, `fixpack
    check` without --pack silently checked this checkout's pack instead ("pack is clean"), apply returned 0 and
    lock --check named the checkout's profiles. Now a working folder with a fixes/series entry of any kind (or
    fixes/ and profiles/ side by side, its series missing) is the pack, looked at without being read (a FIFO
    would block), and loading names its series (exit 2)."""
    b, image = mismatch
    series = b.pack / "fixes" / "series"
    series.unlink()
    {"fifo": os.mkfifo, "folder": os.mkdir, "dangling link": lambda p: p.symlink_to("nowhere"),
     "missing": lambda p: None}[kind](series)
    env = {**{k: v for k, v in os.environ.items() if k not in ("FIXPACK_PACK", "GAUDI_FIXES_ROOT")},
           "PYTHONPATH": str(REPO)}
    for args in (["check"], ["lock", "--check", "-p", "p1"], ["apply", "-p", "p1", "--root", f"demo={image}"],
                 ["status", "-p", "p1", "--root", f"demo={image}", "--color", "never"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, cwd=b.pack,
                           env=env, timeout=60)
        assert r.returncode == 2 and "fixes/series" in r.stdout + r.stderr, (args, r.returncode, r.stdout, r.stderr)
        assert "v0.30.0" not in r.stdout + r.stderr and "clean" not in r.stdout, (args, r.stdout, r.stderr)


def test_completing_fix_ids_never_reads_a_fifo_series(mismatch):
    """Shell completion of fix ids in a pack whose fixes/series is a FIFO: nothing offered, no read that blocks."""
    from fixpack.cli_common import complete_fixes

    b, _image = mismatch
    series = b.pack / "fixes" / "series"
    ctx = click.Context(main)
    ctx.params["pack_root"] = str(b.pack)
    assert complete_fixes(ctx, None, "") == ["one"]
    series.unlink()
    os.mkfifo(series)
    assert complete_fixes(ctx, None, "") == []
