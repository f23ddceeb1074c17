"""The line syntax of a patch file that unidiff leaves to us: git's C-quoted paths, the patch file's own
line ends (as against a changed file's), and its lines split on ``\\n`` alone.

Git writes a path holding a byte it will not show as is in double quotes, with C escapes: ``\\303\\274``
(the UTF-8 bytes of ``ü``, with ``core.quotePath`` on, git's default), ``\\t``, ``\\n``, ``\\"``, ``\\\\``.
:func:`unquote` reads that form; the pack's own form (:func:`unquoted_paths`, what ``fixpack format``
writes and what ``refresh`` gets from git with ``core.quotePath=false``) quotes only a path git would
quote even then, so a path is spelled one way in the pack however the patch was made.

A line of a changed file may end in CR (a target file with CRLF line ends): the CR is part of the
line's content, as in git; one added line in CR LF among the file's lines in LF is refused
(:func:`refuse_stray_crlf`). A patch file whose own lines (its mail header, ``diff --git``, ``---``,
``+++``, ``@@``) end in CRLF was converted as a whole, by an editor or ``core.autocrlf``: it is refused
(:func:`refuse_crlf`).
"""

from __future__ import annotations

import re

from .errors import PatchParseError, Problem

_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
# the header lines that name a path, and where the path starts
HUNK_HEADER = re.compile(r"^@@ -([0-9]+)(?:,([0-9]+))? \+([0-9]+)(?:,([0-9]+))? @@")  # ASCII digits, as git
_PATH_LINE = re.compile(r"^(diff --git |--- |\+\+\+ |rename from |rename to |copy from |copy to )(.*)$")


# git format-patch --base's block after the diff (b4 puts its '---' line above it): the commit the series applies on,
# then the patches it needs below it ('prerequisite-patch-id: <id>'; b4: 'change-id: ...', 'Best regards,'). A SHA-1 or
# SHA-256 object name: no hunk line begins so, so what follows the diff there is no lost hunk
BASE_COMMIT = re.compile(r"base-commit: (?:[0-9a-f]{40}|[0-9a-f]{64})")
_BASE_BLOCK = re.compile(rf"(?m)^(?:\n?---\n|\n)?{BASE_COMMIT.pattern}$")


