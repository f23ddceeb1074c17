"""A target's fixes that no manifest records, though their changes are in its files (a lost manifest, or one
that lost an entry): revert has no record to undo them, so it refuses and says how to get one, rather than
report "nothing to do" over a patched tree, or revert the recorded fixes and leave the others in.

:func:`unrecorded` finds them by the lock's hashes first (a target at the release, or at this chain's
post-images, costs hashes only) and places the patches of the others; :func:`refuse_unrecorded` is revert's
refusal (exit 3, nothing written).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .advice import restore_how
from .errors import MismatchError
from .model import Fix
from .patchfiles import parse_fixes
from .records import Lock
from .states import State
from .tree import Tree, file_hashes

if TYPE_CHECKING:
    from .run import Context
    from .targets import FoundTarget


def unrecorded(fixes: list[Fix], tree: Tree, lock: Lock,
               parse: Callable[[list[str]], object]) -> tuple[list[str], dict[str, list[str]]]:
    """Of ``fixes`` (of one target, series order, none of them recorded): the ids whose post-image ``tree`` holds,
    and per fix only some of whose hunks are there, its files. A fix whose files hash to the lock's post-images is
    held; one whose files are neither those nor the release's (the lock's first pre-images) is placed both ways
    (:func:`fixpack.evaluate.decide`): held when its patch reverses there and does not apply (another profile's
    chain, or a hand edit, changed the files too), partial when its hunks are some one way, some the other.
    ``parse`` loads the patches of the ids given (only those placed). A fix the lock has no entry for, or records
    as upstreamed (pre == post), is not counted."""
    from .evaluate import FixEvidence, decide

    release = lock.release_files()
    held, unsure = [], []
    for fix in fixes:
        entry = lock.fix(fix.id)
        if entry is None or entry.pre() == entry.post():
            continue
        now = file_hashes(tree, list(entry.post()))  # the lock's paths: no patch is parsed
        if now == entry.post():
            held.append(fix.id)
        elif any(h != release.get(p) for p, h in now.items()):
            unsure.append(fix)
    partial: dict[str, list[str]] = {}
    if unsure:
        parse([f.id for f in unsure])
    for fix in unsure:
        state = decide(fix, tree, FixEvidence.from_lock(lock.fix(fix.id)), False).state
        if state is State.UPSTREAMED:
            held.append(fix.id)
        elif state is State.PARTIAL:
            partial[fix.id] = sorted(fix.touched_paths())
    return [f.id for f in fixes if f.id in held], partial


def refuse_unrecorded(ctx: Context, ft: FoundTarget, tree: Tree, recorded: set[str] | None = None) -> None:
    """Revert's refusal (MismatchError, exit 3) when ``tree`` (the target with its recorded fixes reverted;
    ``recorded``: their ids, None when there is no manifest) holds fixes of the profile that are not recorded:
    those whose post-image is there are to be recorded again by ``apply``; those only partly there, put back to the
    release (the command, :func:`fixpack.advice.restore_how`)."""
    fixes = [f for f in ctx.pack.ordered(ctx.profile.default + ctx.profile.opt_in)
             if f.target == ft.spec.name and f.id not in (recorded or set())]
    held, partial = unrecorded(fixes, tree, ctx.lock, lambda ids: parse_fixes(ctx.pack, ctx.profile, ids))
    if not held and not partial:
        return
    which = "no manifest records" if recorded is None else "its manifest does not record"
    said = []
    if held:
        said.append(f"holds {', '.join(held)} (their post-images are there) but {which} them: run `apply` with the "
                    f"same fixes to record them again, then `revert`")
    if partial:
        files = sorted({p for ps in partial.values() for p in ps})
        said.append(f"holds some of the hunks of {', '.join(partial)}, which {which}: `status` names them; put "
                    f"{'its' if len(partial) == 1 else 'their'} files back to the release "
                    f"({restore_how(ctx, ft, files)}), then `revert`")
    raise MismatchError(f"target {ft.spec.name} at {ft.root} {'; it also '.join(said)}; {ctx.report.nothing_written()}")
