"""What every command of the terminal front shares: the pack and root options, the one mapping from
an outcome (an exception or a result) to the process exit code, and how a result is printed.

Only the CLI reads the environment: ``$FIXPACK_PACK`` and ``$GAUDI_FIXES_ROOT`` come in as option
defaults through click (``envvar``), never inside the engine. rich is imported only to draw a table
on a terminal; a pipe (an image build, CI) gets plain lines and never pays for it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, Protocol

import click

from .errors import EXIT_BAD_INPUT, EXIT_INTERNAL, FixpackError


class HasExitCode(Protocol):
    @property
    def exit_code(self) -> int: ...


def exit_code(outcome: BaseException | HasExitCode | None) -> int:
    """The process exit code of a command's outcome: a result's own code (0 when it reached its
    state), an engine error's kind (2 bad input, 3 mismatch, 4 conflict, 5 environment), a usage error
    2, and 1 for anything else: a bug."""
    if outcome is None:
        return 0
    if isinstance(outcome, FixpackError):
        return outcome.exit_code
    if isinstance(outcome, click.ClickException):
        return EXIT_BAD_INPUT
    if isinstance(outcome, BaseException):
        return EXIT_INTERNAL
    return outcome.exit_code


def default_pack_root() -> Path:
    """The working folder if it holds ``fixes/series``, else the checkout this package lies in."""
    if (Path.cwd() / "fixes" / "series").is_file():
        return Path.cwd()
    return Path(__file__).resolve().parent.parent


def parse_roots(values: tuple[str, ...], hint: str = "--root") -> dict[str, Path]:
    """``NAME=PATH`` options as a mapping; a malformed one is a usage error naming the option."""
    roots = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{v!r}: expected NAME=PATH, e.g. vllm=/opt/venv/lib/python3.11/site-packages",
                                     param_hint=hint)
        roots[name] = Path(path)
    return roots


def pack_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--pack", "pack_root", type=click.Path(file_okay=False, path_type=Path), default=None,
                        envvar="FIXPACK_PACK", show_envvar=True,
                        help="The fix pack's root (default: the working folder if it holds fixes/series, else "
                             "this checkout).")(fn)


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of apply, status, revert and lock."""
    opts: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.option("--profile", "-p", required=True, help="Profile name, e.g. v0.30.0 (profiles/<name>.toml)."),
        click.option("--root", "roots", multiple=True, metavar="NAME=PATH",
                     help="Where a target lives: a source tree, git checkout or site-packages (repeatable)."),
        click.option("--target", "only_targets", multiple=True, metavar="NAME",
                     help="Restrict the run to these targets; the others are reported as skipped (repeatable)."),
        pack_option,
        click.option("--copies", "copies_root", type=click.Path(file_okay=False, path_type=Path), default=None,
                     envvar="GAUDI_FIXES_ROOT", show_envvar=True, metavar="DIR",
                     help="A folder of release copies, one sub-folder per target (looked up after --root)."),
        click.option("--lock-wait", "lock_wait", type=str, default="10", envvar="FIXPACK_LOCK_WAIT", show_envvar=True,
                     callback=_seconds, metavar="SECONDS", show_default=True,
                     help="How long to wait for another run's lock on a target before giving up (exit 5)."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document (schema in the README)."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _seconds(ctx: click.Context, param: click.Parameter, value: Any) -> float:
    """A number of seconds >= 0; naming the variable when the value came from the environment."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        source = ctx.get_parameter_source(param.name or "")
        where = f"$FIXPACK_LOCK_WAIT={value!r}" if source is click.core.ParameterSource.ENVIRONMENT else repr(value)
        raise click.BadParameter(f"{where}: not a number of seconds; give e.g. 10", ctx, param)
    return seconds


def fail(exc: BaseException, as_json: bool, command: str, profile: str) -> NoReturn:
    """Say what went wrong (JSON or one line on stderr) and exit with the outcome's code."""
    code = exit_code(exc)
    msg = f"internal error: {exc!r} (please report it)" if code == EXIT_INTERNAL else str(exc)
    if as_json:
        from .report import Report

        click.echo(json.dumps(Report(command, profile, error=msg, failure=code).as_dict(), indent=2, sort_keys=True))
    else:
        click.echo(f"fixpack: error: {msg}", err=True)
    sys.exit(code)


@contextmanager
def outcome(as_json: bool, command: str, profile: str = "") -> Iterator[None]:
    """Run a command's body: an engine error or a bug becomes its message and exit code (click's own
    usage errors and exits pass through)."""
    try:
        yield
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
        raise
    except Exception as exc:
        fail(exc, as_json, command, profile)
