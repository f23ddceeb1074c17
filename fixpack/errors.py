"""The one exception hierarchy of the engine, and the process exit code of each kind.

Every message says what went wrong, where (file and line when there is one), and what to do next.
The engine never calls ``sys.exit``; the CLI maps ``FixpackError.exit_code`` to the process status.

Exit codes (documented in the README):

=====  ==========================================================================
 0     the image ends in the profile's state
 1     an unexpected internal error (a bug: please report it)
 2     bad input: the pack, a profile, a patch, a lock file or the command line
 3     image mismatch: a pin, a fingerprint, a missing target, a tampered file; or the tool's own state
       damaged or planted (an image's journal, a rebase's ``state.json`` or ``<name>.undo.json``)
 4     conflict: a fix does not apply, or applies only in part
 5     environment: the target is not writable, another run holds the lock
 143   ended by SIGTERM once what it had under way was undone (:class:`Terminated`): prove (its revert done),
       rebase (the pack files it was writing put back, or its work kept where it was carrying the fixes)
=====  ==========================================================================
"""

from __future__ import annotations

import re
from pathlib import Path

from .structs import dataclass, field

# the characters a message quoting a file's words shows escaped, and import refuses in a mail's words: a control
# character but tab and line feed (C0, DEL, C1), a bidirectional embedding, override or isolate (Trojan Source)
UNSHOWN = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_MISMATCH = 3
EXIT_CONFLICT = 4
EXIT_ENVIRONMENT = 5
EXIT_TERMINATED = 143  # 128 + SIGTERM (15), the shell's code for a process ended by SIGTERM
# a refusal's claim that it wrote nothing (a run that rolled an interrupted one back first says so instead)
NOTHING_SAID = re.compile(r"nothing (?:in the (?:target|pack) )?was (?:written|changed)")


@dataclass(frozen=True)
class Problem:
    """One problem found while loading or checking: where it is and what to do."""

    message: str
    path: Path | None = None
    line: int | None = None
    hint: str = ""

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line else f"{self.path}: "
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{self.message}{hint}"


class FixpackError(Exception):
    """Base of every error the engine raises on purpose."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        self.problems: list[Problem] = list(problems or [])
        super().__init__(message)

    def __str__(self) -> str:
        head = super().__str__()
        if not self.problems:
            return head
        return head + "\n" + "\n".join(f"  - {p}" for p in self.problems)


class BadInputError(FixpackError):
    """The pack, a profile, a patch, the lock or the command line is wrong."""

    exit_code = EXIT_BAD_INPUT


class PackError(BadInputError):
    """Loading or validating the pack found problems (each with file and line)."""


class PatchParseError(BadInputError):
    """A patch file does not parse, or holds something the engine refuses (CRLF, escaping path). Its ``problems``
    restate the message, with its line and what to do, for a load that collects each patch's problems under the
    fix's; said on its own (``import``, ``refresh``), it is the message once, with what to do after it."""

    def __str__(self) -> str:
        hints = dict.fromkeys(p.hint for p in self.problems if p.hint)  # (in order, each once)
        return Exception.__str__(self) + "".join(f" ({hint})" for hint in hints)


class UnknownNameError(BadInputError):
    """A profile or fix name that the pack does not have; the message lists close matches."""


