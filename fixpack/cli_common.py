"""What every command of the terminal front shares: the pack and root options (built from
:data:`fixpack.cli_fast.OPTIONS`), how an outcome (an exception or a result) ends a command, through the one
mapping to the exit code (:func:`fixpack.cli_plain.exit_code`), and how a result is printed.

Only the CLI reads the environment: ``$FIXPACK_PACK`` and ``$GAUDI_FIXES_ROOT`` come in as option
defaults through click (``envvar``), never inside the engine. rich is imported only to draw a table
on a terminal; a pipe (an image build, CI) gets plain lines and never pays for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from .cli_fast import OPTIONS, seconds_value
from .cli_plain import (
    ENDED,
    argv_profile,
    default_pack_root,
    deliver,
    error_document,
    exit_code,
    failure_text,
    output_lost,
    refuse_closed_stdout,
    split_roots,
    steady_streams,
)
from .cli_plain import emit_json as plain_json
from .errors import by_interrupt, interrupted
from .interrupts import terminated


def _completion_pack(ctx: click.Context) -> Path | None:
    import os

    given = ctx.params.get("pack_root") or os.environ.get("FIXPACK_PACK")
    if given:
        return Path(given)
    try:
        return default_pack_root()
    except Exception:
        return None


def complete_profiles(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of ``--profile``: the names of the pack's ``profiles/*.toml``."""
    root = _completion_pack(ctx)
    if root is None:
        return []
    return sorted(p.stem for p in (root / "profiles").glob("*.toml") if p.stem.startswith(incomplete))


def complete_fixes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Shell completion of fix ids: the pack's ``fixes/series`` (read as the loader reads it)."""
    from .documents import read_capped

    root = _completion_pack(ctx)
    try:
        series = root / "fixes" / "series" if root else None
        lines = read_capped(series).decode("utf-8").splitlines() if series else []  # never a FIFO: it blocks
    except (OSError, ValueError):  # (not a regular file, past its cap, not UTF-8: no completion)
        return []
    ids = [ln.split("#")[0].strip() for ln in lines]
    return [i for i in ids if i and i.startswith(incomplete)]


def complete_targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [t for t in ("vllm", "vllm-gaudi") if t.startswith(incomplete)]


_COLOR = {"mode": "auto"}


def color_mode() -> str:
    """``--color``: auto (rich on a terminal unless ``$NO_COLOR`` is set), always, never (plain lines)."""
    return _COLOR["mode"]


