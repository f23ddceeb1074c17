"""How long work tells what it is doing. The engine calls a :class:`Progress`; the CLI renders it (a
rich bar or status on a terminal, plain lines on stderr otherwise). The default says nothing, so that
the engine's callers and tests need not care.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Progress:
    """The engine's progress hook; every method is a no-op here."""

    def note(self, message: str) -> None:
        """One line: something started, or finished (with its outcome and seconds)."""

    def transfer(self, label: str, done: int, total: int | None, finished: bool = False) -> None:
        """``done`` of ``total`` bytes of a download (``total`` None when the server does not say)."""

    @contextmanager
    def step(self, message: str) -> Iterator[None]:
        """Say ``message``, run the block, then say how long it took (when it took a second or more)."""
        start = time.monotonic()
        self.note(f"{message} ...")
        yield
        if time.monotonic() - start >= 1.0:
            self.note(f"{message}: done in {time.monotonic() - start:.1f} s")


QUIET = Progress()


class DownloadTracker:
    """pypi-simple's progress tracker (a context manager with ``update(bytes)``) over a Progress."""

    def __init__(self, progress: Progress, label: str, total: int | None) -> None:
        self.progress, self.label, self.total, self.done = progress, label, total, 0

    def __enter__(self) -> DownloadTracker:
        self.progress.transfer(self.label, 0, self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.transfer(self.label, self.done, self.total, finished=True)

    def update(self, increment: int | None) -> None:
        self.done += increment or 0
        self.progress.transfer(self.label, self.done, self.total)
