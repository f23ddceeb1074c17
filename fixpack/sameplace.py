"""A hunk whose two sides the forward and the reversed pass both place, at one place, where that says the fix is not
in: a hunk that removes lines finds its post-image inside its own pre-image (:func:`removed_there`; the opposite case,
an add-only hunk whose context is found again inside its own post-image, is
:func:`fixpack.evaluate.pre_inside_post`'s). Used by :func:`fixpack.evaluate.decide`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evaluate import HunkNote, Pass


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