def _set_color(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value:
        _COLOR["mode"] = value
    return value


def option(param: str, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click option of ``param`` from :data:`fixpack.cli_fast.OPTIONS` (its names, kind, environment
    variable and default: one definition for click and the fast entry), with ``kw`` (help, metavar...)."""
    flags, kind, env, default = OPTIONS[param]
    extra: dict[str, Any] = {"multiple": True} if kind == "many" else {"is_flag": True} if kind == "flag" else {}
    if kind == "dir":
        extra.update(type=click.Path(file_okay=False, path_type=Path), default=None)
    if env:
        extra.update(envvar=env, show_envvar=True)
    if default is not None:
        extra["default"] = default
    return click.option(*flags, param, **extra, **kw)


def color_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return option("color", type=click.Choice(["auto", "always", "never"]), default=None, expose_value=False,
                  callback=_set_color, is_eager=True,
                  help="Tables and progress with rich: auto (on a terminal, unless $NO_COLOR is set), always, "
                       "or never (plain lines). Default: auto.")(fn)


def profile_option(help: str = "Profile name, e.g. v0.30.0 (profiles/<name>.toml).",
                   required: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    # no default at all when required: click 8.5 takes an explicit default=None as given and stops asking
    extra: dict[str, Any] = {} if required else {"default": ""}
    return option("profile", required=required, help=help, shell_complete=complete_profiles, **extra)


def parse_roots(values: tuple[str, ...], hint: str = "--root") -> dict[str, Path]:
    """``NAME=PATH`` options as a mapping; a malformed one is a usage error naming the option."""
    roots = split_roots(values)
    if isinstance(roots, str):
        raise click.BadParameter(roots, param_hint=hint)
    return roots


def pack_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return option("pack_root",
                  help="The fix pack's root (default: the working folder if it has fixes/series, or fixes/ and "
                       "profiles/, else this checkout).")(fn)


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of apply, status, revert and lock."""
    opts: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        profile_option(),
        option("roots", metavar="NAME=PATH",
               help="Where a target lives: a source tree, git checkout or site-packages (repeatable)."),
        option("only_targets", metavar="NAME", shell_complete=complete_targets,
               help="Restrict the run to these targets; the others are reported as skipped (repeatable). "
                    "On a machine without vllm-gaudi: --target vllm."),
        pack_option,
        option("copies_root", metavar="DIR",
               help="A folder of release copies, one sub-folder per target (looked up after --root)."),
        option("lock_wait", type=str, callback=_seconds, metavar="SECONDS", show_default=True,
               help="How long to wait for another run's lock on a target (a flock on its folder) before "
                    "giving up with exit 5; the wait is shown as it happens."),
        json_option,
        color_option,
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _seconds(ctx: click.Context, param: click.Parameter, value: Any) -> float:
    """A number of seconds >= 0; naming the variable when the value came from the environment."""
    seconds = seconds_value(value)
    if seconds is None:
        # click's own hint names the variable whenever the option has one: say where the value came from
        if ctx.get_parameter_source(param.name or "") is click.core.ParameterSource.ENVIRONMENT:
            raise click.BadParameter(f"$FIXPACK_LOCK_WAIT={value!r}: not a number of seconds; give e.g. 10", ctx,
                                     param, param_hint="'$FIXPACK_LOCK_WAIT' (the default of --lock-wait)")
        raise click.BadParameter(f"{value!r}: not a number of seconds >= 0; give e.g. 10", ctx, param,
                                 param_hint="'--lock-wait'")
    return seconds


def emit_json(doc: dict[str, Any]) -> None:
    plain_json(doc, click.echo)


def fail(exc: BaseException, as_json: bool, command: str, profile: str, dry_run: bool = False) -> NoReturn:
    """Say what went wrong (JSON or one line on stderr) and exit with the outcome's code."""
    code = exit_code(exc)
    msg = failure_text(exc, not as_json)
    if as_json:
        sys.exit(deliver(lambda: emit_json(error_document(command, profile, msg, code, dry_run)), code))
    try:
        click.echo(f"fixpack: error: {msg}", err=True)
    except OSError:  # stderr gone too: the code is all that is left to say it
        pass
    sys.exit(code)


@contextmanager
def outcome(as_json: bool, command: str, profile: str = "", dry_run: bool = False) -> Iterator[None]:
    """Run a command's body: an engine error or a bug becomes its message and exit code (click's own
    usage errors and exits pass through)."""
    try:
        yield
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
        raise
    except KeyboardInterrupt as stop:  # click would say "Aborted!" and exit 1, the code of a bug
        fail(interrupted(command, terminated(stop, [])), as_json, command, profile, dry_run)
    except Exception as exc:
        fail(interrupted(command) if by_interrupt(exc) else exc, as_json, command, profile, dry_run)


DELIVERED = ("apply", "status", "revert", "sbom", "verify")  # their output goes through cli_plain.deliver
HELP_OPTIONS = ("-h", "--help")


def asks_help(argv: list[str]) -> bool:
    """Whether ``argv`` asks for help (before a ``--``): click prints it itself, not through ``deliver``."""
    return any(a in HELP_OPTIONS for a in (argv[:argv.index("--")] if "--" in argv else argv))


class Interrupted(BaseException):
    """A Ctrl-C while click parses or runs a command, carried past click's own handling of KeyboardInterrupt (a
    blank line, "Aborted!", exit 1) to :meth:`JsonUsageErrors._run_main`."""


class JsonUsageErrors:
    """A click command or group whose usage errors are a JSON document on stdout when ``--json`` is on
    the command line (exit 2, as in plain mode, where click's message goes to stderr)."""

    def command_name(self, argv: list[str]) -> str:
        return str(getattr(self, "name", "") or "")

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """Run the command with steady streams (:func:`fixpack.cli_plain.steady_streams`): a reader that leaves
        keeps the command's own exit code, a stderr that is closed or goes away is no failure, and stdout
        that cannot be written (ENOSPC) is exit 5 once the command has gone on to its end. The commands that
        print through :func:`fixpack.cli_plain.deliver` (their outcome decided before their output) keep
        their stdout as it is, unless asked for help (click prints it). A closed stdout is refused first (exit 5,
        :func:`fixpack.cli_plain.refuse_closed_stdout`)."""
        refuse_closed_stdout()
        ENDED.clear()  # run in-process again (tests): this run has not ended
        argv = list(sys.argv[1:] if args is None else args)
        code: Any = None
        with steady_streams(stdout=self.command_name(argv) not in DELIVERED or asks_help(argv)) as out:
            try:
                return self._run_main(argv, prog_name, complete_var, standalone_mode, **extra)
            except SystemExit as exc:
                code = exc.code
        status = code if isinstance(code, int) else 0 if code is None else 1
        if out is not None and out.lost is not None:
            status = output_lost(out.lost, status)
        sys.exit(status)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)  # type: ignore[misc,no-any-return]
        except KeyboardInterrupt:
            raise Interrupted from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command: a Ctrl-C during it passes click by as :class:`Interrupted`; once it has ended (exits)
        its code is kept (:data:`fixpack.cli_plain.ENDED`) for a Ctrl-C that comes while click unwinds."""
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except SystemExit as exc:
            ENDED[:] = ENDED or [exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1]
            raise
        except KeyboardInterrupt:
            raise Interrupted from None

    def _run_main(self, argv: list[str], prog_name: str | None, complete_var: str | None, standalone_mode: bool,
                  **extra: Any) -> Any:
        """click's main in its non-standalone mode, its outcomes said here: a usage error is click's message and
        its code (2), or with ``--json`` the error document; a Ctrl-C while click parses or a command loads
        (:class:`Interrupted`, or click's Abort where one lands in click's own code) is the one interrupted line,
        exit 5 (:func:`fixpack.entry.refuse_interrupt`), never click's "Aborted!" and exit 1."""
        try:
            rv = super().main(args=argv, prog_name=prog_name,  # type: ignore[misc]
                              complete_var=complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            if "--json" not in argv:
                exc.show()
                sys.exit(exc.exit_code)
            doc = error_document(self.command_name(argv), argv_profile(argv), f"usage: {exc.format_message()}",
                                 exit_code(exc), "--dry-run" in argv)
            sys.exit(deliver(lambda: emit_json(doc), exit_code(exc)))
        except (Interrupted, click.exceptions.Abort, KeyboardInterrupt):
            from .entry import refuse_interrupt

            refuse_interrupt(argv, self.command_name(argv))
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv


class JsonCommand(JsonUsageErrors, click.Command):
    pass


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return option("as_json",
                  help="Print one JSON document on stdout (schemas/<kind>.schema.json; usage errors too).")(fn)
