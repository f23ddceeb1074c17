"""Printing results: one JSON document, plain lines (a pipe, ``NO_COLOR``, ``--color never``), or rich
tables (a terminal; rich is imported only then, and a missing rich falls back to plain lines).

Tables hold short cells only; every message (a pin mismatch, a refused hunk, the summary) is printed
in full below them, so that a narrow terminal never folds an error into a column. An empty table is
not printed.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

import click

from .cli_common import color_mode, emit_json
from .cli_plain import render_plain, summary
from .report import Report

if TYPE_CHECKING:
    from rich.console import Console

STATE_STYLE = {"applied": "green", "absent": "cyan", "upstreamed": "blue", "drifted": "yellow",
               "conflict": "red", "partial": "red", "tampered": "red", "ambiguous": "red", "skipped": "dim"}

def use_rich(stream: Any = None) -> bool:
    """Whether to draw with rich: ``--color always``, or auto on a terminal without ``$NO_COLOR``."""
    mode = color_mode()
    if mode == "never":
        return False
    if mode == "auto" and (os.environ.get("NO_COLOR") or not (stream or sys.stdout).isatty()):
        return False
    try:
        import rich  # noqa: F401
    except ImportError:  # an image without rich: plain lines on the terminal too
        return False
    return True


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    forced = color_mode() == "always"
    out = Console(stderr=stderr, force_terminal=forced or None, no_color=False if forced else None,
                  width=_width(sys.stderr if stderr else sys.stdout))
    out.on_broken_pipe = _broken_pipe  # type: ignore[method-assign]  # rich's own exits 1: the caller decides
    return out


def _width(stream: TextIO) -> int | None:
    """The width rich is to draw at when ``$COLUMNS`` says 0 or less (rich then wrote nothing at all, exit code and
    all, a fresh user found): the terminal's, else 80; None (rich's own choice) otherwise."""
    cols = os.environ.get("COLUMNS", "").strip()
    if not cols.lstrip("-").isascii() or not cols.lstrip("-").isdigit() or int(cols) > 0:
        return None
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):  # not a terminal, or no file descriptor (a test's capture)
        return 80


def _broken_pipe() -> None:
    """rich calls this inside its ``except BrokenPipeError``: raise it on, so that the run keeps its exit code
    (:func:`fixpack.cli_plain.deliver`) instead of rich's exit 1."""
    raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def render(report: Report, as_json: bool) -> None:
    if as_json:
        emit_json(report.as_dict())
    elif use_rich():
        _render_rich(report)
    else:
        render_plain(report, click.echo)


def _render_rich(report: Report) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    title = escape(f"fixpack {report.command} — profile {report.profile}") + (" (dry run)" if report.dry_run else "")
    tt = Table(title=title, title_justify="left")
    for col in ("target", "status", "version", "commit", "pin"):
        tt.add_column(col, no_wrap=col != "version")
    notes: list[str] = []
    for t in report.targets:
        style = "green" if t.status.value == "found" else ("dim" if t.status.value == "skipped" else "red")
        tt.add_row(escape(t.name), f"[{style}]{t.status.value}[/]", escape(t.version), escape(t.commit[:12]),
                   escape(f"{t.pin.get('version', '')} {t.pin.get('commit', '')}"))
        if t.root:
            notes.append(f"[bold]{escape(t.name)}[/] root: {escape(t.root)}")
        notes += [f"[bold]{escape(t.name)}[/] [{style}]{escape(note.replace(chr(10), chr(10) + '    '))}[/]"
                  for note in t.notes]  # a line each; a multi-line one's lines under it
    out.print(tt)
    for n in notes:
        out.print(n, soft_wrap=True)
    if report.fixes:
        ft = Table()
        for col in ("fix", "ver", "target", "kind", "state", "action"):
            ft.add_column(col, no_wrap=col in ("state", "action", "ver"))
        for f in report.fixes:
            ft.add_row(escape(f.id), str(f.version), escape(f.target), "opt-in" if f.opt_in else "default",
                       f"[{STATE_STYLE.get(f.state.value, '')}]{f.state.value}[/]", f.action.value)
        out.print(ft)
        for f in report.fixes:
            if f.messages:
                out.print(f"[bold]{escape(f.id)}[/]: {escape('; '.join(f.messages))}", soft_wrap=True)
    out.print(("[green]" if report.ok else "[red]") + escape(summary(report)) + "[/]", soft_wrap=True)
