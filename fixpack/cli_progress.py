"""Rendering the engine's :class:`fixpack.progress.Progress` on stderr: plain lines (a pipe, CI,
``NO_COLOR``, ``--color never``) or rich (a terminal). Results stay on stdout, so ``--json`` and pipes
read only the result."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from .cli_render import console, use_rich
from .progress import Progress


class CliProgress(Progress):
    def __init__(self, as_json: bool = False) -> None:
        self.rich = use_rich(sys.stderr)
        self.as_json = as_json
        self._bars: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._console = console(stderr=True) if self.rich else None

    def note(self, message: str) -> None:
        if self._console is not None:
            from rich.markup import escape

            self._console.print(f"[dim]{escape(message)}[/]", soft_wrap=True)
        else:
            click.echo(f"fixpack: {message}", err=True)

    def transfer(self, label: str, done: int, total: int | None, finished: bool = False) -> None:
        if self.rich:
            self._rich_transfer(label, done, total, finished)
            return
        now = time.monotonic()
        if finished or done == 0 or now - self._last.get(label, 0.0) >= 2.0:
            self._last[label] = now
            of = f" of {total / 1e6:.1f} MB" if total else ""
            state = "done" if finished else "downloading"
            click.echo(f"fixpack: {label}: {state}, {done / 1e6:.1f} MB{of}", err=True)

    def _rich_transfer(self, label: str, done: int, total: int | None, finished: bool) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        if label not in self._bars:
            bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                           console=self._console, transient=False)
            bar.start()
            self._bars[label] = (bar, bar.add_task(label, total=total))
        bar, task = self._bars[label]
        bar.update(task, completed=done)
        if finished:
            bar.stop()
            del self._bars[label]
