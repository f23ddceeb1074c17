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
