"""Writing a run's targets (apply, revert), all or nothing: every target checked before the first is written, then
each root's transaction (:func:`fixpack.transaction.write_transaction`; targets that share a root, as a
site-packages holds vLLM and vllm-gaudi, are one transaction). A refusal over a later target (a read-only file,
something at a temp path, too little space) leaves every target as it was.

A run over several roots is one group (:class:`fixpack.groups.Group`): each root's journal and backups are kept
until every root is written; then the first root's journal is marked committed (the point of no return) and the
journals go, the first one last. A write that fails part-way on a later root, or a Ctrl-C or SIGTERM before the
commit, rolls that root back (its transaction) and then every root written before it, the last first: each is as
it was before the run, files and state folder (manifest) alike, and the error says nothing was written. A root
that cannot be put back keeps its journal (exit 5, named with what the next run does). A run killed (SIGKILL)
before the commit leaves uncommitted journals, which the next run rolls back wherever it meets them; killed after
it, journals that the next run removes, the files as they are (:func:`recover_interrupted`). Another root's journal
whose first root is not there, or holds a journal that does not read, is refused: that run may have been either
(:mod:`fixpack.groups`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .advice import run_writes
from .errors import EnvironmentProblem, FixpackError, Terminated, io_said
from .fsio import fault_point
from .groups import Group, group_at
from .interrupts import Term, interrupt_once, signals
from .rollback import recover, settle
from .state import journal_path, journal_there, leftover_journal, load_journal
from .structs import dataclass, field, replace
from .transaction import check_before_write, commit_group, finish_group, write_transaction

if TYPE_CHECKING:
    from .fsio import FileChange
    from .records import Kept
    from .run import Context
    from .targets import FoundTarget


@dataclass
class _Root:
    """One root's write: the targets on it (in the run's order), their changes and the folders' modes and owners."""

    root: Path
    targets: list[FoundTarget]
    changes: list[FileChange] = field(default_factory=list)
    folders: dict[str, Kept] = field(default_factory=dict)

    def who(self) -> str:
        """"target NAME (ROOT)", or "targets NAME (ROOT), NAME (ROOT)" for those that share the root."""
        return (f"target{'' if len(self.targets) == 1 else 's'} "
                f"{', '.join(f'{ft.spec.name} ({ft.root})' for ft in self.targets)}")


def write_all(ctx: Context, writes: list[tuple[FoundTarget, list[FileChange], Mapping[str, Kept]]],
              after: Callable[[Path], None] | None = None) -> None:
    """Write each target's changes (none empty), journalled, once every target passed the checks before a write;
    ``after`` each root's write, failed or not (revert: its state folder goes). The caller holds every target's
    lock. Over several roots, all or nothing (the module's docstring). Raises what :func:`check_before_write` and
    :func:`write_transaction` raise (exit 3 or 5; 143 for SIGTERM), those of a later root with the words of the
    roots put back before it; EnvironmentProblem (exit 5) when one of those cannot be put back."""
    roots: dict[Path, _Root] = {}
    for ft, changes, folders in writes:  # (the transaction checks only the space again)
        one = roots.setdefault(ft.root.resolve(), _Root(ft.root, []))
        one.targets.append(ft)
        one.changes += check_before_write(ft.root, changes)
        one.folders.update(folders)
    if len(roots) > 1:
        _write_group(ctx, list(roots.values()), after)
        return
    for one in roots.values():  # one root: its transaction, as a run of one target
        try:
            ctx.report.target(one.targets[0].spec.name).note(write_transaction(one.root, one.changes, one.folders,
                                                                               checked=True))
        finally:
            if after is not None:
                after(one.root)
        for ft in one.targets:
            ctx.report.wrote(ft.spec.name, str(ft.root))


def _write_group(ctx: Context, roots: list[_Root], after: Callable[[Path], None] | None) -> None:
    """Every root's transaction, journals kept, then the commit and the journals removed (the first root's last)."""
    group = Group(os.urandom(16).hex(), tuple(str(r.root.resolve()) for r in roots), 0)
    written, got = 0, list[int]()
    try:
        with interrupt_once():
            try:
                for i, one in enumerate(roots):
                    write_transaction(one.root, one.changes, one.folders, checked=True, group=replace(group, index=i))
                    written = i + 1
                    fault_point()
            except BaseException as exc:  # (a Ctrl-C between two roots too): every root written so far put back
                with signals(got, deferred=True):
                    _undo(ctx, group, roots, written, exc)
            with signals(got, deferred=True):  # the commit and what follows run to their end
                try:
                    synced = commit_group(roots[0].root)
                except OSError as exc:
                    _undo(ctx, group, roots, written, exc)
                _finish(ctx, roots, synced)
    finally:
        for one in roots:
            if after is not None:
                after(one.root)
    for one in roots:
        for ft in one.targets:
            ctx.report.wrote(ft.spec.name, str(ft.root))
    if got:  # a Ctrl-C or SIGTERM once the run was committed: its result stands
        how, kind = _how(got[0] == signal.SIGTERM)
        raise kind(f"{how} after this run's writes were complete: the targets ({'; '.join(r.who() for r in roots)}) "
                   f"hold this run's result (fixpack status shows it)")


def _how(term: bool) -> tuple[str, type[FixpackError]]:
    return ("terminated (SIGTERM)", Terminated) if term else ("interrupted (Ctrl-C, SIGINT)", EnvironmentProblem)


