"""The applier: hunks onto text, in memory, with exact context and no fuzz.

A hunk is placed where its pre-image lines occur exactly. Its own line number is tried first; if
the pre-image is elsewhere, it is placed there and the offset (in lines, positive = further down)
is reported, provided it occurs exactly once in the rest of the file; a pre-image that occurs more
than once away from its line is refused as ambiguous. A hunk with less leading (trailing) context
than trailing (leading) context is anchored to the start (end) of the file, as GNU patch does.
Nothing here touches the disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .diff import Hunk


class Placement(Enum):
    EXACT = "exact"
    OFFSET = "offset"
    AMBIGUOUS = "ambiguous"
    MISSING = "missing"


@dataclass(frozen=True)
class HunkResult:
    """Where one hunk's pre-image (or, reversed, post-image) was found.

    ``index`` is 0-based within the file's hunks; ``line`` the 1-based line where it was found
    (None when missing); ``offset`` the distance from the line the patch names; ``candidates``
    the 1-based lines of every match when ambiguous.
    """

    index: int
    placement: Placement
    line: int | None = None
    offset: int = 0
    candidates: tuple[int, ...] = ()

    @property
    def found(self) -> bool:
        return self.placement in (Placement.EXACT, Placement.OFFSET)


@dataclass(frozen=True)
class TextResult:
    """The outcome of applying all hunks of one file: the new text when every hunk was placed."""

    text: str | None
    hunks: tuple[HunkResult, ...]

    @property
    def ok(self) -> bool:
        return self.text is not None


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only, keeping line ends (a CR stays part of its line's bytes)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _sides(h: Hunk, reverse: bool) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    if reverse:
        return h.new_lines, h.old_lines, h.new_start
    return h.old_lines, h.new_lines, h.old_start


def _expected_index(start: int, length: int) -> int:
    # "@@ -0,0" (insert into an empty file) and a zero-length pre-image name the line before
    return start if length == 0 else start - 1


def _matches_at(lines: list[str], pre: tuple[str, ...], pos: int) -> bool:
    n = len(pre)
    return 0 <= pos and pos + n <= len(lines) and tuple(lines[pos:pos + n]) == pre


def _anchor(h: Hunk) -> str:
    if h.leading_context < h.trailing_context:
        return "start"
    if h.trailing_context < h.leading_context:
        return "end"
    return ""


def locate(lines: list[str], h: Hunk, index: int, floor: int, delta: int, reverse: bool = False) -> HunkResult:
    """Find one hunk's pre-image in ``lines`` at or after ``floor`` (0-based).

    ``delta`` is the offset of the hunks placed before it in the same file, so that a second hunk
    follows the first one's shift without reporting it twice.
    """
    pre, _post, start = _sides(h, reverse)
    length = len(pre)
    expected = _expected_index(start, length) + delta
    anchor = _anchor(h)
    if anchor == "start":
        ok = _matches_at(lines, pre, 0) and 0 >= floor
        return _result(index, [0] if ok else [], expected, start, length, delta)
    if anchor == "end":
        pos = len(lines) - length
        ok = pos >= floor and _matches_at(lines, pre, pos)
        return _result(index, [pos] if ok else [], expected, start, length, delta)
    if expected >= floor and _matches_at(lines, pre, expected):
        return HunkResult(index, Placement.EXACT, expected + 1, delta)
    if length == 0:
        return HunkResult(index, Placement.MISSING)
    first = pre[0]
    found = [p for p in range(floor, len(lines) - length + 1) if lines[p] == first and _matches_at(lines, pre, p)]
    return _result(index, found, expected, start, length, delta)


def _result(index: int, found: list[int], expected: int, start: int, length: int, delta: int) -> HunkResult:
    if not found:
        return HunkResult(index, Placement.MISSING)
    if len(found) > 1:
        return HunkResult(index, Placement.AMBIGUOUS, candidates=tuple(p + 1 for p in found))
    pos = found[0]
    offset = pos - _expected_index(start, length)
    kind = Placement.EXACT if offset == 0 else Placement.OFFSET
    return HunkResult(index, kind, pos + 1, offset)


def apply_text(text: str, hunks: tuple[Hunk, ...], reverse: bool = False) -> TextResult:
    """Apply (or reverse-apply) every hunk of one file to ``text``.

    Returns the new text and one HunkResult per hunk; ``text`` is None when any hunk could not be
    placed (missing or ambiguous). Hunks are placed in order and never overlap.
    """
    lines = split_lines(text)
    out: list[str] = []
    results: list[HunkResult] = []
    floor = 0
    delta = 0
    failed = False
    for i, h in enumerate(hunks):
        res = locate(lines, h, i, floor, delta, reverse)
        results.append(res)
        if not res.found or res.line is None:
            failed = True
            continue
        pre, post, _ = _sides(h, reverse)
        pos = res.line - 1 if len(pre) else res.line - 1
        out.extend(lines[floor:pos])
        out.extend(post)
        floor = pos + len(pre)
        delta = res.offset
    if failed:
        return TextResult(None, tuple(results))
    out.extend(lines[floor:])
    return TextResult("".join(out), tuple(results))


def probe(text: str, hunks: tuple[Hunk, ...], reverse: bool = False) -> tuple[HunkResult, ...]:
    """Locate every hunk independently (no early stop), for status evidence and partial checks."""
    lines = split_lines(text)
    return tuple(locate(lines, h, i, 0, 0, reverse) for i, h in enumerate(hunks))
