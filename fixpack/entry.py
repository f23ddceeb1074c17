"""The entry points' guard (``python -m fixpack.cli``, the ``fixpack`` console script, ``apply_all.py``):
Ctrl-C (SIGINT) while Python imports the tool, before a command has started, is exit 5 with the one
``interrupted`` line (a JSON document with ``--json``), never a traceback, an exit 1 or a death by SIGINT;
and one that comes after the command has ended, or a SIGTERM then, leaves its exit code as it was.

This module imports nothing heavy (only ``sys``; not even ``typing``), so that the guard is in place
before the rest of the tool is imported; the message is built only when it is needed
(:func:`fixpack.errors.interrupted`). An entry imports it inside ``try`` and, interrupted even there, calls
:func:`refuse_interrupt`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing takes milliseconds to import: its names are for the type checker only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn


def guarded(body: Callable[[], object], argv: list[str], command: str = "") -> NoReturn:
    """Run ``body`` (it imports and runs the command, and exits with its code) and exit with that code;
    ``command`` names it when ``argv`` does not (``apply_all.py``). A KeyboardInterrupt that reaches here
    is refused as :func:`fixpack.errors.interrupted` is (exit 5): the commands turn one during their run
    into that themselves (a write under way rolls itself back first), so here it is one during the imports.
    Once the run has ended SIGINT is ignored: Python's shutdown would restore its default action, and a
    Ctrl-C then would kill the finished run (exit -2)."""
    code: str | int | None = 0
    try:
        _term_as_interrupt()
        try:
            body()
        except SystemExit as exc:
            code = exc.code
        _ignore_sigint()
    except KeyboardInterrupt as stop:
        from .interrupts import terminated

        refuse_interrupt(argv, command, terminated(stop, []))
    except Exception as exc:  # one Python wrapped (fixpack.errors.by_interrupt) while the tool imports
        from .errors import by_interrupt

        if by_interrupt(exc):
            refuse_interrupt(argv, command)
        raise
    sys.exit(code)


def _term_as_interrupt() -> None:
    """SIGTERM raised as :class:`fixpack.interrupts.Term` (a KeyboardInterrupt) where the command is, from here on, so
    that it unwinds and is said as a Ctrl-C is, with exit 143 (a write under way sets its own handler and puts itself
    back first): by its default action it ended a run that waited for the lock or planned with no line, no JSON
    document, killed by signal 15. A SIGTERM the process ignores stays ignored."""
    import signal

    def term(signum: int, frame: object) -> None:
        from .interrupts import Term

        raise Term()

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, term)


def refuse_interrupt(argv: list[str], command: str = "", term: bool = False) -> NoReturn:
    """Exit 5 saying the run was interrupted (one line on stderr, or the error document with ``--json``), a second
    Ctrl-C ignored; ``term``: SIGTERM's (exit 143); ``command`` as for :func:`guarded`. One that comes after the
    command has ended (its output written: :data:`fixpack.cli_plain.ENDED`) keeps its exit code and says no more."""
    _ignore_sigint()
    ended = getattr(sys.modules.get("fixpack.cli_plain"), "ENDED", None)
    if ended:
        sys.exit(ended[0])
    words = [a for i, a in enumerate(argv) if not a.startswith("-") and argv[i - 1:i] != ["--color"]]
    command = command or (words[0] if words else "")
    from .cli_plain import argv_profile, deliver, emit_json, error_document, write_line
    from .errors import interrupted

    exc = interrupted(command or "run", term)
    if "--json" in argv:
        doc = error_document(command, argv_profile(argv), str(exc), exc.exit_code, "--dry-run" in argv)
        sys.exit(deliver(lambda: emit_json(doc, write_line), exc.exit_code))
    try:
        write_line(f"fixpack: error: {exc}", err=True)
    except OSError:  # stderr gone too: the code is all that is left to say it
        pass
    sys.exit(exc.exit_code)


def _ignore_sigint() -> None:
    """SIGINT and SIGTERM ignored from here on (the run has ended or is saying why it stopped: a SIGTERM now,
    a CI timeout's, would end a finished run as killed, exit 143 with nothing said, where the command's own
    code is the truth), and CPython's note of an unhandled KeyboardInterrupt cleared: a Ctrl-C
    that landed in code run by ``exec`` of a string (a dataclass's generated methods, while a module is
    imported) sets it even when the KeyboardInterrupt is then caught, and Python would end the process by
    SIGINT (exit -2) after this run's own exit; the next ``exec`` of a string that completes clears it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    exec("None")  # a constant: only to clear that note
