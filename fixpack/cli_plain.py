"""The terminal front's plain parts, without click: the one mapping from an outcome to the exit code, the
error documents, plain lines and JSON, the default pack and ``--root`` values. :mod:`fixpack.cli_common`
(click) and :mod:`fixpack.cli_fast` (the image's plain command lines, no click) both print through these,
each with its own ``echo`` (click's, or :func:`write_line`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from .errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    UNSHOWN,
    BadInputError,
    EnvironmentProblem,
    FixpackError,
    InternalError,
)
from .progress import Progress
from .report import Report
from .states import Action, State

Echo = Callable[..., Any]  # echo(text, err=False): click.echo, or write_line
REPORT_COMMANDS = ("apply", "status", "revert")  # their JSON is a Report (schemas/report.schema.json)
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")  # what click.echo drops from a line written to a pipe


class HasExitCode(Protocol):
    @property
    def exit_code(self) -> int: ...


def exit_code(outcome: BaseException | HasExitCode | None) -> int:
    """The process exit code of a command's outcome: a result's own code (0 when it reached its
    state), an engine error's kind (2 bad input, 3 mismatch, 4 conflict, 5 environment), a usage error
    2, a package missing from the environment 5, and 1 for anything else: a bug."""
    if outcome is None:
        return 0
    if isinstance(outcome, FixpackError):
        return outcome.exit_code
    click = sys.modules.get("click")  # a usage error exists only where click was loaded
    if click is not None and isinstance(outcome, click.ClickException):
        return EXIT_BAD_INPUT
    if isinstance(outcome, ModuleNotFoundError):
        return EXIT_ENVIRONMENT
    if _path_failure(outcome):
        return EXIT_BAD_INPUT if _path_failure(outcome) == "path" else EXIT_ENVIRONMENT
    if isinstance(outcome, BaseException):
        return EXIT_INTERNAL
    return outcome.exit_code


# a path's own failure (a name too long, a loop of links, a file where a folder is): the path given is at fault
_PATH_ERRNOS = {errno.ENAMETOOLONG: "a name too long: give a shorter path",
                errno.ELOOP: "a loop of symbolic links: fix the path or the links",
                errno.ENOTDIR: "a file where a folder is on that path: fix the path"}
_ENV_ERRNOS = {errno.EACCES: "run as a user who may read and write it, or fix its permissions",
               errno.EPERM: "run as a user who may read and write it, or fix its permissions (or an immutable flag)",
               errno.ENOENT: "it went away while the run read it: run again",
               errno.EIO: "check the disk"}


def _path_failure(exc: object) -> str:
    """"path" for an OSError of the path itself (or pathlib's symlink loop), "environment" for one of permissions,
    a file gone or a failing disk that no engine error caught on its way out (said with the file and what to do,
    never as a bug), else ""."""
    if isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop from "):
        return "path"
    if isinstance(exc, FileNotFoundError) and not exc.filename and cwd_gone():
        return "cwd"
    if not isinstance(exc, OSError) or type(exc).__module__ != "builtins" or not exc.filename:
        return ""
    return "path" if exc.errno in _PATH_ERRNOS else "environment" if exc.errno in _ENV_ERRNOS else ""


def cwd_gone() -> bool:
    """The working folder cannot be found (removed while the shell was in it): what a relative path means, and the
    pack the working folder would name, cannot be told (a command given absolute paths runs on)."""
    try:
        os.getcwd()
        return False
    except OSError:
        return True


CWD_GONE = ("the working folder cannot be found (removed while the shell was in it?): give absolute paths and "
            "--pack DIR (or $FIXPACK_PACK), or cd to a folder that exists, and run it again")


_UNSHOWN = re.compile(f"[{UNSHOWN}]")  # (shown as \x1b, \u202e)


def failure_text(exc: BaseException, plain: bool = True) -> str:
    """What a failed command says: the error's message, what to install, or a bug to report; on a ``plain`` line
    (not in a JSON document, which carries any character escaped) a control character or bidirectional control in
    it (a value quoted from a file: a terminal would act on it) shown as its escape."""
    text = _failure_text(exc)
    return _escaped(text) if plain else text


def _escaped(text: str) -> str:
    """``text`` with each control or bidirectional character shown as its escape (``\\x1b``, ``\\u202e``)."""
    return _UNSHOWN.sub(lambda m: ascii(m.group(0))[1:-1], text)


def _failure_text(exc: BaseException) -> str:
    if isinstance(exc, ModuleNotFoundError):
        return missing_package(exc.name or str(exc))
    if _path_failure(exc) == "cwd":
        return CWD_GONE
    if isinstance(exc, RuntimeError) and _path_failure(exc):
        return f"{str(exc).removeprefix('Symlink loop from ')}: {_PATH_ERRNOS[errno.ELOOP]}"
    if isinstance(exc, OSError) and _path_failure(exc):
        said = {**_PATH_ERRNOS, **_ENV_ERRNOS}[exc.errno or 0]
        return f"{exc.filename}: {exc.strerror} ({errno.errorcode.get(exc.errno or 0, '?')}): {said}"
    if isinstance(exc, InternalError):  # a bug, said with what the run did about it
        return f"internal error: {exc} (please report it)"
    return f"internal error: {exc!r} (please report it)" if exit_code(exc) == EXIT_INTERNAL else str(exc)


def missing_package(name: str) -> str:
    """What to install when ``name`` cannot be imported (the image's needs, or the maintainer's); for a module of
    fixpack itself (imported when a command first needs it), what happened instead: nothing to install, its own
    files or the folder it runs from went away while it ran."""
    if name == "fixpack" or name.startswith("fixpack."):
        import os

        try:
            os.getcwd()
            why = "its files are not all there (removed or moved while it ran?): check out the pack or reinstall it"
        except OSError:
            why = ("the folder it was run from was removed while it ran (Python looks for fixpack's modules there): "
                   "run it again from a folder that exists")
        return f"fixpack's own module {name!r} cannot be imported from {Path(__file__).parent}: {why}"
    top = name.split(".")[0]
    need = _NEEDS.get(top, "the maintainer's commands need `pip install -e '.[maintainer]'` from the pack's checkout")
    return f"the Python package {name!r} is not installed in {sys.executable}: {need}; nothing was written"


_IMAGE = "apply, status and revert need `pip install unidiff click installer` (and tomli on Python 3.10)"
_SBOM = ("apply --sbom, sbom and verify need `pip install 'cyclonedx-python-lib[json-validation]'` (setup.cfg's "
         "sbom extra)")
_NEEDS = {"unidiff": _IMAGE, "click": _IMAGE, "tomli": _IMAGE,  # the package each import name comes from
          "installer": _IMAGE.replace("need", "need, to install a component,", 1),
          "cyclonedx": _SBOM, "packageurl": _SBOM, "jsonschema": _SBOM, "referencing": _SBOM,
          "lxml": _SBOM, "license_expression": _SBOM, "sortedcontainers": _SBOM, "py_serializable": _SBOM}


def envelope(command: str, profile: str = "", code: int = 0, error: str = "", **body: Any) -> dict[str, Any]:
    """A JSON document's common keys (every schema under ``schemas/`` has them), then ``body``."""
    from . import __version__

    doc: dict[str, Any] = {"schema": 1, "tool_version": __version__, "command": command, "profile": profile,
                           "ok": code == 0, "exit_code": code, "error": error}
    doc.update(body)
    return doc


def error_document(command: str, profile: str, message: str, code: int, dry_run: bool = False) -> dict[str, Any]:
    """What ``--json`` prints when a command fails before it has a result (its schema's failure form).
    ``dry_run``: the command was asked to write nothing (``--dry-run``; ``status`` always is one)."""
    if command in REPORT_COMMANDS:
        return Report(command, profile, dry_run=dry_run or command == "status", error=message,
                      failure=code).as_dict()
    return envelope(command, profile, code, message)


def argv_profile(argv: list[str]) -> str:
    """The ``--profile`` (``-p``) a command line gives, for an error document written before it is parsed."""
    for i, arg in enumerate(argv):
        if arg in ("--profile", "-p") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--profile="):
            return arg.partition("=")[2]
    return ""


def default_pack_root() -> Path:
    """The working folder if it is a pack (:func:`is_pack`; or is inside a fix's work tree,
    ``<pack>/.edit/<fix>/``: its pack; or inside a pack, ``<pack>/fixes/x``: the nearest folder above that is one, as
    git finds its repository), else the checkout this package lies in; an installed copy of the tool
    (``pip install .``, not editable) has no pack beside it: say so."""
    if cwd_gone():  # no working folder to look in: nor a pack beside this checkout to take in its place unsaid
        raise EnvironmentProblem(f"no fix pack given: {CWD_GONE}")
    here = Path.cwd()
    edit = next((p.parent for p in (here, *here.parents) if p.name == ".edit"), None)
    for root in (here, *([edit] if edit else []), *here.parents, Path(__file__).resolve().parent.parent):
        if is_pack(root):
            return root
    raise BadInputError(f"no fix pack found: neither the working folder ({Path.cwd()}) nor "
                        f"{Path(__file__).parent.parent} holds fixes/series. Give --pack DIR or set $FIXPACK_PACK "
                        f"to a checkout of the fix pack (an installed fixpack ships the tool, not the pack)")


def is_pack(root: Path) -> bool:
    """Whether ``root`` is a fix pack: it has a ``fixes/series`` entry of any kind (a FIFO, a folder, a dangling
    link: loading then names what is wrong with it), or ``fixes/`` and ``profiles/`` folders side by side (its
    series missing). Only looked at (lstat, stat), never read: a FIFO would block."""
    try:
        (root / "fixes" / "series").lstat()
        return True
    except OSError:
        return (root / "fixes").is_dir() and (root / "profiles").is_dir()


def split_roots(values: tuple[str, ...] | list[str]) -> dict[str, Path] | str:
    """``NAME=PATH`` values as a mapping, or what is wrong with them (a usage error)."""
    roots: dict[str, Path] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            return f"{v!r}: expected NAME=PATH, e.g. vllm=/opt/venv/lib/python3.11/site-packages"
        if name in roots and roots[name] != Path(path):
            return f"{name!r} is given twice ({roots[name]} and {path}): give one root per target"
        roots[name] = Path(path)
    return roots


def write_line(text: str, err: bool = False) -> None:
    """One line on stdout (stderr) as click.echo writes it: escape sequences dropped off a terminal."""
    stream = sys.stderr if err else sys.stdout
    stream.write((text if stream.isatty() else _ANSI.sub("", text)) + "\n")
    stream.flush()


def refuse_closed_stdout() -> None:
    """Refuse to run with stdout closed (``>&-``: fd 1 was not open at start, so Python has no
    ``sys.stdout``): exit 5 with one line on stderr, before anything is done. Run first thing by every entry
    (:func:`fixpack.cli_fast.main`, :meth:`fixpack.cli_common.JsonUsageErrors.main`): a file opened later could
    be given fd 1, and what a command or a child process prints would be written into it. A closed stderr as
    well: the exit code alone says it."""
    if sys.stdout is not None:
        return
    try:
        if sys.stderr is not None:
            sys.stderr.write("fixpack: error: stdout is closed (`>&-`): nothing was done; give it a file, a pipe or "
                             "/dev/null (`>/dev/null`) and run again\n")
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(EXIT_ENVIRONMENT)


ENDED: list[int] = []
"""The exit code of the command run by this process once its outcome is decided and written (:func:`deliver`, or
the command's exit: :meth:`fixpack.cli_common.JsonUsageErrors.invoke`): a Ctrl-C after that keeps it
(:func:`fixpack.entry.refuse_interrupt`), never a second document or an "interrupted" line."""


def deliver(write: Callable[[], Any], code: int, what: str = "the report") -> int:
    """Run ``write`` (printing a command's result, whose outcome ``code`` is decided and written); the exit
    code to end with. A reader that went away (``| head``, EPIPE) keeps ``code``: it chose not to read. Any
    other failure to write (ENOSPC, EIO) is exit 5, said in one line on stderr. Either way stdout is pointed
    at /dev/null, so that nothing more is printed and the interpreter's flush at exit cannot fail again."""
    try:
        write()
        ENDED[:] = [code]
    except OSError as exc:
        silence_stdout()
        if exc.errno in (errno.EPIPE, errno.ECONNRESET):
            ENDED[:] = [code]
            return code
        name = errno.errorcode.get(exc.errno or 0, "")
        try:
            write_line(f"fixpack: error: cannot write {what} to stdout: {exc.strerror or exc}"
                       f"{f' ({name})' if name else ''}; the run itself had finished (exit {code}), only its "
                       f"output is lost: run status with stdout on a file or pipe that can be written to see the "
                       f"image", err=True)
        except OSError:
            pass
        ENDED[:] = [EXIT_ENVIRONMENT]
        return EXIT_ENVIRONMENT
    return code


def silence_stdout(stream: Any = None) -> None:
    """Point stdout's (``stream``'s) file descriptor at /dev/null (what is still buffered goes there, not to the
    lost reader)."""
    import os

    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, (stream or sys.stdout).fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # no stdout at all: nothing to silence
        pass


class SteadyStream:
    """``sys.stdout`` or ``sys.stderr`` for a command that prints as it goes (lock, check, rebase, fetch...):
    a write that fails does not stop the command. A reader that left (EPIPE) is let go, as
    :func:`deliver` does for apply; another failure (ENOSPC, EIO) is kept in :attr:`lost` for the end of
    the command to say. Either way the stream's descriptor then points at /dev/null, so that nothing more
    fails (the interpreter's flush at exit included)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.lost: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as exc:
            self._lose(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        if exc.errno not in (errno.EPIPE, errno.ECONNRESET) and self.lost is None:
            self.lost = exc
        silence_stdout(self._stream)
        try:  # what the failed write left in the buffer goes to /dev/null now
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def steady_streams(stdout: bool = True) -> Iterator[SteadyStream | None]:
    """Run a command with :class:`SteadyStream` as ``sys.stderr`` (and ``sys.stdout`` unless ``stdout`` is
    False: a command that prints through :func:`deliver`); yields stdout's, to be asked what was lost. A
    stderr closed before the run (``2>&-``: Python has none) is /dev/null for it, so a progress line or an
    error message cannot fail."""
    import os

    before = sys.stdout
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # the process's stderr from now on
    err = sys.stderr
    out = SteadyStream(sys.stdout) if stdout and sys.stdout is not None else None
    sys.stderr = SteadyStream(err)
    if out is not None:
        sys.stdout = out
    try:
        yield out
    finally:
        sys.stdout, sys.stderr = before, err


def output_lost(exc: OSError, code: int) -> int:
    """The exit code of a command whose output could not be written (not a reader that left): 5, said in one line
    on stderr with the errno; the command itself had gone on to its end (exit ``code``)."""
    name = errno.errorcode.get(exc.errno or 0, "")
    try:
        write_line(f"fixpack: error: cannot write to stdout: {exc.strerror or exc}{f' ({name})' if name else ''}; "
                   f"the command went on to its end (exit {code}), only its output is lost: run it again with stdout "
                   f"on a file or pipe that can be written to", err=True)
    except OSError:
        pass
    return EXIT_ENVIRONMENT


def emit_json(doc: dict[str, Any], echo: Echo) -> None:
    echo(json.dumps(doc, indent=2, sort_keys=True))


def render_plain(report: Report, echo: Echo) -> None:
    """The report as plain lines: a head line, a line per target and per fix, the summary."""
    echo(f"{report.command} profile {report.profile}" + (" (dry run)" if report.dry_run else ""))
    for t in report.targets:
        facts = f" {t.version or '?'} @ {t.commit or '?'}" if t.status.value in ("found", "mismatch") else ""
        echo(f"target {t.name}: {t.status.value}{facts}" + (f" at {_one_line(str(t.root))}" if t.root else ""))
        for note in t.notes:  # a line each: a sentence of its own, never run into the root or another; the lines
            echo("  - " + note.replace("\n", "\n    "))  # of a multi-line one (a pack error's list) under it
    for f in report.fixes:
        opt = " (opt-in)" if f.opt_in else ""
        detail = _one_line("; ".join(f.messages))  # drifted fixes carry their offsets in their messages already
        echo(f"{f.id} v{f.version}{opt}: {f.state.value}, {f.action.value}" + (f" - {detail}" if detail else ""))
    echo(_one_line(summary(report)))


def _one_line(text: str) -> str:
    """``text`` on one plain line: a line feed (a --root whose name holds one, quoted in a message) shown as ``\\n``,
    a control or bidirectional character as its escape; --json keeps them as they are."""
    return _escaped(text).replace("\n", "\\n")


def summary(report: Report) -> str:
    if not report.ok:
        return f"FAILED (exit {report.exit_code}): {report.error}"
    counts: dict[str, int] = {}
    for f in report.fixes:
        key = f.action.value if f.action is not Action.NONE else (
            "already applied" if f.state is State.APPLIED else f.state.value)
        counts[key] = counts.get(key, 0) + 1
    return "OK: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to do")


class PlainProgress(Progress):
    """The engine's progress as plain lines on stderr (a pipe, CI, ``NO_COLOR``, ``--color never``)."""

    def __init__(self, echo: Echo = write_line) -> None:
        self.echo = echo
        self._last: dict[str, float] = {}

    def note(self, message: str) -> None:
        self.echo(f"fixpack: {message}", err=True)

    def transfer(self, label: str, done: int, total: int | None, finished: bool = False) -> None:
        import time

        now = time.monotonic()
        if finished or done == 0 or now - self._last.get(label, 0.0) >= 2.0:
            self._last[label] = now
            of = f" of {total / 1e6:.1f} MB" if total else ""
            state = "done" if finished else "downloading"
            self.echo(f"fixpack: {label}: {state}, {done / 1e6:.1f} MB{of}", err=True)
