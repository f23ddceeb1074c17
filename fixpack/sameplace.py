"""A hunk whose two sides the forward and the reversed pass both place, at one place: whether that says the fix is
in (an add-only hunk finds its context again inside its own post-image, :func:`pre_inside_post`) or not (a hunk that
removes lines finds its post-image inside its own pre-image, :func:`removed_there`). Used by
:func:`fixpack.evaluate.decide` and the lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evaluate import FixEvidence, HunkNote, Pass
    from .model import Fix


def pre_inside_post(fix: Fix, fwd: Pass, rev: Pass, ev: FixEvidence) -> bool:
    """Each hunk the forward pass placed lies inside its own post-image, where the reversed pass placed that: a hunk
    that only adds lines after its context (at a file's end, or anchored so at its stated line) finds the context
    again once it is applied, at the same place. That is no second place for the fix: its pre-image is there only as
    part of its post-image, which is in. Not so where the post-image outlives its own reversal (the added lines are
    in the file twice, one after the other): which copy is the fix's cannot be told."""
    placed = {n.flat: n for n in rev.hunks if n.line is not None}
    for n in fwd.hunks:
        r = placed.get(n.flat)
        if n.line is None or r is None or r.line is None or not r.line <= n.line <= r.line + len(r.pre) - len(n.pre):
            return False
    from .evaluate import run_pass  # (evaluate imports this module)

    return bool(fwd.hunks) and not run_pass(fix, rev.tree, reverse=True, evidence=ev).ok


def removed_there(fwd: Pass, rev: Pass) -> list[HunkNote]:
    """The hunks whose pre-image the forward pass places over the lines where the reversed pass places their
    post-image, not inside it: a hunk that removes lines finds its post-image inside its own pre-image, so "is it in?"
    says yes where the lines it removes are still there; it is not in (an add-only one is :func:`pre_inside_post`'s)."""
    placed = {n.flat: n for n in rev.hunks if n.line is not None}
    out = []
    for n in fwd.hunks:
        r = placed.get(n.flat)
        if n.line is None or r is None or r.line is None:
            continue
        f_end, r_end = n.line + len(n.pre), r.line + len(r.pre)
        if n.line < r_end and r.line < f_end and not r.line <= n.line <= f_end <= r_end:
            out.append(n)
    return out
