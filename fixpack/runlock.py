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

from .errors import BadInputError, BusyError, EnvironmentProblem
from .progress import QUIET, Progress

DEFAULT_WAIT = 10.0  # seconds a run waits for another one's lock, unless the caller says otherwise


@contextmanager
def run_lock(root: Path, shared: bool = False, wait: float = DEFAULT_WAIT,
             progress: Progress = QUIET, how_long: str = "--lock-wait, $FIXPACK_LOCK_WAIT",
             what: str = "the target's folder") -> Iterator[None]:
    """Hold the run lock of ``root``: exclusively to write, shared to read a consistent state.

    The lock is a ``flock`` on the root folder, opened without following a link. Waits up to ``wait``
    seconds for another run, then raises BusyError (exit 5). ``progress`` hears when the run starts
    waiting (the flock names no holder: the folder and the time left are what can be said);
    ``how_long`` is what sets the wait and ``what`` names the folder, for the messages.
    """
    try:
        fd = os.open(root.resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise EnvironmentProblem(f"{root}: cannot open {what} to lock it ({exc.strerror}); run as a "
                                 f"user who may read it") from exc
    try:
        _acquire(fd, root, shared, wait, progress, how_long)
        yield
    finally:
        os.close(fd)  # releases the flock


def _acquire(fd: int, root: Path, shared: bool, wait: float, progress: Progress, how_long: str) -> None:
    deadline = time.monotonic() + wait
    told = False
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                raise BusyError(f"another fixpack run holds the lock on {root} (waited {wait:g} s; {how_long}); "
                                f"wait for it to finish and run again") from exc
            if not told:
                told = True
                progress.note(f"waiting for another fixpack run that holds the lock on {root} (up to {wait:g} s; "
                              f"{how_long})")
            time.sleep(0.02)


PACK_WAIT = 600.0  # seconds a refresh or import waits for another one writing the same pack


@contextmanager
def pack_lock(pack_root: Path, progress: Progress = QUIET) -> Iterator[None]:
    """Hold the pack's run lock (a ``flock`` on its folder) from reading the pack to writing it, for
    every command that writes the pack's files (refresh, import, lock, format, edit --abort's
    rollback): two refreshes or imports at once each wrote the series and the profile as they had read
    them, and the one that wrote last dropped the other's fix (and each would roll back the other's
    journal).

    Raises BadInputError (exit 2) when ``pack_root`` has no ``fixes/`` folder (a mistyped ``--pack``: the
    loader's answer, before any lock), EnvironmentProblem or BusyError (exit 5) as :func:`run_lock`."""
    if not (pack_root / "fixes").is_dir():
        raise BadInputError(f"{pack_root}: no fixes/ folder, so no fix pack to write; point --pack at the fix "
                            f"pack's root (nothing was written)")
    with run_lock(pack_root, wait=PACK_WAIT, progress=progress, what="the pack's folder",
                  how_long="a command writing the pack waits for another one that long"):
        yield
