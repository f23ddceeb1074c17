"""A hunk whose two sides the forward and the reversed pass both place, at one place, where that tells whether the
fix is in: a hunk that removes lines finds its post-image inside its own pre-image, and is not in
(:func:`removed_there`); an add-only hunk finds its context again inside its own post-image, and is
(:func:`inside_own_post`). Used by :func:`fixpack.evaluate.decide` and the lock's fingerprints."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evaluate import HunkNote, Pass
    from .model import Fix


def removed_there(fwd: Pass, rev: Pass) -> list[HunkNote]:
    """The hunks whose pre-image the forward pass places over the lines where the reversed pass places their
    post-image, not inside it: a hunk that removes lines finds its post-image inside its own pre-image, so "is it in?"
    says yes where the lines it removes are still there; it is not in (an add-only one is :func:`inside_own_post`'s)."""
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


def inside_own_post(fix: Fix, fwd: Pass, rev: Pass) -> bool:
    """Each hunk of ``fix`` the forward pass placed lies inside its own post-image (:func:`inside_own`)."""
    return bool(fwd.hunks) and len(inside_own(fix, fwd, rev)) == len(fwd.hunks)


def inside_own(fix: Fix, fwd: Pass, rev: Pass) -> list[HunkNote]:
    """The hunks of ``fix`` the forward pass placed inside their own post-image, where the reversed pass placed
    that, flush with it on the side the hunk has no context on: a hunk that only adds lines after its context (at a
    file's end, or anchored so at its stated line) finds the context again once it is applied, at the start of its
    post-image (one that adds lines before its context, at its end; one with no context line above or below its
    change, anywhere inside it). A hunk with context on both sides finds its pre-image inside its post-image only
    where the lines it adds repeat its context (``D D D`` and ``D D`` added before ``C``): the release may hold that
    post-image itself, so it tells nothing (never counted)."""
    placed = {n.flat: n for n in rev.hunks if n.line is not None}
    hunks = [h for fp in fix.file_patches() for h in fp.hunks]
    out = []
    for n in fwd.hunks:
        r, h = placed.get(n.flat), hunks[n.flat]
        if n.line is None or r is None or r.line is None or h.leading_context and h.trailing_context:
            continue
        last = r.line + len(r.pre) - len(n.pre)  # (the last line its pre-image may start at inside the post-image)
        if r.line <= n.line <= last if not h.leading_context and not h.trailing_context else \
                n.line == (r.line if h.leading_context else last):
            out.append(n)
    return out
