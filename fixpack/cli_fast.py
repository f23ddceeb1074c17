"""The image's fast entry: ``apply``, ``status`` and ``revert`` run without loading click (its import is
most of a no-op run) when the command line uses only their plain options and the output is plain lines
or JSON (a pipe, a build log). Anything else (a terminal with rich, ``--help``, a usage error, ``--reject``
or ``--sbom``, an option given twice) returns None before the engine runs, and the caller hands the same
command line to click, which parses it as always.

:data:`OPTIONS` is the one definition of these commands' options: :mod:`fixpack.cli_common` and
:mod:`fixpack.cli` build their click options from it (names, environment variables, kind, default).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .cli_plain import (
    PlainProgress,
    default_pack_root,
    deliver,
    emit_json,
    error_document,
    exit_code,
    failure_text,
    refuse_closed_stdout,
    render_plain,
    split_roots,
    write_line,
)
from .errors import by_interrupt, interrupted
from .interrupts import terminated

# parameter -> (option names, kind, environment variable, default); kind: "text" (one value), "many"
# (repeatable), "dir" (a folder, as click.Path(file_okay=False)), "flag"
OPTIONS: dict[str, tuple[tuple[str, ...], str, str | None, str | None]] = {
    "profile": (("--profile", "-p"), "text", None, None),
    "roots": (("--root",), "many", None, None),
    "only_targets": (("--target",), "many", None, None),
    "pack_root": (("--pack",), "dir", "FIXPACK_PACK", None),
    "copies_root": (("--copies",), "dir", "GAUDI_FIXES_ROOT", None),
    "lock_wait": (("--lock-wait",), "text", "FIXPACK_LOCK_WAIT", "10"),
    "as_json": (("--json",), "flag", None, None),
    "color": (("--color",), "text", None, None),
    "dry_run": (("--dry-run",), "flag", None, None),
    "strict": (("--strict",), "flag", None, None),
    "all_opt_in": (("--all-opt-in",), "flag", None, None),
}
COMMON = ("profile", "roots", "only_targets", "pack_root", "copies_root", "lock_wait", "as_json", "color")
COMMANDS = {"apply": (*COMMON, "dry_run", "strict", "all_opt_in"), "status": (*COMMON, "strict", "all_opt_in"),
            "revert": (*COMMON, "dry_run")}
TAKES_FIXES = ("apply", "status")  # their arguments name opt-in fixes


def names(param: str) -> tuple[str, ...]:
    return OPTIONS[param][0]


def parse(command: str, argv: list[str], defaults: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``argv`` of ``command`` as the keyword arguments its click command would get, or None when click
    must parse it (anything but plain options and, for apply, fix names)."""
    flag_of = {n: p for p in COMMANDS[command] for n in names(p)}
    given: dict[str, Any] = {}
    opt_ins: list[str] = []
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        param = flag_of.get(name)
        if param is None:
            if arg.startswith("-") or command not in TAKES_FIXES:
                return None
            opt_ins.append(arg)
            continue
        kind = OPTIONS[param][1]
        if kind == "flag":
            if eq:
                return None
            given[param] = True
            continue
        value = value if eq else next(args, "")
        if not value or value.startswith("-") or (kind != "many" and param in given):
            return None
        given[param] = [*given.get(param, []), value] if kind == "many" else value
    return _complete(command, given, opt_ins, defaults or {})


def _complete(command: str, given: dict[str, Any], opt_ins: list[str],
              defaults: dict[str, Any]) -> dict[str, Any] | None:
    """Each parameter's value as click resolves it: the command line, its environment variable (when not
    empty), the caller's default, the option's default; None where click would refuse it, or draw rich."""
    out: dict[str, Any] = {"opt_ins": tuple(opt_ins)} if command in TAKES_FIXES else {}
    for param in COMMANDS[command]:
        _flags, kind, env, default = OPTIONS[param]
        value = given.get(param) or (os.environ.get(env) if env else None) or defaults.get(param) or default
        if kind == "many":
            value = tuple(value or ())
        elif kind == "flag":
            value = bool(value)
        elif kind == "dir" and value is not None:
            value = Path(value)
            try:
                if str(value) in ("", ".") or value.is_file() or (value.exists() and not os.access(value, os.R_OK)):
                    return None
            except OSError:  # a name too long, a loop of links: click's path check says it
                return None
        out[param] = value
    roots = split_roots(out["roots"])
    seconds = seconds_value(out["lock_wait"])
    if not out["profile"] or isinstance(roots, str) or seconds is None or not _plain(out.pop("color")):
        return None
    out["lock_wait"] = seconds
    return out


