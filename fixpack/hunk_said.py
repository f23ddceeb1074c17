"""What a refused hunk's message says of its closest near-miss (:class:`~fixpack.applier.Closest`): the lines it
covers, each line that differs (in its text, or only in its line end: LF, CR LF, none), and a ``\\ No newline at end
of file`` marker that follows no last line of the file (:func:`misplaced_marker`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .applier import MARKER_SAID, Closest

if TYPE_CHECKING:
    from .evaluate import HunkNote


def misplaced_marker(note: HunkNote) -> str:
    """What is said of a missing hunk whose ``\\ No newline at end of file`` marker follows no last line of the file
    (its place in the patch, when known), else "": the lines it looks for end without a newline where the file goes on
    (a near-miss of every line but that one's end: git's marker was moved or copied), or those it puts in place would
    (refused by the applier: they would join the next line)."""
    c, looked = note.closest, note.pre
    end = c.line + len(looked) - 1 if c is not None else 0
    if note.reason.startswith(MARKER_SAID):  # (the side it puts in place: the other one's lines)
        kinds, said = (" +" if note.side == "pre-image" else " -"), note.reason.removeprefix(MARKER_SAID + ": ")
    elif c is not None and c.line_ends and looked and not looked[-1].endswith("\n") and end < note.searched:
        kinds, said = (" -" if note.side == "pre-image" else " +"), (
            f"the {note.side} it looks for ends without a newline at line {end}, and the file goes on past it (to "
            f"line {note.searched})")
    else:
        return ""
    lines = note.text.split("\n")
    k = next((k for k in range(1, len(lines)) if lines[k].startswith("\\") and lines[k - 1][:1] in kinds), 0)
    where = f" ({note.patch}:{note.at + k})" if note.patch and note.at and k else ""
    return f"{MARKER_SAID}{where}: {said}"


def span(c: Closest, single: bool = True) -> str:
    """The lines a near-miss covers: "lines A-B" ("line A" for one, where ``single``)."""
    return f"line {c.line}" if single and c.total == 1 else f"lines {c.line}-{c.line + c.total - 1}"


def differs(n: int, expected: str, found: str) -> str:
    """One differing line of a closest near-miss; two that differ only in their line end (a newline, a CR)
    say so (``expected '', found ''`` said nothing)."""
    if expected == found or expected.rstrip("\r\n") != found.rstrip("\r\n"):
        return f"; line {n}: expected {expected!r}, found {found!r}"
    return (f"; line {n}: {expected.rstrip(chr(13) + chr(10))!r} as expected, but the patch's line ends in "
            f"{line_end(expected)} and the file's in {line_end(found)}")


def line_end(line: str) -> str:
    return "CRLF" if line.endswith("\r\n") else "LF" if line.endswith("\n") else "no newline (the file's end)"
