"""Printing a :class:`fixpack.report.Report`: one JSON document, plain lines (a pipe), or rich tables
(a terminal; rich is imported only then, and a missing rich falls back to plain lines)."""

from __future__ import annotations

import json
import sys

import click

from .report import FixReport, Report
from .states import Action, State

STATE_STYLE = {"applied": "green", "absent": "cyan", "upstreamed": "blue", "drifted": "yellow",
               "conflict": "red", "partial": "red", "tampered": "red", "ambiguous": "red", "skipped": "dim"}


def render(report: Report, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, sort_keys=True))
        return
    if sys.stdout.isatty():
        try:
            _render_rich(report)
            return
        except ImportError:  # an image without rich: plain lines on the terminal too
            pass
    _render_plain(report)


def _fix_detail(f: FixReport) -> str:
    # drifted fixes carry their offsets in their messages already
    return "; ".join(f.messages)


def _render_plain(report: Report) -> None:
    head = f"{report.command} profile {report.profile}" + (" (dry run)" if report.dry_run else "")
    click.echo(head)
    for t in report.targets:
        facts = f"{t.version or '?'} @ {t.commit or '?'}" if t.status.value in ("found", "mismatch") else ""
        click.echo(f"target {t.name}: {t.status.value} {facts} {t.root} {t.message}".rstrip())
    for f in report.fixes:
        opt = " (opt-in)" if f.opt_in else ""
        detail = _fix_detail(f)
        click.echo(f"{f.id} v{f.version}{opt}: {f.state.value}, {f.action.value}" + (f" - {detail}" if detail else ""))
    click.echo(summary(report))


def _render_rich(report: Report) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    title = escape(f"fixpack {report.command} — profile {report.profile}") + (" (dry run)" if report.dry_run else "")
    tt = Table(title=title, title_justify="left")
    for col in ("target", "status", "version", "commit", "pin", "root / message"):
        tt.add_column(col)
    for t in report.targets:
        style = "green" if t.status.value == "found" else ("dim" if t.status.value == "skipped" else "red")
        tt.add_row(escape(t.name), f"[{style}]{t.status.value}[/]", escape(t.version), escape(t.commit[:12]),
                   escape(f"{t.pin.get('version', '')} {t.pin.get('commit', '')}"),
                   escape((t.root + " " + t.message).strip()))
    console.print(tt)
    ft = Table()
    for col in ("fix", "ver", "target", "kind", "state", "action", "details"):
        ft.add_column(col, overflow="fold")
    for f in report.fixes:
        ft.add_row(escape(f.id), str(f.version), escape(f.target), "opt-in" if f.opt_in else "default",
                   f"[{STATE_STYLE.get(f.state.value, '')}]{f.state.value}[/]", f.action.value,
                   escape(_fix_detail(f)))
    console.print(ft)
    console.print(("[green]" if report.ok else "[red]") + escape(summary(report)) + "[/]")


def summary(report: Report) -> str:
    if not report.ok:
        return f"FAILED (exit {report.exit_code}): {report.error}"
    counts: dict[str, int] = {}
    for f in report.fixes:
        key = f.action.value if f.action is not Action.NONE else (
            "already applied" if f.state is State.APPLIED else f.state.value)
        counts[key] = counts.get(key, 0) + 1
    return "OK: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing to do")