def seconds_value(value: Any) -> float | None:
    """A lock wait in seconds (a number >= 0 and finite), or None when ``value`` is not one."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds < float("inf") else None


def _plain(color: str | None) -> bool:
    """Whether the output is plain lines (no rich): ``--color never``, or auto with ``$NO_COLOR``, no
    terminal on stdout and stderr, or no rich installed; and both streams take UTF-8 as they are."""
    if color not in (None, "auto", "never"):
        return False
    streams = (sys.stdout, sys.stderr)
    if any(s is None or (getattr(s, "encoding", "") or "").lower().replace("-", "") != "utf8" for s in streams):
        return False
    if color == "never" or os.environ.get("NO_COLOR") or not any(s.isatty() for s in streams):
        return True
    from importlib.util import find_spec

    return find_spec("rich") is None  # a terminal without rich gets plain lines too


def run(command: str, argv: list[str], defaults: dict[str, Any] | None = None) -> int | None:
    """Run ``command`` (apply, status, revert) from ``argv`` without click: the exit code, or None (nothing
    was run) when click must handle this command line."""
    params = parse(command, argv, defaults) if command in COMMANDS else None
    if params is None:
        return None
    as_json, profile = params.pop("as_json"), params["profile"]
    dry_run = command == "status" or params.get("dry_run", False)
    try:
        try:  # Ctrl-C while the engine is imported, too: exit 5 with its line, no traceback
            from . import engine

            roots = split_roots(params.pop("roots"))
            assert not isinstance(roots, str)  # checked by parse
            req = engine.Request(pack_root=params.pop("pack_root") or default_pack_root(), roots=roots,
                                 env_root=params.pop("copies_root"), progress=PlainProgress(), **params)
            report = getattr(engine, command)(req)
        except KeyboardInterrupt as stop:
            raise interrupted(command, terminated(stop, [])) from None
    except Exception as exc:
        exc = interrupted(command) if by_interrupt(exc) else exc
        return _say(error_document(command, profile, failure_text(exc, False), exit_code(exc), dry_run) if as_json
                    else f"fixpack: error: {failure_text(exc)}", exit_code(exc))
    return _say(report.as_dict() if as_json else report, exit_code(report))


def _say(what: Any, code: int) -> int:
    """Print a result (a report, a JSON document, or an error line on stderr) and return the exit code: the
    run's own ``code``, also when the reader went away (``| head``); 5 when stdout cannot be written
    (:func:`fixpack.cli_plain.deliver`)."""
    if isinstance(what, dict):
        return deliver(lambda: emit_json(what, write_line), code)
    if isinstance(what, str):
        try:
            write_line(what, err=True)
        except OSError:  # stderr gone too: the code is all that is left to say it
            pass
        return code
    return deliver(lambda: render_plain(what, write_line), code)


def main(argv: list[str] | None = None, defaults: dict[str, Any] | None = None, command: str | None = None) -> None:
    """``fixpack COMMAND ...`` (``command`` None: the first argument names it) or, with ``command``, that
    command's arguments: exits with its code when it ran here; returns (having done nothing) otherwise. A
    closed stdout is refused first (exit 5, :func:`fixpack.cli_plain.refuse_closed_stdout`)."""
    refuse_closed_stdout()
    args = list(sys.argv[1:] if argv is None else argv)
    if command is None:
        command, args = (args[0], args[1:]) if args else ("", [])
    code = run(command, args, defaults)
    if code is not None:
        sys.exit(code)
