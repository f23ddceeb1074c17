"""What a drifted fix says under ``--strict`` (an image mismatch there): the files that drift it and the ways on,
each a command (:func:`strict_drift`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .advice import restore_how
from .run import Context
from .targets import FoundTarget

if TYPE_CHECKING:
    from .model import Fix


def strict_drift(ctx: Context, ft: FoundTarget, fix: Fix, files: list[str], recorded: set[str]) -> str:
    """A drifted fix under ``--strict`` (an image mismatch): the files that make it drifted (``files``: its hunks
    moved in them, or they are not the lock's pre-image) and the ways on, each a command. Where opt-in fixes the
    lock placed it on top of (before it in the series, touching those files) are not in this run, the drift is
    theirs: name them too. Else the files were changed after the release: put them back (:func:`restore_how`),
    after a revert where fixes the manifest records as applied (``recorded``) touch them, since the put-back would
    take their change out too; or run without ``--strict``, which takes the drift."""
    assert ctx.rerun is not None
    word = ctx.report.command
    one = len(files) == 1
    what = f"{files[0]} differs" if one else f"{', '.join(files)} differ"
    on_them = set(files)
    lock_paths = {fid: set(e.pre()) if (e := ctx.lock.fix(fid)) else set() for fid in ctx.pack.series}
    before = ctx.pack.series[:ctx.pack.series.index(fix.id)]
    behind = [f for f in before if f in ctx.profile.opt_in and f not in ctx.selected and f not in recorded
              and ctx.pack.fixes[f].target == fix.target and lock_paths[f] & on_them]
    takes = "applies it as reported above" if word == "apply" else "reports it as drifted, not a mismatch"
    without = f"run without --strict, which {takes}: {ctx.rerun(word, False, ())}"
    if behind:
        it = "it" if len(behind) == 1 else "them"
        return (f"--strict: a drifted fix is an image mismatch: the lock placed {fix.id} on top of opt-in "
                f"{', '.join(behind)} (before it in the pack, on {', '.join(files)}), which this run does not apply, "
                f"so {what} from the lock's pre-image. Name {it} too: {ctx.rerun(word, True, tuple(behind))}; or, if "
                f"the image is meant without {it}, {without}")
    applied = [f for f in ctx.pack.series if f in recorded and lock_paths.get(f, set()) & on_them]
    revert = (f"revert first ({ctx.rerun('revert', False, ())}: the put-back would take out applied "
              f"{', '.join(applied)} too), then " if applied else "")
    return (f"--strict: a drifted fix is an image mismatch: {what} from the release the lock pins. If "
            f"{'it was' if one else 'they were'} changed after the release, {revert}put {'it' if one else 'them'} "
            f"back: {restore_how(ctx, ft, files)}; then run {ctx.rerun(word, True, ())}. If the image is meant to "
            f"differ there, {without}")


__all__ = ["strict_drift"]
