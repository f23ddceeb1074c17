"""The run lock: an advisory ``flock`` on the target's root folder itself.

No command creates or removes it, so a run waiting for it and a run arriving later wait on the same
lock (a lock *file* that a revert removed let two writers in at once), and there is no file a
planted link could redirect. Writers take it exclusively; status and dry runs take it shared. How
long a run waits is the caller's (the CLI reads ``$FIXPACK_LOCK_WAIT``).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import BusyError, EnvironmentProblem
from .progress import QUIET, Progress

DEFAULT_WAIT = 10.0  # seconds a run waits for another one's lock, unless the caller says otherwise


@contextmanager
def run_lock(root: Path, shared: bool = False, wait: float = DEFAULT_WAIT,
             progress: Progress = QUIET) -> Iterator[None]:
    """Hold the run lock of ``root``: exclusively to write, shared to read a consistent state.

    The lock is a ``flock`` on the root folder, opened without following a link. Waits up to ``wait``
    seconds for another run, then raises BusyError (exit 5). ``progress`` hears when the run starts
    waiting (the flock names no holder: the folder and the time left are what can be said).
    """
    try:
        fd = os.open(root.resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise EnvironmentProblem(f"{root}: cannot open the target's folder to lock it ({exc.strerror}); run as a "
                                 f"user who may read it") from exc
    try:
        _acquire(fd, root, shared, wait, progress)
        yield
    finally:
        os.close(fd)  # releases the flock


def _acquire(fd: int, root: Path, shared: bool, wait: float, progress: Progress = QUIET) -> None:
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                raise BusyError(f"another fixpack run holds the lock on {root} (waited {wait:g} s; --lock-wait, "
                                f"$FIXPACK_LOCK_WAIT); wait for it to finish and run again") from exc
            if not told:
                told = True
                progress.note(f"waiting for another fixpack run that holds the lock on {root} (up to {wait:g} s; "
                              f"--lock-wait, $FIXPACK_LOCK_WAIT)")
            time.sleep(0.02)


