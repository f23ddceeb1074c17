"""The rebase's evidence against placement by guess: how often each hunk's lines occurred on the old
release, and where a clean 3-way merge on the new release relied on a twin of them."""

from __future__ import annotations

from typing import Any

from .applier import occurrences, split_lines
from .diff import parse_patch
from .evaluate import TRUSTED, FixEvidence, run_pass
from .gitwork import Snap
from .model import Fix
from .structs import replace
from .tree import Tree


def old_counts(fix: Fix, old_steps: list[Snap]) -> FixEvidence:
    """How often each hunk's pre-image occurs in its file on the old release (with the earlier fixes):
    the evidence that tells a twin that appeared upstream from context that was never unique."""
    counts: list[tuple[int | None, int | None]] = []
    for pf, step in zip(fix.patches, old_steps):
        for fp in pf.files:
            text = step.get(fp.old_path or "", (None, None))[0] if fp.old_path else ""
            counts += [(len(occurrences(split_lines(text or ""), h.old_lines)), None) for h in fp.hunks]
    return FixEvidence(counts=tuple(counts))


def twins(fix: Fix, bodies: list[str], tree: Tree, old_steps: list[Snap]) -> list[str]:
    """The old patch's hunks that the new release holds in more than one equally good place (and in
    more places than the old release held them): upstream added a twin of the fix's lines, and text
    alone cannot tell which copy the fix belongs to, so a clean 3-way merge there is git's guess.

    A place's score is how many of the hunk's pre-image lines match there, line for line; its changed
    lines must all match. Only a majority match counts (below that git aligned on more than the hunk).
    """
    work = tree.fork()
    out: list[str] = []
    for pf, body, step in zip(fix.patches, bodies, old_steps):
        for fp in pf.files:
            new_lines = split_lines(work.read(fp.old_path) or "") if fp.old_path else []
            old_text = step.get(fp.old_path or "", (None, None))[0] if fp.old_path else ""
            for i, h in enumerate(fp.hunks):
                best = _best_places(new_lines, h)
                before = len(occurrences(split_lines(old_text or ""), h.old_lines))
                if len(best) > 1 and len(best) > before:
                    out.append(f"ambiguous context: {fp.path} hunk #{i + 1}: its lines match equally well at lines "
                               f"{[n + 1 for n in best]} of the new release (they occurred {before} time(s) in the "
                               f"old one); text alone cannot tell which copy the fix belongs to")
        merged = replace(fix, patches=(replace(pf, parsed=parse_patch(body.encode("utf-8", "surrogateescape"),
                                                                      f"merged {pf.path.name}").files),))
        work.adopt(run_pass(merged, work, reverse=False, evidence=TRUSTED).tree)
    return out


def _best_places(lines: list[str], h: Any) -> list[int]:
    """0-based starts where most of the hunk's pre-image lines match (its changed lines all matching)."""
    pre = h.old_lines
    core = pre[h.leading_context:len(pre) - h.trailing_context]
    if core:
        starts = {q - h.leading_context for q in occurrences(lines, core)}
    else:
        wanted = set(pre)
        starts = {i - k for i, ln in enumerate(lines) if ln in wanted for k, p in enumerate(pre) if p == ln}
    scores = {s: sum(1 for k, p in enumerate(pre) if 0 <= s + k < len(lines) and lines[s + k] == p) for s in starts}
    top = max(scores.values(), default=0)
    if top * 2 <= len(pre):
        return []
    return sorted(s for s, v in scores.items() if v == top)
