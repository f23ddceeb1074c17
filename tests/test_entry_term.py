"""A SIGTERM that comes once a command has ended (Python's shutdown: here an atexit hook that signals the
process) leaves the command's exit code as it was, as a Ctrl-C then does (fixpack.entry.guarded); it ended
the finished run as killed, exit 143 with nothing said (found by a fresh user after a rebase's report)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_command_ended_keeps_its_exit_code(sig):
    child = textwrap.dedent(f"""
        import atexit, os, sys, time
        from fixpack import entry

        def body():
            def late():
                os.kill(os.getpid(), {int(sig)})
                time.sleep(0.2)  # the signal is delivered here, during shutdown
                print("still here", flush=True)
            atexit.register(late)
            print("done", flush=True)
            sys.exit(3)

        entry.guarded(body, ["status"])
    """)
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 3, (run.returncode, run.stdout, run.stderr)
    assert run.stdout.splitlines() == ["done", "still here"] and run.stderr == "", run


@pytest.mark.parametrize("as_json", [False, True])
def test_a_sigterm_while_a_run_waits_for_the_lock_is_said_and_exits_143(builder, as_json):
    """A fresh user: SIGTERM while status (apply, revert) waited for another run's lock, or planned, ended the
    process by its default action: no line, no JSON document, killed by signal 15 (a CI job not run from a shell saw
    only that). It is said as Ctrl-C is, `terminated (SIGTERM)`, exit 143, the error document with --json."""
    import fcntl
    import json
    import time

    from conftest import numbered

    base = numbered(10)
    clean = builder.tree("clean", {"demo_pkg/mod.py": base})
    builder.add_fix("one", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    image = builder.tree("image", {"demo_pkg/mod.py": base})
    held = os.open(image, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # another run holds the target
    try:
        cmd = [sys.executable, "-m", "fixpack.cli", "status", "--profile", "p1", "--pack", str(builder.pack),
               "--root", f"demo={image}", "--lock-wait", "60", *(["--json"] if as_json else [])]
        run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
        assert run.stderr is not None
        said = run.stderr.readline()  # the wait is under way once it says so
        assert "waiting for another fixpack run that holds the lock" in said, said
        time.sleep(0.2)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        os.close(held)
    assert run.returncode == 143, (run.returncode, out, err)
    if as_json:
        doc = json.loads(out)
        assert doc["exit_code"] == 143 and doc["error"].startswith("terminated (SIGTERM); status writes nothing"), doc
    else:
        assert "fixpack: error: terminated (SIGTERM); status writes nothing. Run again" in err, err
    assert "Traceback" not in err
