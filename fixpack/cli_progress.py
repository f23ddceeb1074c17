"""Rendering the engine's :class:`fixpack.progress.Progress` on stderr: plain lines (a pipe, CI,
``NO_COLOR``, ``--color never``) or rich (a terminal). Results stay on stdout, so ``--json`` and pipes
read only the result."""

from __future__ import annotations

import sys
from typing import Any

import click

from .cli_plain import PlainProgress
from .cli_render import console, use_rich


class CliProgress(PlainProgress):
    """Progress on stderr: rich on a terminal, else plain lines (:class:`PlainProgress`) through click."""

    def __init__(self, as_json: bool = False) -> None:
        super().__init__(click.echo)
        self.rich = use_rich(sys.stderr)
        self.as_json = as_json
        self._bars: dict[str, Any] = {}
        self._console = console(stderr=True) if self.rich else None

    def note(self, message: str) -> None:
        if self._console is None:
            return super().note(message)
        from rich.markup import escape

        self._console.print(f"[dim]{escape(message)}[/]", soft_wrap=True)

    def transfer(self, label: str, done: int, total: int | None, finished: bool = False) -> None:
        if not self.rich:
            return super().transfer(label, done, total, finished)
        self._rich_transfer(label, done, total, finished)

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
