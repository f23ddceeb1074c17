"""Writing a run's targets (apply, revert): every target checked before the first is written, then each one's
transaction (:func:`fixpack.transaction.write_transaction`). A refusal over a later target (a read-only file,
something at a temp path, too little space) leaves every target as it was; a write of a later target that fails
part-way is rolled back, and its error names the targets written before it (:meth:`fixpack.report.Report.wrote`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .transaction import check_before_write, write_transaction

if TYPE_CHECKING:
    from .fsio import FileChange
    from .records import Kept
    from .run import Context
    from .targets import FoundTarget


def write_all(ctx: Context, writes: list[tuple[FoundTarget, list[FileChange], Mapping[str, Kept]]],
              after: Callable[[Path], None] | None = None) -> None:
    """Write each target's changes (none empty), journalled, once every target passed the checks before a write;
    ``after`` each target's write, failed or not (revert: its state folder goes). The caller holds every target's
    lock. Raises what :func:`check_before_write` and :func:`write_transaction` raise (exit 3 or 5)."""
    checked = [(ft, check_before_write(ft.root, changes), folders) for ft, changes, folders in writes]
    for ft, changes, folders in checked:  # (the transaction checks only the space again)
        try:
            ctx.report.target(ft.spec.name).note(write_transaction(ft.root, changes, folders, checked=True))
        finally:
            if after is not None:
                after(ft.root)
        ctx.report.wrote(ft.spec.name, str(ft.root))
