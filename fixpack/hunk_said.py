"""What a hunk's message says (:func:`hunk_message`: ambiguous, missing, with the hunk's number and, where its fix has
several patch files, the one that holds it); of a refused hunk's closest near-miss (:class:`~fixpack.applier.Closest`):
the lines it covers, each line that differs (in its text, or only in its line end: LF, CR LF, none), and a ``\\ No
newline at end of file`` marker that follows no last line of the file (:func:`misplaced_marker`); and a CR LF line an
add-only hunk would put into an LF file (:func:`refuse_stray_cr`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .applier import (
    BESIDE_SAID,
    MARKER_SAID,
    WHOLE_REASON,
    Closest,
    Placement,
    stray_cr_added,
)
from .errors import PatchParseError, Problem
from .safepath import shown_path

if TYPE_CHECKING:
    from .evaluate import HunkNote
    from .patchmodel import FilePatch


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


def refuse_stray_cr(current: str, fp: FilePatch, patch: str) -> None:
    """PatchParseError (exit 2, before anything is written) for a CR LF line an add-only hunk (git diff -U0) would
    put into a file whose lines end in LF (:func:`~fixpack.applier.stray_cr_added`): parse cannot see the file's line
    ends in such a hunk, the file here shows them."""
    found = stray_cr_added(current, fp.hunks)
    if found is None:
        return
    line, lf, end = found
    path = shown_path(fp.path)
    ends = "in CR LF" if end == "CR LF" else "in a CR, the file's last byte"
    what = (f"the line ends {ends}, but {path}, where its hunk (no context or removed line, as git diff -U0 writes "
            f"it) adds it, ends its lines in LF ({lf} of them, none in CR LF): its CR would be written into {path}")
    hint = ("remove the CR from the line's end (a line pasted from a CRLF file, or an editor set to CRLF?), or "
            "regenerate the patch with git diff, whose context lines show the file's line ends")
    where = f"{patch}:{line}" if patch else f"patch line {line}"
    raise PatchParseError(f"{where}: {what}", [Problem(what, Path(patch) if patch else None, line, hint)])


def hunk_message(note: HunkNote, edited: bool = False) -> str:
    """:meth:`~fixpack.evaluate.HunkNote.message`: what became of the hunk ``note`` tells of, where it was looked for
    and what was found instead (its closest near-miss); ``edited``: the file is a fix's, changed since it was applied
    (tampered), so an ambiguous post-image is the image's doing, not the pack's (advice for the file, not a refresh)."""
    where = f"{shown_path(note.path)}: {note.number}"
    if note.placement == Placement.AMBIGUOUS.value:
        lines = f" at lines {list(note.candidates)}" if note.candidates else ""
        if edited and note.side == "post-image":
            return (f"{where} is ambiguous: {note.reason}{lines}; it is not placed by guess: which copy is the "
                    f"fix's cannot be told, and the file was changed since the fix was applied (a block copied or "
                    f"removed by hand?). Check the file by hand and undo that change, or put it back to the "
                    f"release and run again")
        return (f"{where} is ambiguous: {note.reason}{lines}; it is not placed by guess: which copy is the fix's "
                f"cannot be told from this file")
    c = note.closest
    if c is not None and note.header_wrong():
        return (f"{where} missing at its stated line {note.expected}: its {note.side} is whole at "
                f"{span(c, single=False)} ({c.line - note.expected:+d} lines), "
                f"{note.reason.removeprefix('not at its stated line, ')}: the hunk's @@ line names the wrong "
                f"line; fix its numbers, or regenerate the patch with git diff / format-patch")
    if WHOLE_REASON in note.reason:
        return (f"{where} missing: {note.reason}; a patch written without context lines (git diff -U0) of a "
                f"file's first lines reads so too: regenerate it with them (git diff, format-patch); else the file "
                f"is not the one the patch was written for: put it back to the release, or rebase the fix")
    misplaced = misplaced_marker(note)
    if misplaced:
        return (f"{where} missing: {misplaced}; it must follow the last line of the file's pre- or post-image: "
                f"remove it, or regenerate the patch with git diff / format-patch")
    if BESIDE_SAID in note.reason:
        return f"{where} missing: the hunk is {note.reason}"
    if c is not None and note.whole():  # an anchored hunk whose lines are elsewhere, or not alone
        return (f"{where} missing: the hunk is {note.reason}, and its {note.side} is not there but at "
                f"{span(c)} (stated: line {note.expected}); such a hunk goes elsewhere only at its stated line, "
                f"where its {note.side} occurs once. If the file's start or end is not where it belongs, give it "
                f"as many context lines above its change as below (regenerate the patch with git diff / "
                f"format-patch); else rebase it")
    text = (f"{where} missing: its {note.side} is not in lines 1-{note.searched} (expected at line "
            f"{note.expected})" if note.searched else
            f"{where} missing: the file is empty (its {note.side} was expected at line {note.expected})")
    if note.reason:
        text += f"; {note.reason}"
    if c is not None:
        text += (f"; closest: {span(c, single=False)}, {c.matching} of {c.total} lines match"
                 + "".join(differs(n, e, f) for n, e, f in c.differs))
        if c.line_ends:
            text += ("; every line is there but for its line end: " + (
                "write the hunk's lines with the file's line ends (regenerate the patch from this file with git "
                "diff, which keeps a CR)" if c.cr else "a last line with a newline in one and none in the other "
                "(regenerate the patch from this file with git diff, which marks a last line with none '\\ No "
                "newline at end of file')"))
    return text

