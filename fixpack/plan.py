"""A target's plan (the chain worked out in memory by :mod:`fixpack.engine`), the manifest writing it records, and
what a dry run (status) says of it beside the fixes: the journal a run would roll back first, the manifest it would
write again though no file changes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .kept import records_after
from .records import Manifest, ManifestComponent, ManifestFix, Recorded
from .replay import as_laid
from .rollback import pending_note
from .state import manifest_path
from .structs import dataclass, field, replace
from .tree import Tree, file_hashes

if TYPE_CHECKING:
    from .fsio import FileChange
    from .run import Context
    from .targets import FoundTarget


@dataclass
class TargetPlan:
    """A target's chain worked out in memory: the tree it ends as, the manifest it had and the one it
    would write (``entries``), whether every fix reached its state, and a killed run's journal. ``held``: status's
    plan of files the lock vouches for (no hunk placed, no entry worked out: :func:`fixpack.engine._status_held`)."""

    tree: Tree
    manifest: Manifest | None
    entries: list[ManifestFix]
    reached: bool
    pending_journal: bool
    components: list[ManifestComponent] = field(default_factory=list)
    held: bool = False


def new_manifest(ctx: Context, ft: FoundTarget, plan: TargetPlan, changes: list[FileChange] | None = None) -> Manifest:
    """The manifest writing ``plan`` leaves on ``ft``: its entries, their files' sha256 as the plan's tree holds them,
    and (given the ``changes`` written) the modes and owners of what its fixes removed."""
    files: dict[str, str | None] = {}
    for e in plan.entries:
        if e.state is Recorded.APPLIED:
            files.update(file_hashes(plan.tree, list(e.files)))
    kept = records_after(ft.root, changes or [], plan.manifest, files)  # the modes, owners of what fixes removed
    return Manifest(ctx.profile.name, ft.spec.name, {"version": ft.spec.pin.version, "commit": ft.spec.pin.commit},
                    {"version": ft.version, "commit": ft.commit}, tuple(plan.entries), files,
                    components=tuple(plan.components), removed_files=kept[0], removed_dirs=kept[1])


def manifest_changed(ctx: Context, ft: FoundTarget, plan: TargetPlan) -> bool:
    """Whether writing ``plan`` gives ``ft`` another manifest than it has (its fixes, files, profile, components)."""
    new = new_manifest(ctx, ft, plan)
    return not new.same_state(plan.manifest) and bool(plan.entries or plan.components or plan.manifest)


def manifest_rel(ft: FoundTarget) -> str:
    """The target's manifest, relative to its root (as a run's writes name it)."""
    return manifest_path(ft.root, ft.spec.name).relative_to(ft.root).as_posix()


def dry_notes(ctx: Context, plans: dict[str, TargetPlan]) -> None:
    """A dry run's (status's) notes per target: the journal a run would roll back first (:func:`note_journal`), else
    the manifest it would write again where no file changes (what it records is not what is there: offsets edited),
    as apply's note says once it did."""
    for name, plan in plans.items():
        note_journal(ctx, name, plan.pending_journal)
        ft, quiet = ctx.found[name], plan.pending_journal or plan.held or plan.tree.changes()
        if ctx.report.dry_run and ctx.report.ok and not quiet and manifest_changed(
                ctx, ft, replace(plan, entries=as_laid(plan.entries, ctx.pack, plan.manifest, plan.tree, ctx.lock))):
            ctx.report.target(name).note(f"no file of the target would change; a run would write its manifest "
                                         f"{manifest_rel(ft)} again, to record what is there")


def note_journal(ctx: Context, name: str, pending: bool) -> None:
    """A dry run's (status's) first note on target ``name``: what a run would roll back or remove first."""
    if pending:
        t = ctx.report.target(name)
        t.note(pending_note(Path(t.root)), first=True)