class StaleLockError(BadInputError):
    """The profile's lock does not match the pack or the release copy; regenerate it. A lock file that does
    not read says where: ``line`` (1-based, None when no line can be named), ``what`` (the message after
    the lock's path, up to its advice) and ``hint`` (that advice: the command that regenerates it)."""

    def __init__(self, message: str, line: int | None = None, what: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.what = what or message
        self.hint = hint


class MismatchError(FixpackError):
    """The image does not match the profile: a pin, a fingerprint, a missing target, tampering."""

    exit_code = EXIT_MISMATCH


class DamagedStateError(MismatchError):
    """The tool's own state on disk (manifest, journal, backups, the state folder) is damaged or planted.

    Raised before anything is written, in every command: state on disk is untrusted input.
    """

    def __init__(self, path: Path, what: str, advice: str = "remove it or restore the image") -> None:
        super().__init__(f"the state in {path} is damaged: {what}; {advice} (nothing was written)")
        self.path = path
        self.what = what


class DamagedJournalError(DamagedStateError):
    """A journal a killed run left that cannot be rolled back. ``root``: the tree it was writing; ``raw``: its
    bytes (never trusted, read only to name the files). The message's first step names no command: the run,
    which knows the target's release, renders one (:func:`fixpack.advice.journal_steps`)."""

    def __init__(self, path: Path, what: str, advice: str, root: Path, raw: bytes) -> None:
        super().__init__(path, what, advice)
        self.root = root
        self.raw = raw


class ConflictError(FixpackError):
    """A fix does not apply, or only some of its hunks are present."""

    exit_code = EXIT_CONFLICT


class EnvironmentProblem(FixpackError):
    """The target cannot be written, or another run holds the lock."""

    exit_code = EXIT_ENVIRONMENT


class BusyError(EnvironmentProblem):
    """Another run holds the target's lock."""


def unreadable(path: Path | str, exc: OSError, whose: str = "the pack", after: str = "nothing was written"
               ) -> UnreadableError | None:
    """The error for a read of ``path`` that failed for no fault of its bytes: permissions (EACCES, EPERM: the file,
    or a folder on its way, is not readable by this user) or the disk (EIO): exit 5 naming the file, the errno and
    what to do, then ``after`` (what the run wrote). None for another errno (the caller says what that is). ``whose``:
    what the file belongs to, in the advice ("the pack")."""
    import errno

    perms = f"run as a user who may read {whose}, or fix the permissions of it and of the folders on its way"
    todo = {errno.EACCES: perms, errno.EPERM: perms,
            errno.EIO: f"the disk failed to read it: check the disk (dmesg), or put {whose} there again from its "
                       f"source"}.get(exc.errno or 0)
    if todo is None:
        return None
    return UnreadableError(f"{path}: cannot be read: {exc.strerror} ({errno.errorcode[exc.errno or 0]}); {todo}",
                           after)


def raise_unreadable(path: Path | str, exc: OSError, whose: str = "the pack") -> None:
    """Raises :func:`unreadable`'s error for ``exc`` when it is one (permissions, the disk); else returns."""
    err = unreadable(path, exc, whose)
    if err is not None:
        raise err from None


class UnreadableError(EnvironmentProblem):
    """A file this user may not read (:func:`unreadable`); ``said``: the message without what the run wrote, for a
    run that goes on without the file (revert without its lock)."""

    def __init__(self, said: str, after: str = "") -> None:
        super().__init__(f"{said}; {after}" if after else said)
        self.said = said


def says_disk_full(text: str) -> bool:
    """Whether a tool's output (git, pip) says a write found no room: ENOSPC or EDQUOT, in the C library's words."""
    return "No space left on device" in text or "Disk quota exceeded" in text


def io_said(exc: OSError, where: Path | str) -> str:
    """``where`` and the errno of a failed I/O, in the C library's words and by name: "PATH: No space left on device
    (ENOSPC)"."""
    import errno
    import os

    name = errno.errorcode.get(exc.errno or 0, "?")
    return f"{where}: {os.strerror(exc.errno) if exc.errno else exc} ({name})"


def io_advice(exc: OSError) -> str:
    """What to do about a failed write, by its errno ("free space on its file system"; else "remove the cause")."""
    import errno

    return {errno.ENOSPC: "free space on its file system", errno.EDQUOT: "free space or raise the quota",
            errno.EROFS: "remount it read-write", errno.EACCES: "run as a user who may write it",
            errno.EPERM: "run as a user who may write it (or clear an immutable flag)",
            errno.EIO: "check the disk"}.get(exc.errno or 0, "remove the cause")


def write_failed(exc: OSError, path: Path, data: bytes, kept: str = "") -> EnvironmentProblem:
    """The error (exit 5) for a file of the pack (a lock, a patch) whose write of ``data`` through a temp file failed:
    the file as it was before, or, when only the sync of its folder after the rename failed, holding ``data`` (a crash
    may lose it yet); ``kept``: what else the command wrote before it, or did not; and what to do."""
    from .safepath import holds_bytes

    if holds_bytes(path, data):
        return EnvironmentProblem(f"cannot sync the folder of {path} after it was written ({io_said(exc, path.parent)})"
                                  f"; the file holds its new bytes, which a crash may still lose{kept}. "
                                  f"{io_advice(exc).capitalize()} and run again")
    return EnvironmentProblem(f"cannot write {io_said(exc, path)}; the file is as it was{kept}. "
                              f"{io_advice(exc).capitalize()} and run again")


def failure_of(exc: OSError) -> tuple[str, str]:
    """The file and the reason of a failed I/O, the reason in the C library's words and by name ("No space left on
    device (ENOSPC)"); a ``shutil.Error`` (an OSError holding copytree's (source, destination, why) list, with no
    errno of its own) gives its first failure."""
    import errno

    where, why = str(exc.filename or ""), f"{exc.strerror or exc} ({errno.errorcode.get(exc.errno or 0, '?')})"
    if _copy_failures(exc):
        _src, where, why = (str(x) for x in exc.args[0][0])  # shutil.Error: copytree's first failure
        said = _ERRNO_SAID.match(why)  # "[Errno 28] No space left on device: 'a' -> 'b'"
        why = f"{said[2]} ({errno.errorcode.get(int(said[1]), '?')})" if said else why
    return where, why


_ERRNO_SAID = re.compile(r"\[Errno (\d+)\] (.*?)(?:: '|$)")  # how an OSError's text starts


def _copy_failures(exc: OSError) -> bool:
    """Whether ``exc`` is a ``shutil.Error``: copytree's list of (source, destination, why) for each file it could not
    copy, with no errno of its own."""
    return bool(exc.args and isinstance(exc.args[0], list) and exc.args[0] and len(exc.args[0][0]) == 3)


def errno_of(exc: OSError) -> int | None:
    """The errno of a failed I/O; of a ``shutil.Error``, its first failure's (read from its text)."""
    if not _copy_failures(exc):
        return exc.errno
    said = _ERRNO_SAID.match(str(exc.args[0][0][2]))
    return int(said[1]) if said else None


def temp_work_failed(exc: OSError, doing: str, unchanged: str) -> EnvironmentProblem:
    """The error for an I/O failure while ``doing`` work in a temporary folder (a staging copy, a wheel build), where
    ``unchanged`` ("the pack") is not written yet: the file and the errno, and what to do: free space in $TMPDIR (or
    point it elsewhere) when the file lies there, else remove the cause. A ``shutil.Error`` (an OSError holding
    copytree's (source, destination, why) list) names its first failure."""
    import tempfile

    where, why = failure_of(exc)
    tmp = tempfile.gettempdir().rstrip("/")
    inside = where == tmp or where.startswith(tmp + "/")
    todo = (f"Free space there, or set TMPDIR to a folder with room ({tmp} now), and run again" if inside else
            "Remove the cause and run again")
    return EnvironmentProblem(f"{where or tmp}: {why} while {doing}; nothing in {unchanged} was written. {todo}")


_AFTER_INTERRUPT = {
    "apply": "no write was under way (one under way rolls itself back and says so), so each target holds what it "
             "held before this run, or this run's completed writes (fixpack status shows which). Run again",
    "status": "status writes nothing. Run again",
    "fetch": "the release cache keeps no half copy (a download lands in a .part file, an unpack in a .unpack-* "
             "folder, and the next fetch starts them over). Run again",
}
_AFTER_INTERRUPT["revert"] = _AFTER_INTERRUPT["apply"]


def by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C in disguise: a KeyboardInterrupt among its causes (Python 3.11 wraps one raised
    in a class's ``__set_name__`` while a module is imported, e.g. a ``cached_property``, in a RuntimeError).
    Never one of this tool's errors (a FixpackError was raised knowing of any interrupt, and says it: a
    SIGTERM, exit 143, or a write's rollback), nor a context its raiser suppressed (``raise ... from None``)."""
    if isinstance(exc, FixpackError):
        return False
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    return False


def interrupted(command: str, term: bool = False) -> FixpackError:
    """Ctrl-C (SIGINT) outside a write, or SIGTERM (``term``: a CI timeout, ``docker stop``; exit 143): what the CLI
    says instead of a traceback (exit 5), fitting ``command`` (a write to a target has rolled itself back before this:
    :func:`fixpack.transaction.write_transaction`; a fetch has no target)."""
    after = _AFTER_INTERRUPT.get(command, f"fixpack {command} did not finish. Run it again")
    how, kind = stopped_by(term)
    return kind(f"{how}; {after}")



class Terminated(FixpackError):
    """SIGTERM (a CI timeout) during a run that handles it (:mod:`fixpack.interrupts`): what it had under way was
    undone first (a proof's revert, a rebase's pack write put back), or the message says how to finish that.
    Exit 143, the shell's code for a process ended by SIGTERM."""

    exit_code = EXIT_TERMINATED


def stopped_by(term: bool) -> tuple[str, type[FixpackError]]:
    """How a run stopped by a signal says so, and the error that says it: SIGTERM ``terminated (SIGTERM)``,
    :class:`Terminated` (exit 143); Ctrl-C ``interrupted (Ctrl-C, SIGINT)``, :class:`EnvironmentProblem` (exit 5)."""
    return ("terminated (SIGTERM)", Terminated) if term else ("interrupted (Ctrl-C, SIGINT)", EnvironmentProblem)


def of_code(code: int) -> type[FixpackError]:
    """The error class that exits with ``code``: an error said again in other words, with its own exit code (a
    rebase's pack write put back after it: :func:`fixpack.rebase_session.write_pack`)."""
    kinds: dict[int, type[FixpackError]] = {EXIT_BAD_INPUT: BadInputError, EXIT_MISMATCH: MismatchError,
                                            EXIT_CONFLICT: ConflictError, EXIT_ENVIRONMENT: EnvironmentProblem,
                                            EXIT_TERMINATED: Terminated}
    return kinds.get(code, FixpackError)


class InternalError(FixpackError):
    """A bug of this tool (exit 1, :data:`EXIT_INTERNAL`) said with what the run did about it: its message starts
    with the bug's ``repr`` (a rebase's pack write put back after it: :func:`fixpack.rebase_session.write_pack`)."""


class GitError(FixpackError):
    """A git command failed; the message holds the command, its exit code and its output."""

    exit_code = EXIT_ENVIRONMENT


@dataclass
class Collector:
    """Gathers problems so that loading reports all of them at once, not just the first."""

    problems: list[Problem] = field(default_factory=list)

    def add(self, message: str, path: Path | None = None, line: int | None = None, hint: str = "") -> None:
        self.problems.append(Problem(message, path, line, hint))

    def raise_if_any(self, what: str, error: type[FixpackError] = PackError) -> None:
        if self.problems:
            n = len(self.problems)
            raise error(f"{what}: {n} problem{'s' if n != 1 else ''}", self.problems)
