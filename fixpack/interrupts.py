"""SIGTERM handled as Ctrl-C is, for the runs that must not die half way through a write (``prove``, whose image
is reverted in a ``finally``; ``rebase``, whose pack files are put back when their write is cut): a CI timeout's
SIGTERM would otherwise end the process where it stands, no ``finally`` or ``except`` run.

In a :func:`signals` block SIGTERM raises :class:`Term`, a KeyboardInterrupt, where the run is, so that it unwinds
as a Ctrl-C does (a write under way puts itself back, a running subprocess is killed), and is noted; the run then
says what it did as it does for Ctrl-C, as :class:`fixpack.errors.Terminated` (exit 143). The clean-up itself runs
in a ``deferred`` block, where SIGTERM and SIGINT are only noted: it runs to its end, and the caller acts on them
after. Only the main thread can set handlers: elsewhere the block handles nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Term(KeyboardInterrupt):
    """SIGTERM raised where the run is, so that it unwinds as Ctrl-C does."""


@contextmanager
def signals(got: list[int], deferred: bool = False) -> Iterator[None]:
    """SIGTERM handled in the block: noted in ``got`` and raised as :class:`Term`; with ``deferred`` SIGTERM and
    SIGINT are only noted (the block runs to its end; the caller acts after). The handlers before are put back
    when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: FrameType | None) -> None:
        got.append(signum)
        if not deferred:
            raise Term()

    old = {s: signal.signal(s, note) for s in ((signal.SIGTERM, signal.SIGINT) if deferred else (signal.SIGTERM,))}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


@contextmanager
def interrupt_once() -> Iterator[None]:
    """In the block, the first SIGINT raises KeyboardInterrupt where the run is, as Ctrl-C does, and the first
    SIGTERM :class:`Term` (a KeyboardInterrupt: a CI timeout or ``docker stop`` unwinds the write as Ctrl-C does,
    where it ended the process half way through it); every later one of either is ignored, so that what the first
    set going (a write put back from its journal, the backups removed) runs to its end: a second Ctrl-C cut a
    rollback, leaving the target half written and its journal, under a message that said no write was under way.
    A signal the process ignores (SIGINT in a background job) stays ignored; only the main thread can set
    handlers: elsewhere the block handles nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []

    def once(signum: int, frame: FrameType | None) -> None:
        if not fired:
            fired.append(signum)
            raise Term() if signum == signal.SIGTERM else KeyboardInterrupt

    old = {s: signal.signal(s, once) for s in (signal.SIGINT, signal.SIGTERM)
           if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


def terminated(exc: BaseException, got: list[int]) -> bool:
    """Whether the run was stopped by SIGTERM: ``exc`` is a :class:`Term`, or ``got`` (a :func:`signals` list)
    holds SIGTERM."""
    return isinstance(exc, Term) or signal.SIGTERM in got