def _finish(ctx: Context, roots: list[_Root], synced: bool) -> None:
    """Remove the committed run's journals and backups, the first root's last (until it goes, the run's commit is
    there for the others'); a journal that cannot be removed is kept, with the first one, and noted: the next run
    removes them (the files hold this run's result)."""
    kept: list[str] = []
    for one in reversed(roots):
        fault_point()
        name = one.targets[0].spec.name
        if not synced or (one is roots[0] and kept):
            why = "its folder could not be synced" if not synced else f"until {', '.join(kept)} is gone"
            ctx.report.target(name).note(f"this run is complete, but its journal {journal_path(one.root)} is kept "
                                         f"({why}): the next apply or revert over these targets removes it, the files "
                                         f"as they are")
            continue
        try:
            ctx.report.target(name).note(finish_group(one.root))
        except OSError as exc:
            kept.append(str(journal_path(one.root)))
            ctx.report.target(name).note(f"this run is complete, but its journal could not be removed "
                                         f"({io_said(exc, journal_path(one.root))}): the next apply or revert "
                                         f"removes it, the files as they are")


def _undo(ctx: Context, group: Group, roots: list[_Root], written: int, exc: BaseException) -> NoReturn:
    """Put back every root this run wrote (the first ``written``, and one a Ctrl-C met once its transaction was
    done), the last first, then raise ``exc`` with what was put back and what was kept."""
    failed = roots[written] if written < len(roots) else None  # the root whose write failed (its own rollback done)
    if isinstance(exc, KeyboardInterrupt) and failed is not None and (g := group_at(failed.root)) is not None \
            and g.id == group.id:
        written, failed = written + 1, None  # done, but not counted yet: its journal is this run's
    back: list[_Root] = []
    kept: list[tuple[_Root, Exception]] = []
    for one in reversed(roots[:written]):
        try:
            recover(one.root)
            back.append(one)
        except (OSError, FixpackError) as again:
            kept.append((one, again))
    if not isinstance(exc, (FixpackError, KeyboardInterrupt, OSError)):
        raise exc  # a bug: the roots written are put back all the same, then it goes up
    how, kind = _how(isinstance(exc, Term))
    said = (exc.args[0] if isinstance(exc, FixpackError) else
            f"{io_said(exc, journal_path(roots[0].root))} while committing the run" if isinstance(exc, OSError) else
            f"{how} while writing the run's targets")
    said, step = _last_step(said)  # what to do goes last, after what was put back
    when = "before it in this run" if isinstance(exc, FixpackError) else "in this run"  # (a commit failed, a Ctrl-C)
    if back:
        whole = failed is None or not journal_there(failed.root)  # (a failed root's own rollback that failed keeps it)
        who = "; ".join(r.who() for r in reversed(back))
        said += (f". {who[0].upper()}{who[1:]}, written {when}, "
                 f"{'was' if len(back) == 1 else 'were'} rolled back{' too' if isinstance(exc, FixpackError) else ''}"
                 f"{': ' + ctx.report.nothing_written() if whole and not kept else ''}")
    for r, err in kept:
        cause = err.__cause__ if isinstance(err, FixpackError) else err
        why = io_said(cause, cause.filename or r.root) if isinstance(cause, OSError) else str(err)
        said += (f". Putting back {r.who()}, written {when}, failed ({why}): its journal {journal_path(r.root)} is "
                 f"kept, and the next apply or revert rolls it back first (a journal of this run is rolled back "
                 f"wherever a run meets it: no target keeps this run's writes)")
    said += step
    if kept:
        raise (Terminated if isinstance(exc, (Term, Terminated)) else EnvironmentProblem)(said) from exc
    if isinstance(exc, FixpackError):  # its class (exit code) and fields kept, its words with the roots put back
        exc.args = (said, *exc.args[1:])
        raise exc
    raise kind(said) from (exc if isinstance(exc, OSError) else None)


def _last_step(said: str) -> tuple[str, str]:
    """``said`` without its last sentence where that says to run again (". Free space ... and run again"), and that
    sentence ("" where there is none)."""
    head, dot, last = said.rpartition(". ")
    return (head, f"{dot}{last}") if dot and last.lower().endswith("run again") else (said, "")


def recover_interrupted(ctx: Context) -> None:
    """Roll back what a killed run left (:func:`fixpack.rollback.settle`), before looking at the files (the tree
    may be torn), or remove the journals of a run over several targets that was complete, the first target's last;
    each target noted (:meth:`fixpack.report.Report.recovered`, :meth:`fixpack.report.Report.finished`). The
    caller holds the targets' locks. Raises what :func:`fixpack.rollback.settle` raises, and what
    :func:`fixpack.state.load_journal` raises for any of them before the first is rolled back or removed."""
    # every journal loaded and checked before any is obeyed: a refusal leaves every target as it was
    loaded = {ft.root: load_journal(ft.root, run_writes(ctx, ft.root)) for ft in ctx.found.values()
              if journal_there(ft.root)}

    def first_of_a_group(ft: FoundTarget) -> bool:
        journal = loaded.get(ft.root)
        return journal is not None and journal.group is not None and journal.group.index == 0

    for ft in sorted(ctx.found.values(), key=first_of_a_group):  # (a stable sort: else in the run's order)
        if leftover_journal(ft.root):
            journal = journal_there(ft.root)  # (else backups alone, which no journal names)
            changed = settle(ft.root, run_writes(ctx, ft.root), loaded.get(ft.root))  # (removed even when not needed)
            if changed is None:
                ctx.report.finished(ft.spec.name, str(ft.root))
            else:
                ctx.report.recovered(ft.spec.name, str(ft.root), len(changed) if journal else None)
