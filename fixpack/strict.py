"""The next steps of a run's failing fixes (:func:`next_steps`): what a drifted fix says under ``--strict`` (an image
mismatch there: the files that drift it and the ways on, each a command, :func:`strict_drift`), and the opt-ins that
every failing fix of the run was locked on top of, named together in each command."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .advice import add_next_steps, found_whole, recorded_has, restore_how, to_release
from .run import Context, behind_files, locked_paths, name_too, opt_ins_behind, refusing_files
from .states import State
from .targets import FoundTarget

if TYPE_CHECKING:
    from .model import Fix
    from .records import Manifest


def next_steps(ctx: Context, manifests: dict[str, Manifest | None]) -> None:
    """Once every target of an apply or status is evaluated: the opt-ins each failing fix (in conflict or partial,
    or drifted under ``--strict``, ``ctx.drift``) was locked on top of and the run does not apply, with those they
    were locked on top of in turn (``ctx.behind_of``), and all of them together (``ctx.behind``: each command names
    them all, so the run after it goes through); then each drifted fix's message (:func:`strict_drift`) and the
    other fixes' next steps (:func:`fixpack.advice.add_next_steps`; ``manifests`` as there)."""
    failing = []
    for fr in ctx.report.fixes:
        ft, fix = ctx.found.get(fr.target), ctx.pack.fixes.get(fr.id)
        if fr.kind == "fix" and ft and fix and fr.state in (State.CONFLICT, State.PARTIAL):
            m = manifests.get(fr.target)
            files = behind_files(ctx, fix, refusing_files(ft, fix, fr)[1])
            failing.append((fix, files, m.applied_ids() if m else set()))
    failing += [(fix, files, recorded) for _fr, _ft, fix, files, recorded, _tampered, _laid in ctx.drift]
    for fix, files, recorded in failing:
        behind = opt_ins_behind(ctx, fix, files, recorded)[0]
        for b in behind:  # an opt-in named is itself placed on top of others, or requires some: those too, at once
            more = opt_ins_behind(ctx, ctx.pack.fixes[b], sorted(locked_paths(ctx, b)), recorded)[0]
            more += [r for r in ctx.pack.fixes[b].requires if r in ctx.profile.opt_in and r not in ctx.selected]
            behind += [f for f in more if f not in behind]
        ctx.behind_of[fix.id] = [f for f in ctx.pack.series if f in behind]
    ctx.behind = tuple(f for f in ctx.pack.series if any(f in b for b in ctx.behind_of.values()))
    for fr, ft, fix, files, recorded, tampered, laid in ctx.drift:
        fr.messages.append(strict_drift(ctx, ft, fix, files, recorded, tampered, laid))
    add_next_steps(ctx, manifests)


