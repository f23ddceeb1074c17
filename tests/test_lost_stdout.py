"""A run whose stdout cannot be written: a reader that left (a pipe closed early, ``| head``) ends the run
with the run's own exit code, no traceback; stdout on a full device (/dev/full) is exit 5 with one line on
stderr naming stdout and the errno. The outcome is decided and written before the report is printed."""

import os
import subprocess
import sys

import pytest
from conftest import REPO, numbered, one_fix_pack

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    one_fix_pack(builder, MOD)
    return builder


def _run(b, target, args, stdout):
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": ""}
    cmd = [sys.executable, "-m", "fixpack.cli", args[0], "-p", "p1", "--pack", str(b.pack), "--root",
           f"demo={target}", *args[1:]]
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, timeout=60)


def _args(command, extra, tmp_path):
    """``extra`` for ``command``: REJ is --reject (apply) or an option given twice (also a click run)."""
    if "REJ" not in extra:
        return [command, *extra]
    more = ["--reject", str(tmp_path / "rej")] if command == "apply" else ["--lock-wait", "5", "--lock-wait", "5"]
    return [command, *more]


def _closed_pipe():
    r, w = os.pipe()
    os.close(r)  # the reader left before the first line
    return w


# plain lines without click, JSON without click, click (--reject makes it parse), rich tables (--color always)
MODES = [[], ["--json"], ["REJ"], ["--color", "always"]]


@pytest.mark.parametrize("extra", MODES)
def test_a_reader_that_left_keeps_the_runs_exit_code(setup, tmp_path, extra):
    b = setup
    target = b.tree("image", {MOD: numbered(20)})
    w = _closed_pipe()
    try:
        p = _run(b, target, _args("apply", extra, tmp_path), w)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    assert "three" in (target / MOD).read_text()  # the apply was done
    (target / MOD).write_text((target / MOD).read_text() + "tampered\n")
    w = _closed_pipe()
    try:
        p = _run(b, target, _args("status", extra, tmp_path), w)
    finally:
        os.close(w)
    assert p.returncode == 3, p.stderr  # the tampered image's own code, not 1
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("extra", MODES)
def test_stdout_on_a_full_device_is_exit_5_naming_it(setup, tmp_path, extra):
    b = setup
    target = b.tree("image", {MOD: numbered(20)})
    with open("/dev/full", "w") as full:
        p = _run(b, target, _args("apply", extra, tmp_path), full)
    assert p.returncode == 5, p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    line = [ln for ln in p.stderr.splitlines() if "to stdout" in ln]
    assert len(line) == 1 and "ENOSPC" in line[0] and "exit 0" in line[0], p.stderr
    assert "three" in (target / MOD).read_text()
    with open("/dev/full", "w") as full:
        p = _run(b, target, _args("revert", extra, tmp_path), full)
    assert p.returncode == 5 and "Traceback" not in p.stderr, p.stderr


def test_the_sbom_on_a_lost_stdout(setup):
    b = setup
    target = b.tree("image", {MOD: numbered(20)})
    w = _closed_pipe()
    try:
        p = _run(b, target, ["sbom"], w)
    finally:
        os.close(w)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            p = _run(b, target, ["sbom"], full)
        assert p.returncode == 5 and "ENOSPC" in p.stderr and "Traceback" not in p.stderr, p.stderr