def base_follows(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` (0-based) is a ``base-commit`` line, or b4's ``---`` line right above one."""
    return i < len(lines) and bool(BASE_COMMIT.fullmatch(lines[i]) or (lines[i] == "---" and i + 1 < len(lines)
                                                                        and BASE_COMMIT.fullmatch(lines[i + 1])))


def base_block_at(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` (0-based), outside any hunk, opens git format-patch --base's block: the ``base-commit``
    line itself, b4's ``---`` line right above it, or the blank line above either (git's; b4's mails have one too)."""
    return base_follows(lines, i) or (lines[i] == "" and base_follows(lines, i + 1))


def after_base_block(source: str, lines: list[str], n: int) -> None:
    """PatchParseError at a file section's first line below git format-patch --base's block (which opens at line
    ``n``, 1-based) and above the signature: git am applies it, while the diff is read to the block only, so it would
    be dropped unseen."""
    for k in range(n, len(lines)):
        if lines[k] == "-- ":
            return
        if lines[k].startswith("diff --git ") or (lines[k].startswith("--- ") and k + 1 < len(lines)
                                                   and lines[k + 1].startswith("+++ ")):
            what = (f"a file section below the base-commit block at line {n} (git format-patch --base writes the "
                    f"block after the last one): git am applies it, this reader would drop it")
            raise PatchParseError(f"{source}:{k + 1}: {what}", [Problem(what, None, k + 1, "move the section above the "
                                                                        "block, or regenerate the patch")])


def base_taken(source: str, n: int, hunk_line: int) -> PatchParseError:
    """The error for a hunk (its @@ line at ``hunk_line``) whose last counted line is the blank line ``n`` right above
    a ``base-commit:`` line (or b4's ``---`` above one): git format-patch --base writes that blank line between the
    diff and its block, so the hunk's @@ counts claim one line more than it has, or its own last context line (blank)
    lost its space and the block's blank line is missing. Both readings are said."""
    what = (f"the hunk that starts at line {hunk_line} ends with the blank line {n}, right above the base-commit "
            f"block: its @@ counts claim one line more than it has (the blank line is git format-patch --base's), or "
            f"its last context line lost its leading space")
    return PatchParseError(f"{source}:{n}: {what}", [Problem(what, None, n, "fix the @@ line's numbers, or regenerate "
                                                             "the patch with git format-patch")])


def without_base_block(body: str) -> str:
    """``body`` (a diff, from its first file section on) up to git format-patch --base's block, which it drops with
    everything after it (the patches it names, the signature): the commit a series was made on is no part of a fix."""
    m = _BASE_BLOCK.search(body)
    return body if m is None else body[:m.start()]


class QuoteError(ValueError):
    """A quoted path whose escapes git would not write (``\\x``, an octal past 377, a lone backslash)."""


def hunk_numbers(m: re.Match[str], next_old: int, shift: int, prev_line: int) -> tuple[int, int, int, str]:
    """A matched HUNK_HEADER's pre- and post-image line counts, its first pre-image line, and why its numbers do
    not add up ('' when they do). A side's start with count 0 names the line before it. A hunk is placed by its
    pre-image start and put back by its post-image start, so the latter must be the former plus ``shift``, the
    file's earlier hunks' line changes; it must start at or past ``next_old`` (the line after the file's previous
    hunk, the one at patch line ``prev_line``)."""
    old = int(m.group(2)) if m.group(2) is not None else 1
    new = int(m.group(4)) if m.group(4) is not None else 1
    first_old, first_new = int(m.group(1)) + (old == 0), int(m.group(3)) + (new == 0)
    if old == new == 0:
        why = "a hunk of no lines, neither pre-image nor post-image (git diff writes none; it changes nothing)"
    elif first_old < 1 or first_new < 1:
        why = (f"a side of {old if first_old < 1 else new} lines cannot start at line 0 (lines count from 1; only a "
               f"side of no lines starts at 0)")
    elif first_old < next_old:
        why = (f"it starts at pre-image line {first_old}, inside or before the file's previous hunk (the one at patch "
               f"line {prev_line}: pre-image lines up to {next_old - 1}; one of the two headers is wrong)")
    elif first_new != first_old + shift:
        why = (f"its post-image start {first_new} is not its pre-image start {first_old} plus the line changes of "
               f"the file's hunks before it ({shift:+d})")
    else:
        why = ""
    return old, new, first_old, why


def unquote(raw: str) -> str:
    """A path as git's C-quoted form ``"..."`` spells it (``raw`` unquoted: returned as is). Octal escapes
    are bytes, read as UTF-8 (bytes that are not UTF-8 are kept as surrogates, as the tree reads them)."""
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    out = bytearray()
    body, i = raw[1:-1], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1: i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", body[i + 1: i + 4]):
            out.append(int(body[i + 1: i + 4], 8))
            i += 4
        else:
            raise QuoteError(f"a backslash git does not write in a quoted path: {body[i:i + 4]!r}")
    return out.decode("utf-8", "surrogateescape")


def needs_quotes(path: str) -> bool:
    """Whether git quotes ``path`` even with ``core.quotePath=false``: a control character, ``"`` or ``\\``
    (or bytes that are not UTF-8)."""
    return bool(re.search(r'[\x00-\x1f"\\\x7f\udc80-\udcff]', path))


def unquoted_paths(body: str) -> str:
    """``body`` (a diff part) with each quoted path of its header lines written unquoted where git with
    ``core.quotePath=false`` writes it so; hunk lines are left alone."""
    out, old, new = [], 0, 0
    for line in body.split("\n"):
        if old > 0 or new > 0:
            kind = line[:1]
            old -= kind in (" ", "-", "")
            new -= kind in (" ", "+", "")
        elif m := re.match(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", line):
            old, new = int(m.group(1) or 1), int(m.group(2) or 1)
        elif m := _PATH_LINE.match(line):
            line = m.group(1) + _QUOTED.sub(_plain, m.group(2))
        out.append(line)
    return "\n".join(out)


def _plain(m: re.Match[str]) -> str:
    try:
        path = unquote(m.group(0))
    except QuoteError:
        return m.group(0)
    return m.group(0) if needs_quotes(path) else path


_MARKER = re.compile(r"^\\.*$", re.M)


def as_git_markers(text: str) -> str:
    """``text`` with every line that starts with a backslash as git reads it: a "\\ No newline at end of file"
    marker, whatever its words (GNU diff writes them in the user's language; the structure check has placed each
    one after a hunk line). unidiff knows the English words only, and dropped the others: such a patch applied as
    if its file ended in a newline, where ``git am`` and ``git apply`` take the marker."""
    return _MARKER.sub(lambda _m: "\\ No newline at end of file", text)


def split_lines(text: str) -> list[str]:
    """``text``'s lines split on ``\\n`` only, each keeping its end (a CR stays in its line's content)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def refuse_cr_only(text: str, source: str) -> None:
    """Raise PatchParseError for a patch file whose lines end in CR alone (classic Mac): no LF at all, so it reads as
    one line; :func:`refuse_crlf`'s "CRLF" and its dos2unix would not say that, nor convert it."""
    if "\r" in text.rstrip("\r\n") and "\n" not in text.rstrip("\n"):  # (parse_patch ends the last line in LF)
        what = "CR line endings in the patch file itself (classic Mac: it holds no LF at all): the file was converted"
        raise PatchParseError(f"{source}:1: {what}", [Problem(what, None, 1, "convert the patch file to LF line "
                                                              "endings (tr '\\r' '\\n', or mac2unix) and re-run")])


_MODE_LINE = re.compile(r"^(old mode|new mode|new file mode|deleted file mode) (.*)$")
# the modes git writes for a file: 120000 (a symbolic link) is refused where a fix is loaded (patchfiles.symlink_change)
GIT_FILE_MODES = frozenset({"100644", "100755", "120000"})


def refuse_bad_modes(lines: list[str], first: int, source: str) -> None:
    """Raise PatchParseError at the first of the diff's ``lines`` (numbered from ``first``) that gives a mode git
    writes for no file: a gitlink (160000), 777, a set-id bit or a digit that is not octal would be written as read
    (or fail as an internal error)."""
    for n, ln in enumerate(lines, first):
        m = _MODE_LINE.match(ln)
        if m and m.group(2) not in GIT_FILE_MODES:
            what = (f"{m.group(1)} {m.group(2)!r}: no mode git writes for a file (100644, or 100755 for an executable "
                    f"one)")
            raise PatchParseError(f"{source}:{n}: {what}", [Problem(what, None, n, "regenerate the patch with git "
                                                                                   "diff / format-patch")])


def refuse_crlf(lines: list[str], first: int, source: str) -> None:
    """Raise PatchParseError for the first of the patch file's own ``lines`` (numbered from ``first``; not a
    changed file's lines) that ends in CRLF: the patch file was converted as a whole."""
    for n, line in enumerate(lines, first):
        if line.endswith("\r"):
            what = (f"CRLF line endings in the patch file itself: line {n} ends in CRLF, and it is a line of the "
                    f"patch ({line[:40].rstrip()!r}), not a line of a changed file: the patch file was converted "
                    f"to CRLF line endings (an editor, or git's core.autocrlf). A changed file's lines may end in "
                    f"CR; the patch's own lines may not")
            raise PatchParseError(f"{source}:{n}: {what}", [Problem(what, None, n, "convert the patch file back "
                                                                    "to LF line endings (dos2unix) and re-run")])


def refuse_stray_crlf(lines: list[tuple[str, str, int]], path: str, source: str, new_file: bool = False) -> None:
    """Raise PatchParseError at the first line a file section of the patch adds (``lines``: each hunk line of the
    section as (kind, text with its end, line in the patch file)) that ends in CR LF, where the section's other lines
    end in LF alone and none of its context or removed lines (the target file's own, as the patch shows them) ends in
    CR LF: one line pasted from a CRLF file, or saved by an editor set to CRLF, would write a CR into ``path``. A change
    to a CRLF file (its context and removed lines end in CR LF), a file whose lines all end in CR LF, or a section
    that turns LF lines into CR LF ones (every line it removes added again in CR LF, no context line) is taken as it
    is: a CR is a line's content there. A line a '\\ No newline at end of file' marker follows has no end (its text
    ends in LF as the patch holds it; a CR before that LF is the file's last byte: a lone CR, stray as a CR LF is),
    and the marker is no line of the file: neither ends in LF here. A file the patch
    creates (``new_file``) with both ends is refused too (a pasted line as much as in a changed file), but git diff
    writes such a file as it is, so the hint is to give the file one kind of line end, not to regenerate the patch."""
    ends = [(kind, (("\r" if text.endswith("\r\n") else "") if k + 1 < len(lines) and lines[k + 1][0] == "\\" else
                    "\r\n" if text.endswith("\r\n") else "\n"), n)
            for k, (kind, text, n) in enumerate(lines) if kind != "\\"]
    if any(kind in (" ", "-") and end in ("\r\n", "\r") for kind, end, _n in ends):
        return
    lf = sum(1 for _kind, end, _n in ends if end == "\n")
    stray, cr = next(((n, end) for kind, end, n in ends if kind == "+" and end in ("\r\n", "\r")), (None, ""))
    old, new = ([text.removesuffix("\n").removesuffix("\r") for k, text, _n in lines if k == kind] for kind in "-+")
    mixed = any((kind == " " and end) or (kind == "+" and end == "\n") for kind, end, _n in ends) or \
        bool(old) and old != new  # a change of line ends alone: every line it removes, added again in CR LF
    if stray is None or not lf or not mixed:
        return
    own = any(kind in (" ", "-") for kind, _end, _n in ends)  # the file's own lines, as the patch shows them
    said = "in CR LF" if cr == "\r\n" else "in a CR, the file's last byte (a '\\ No newline' marker follows it)"
    what = (f"the line ends {said}, while the patch's other lines of {path} end in LF ({lf} of them"
            f"{', its context and removed lines among them' if own else ''}): its CR would be written into {path}")
    hint = (f"remove the CR from the line's end (a line pasted from a CRLF file, or an editor set to CRLF?); if "
            f"{path} itself has CRLF line ends, regenerate the patch from it with git diff, which keeps them")
    if new_file:  # (git diff writes a new file's lines as they are: regenerating it gives the same patch)
        hint = (f"the patch creates {path} with lines that end in CR LF and lines that end in LF: give the file one "
                f"kind of line end (remove the CR from this line, a line pasted from a CRLF file?, or convert the "
                f"file with unix2dos / dos2unix), then regenerate the patch")
    raise PatchParseError(f"{source}:{stray}: {what}", [Problem(what, None, stray, hint)])


_CHARSET = re.compile(r"^content-type:.*\bcharset=\"?([\w.:-]+)", re.IGNORECASE | re.MULTILINE)


def refuse_not_utf8_message(lines: list[str], first: int, source: str) -> None:
    """Raise PatchParseError for the first of the patch's message ``lines`` (its mail header and description,
    before the diff; numbered from ``first``) that holds bytes that are not UTF-8 (read with surrogateescape),
    unless the mail declares another charset: the message is text, git writes it as UTF-8, and ``fixpack
    format`` would replace such bytes. A changed file's lines are the diff's (an added line is refused there)."""
    declared = _CHARSET.search("\n".join(lines))
    if declared and declared.group(1).lower() not in ("utf-8", "utf8", "us-ascii"):
        return
    for n, line in enumerate(lines, first):
        bad = re.search("[\udc80-\udcff]", line)
        if bad:
            byte = len(line[:bad.start()].encode("utf-8", "surrogateescape")) + 1
            what = (f"the patch's message (its mail header or description, before the diff) holds bytes that are "
                    f"not UTF-8 (byte {byte} of the line)")
            raise PatchParseError(f"{source}:{n}: {what}", [Problem(what, None, n, "write the message as UTF-8 (git "
                                                                    "format-patch writes it so) and re-run")])


_BINARY_HINT = ("a text change: take the 'Binary files' line out, or regenerate the patch with git diff; a binary one: "
                "regenerate it with git diff --binary (its data in the patch) and declare the file under [binary] in "
                "fix.toml (a 'Binary files ... differ' section is applied only to make a new file from a [binary] file "
                "of the fix's folder)")


def binary_then_text(source: str, at: int, line: str, n: int, plain: bool = False) -> PatchParseError:
    """The error for a ``Binary files ... differ`` line (``line``, at patch line ``at``) followed by a text diff of the
    file it names (its ``---`` or ``+++`` at line ``n``): in a git file section (git writes a section one way or the
    other), or in a plain diff (``plain``: diff -r writes the line for a binary file, and no text diff of it). unidiff
    reads the two as two sections of one file."""
    said, way = (("diff -r writes it for a binary file", "a diff writes a file's change") if plain else
                 ("git diff without --binary", "git writes a file's section"))
    what = (f"{line[:120]!r} says the file's change is binary and not in the patch ({said}), but a text diff of the "
            f"file follows it at line {n}: {way} one way or the other, never both")
    return PatchParseError(f"{source}:{at}: {what}", [Problem(what, None, at, _BINARY_HINT)])


def binary_after_text(source: str, at: int, line: str, text_at: int) -> PatchParseError:
    """The error for a ``Binary files ... differ`` line (``line``, at patch line ``at``) after a text diff of the file
    it names (in its section: the text diff's ``---`` at line ``text_at``). unidiff reads the two as two sections of
    one file."""
    what = (f"{line[:120]!r} says the file's change is binary and not in the patch, but the file's text diff is above "
            f"it (from line {text_at}): a diff writes a file's change one way or the other, never both")
    return PatchParseError(f"{source}:{at}: {what}", [Problem(what, None, at, _BINARY_HINT)])


# a patch saved in UTF-16 or UTF-32 (a PowerShell '>' redirect, an editor's "Unicode"): its byte-order mark, its
# encoding and byte order, longest mark first (UTF-32 LE's begins with UTF-16 LE's)
_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32", "little"), (b"\x00\x00\xfe\xff", "UTF-32", "big"),
          (b"\xff\xfe", "UTF-16", "little"), (b"\xfe\xff", "UTF-16", "big"))


def wide_text(data: bytes) -> tuple[str, str] | None:
    """What a patch file that holds NUL bytes is when it is text in UTF-16 or UTF-32 rather than UTF-8: (words for a
    message, the encoding ``iconv -f`` takes), by its byte-order mark or, without one, by where the NUL bytes of its
    start fall (ASCII text in UTF-32: three in every four bytes, the fourth never one; in UTF-16: every other byte,
    none between them); None for anything else (a binary file)."""
    for mark, name, end in _MARKS:
        if data.startswith(mark):  # (iconv reads the mark: its order, the mark itself left out)
            return f"{name} text ({end}-endian, its byte-order mark {mark.hex(' ').upper()} first)", name
    head = data[:4096]
    if len(head) < 4 or b"\0" not in head:  # (UTF-8 text, the common case: no lanes to look at)
        return None
    head = head[:len(head) - len(head) % 4]
    for width, words in ((4, "three NUL bytes in every four"), (2, "a NUL byte every other byte")):
        lanes = [head[i::width] for i in range(width)]
        for text_at, end in ((0, "little"), (width - 1, "big")):
            if all(_mostly_nul(lane) for i, lane in enumerate(lanes) if i != text_at) \
                    and lanes[text_at].count(0) <= 0.05 * len(lanes[text_at]):
                return (f"UTF-{8 * width} text ({end}-endian, no byte-order mark: {words})",
                        f"UTF-{8 * width}{end[0].upper()}E")
    return None


def _mostly_nul(lane: bytes) -> bool:
    return lane.count(0) >= 0.9 * len(lane)
