"""The applier: hunks onto text, in memory, with exact context and no fuzz, placed only on evidence.

The placement rule (the same for apply, status, dry runs, the lock, refresh and rebase):

- **Pinned.** When the file is byte for byte the pre-image the patch was written against (its sha256
  is the lock's, or the tree is the release copy itself), a hunk goes at its stated line and nowhere
  else: the line numbers are right by construction.
- **Searched.** Otherwise the hunk's pre-image is looked for in the whole file. It is placed only when
  it occurs exactly once there, and occurred at most once in the pinned pre-image too (the lock
  records that count): a twin that appeared, or one that went away, leaves nothing to tell the copies
  apart, so the hunk is refused as ``ambiguous`` with every candidate line. A placement away from the
  stated line (plus the running offset of the hunks and fixes placed before it in the same file) is
  reported as an offset.
- A hunk with less leading (trailing) context than trailing (leading) context is anchored to the start
  (end) of the file, as GNU patch does, when searched: placed there where its pre-image occurs once, as in the
  pinned file (a twin elsewhere makes it ``ambiguous``: the copy at the end may be the one upstream appended; so does
  a twin in the pinned file, as the lock warns), or else only at its stated line (plus the
  running offset) where its pre-image occurs once; reversed, where its post-image occurs once and holds lines it
  adds (they are the fix's, wherever the file ends now). A hunk without any pre-image line is placed only when pinned.
- A file's only hunk, without context, one of whose sides is empty at line 0 (``@@ -1,N +0,0 @@``, as diff and git
  write a file emptied; ``@@ -0,0 +1,N @@``, one filled) stands for the whole file on both sides, as git apply
  reads a hunk without context: when searched, the empty side is placed only in an empty file and the other only
  where it is the whole file.

Nothing here touches the disk.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum

from .patchmodel import Hunk
from .structs import dataclass, replace


class Placement(Enum):
    EXACT = "exact"
    OFFSET = "offset"
    AMBIGUOUS = "ambiguous"
    MISSING = "missing"


@dataclass(frozen=True)
class HunkEvidence:
    """What the pack knows of one hunk beyond its text.

    ``pinned``: the file is the pre-image the patch was written against (place at the stated line only).
    ``count``: how often the hunk's pre-image (reversed: post-image) occurs in that pinned file, from
    the lock; None when unknown (taken as once). ``offset``: pinned at its stated line plus this many lines (not
    the running offset): where unwinding a recorded fix took the hunk off, on files as that left them. ``recorded``:
    reversed from where the manifest records the fix was laid (the running offset starts there), on files whose sha256
    is the manifest's: a hunk is taken off at its stated line plus the running offset where its post-image is there
    (where it was laid: an anchored hunk only at the anchor or there), whatever twin of it the file holds elsewhere
    (one its own fix's other hunk put there, one the drift brought).
    """

    pinned: bool = False
    count: int | None = None
    offset: int | None = None
    recorded: bool = False


SEARCH = HunkEvidence()
PINNED = HunkEvidence(pinned=True)


@dataclass(frozen=True)
class Closest:
    """The best near-miss for a missing hunk: where it starts (1-based), how many of its lines match
    there, and up to three differing lines as (line, expected, found); ``line_ends``: every line matches
    there but for its line end (LF, CRLF or none), and some line differs in it; ``cr``: a CR is what differs in one
    (else only a last line's newline does)."""

    line: int
    matching: int
    total: int
    differs: tuple[tuple[int, str, str], ...]
    line_ends: bool = False
    cr: bool = False


@dataclass(frozen=True)
class HunkResult:
    """Where one hunk's pre-image (or, reversed, post-image) was found.

    ``index`` is 0-based within the file's hunks; ``line`` the 1-based line where it was placed (None
    when refused); ``offset`` the distance from the line the patch names (plus the running offset);
    ``candidates`` the 1-based lines of every occurrence when ambiguous; ``expected`` the 1-based line
    it was looked for first; ``reason`` why it was refused (the near-miss of a missing hunk is worked
    out only when it is reported: :func:`closest`). ``turned``: where the lines it puts in place lie in the text
    the pass leaves, from the line the patch names for them: the offset a pass the other way measures (it is
    ``offset`` but where the file's hunks were laid out of the patch's order, upstream having moved a block).
    """

    index: int
    placement: Placement
    line: int | None = None
    offset: int = 0
    candidates: tuple[int, ...] = ()
    expected: int = 0
    reason: str = ""
    turned: int = 0

    @property
    def found(self) -> bool:
        return self.placement in (Placement.EXACT, Placement.OFFSET)

    @property
    def present(self) -> bool:
        """Its lines are in the file, placed or not (an ambiguous hunk is present, twice or more)."""
        return self.found or self.placement is Placement.AMBIGUOUS


@dataclass(frozen=True)
class TextResult:
    """The outcome of applying all hunks of one file: the new text when every hunk was placed."""

    text: str | None
    hunks: tuple[HunkResult, ...]
    delta: int = 0  # the running offset after the last hunk (for the next fix in the same file)
    lines: int = 0  # how many lines the searched text had

    @property
    def ok(self) -> bool:
        return self.text is not None


# what str.splitlines breaks on besides "\n": a text without any of them splits the same way in C
_OTHER_BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only, keeping line ends (a CR stays part of its line's bytes)."""
    if not any(c in text for c in _OTHER_BREAKS):
        return text.splitlines(keepends=True)
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def sides(h: Hunk, reverse: bool) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """(lines looked for, lines put in their place, stated 1-based start) for one direction."""
    if reverse:
        return h.new_lines, h.old_lines, h.new_start
    return h.old_lines, h.new_lines, h.old_start


def _expected_index(start: int, length: int) -> int:
    # "@@ -0,0" (insert into an empty file) and a zero-length pre-image name the line before
    return start if length == 0 else start - 1


def _matches_at(lines: list[str], pre: tuple[str, ...], pos: int) -> bool:
    n = len(pre)
    return 0 <= pos and pos + n <= len(lines) and tuple(lines[pos:pos + n]) == pre


def occurrences(lines: list[str], pre: tuple[str, ...]) -> list[int]:
    """Every 0-based position where ``pre`` occurs in ``lines`` (overlapping ones included)."""
    if not pre:
        return list(range(len(lines) + 1))
    first, n = pre[0], len(pre)
    found: list[int] = []
    end = len(lines) - n + 1  # candidates: where the first line is (list.index scans in C)
    p = -1
    while True:
        try:
            p = lines.index(first, p + 1, end)
        except ValueError:
            return found
        if tuple(lines[p:p + n]) == pre:
            found.append(p)


PINNED_REASON = "not at its stated line, in a file that is the pre-image it was written against"
PINNED_POST_REASON = "not at its stated line, in a file that is the post-image it leaves"  # (reversed)
TAKEN_OFF_REASON = "not where unwinding the recorded fix took it off, in the files as that left them"


def image(reverse: bool) -> str:
    """What a pass looks for, in a message: a hunk's pre-image, or, reversed (is the fix in? revert), its post-image."""
    return "post-image" if reverse else "pre-image"


def _anchor(h: Hunk) -> str:
    if h.leading_context < h.trailing_context:
        return "start"
    if h.trailing_context < h.leading_context:
        return "end"
    return ""


def _adds_beside(lines: list[str], h: Hunk, pos: int, anchor: str) -> int | None:
    """The 0-based line next to ``h``'s pre-image at ``pos`` on the side of its ``anchor`` (after it for "end",
    before it for "start") where that line is the one the hunk puts there, next to its context: the lines it adds are
    there already (the fix applied, then a line put among them or after them, and its record lost), so laying it would
    put them in a second time. None otherwise: its post-image whole there (which both passes judge), or a hunk whose
    context on that side is not empty (its lines would differ)."""
    pre, post, k, m = h.old_lines, h.new_lines, h.leading_context, h.trailing_context
    if _matches_at(lines, post, pos if anchor == "end" else pos - (len(post) - len(pre))):
        return None  # its post-image whole there: whether it is in is decided both ways (fixpack.evaluate.decide)
    if k + m >= len(post):  # (it adds nothing)
        return None
    if anchor == "end" and m == 0 and pos + len(pre) < len(lines) and lines[pos + len(pre)] == post[k]:
        return pos + len(pre)
    if anchor == "start" and k == 0 and pos > 0 and lines[pos - 1] == post[len(post) - m - 1]:
        return pos - 1
    return None


def _taken_out(h: Hunk) -> list[str]:
    """The lines between ``h``'s leading and trailing context in its pre-image: those it removes (or changes)."""
    return list(h.old_lines[h.leading_context:len(h.old_lines) - h.trailing_context])


def _adds(h: Hunk) -> bool:
    """``h``'s post-image holds a line its pre-image does not (else it is its pre-image's lines: a removal)."""
    return bool(Counter(h.new_lines) - Counter(h.old_lines))


def _removes_beside(lines: list[str], h: Hunk, pos: int, anchor: str) -> int | None:
    """Reversed, ``h``'s post-image at ``pos`` (not at the file's ``anchor``): the 0-based line next to it on the side
    of its anchor where that is a line the hunk removes (the file goes on past its context with one of the lines it
    takes out: a drift left it there, or the fix was never laid), else None. The hunk is not in there."""
    gone, end = set(_taken_out(h)), pos + len(h.new_lines)
    if anchor == "end" and h.trailing_context == 0 and end < len(lines) and lines[end] in gone:
        return end
    if anchor == "start" and h.leading_context == 0 and pos > 0 and lines[pos - 1] in gone:
        return pos - 1
    return None


def _removed_at(lines: list[str], h: Hunk, anchor: str) -> bool:
    """``h`` only removes lines, more of them than its context, and the file ends (``anchor`` "end"; starts, "start")
    with the lines it removes: its post-image, its context alone, found at the anchor is one of them (``C`` after
    ``D A C`` removed, in a file that ends ``D A C``), not a sign that they are out."""
    gone = _taken_out(h)
    if len(gone) <= len(h.new_lines) or _adds(h):  # (more lines than its post-image)
        return False
    return lines[len(lines) - len(gone):] == gone if anchor == "end" else lines[:len(gone)] == gone


def whole_file(h: Hunk) -> bool:
    """The hunk has no context and one side empty at line 0: as a file's only hunk, it empties or fills the file."""
    return h.leading_context == h.trailing_context == 0 and (
        (h.new_start, h.new_len) == (0, 0) or (h.old_start, h.old_len) == (0, 0))


WHOLE_REASON = "as git apply reads a file's only hunk without context"  # (see whole_file)
BESIDE_SAID = ("the lines it adds are there (the fix applied before, its record lost, and the file changed after it?): "
               "laying it would put them in twice")  # (see _adds_beside)
REMOVED_SAID = ("the lines it takes out are not all out there (a line left by a drift, or the fix never laid): it is "
                "not taken for applied")  # (see _removes_beside)


def _lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def locate(lines: list[str], h: Hunk, index: int, delta: int, reverse: bool = False,
           evidence: HunkEvidence = SEARCH, lone: bool = False) -> HunkResult:
    """Place one hunk's pre-image in ``lines`` by the placement rule.

    ``delta`` is the running offset of what was placed before it in the same file (earlier hunks, and
    earlier fixes of the chain), so that a hunk follows their shift without reporting it twice; ``lone``: it is
    its file's only hunk (see :func:`whole_file`).
    """
    pre, _post, start = sides(h, reverse)
    expected = _expected_index(start, len(pre)) + delta
    if evidence.pinned:  # the file it was written against: its stated line, whatever its context's shape
        at = expected if evidence.offset is None else expected - delta + evidence.offset  # (or where it was taken off)
        if _matches_at(lines, pre, at):
            return _placed(index, at, expected, delta)
        return _missing(index, lines, pre, at, PINNED_POST_REASON if reverse else PINNED_REASON
                        if evidence.offset is None else TAKEN_OFF_REASON)
    if lone and whole_file(h):
        if len(lines) == len(pre) and _matches_at(lines, pre, 0):
            return _placed(index, 0, expected, delta)
        what = "is the empty file" if not pre else f"must be the whole file ({_lines(len(pre))})"
        does = "empties" if (h.new_start, h.new_len) == (0, 0) else "fills"
        return _missing(index, lines, pre, expected, f"its {image(reverse)} {what}, {WHOLE_REASON} that {does} the "
                                                     f"file, and this file holds {_lines(len(lines))}")
    anchor = _anchor(h)
    if anchor and evidence.recorded and _matches_at(lines, pre, expected):  # where the manifest records it was laid
        return _placed(index, expected, expected, delta)
    if anchor:
        pos = 0 if anchor == "start" else len(lines) - len(pre)
        found = occurrences(lines, pre)
        if _matches_at(lines, pre, pos) and not (reverse and _removed_at(lines, h, anchor)):
            pinned = max(evidence.count or 1, 1)  # its copies in the pinned file (the anchored one among them)
            if len(found) == 1 and pinned == 1:
                return _placed(index, pos, expected, delta)
            # a twin: the copy at the file's start or end may be one upstream appended (or, where the pinned file held
            # twins too, one of them went away and another came), so the anchor alone does not tell them apart
            return HunkResult(index, Placement.AMBIGUOUS, candidates=tuple(p + 1 for p in found),
                              expected=expected + 1,
                              reason=f"anchored to the {anchor} of the file, where its {image(reverse)} is, and it "
                                     f"occurs {len(found)} times in the file"
                                     + (f" (the pinned {image(reverse)} held {pinned})" if pinned > 1 else ""))
        if len(found) == 1 and (evidence.count is None or evidence.count <= 1) and (
                _adds(h) if reverse else found[0] == expected):
            # alone at its stated line (where a pinned file has it); or, reversed, its post-image with the lines it
            # adds, alone in the file: those lines are the fix's wherever the file ends now (a drift above moved
            # them, a later fix of the chain added lines after them), and taking them out guesses nothing. A removal's
            # post-image, its context alone, is no sign of it off the file's start or end: it is not in there
            beside = None if evidence.recorded else _removes_beside(lines, h, found[0], anchor) if reverse else \
                _adds_beside(lines, h, found[0], anchor)  # (recorded: laid there, whatever came after it)
            if beside is None:
                return _placed(index, found[0], expected, delta)
            side = "after" if anchor == "end" else "before"
            return _missing(index, lines, pre, expected, f"anchored to the {anchor} of the file, where its "
                                                         f"{image(reverse)} is not, and at its stated line "
                                                         f"{found[0] + 1} " + (
                f"a line it removes is {side} its context (line {beside + 1}): {REMOVED_SAID}" if reverse else
                f"the line it puts {side} its context is there already (line {beside + 1}): {BESIDE_SAID}"))
        twins = f"; its {image(reverse)} occurs {len(found)} times in the file" if len(found) > 1 else ""
        return _missing(index, lines, pre, expected, f"anchored to the {anchor} of the file (it has "
                                                     f"{h.leading_context} context lines above its change and "
                                                     f"{h.trailing_context} below, as diff writes a hunk there){twins}")
    if not pre and lines:
        return HunkResult(index, Placement.AMBIGUOUS, expected=expected + 1,
                          reason=f"it has no context line to locate it by, and the file is not the pinned "
                                 f"{image(reverse)}")
    found = occurrences(lines, pre)
    if evidence.recorded and expected in found:  # where the manifest records it was laid, whatever twin it has
        return _placed(index, expected, expected, delta)
    return _searched(index, lines, pre, found, expected, delta, evidence, image(reverse))


def _searched(index: int, lines: list[str], pre: tuple[str, ...], found: list[int], expected: int, delta: int,
              evidence: HunkEvidence, side: str) -> HunkResult:
    cands = tuple(p + 1 for p in found)
    if not found:
        return _missing(index, lines, pre, expected, "")
    if len(found) > 1:
        return HunkResult(index, Placement.AMBIGUOUS, candidates=cands, expected=expected + 1,
                          reason=f"its {side} occurs {len(found)} times in the file")
    if evidence.count is not None and evidence.count > 1:
        return HunkResult(index, Placement.AMBIGUOUS, candidates=cands, expected=expected + 1,
                          reason=f"the pinned {side} held {evidence.count} copies of its context and this file "
                                 f"holds one: which copy remains cannot be told")
    return _placed(index, found[0], expected, delta)


def _placed(index: int, pos: int, expected: int, delta: int) -> HunkResult:
    offset = pos - expected + delta  # from the stated line: the running offset plus this hunk's own
    kind = Placement.EXACT if offset == 0 else Placement.OFFSET  # as GNU patch says it: a running offset is one
    return HunkResult(index, kind, pos + 1, offset, expected=expected + 1)


def _missing(index: int, lines: list[str], pre: tuple[str, ...], expected: int, reason: str) -> HunkResult:
    # the closest near-miss is worked out only for a hunk that is reported (see closest()): a fix that
    # is applied already misses every pre-image, and that is no news
    return HunkResult(index, Placement.MISSING, expected=expected + 1, reason=reason)


def _shown(expected: str, found: str) -> tuple[str, str]:
    """Two lines as a near-miss shows them: without their newline, unless that (or a CR) is all they differ in."""
    a, b = expected.rstrip("\n"), found.rstrip("\n")
    return (a, b) if a.rstrip("\r") != b.rstrip("\r") else (expected, found)


def closest(lines: list[str], pre: tuple[str, ...], expected: int) -> Closest | None:
    """The position where most of ``pre``'s lines match, line for line, their line ends (LF, CRLF, none)
    set aside, then most match whole (ties: the one nearest ``expected``); None when no line matches
    anywhere. A patch whose hunk lines end in CRLF against a file whose lines end in LF (or the other way)
    matches nowhere whole; so it is still shown where it would go, each line said to differ in its end."""
    n = len(pre)
    if not n or not lines:
        return None
    bare = [ln.rstrip("\r\n") for ln in lines]
    want = [p.rstrip("\r\n") for p in pre]
    wanted = set(want)
    starts = {i - k for i, ln in enumerate(bare) if ln in wanted for k, p in enumerate(want) if p == ln}
    best: tuple[int, int, int] | None = None  # (matching bare, matching whole, -distance)
    best_pos = 0
    for s in starts:
        if s < -n or s > len(lines):
            continue
        inside = [k for k in range(n) if 0 <= s + k < len(lines)]
        key = (sum(1 for k in inside if bare[s + k] == want[k]), sum(1 for k in inside if lines[s + k] == pre[k]),
               -abs(s - expected))
        if best is None or key > best:
            best, best_pos = key, s
    if best is None:
        return None
    diffs = tuple((best_pos + k + 1, *(_shown(p, lines[best_pos + k]) if 0 <= best_pos + k < len(lines)
                   else (p.rstrip("\n"), "(end of file)"))) for k, p in enumerate(pre)
                  if not (0 <= best_pos + k < len(lines) and lines[best_pos + k] == p))
    cr = any(0 <= best_pos + k < len(lines) and lines[best_pos + k].endswith("\r\n") != p.endswith("\r\n")
             for k, p in enumerate(pre))
    return Closest(best_pos + 1, best[1], n, diffs[:3], line_ends=best[0] == n and best[1] < n, cr=cr)


def apply_text(text: str, hunks: tuple[Hunk, ...], reverse: bool = False,
               evidence: tuple[HunkEvidence, ...] = (), delta: int = 0, in_place: bool = True,
               each: tuple[int, ...] = ()) -> TextResult:
    """Apply (or reverse-apply) every hunk of one file to ``text``.

    ``evidence`` gives each hunk's :class:`HunkEvidence` (default: searched, count unknown); ``delta``
    the running offset left by earlier fixes in this file; ``in_place``: the file is changed, not created or deleted
    (whose whole-file checks are the caller's: :func:`whole_file` is for a file changed in place). Each hunk is placed
    on its own evidence
    (a unique place may lie before the hunk ahead of it, when upstream swapped two blocks); hunks that
    would overlap are refused. ``each``: per hunk, the running offset it is placed from (where the manifest records
    each hunk's offset: a drift lay between two of them when the fix was laid), instead of the hunk before it's.
    Returns the new text and one HunkResult per hunk; ``text`` is None when any hunk could not be placed (missing,
    ambiguous or overlapping).
    """
    lines = split_lines(text)
    results: list[HunkResult] = []
    running = delta
    for i, h in enumerate(hunks):
        running = each[i] if i < len(each) else running
        res = locate(lines, h, i, running, reverse, evidence[i] if i < len(evidence) else SEARCH,
                     in_place and len(hunks) == 1)
        results.append(res)
        if res.found:
            running = res.offset
    results = _refuse_cut_lines(_refuse_overlaps(results, hunks, reverse), hunks, reverse, len(lines))
    if not all(r.found for r in results):
        return TextResult(None, tuple(results), delta, len(lines))
    out: list[str] = []
    floor = 0
    for res, h in sorted(zip(results, hunks), key=lambda rh: rh[0].line or 0):
        pre, post, _ = sides(h, reverse)
        pos = (res.line or 1) - 1
        out.extend(lines[floor:pos])
        results[res.index] = replace(res, turned=len(out) - _expected_index(sides(h, not reverse)[2], len(post)))
        out.extend(post)
        floor = pos + len(pre)
    out.extend(lines[floor:])
    return TextResult("".join(out), tuple(results), running, len(lines))


def _refuse_overlaps(results: list[HunkResult], hunks: tuple[Hunk, ...], reverse: bool) -> list[HunkResult]:
    """Two placed hunks whose lines overlap cannot both be right: refuse the later one."""
    taken: list[tuple[int, int, int]] = []  # (first, end, hunk index), 0-based, end exclusive
    out = []
    for res, h in zip(results, hunks):
        if res.found and res.line is not None:
            first, end = res.line - 1, res.line - 1 + len(sides(h, reverse)[0])
            clash = next((k for a, e, k in taken if first < e and a < end or first == a), None)
            if clash is not None:
                res = HunkResult(res.index, Placement.MISSING, expected=res.expected,
                                 reason=f"its only place overlaps hunk #{clash + 1}'s lines")
            else:
                taken.append((first, end, res.index))
        out.append(res)
    return out


MARKER_SAID = "its '\\ No newline at end of file' marker is misplaced"


def _refuse_cut_lines(results: list[HunkResult], hunks: tuple[Hunk, ...], reverse: bool,
                      total: int) -> list[HunkResult]:
    """A placed hunk whose lines put in their place end without a newline (a ``\\ No newline at end of file`` marker
    after its last line) where the file goes on past them would join that line to the next: refused (a marker that
    follows no file's last line; the lines looked for end so only at the file's end, and are found nowhere else)."""
    out = []
    for res, h in zip(results, hunks):
        look, put, _ = sides(h, reverse)
        end = (res.line or 1) - 1 + len(look)
        if res.found and put and not put[-1].endswith("\n") and end < total:
            at = f"after line {end}" if not look else f"at line{f's {res.line}-' if len(look) > 1 else ' '}{end}"
            res = HunkResult(res.index, Placement.MISSING, expected=res.expected,
                             reason=f"{MARKER_SAID}: the {image(not reverse)} it puts {at} ends without a newline, and "
                                    f"the file goes on past it (to line {total})")
        out.append(res)
    return out


def probe(text: str, hunks: tuple[Hunk, ...], reverse: bool = False,
          evidence: tuple[HunkEvidence, ...] = (), in_place: bool = True) -> tuple[HunkResult, ...]:
    """Locate every hunk independently (no early stop), for status evidence and partial checks; ``in_place`` as
    :func:`apply_text` takes it."""
    lines = split_lines(text)
    return tuple(locate(lines, h, i, 0, reverse, evidence[i] if i < len(evidence) else SEARCH,
                        in_place and len(hunks) == 1) for i, h in enumerate(hunks))


def stray_cr_added(text: str, hunks: tuple[Hunk, ...]) -> tuple[int, int, str] | None:
    """(patch line, LF lines of ``text``, its end: "CR LF" or "CR") of the first line a hunk with no context or
    removed line adds (git diff -U0 of added lines: the patch cannot show the file's line ends, so parse took it)
    that ends in CR LF (or in a lone CR: a last line with no newline), where ``text``, the file it goes into, ends
    its lines in LF and none in CR LF; None otherwise. A CRLF file, a file with both ends, and a new (empty) file take
    such a line as content."""
    found = next(((h.diff_line + 1 + k, "CR LF" if ln.endswith("\n") else "CR") for h in hunks if not h.old_lines
                  for k, ln in enumerate(h.new_lines) if ln.endswith(("\r\n", "\r"))), None)  # (its body: added lines)
    if found is None:  # (the file is read for its line ends only where such a line is)
        return None
    lines = split_lines(text)
    lf = sum(1 for ln in lines if ln.endswith("\n") and not ln.endswith("\r\n"))
    return (found[0], lf, found[1]) if lf and not any(ln.endswith("\r\n") for ln in lines) else None