def strict_drift(ctx: Context, ft: FoundTarget, fix: Fix, files: list[str], recorded: set[str],
                 tampered: set[str], laid: bool = False) -> str:
    """A drifted fix under ``--strict`` (an image mismatch): the files that make it drifted (``files``: its hunks
    moved in them, or they are not the lock's pre-image) and the ways on, each a command. Where opt-in fixes the
    lock placed it on top of are not in this run (:func:`opt_ins_behind`), the drift is theirs: name them too.
    Where a fix the manifest records on those files is ``tampered``, its own message leads (a revert is refused
    until then). Else the files were changed after the release: put them back (:func:`restore_how`), after a revert
    where fixes the manifest records as applied (``recorded``) touch them, since the put-back would take their
    change out too, then apply again; or run without ``--strict``, which takes the drift. ``laid``: the fix is in
    already (recorded, or found with its record lost), laid on the drifted files by a run without ``--strict``."""
    assert ctx.rerun is not None
    word = ctx.report.command
    one, what = _differ(files)
    head = "--strict: a drifted fix is an image mismatch: "
    takes = "applies it as reported above" if word == "apply" else "reports it as drifted, not a mismatch"
    if laid:  # applied already (recorded, or found with its record lost), laid on the drifted file without --strict
        takes = (("keeps it as it is" if fix.id in recorded else "records it as applied") if word == "apply" else
                 "reports it as applied, not a mismatch")
    behind, said = opt_ins_behind(ctx, fix, files, recorded)
    own = ctx.behind_of.get(fix.id, behind)
    drifting = {f.id for _fr, _ft, f, *_rest in ctx.drift}  # without --strict they apply as drifted
    need = {g: b for g, b in ctx.behind_of.items() if g != fix.id and g not in drifting}  # the fixes that conflict
    others = tuple(f for f in ctx.pack.series if any(f in b for b in need.values()))
    without = f"run without --strict, which {takes}: {ctx.rerun(word, False, others)}"
    if behind:
        too = name_too(ctx, behind, word, True, own)
        held = [g for g, b in need.items() if set(b) & set(own)]  # they do not apply without what this one needs
        shared = [f for f in own if any(f in need[g] for g in held)]
        one, them, they = len(held) == 1, ", ".join(shared), ", ".join(held)
        alt = (f"{they} {'does' if one else 'do'} not apply without {them} either: the image cannot leave {them} out "
               f"while {they} {'is' if one else 'are'} named" if held else
               f"or, if the image is meant without {'it' if len(own) == 1 else 'them'}, {without}")
        return f"{head}{said}, so {what} from the lock's pre-image. {too[0].upper()}{too[1:]}; {alt}"
    again = ctx.behind  # other fixes' opt-ins: the run after the put-back names them
    # a revert takes out every applied fix and component of the target: the apply after it names the opt-ins
    # it took out (``recorded`` holds the components the manifest records too)
    put = tuple(f for f in ctx.pack.series if f in again or (f in recorded and f in ctx.profile.opt_in and
                                                               ctx.pack.fixes[f].target == fix.target))
    put += tuple(c.id for c in ctx.profile.components if c.opt_in and c.id in recorded and c.target == fix.target)
    # the files of every fix of the target drifted so (none behind an opt-in): one put-back for all, then one run
    files = sorted({p for _fr, t, f, fs, rec, *_rest in ctx.drift if t.spec.name == ft.spec.name
                    and not opt_ins_behind(ctx, f, fs, rec)[0] for p in fs} | set(files))
    one, what = _differ(files)
    on_them = set(files)
    applied = [f for f in ctx.pack.series if f in recorded and locked_paths(ctx, f) & on_them]
    broken = [f for f in applied if f in tampered]
    if broken:
        return (f"{head}{what} from the release the lock pins, and applied {', '.join(broken)} on "
                f"{'it' if one else 'them'} is tampered: follow {'its' if len(broken) == 1 else 'their'} message "
                f"first (a revert is refused until then), then run {ctx.rerun(word, True, again)}")
    wrong = _wrong_lock(ctx, ft, one)
    if applied:
        return (f"{head}{what} from the release the lock pins. If {'it was' if one else 'they were'} changed after "
                f"the release: revert first ({ctx.rerun('revert', False, (), only=ft.spec.name)}: it takes out every "
                f"applied fix of target {ft.spec.name}; the put-back would take {', '.join(applied)} out of "
                f"{'it' if one else 'them'} anyway), put {'it' if one else 'them'} back "
                f"({restore_how(ctx, ft, files)}), then apply again: {ctx.rerun('apply', True, put, False)}. If the "
                f"image is meant to differ there, {without}. {wrong}")
    how = restore_how(ctx, ft, files)
    if laid:  # found whole with no record: every file of the fixes so found that share them goes back, as revert's
        back = ctx.pack.with_sharers(found_whole(ctx, fix.target, recorded), set(files))
        has, settle, _unknown = recorded_has(ctx, ft, back)
        how = to_release(ctx, ft, back, has, settle)
        one, what = _differ(back)
    return (f"{head}{what} from the release the lock pins. If {'it was' if one else 'they were'} changed after the "
            f"release, put {'it' if one else 'them'} back: {how}; then run "
            f"{ctx.rerun(word, True, again)}. If the image is meant to differ there, {without}. {wrong}")


def _differ(files: list[str]) -> tuple[bool, str]:
    """Whether ``files`` is one file, and "X differs" or "X, Y differ"."""
    return len(files) == 1, f"{', '.join(files)} {'differs' if len(files) == 1 else 'differ'}"


def _wrong_lock(ctx: Context, ft: FoundTarget, one: bool) -> str:
    """The way out where the put-back changes nothing: the files are the release's, and the lock is not (made from
    another release, or edited): ``lock --check`` of the target against a clean copy names its entries that differ.
    (The put-back alone, run again, said the same thing again.)"""
    from .lock_hints import where_lock_runs
    from .progname import command

    check = command("lock", "--check", "--profile", ctx.profile.name, "--pack", str(ctx.profile.path.parent.parent),
                    "--target", ft.spec.name)
    return (f"If {'it is' if one else 'they are'} the release's already (put back, the same message again), the lock "
            f"is not this release's: {check} compares it with a clean copy of the release (fetched; --root "
            f"{ft.spec.name}=PATH gives one) and names the entries that differ{where_lock_runs()}.")


__all__ = ["next_steps", "strict_drift"]