def _maint(b, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, shell_tail=""):
    """A maintainer command (``fixpack ARGS --pack PACK``); ``shell_tail``: run through bash with it after the
    command (a redirection such as ``2>&-``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": ""}
    cmd = [sys.executable, "-m", "fixpack.cli", *args, "--pack", str(b.pack)]
    if shell_tail:
        import shlex

        cmd = ["bash", "-c", f"{shlex.join(cmd)} {shell_tail}"]
    return subprocess.run(cmd, stdout=stdout, stderr=stderr, text=True, env=env, timeout=120)


def _stale(b):
    patch = b.pack / "fixes/one/0001-change.patch"
    patch.write_text(patch.read_text().replace("+three\n", "+THREE\n"))


@pytest.mark.parametrize("command", ["check", "lock --check", "format --check", "export"])
def test_a_maintainer_command_whose_reader_left_keeps_its_own_exit_code(setup, tmp_path, command):
    """check, lock --check, format, export ... exited 1 (click's code for EPIPE) when their reader left
    (`fixpack check | true`): they end with the code they end with when their output is read, silently; a
    stale lock's 2 stays 2."""
    b = setup
    (b.pack / "fixes/one/test_one.py").write_text("def test_it():\n    pass\n")
    clean = b.base / "clean"
    args = {"check": ["check"], "lock --check": ["lock", "--check", "-p", "p1", "--root", f"demo={clean}"],
            "format --check": ["format", "--check"],
            "export": ["export", "-p", "p1", "--out", str(tmp_path / "out")]}[command]
    for stale in (False, True):
        if stale:
            _stale(b)
        read = _maint(b, args)
        if stale and not read.stdout:
            continue  # lock --check says a stale lock on stderr alone
        assert read.stdout.strip(), read.stderr  # it prints: a reader that leaves makes a write fail
        w = _closed_pipe()
        try:
            p = _maint(b, args, stdout=w)
        finally:
            os.close(w)
        assert p.returncode == read.returncode, (stale, p.stderr, read.stderr)
        assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
        if command == "check":
            assert read.returncode == (2 if stale else 0)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_maintainer_commands_stdout_on_a_full_device_is_exit_5_naming_it(setup):
    b = setup
    (b.pack / "fixes/one/test_one.py").write_text("def test_it():\n    pass\n")
    with open("/dev/full", "w") as full:
        p = _maint(b, ["check"], stdout=full)
    assert p.returncode == 5, p.stderr
    line = [ln for ln in p.stderr.splitlines() if "to stdout" in ln]
    assert len(line) == 1 and "ENOSPC" in line[0] and "(exit 0)" in line[0], p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("how", ["reader left", "closed"])
def test_a_stderr_that_is_gone_during_a_run_is_no_failure(setup, how):
    """lock prints progress on stderr: a stderr whose reader left (EPIPE) made the run exit 1 with the lock
    unwritten or a traceback; a closed stderr (2>&-) is no failure either. The lock is written, exit 0; a
    failing run keeps its own code."""
    b = setup
    clean = b.base / "clean"
    lock = b.pack / "profiles/p1.lock"
    lock.unlink()
    args = ["lock", "-p", "p1", "--root", f"demo={clean}"]
    for want in (0, 2):
        if how == "closed":
            p = _maint(b, args, stderr=None, shell_tail="2>&-")
        else:
            w = _closed_pipe()
            try:
                p = _maint(b, args, stderr=w)
            finally:
                os.close(w)
        assert p.returncode == want, (want, p.stdout)
        if want == 0:
            assert lock.is_file() and "wrote" in p.stdout, p.stdout
            args = ["lock", "-p", "p1", "--root", "demo=/nonexistent/copy", "--target", "nosuch"]


def test_tools_rebase_whose_reader_left_keeps_its_exit_code(tmp_path):
    """tools/rebase.py runs the rebase command without the fixpack group: its reader leaving (`| head`) made it
    exit 1 as well."""
    w = _closed_pipe()
    try:
        p = subprocess.run([sys.executable, str(REPO / "tools/rebase.py"), "--help"], stdout=w, stderr=subprocess.PIPE,
                           text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def _fixpack(args):
    return [sys.executable, "-m", "fixpack.cli", *args]


# every command's help: the group's own, the report commands (printed through deliver otherwise), the maintainer's,
# and the image's entry script
HELPS = [[], ["apply"], ["status"], ["revert"], ["sbom"], ["verify"], ["lock"], ["check"], ["rebase"], ["-h", "apply"]]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("args", [_fixpack([*a, "--help"]) for a in HELPS]
                         + [[sys.executable, str(REPO / "apply_all.py"), "--help"]],
                         ids=[" ".join(a) or "group" for a in HELPS] + ["apply_all.py"])
def test_help_on_a_lost_stdout(args, tmp_path):
    """`fixpack apply --help >/dev/full` was click's ENOSPC traceback and exit 1 (apply, status, revert, sbom and
    verify keep their stdout for deliver): every --help now is as `fixpack --help`: a full device is exit 5 with
    one line naming stdout and the errno, a reader that left is exit 0, silently."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": ""}
    with open("/dev/full", "w") as full:
        p = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, timeout=60)
    assert p.returncode == 5, p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    line = [ln for ln in p.stderr.splitlines() if "to stdout" in ln]
    assert len(line) == 1 and "ENOSPC" in line[0] and "(exit 0)" in line[0], p.stderr
    w = _closed_pipe()
    try:
        p = subprocess.run(args, stdout=w, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def _closed_stdout(cmd, cwd, stderr_closed=False):
    """``cmd`` with fd 1 closed (``>&-``: Python starts with no sys.stdout), and fd 2 too when ``stderr_closed``."""
    import shlex

    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": ""}
    tail = ">&- 2>&-" if stderr_closed else ">&-"
    return subprocess.run(["bash", "-c", f"{shlex.join(cmd)} {tail}"], stderr=subprocess.PIPE, text=True, env=env,
                          cwd=cwd, timeout=120)


def _tree(root):
    """The image's bytes and modes, and every path under it (an empty folder made by a run shows too)."""
    from conftest import snapshot

    return snapshot(root), sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def _refused(p, stderr_closed=False):
    assert p.returncode == 5, p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    if stderr_closed:
        assert p.stderr == ""
    else:
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and "stdout is closed" in lines[0] and "/dev/null" in lines[0], p.stderr


@pytest.mark.parametrize("extra", MODES)
@pytest.mark.parametrize("command", ["apply", "status", "revert"])
def test_a_closed_stdout_is_refused_before_anything(setup, tmp_path, command, extra):
    """`fixpack apply ... >&-` wrote the image, then died on rich's sys.stdout.isatty() (None) with exit 1; with
    --json it exited 0 with its report lost. Every mode (no click, JSON, click, rich) now refuses before anything
    is done: exit 5, one line on stderr; the image byte-identical (for revert: the applied image). With stderr
    closed as well: exit 5, no traceback."""
    b = setup
    target = b.tree("image", {MOD: numbered(20)})
    if command == "revert":
        assert _run(b, target, ["apply"], subprocess.DEVNULL).returncode == 0
    before = _tree(target)
    args = _args(command, extra, tmp_path)
    cmd = _fixpack([args[0], "-p", "p1", "--pack", str(b.pack), "--root", f"demo={target}", *args[1:]])
    for stderr_closed in (False, True):
        _refused(_closed_stdout(cmd, tmp_path, stderr_closed), stderr_closed)
        assert _tree(target) == before
        assert not (tmp_path / "rej").exists()


@pytest.mark.parametrize("script", ["apply_all.py", "fixes/apply_all.py"])
@pytest.mark.parametrize("extra", [[], ["--json"], ["--reject", "REJ"]])
def test_the_image_entry_refuses_a_closed_stdout(setup, tmp_path, script, extra):
    """The image's entry scripts (no click for a plain command line, click for --reject) refuse too."""
    b = setup
    target = b.tree("image", {MOD: numbered(20)})
    before = _tree(target)
    extra = [str(tmp_path / "rej") if e == "REJ" else e for e in extra]
    cmd = [sys.executable, str(REPO / script), "-p", "p1", "--pack", str(b.pack), "--root", f"demo={target}", *extra]
    for stderr_closed in (False, True):
        _refused(_closed_stdout(cmd, tmp_path, stderr_closed), stderr_closed)
        assert _tree(target) == before


@pytest.mark.parametrize("args", [["lock", "-p", "p1", "--root", "demo=CLEAN"], ["--version"], ["apply", "--help"]])
def test_a_maintainer_command_and_the_help_refuse_a_closed_stdout(setup, tmp_path, args):
    """lock (which writes the pack's lock), --version and --help refuse a closed stdout alike: exit 5, nothing written."""
    b = setup
    lock = b.pack / "profiles/p1.lock"
    lock.unlink()
    pack = _tree(b.pack)
    args = [a.replace("CLEAN", str(b.base / "clean")) for a in args]
    p = _closed_stdout(_fixpack([*args, "--pack", str(b.pack)] if args[0] == "lock" else args), tmp_path)
    _refused(p)
    assert not lock.exists() and _tree(b.pack) == pack


def _killed_apply(b, target, at):
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIXPACK_FAULT_AT": str(at)}
    return subprocess.run(_fixpack(["apply", "-p", "p1", "--pack", str(b.pack), "--root", f"demo={target}"]),
                          capture_output=True, env=env, timeout=60).returncode


@pytest.mark.parametrize("at, said", [(2, "no file needed restoring"), (3, "1 file restored"), (4, "2 files restored")])
def test_a_rolled_back_run_counts_its_files_in_words(setup, at, said):
    """The note of a rolled-back interrupted run said "(1 files restored)", and counted every file its journal names:
    a run killed before it replaced any (``at`` 2: the journal is written) was said to have "2 files restored". A
    killed apply of this pack names two (the module and the manifest); at 3 it replaced the module, at 4 both."""
    from fixpack import engine

    b = setup
    target = b.tree("image", {MOD: numbered(20)})
    assert _killed_apply(b, target, at) == 137 and (target / ".fixpack/journal.json").exists()
    assert ((target / MOD).read_text() == numbered(20)) == (at == 2)
    r = engine.apply(b.request(target))
    assert r.ok, r.as_dict()
    notes = [n for n in r.targets[0].notes if n.startswith("rolled back an interrupted run")]
    assert notes == [f"rolled back an interrupted run ({said})"], notes
