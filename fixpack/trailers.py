"""A commit message's trailers, found and read by the rules ``git interpret-trailers --parse`` reads them by (its
manual), with no git needed: ``apply`` and ``status`` in an image read patches too.

- The message ends at a line ``---`` followed by nothing but white space, or by a space and a name (where ``git am``
  ends a mail's message: :func:`is_patch_break`); a trailing run of comment (``#``) and empty lines, and an old
  ``Conflicts:`` block, is no part of it, nor is anything after a ``# ---- >8 ----`` scissors line
  (:func:`message_end`).
- The trailer block is the message's last paragraph, after the title (a blank or white-space-only line before it),
  when every one of its lines is a trailer (comment lines aside), or when at least one is git-generated
  (``Signed-off-by: ``, ``(cherry picked from commit ``) and at least 25% of them are trailers; a line that starts
  with white space continues the line before it (:func:`block_start`). No ``trailer.*`` configuration is read: a
  patch reads the same on every machine.
- A trailer is ``Key: value``: a key of ASCII letters, digits and ``-`` at the line's start, any spaces or tabs, then
  ``:``; its value is the rest, its continuation lines joined by one space, white space trimmed (an empty ``Key:``,
  its value on the next line, reads that value). Any other line of the block (the ``(cherry picked ...)`` line, a
  comment, text) is no trailer, but stays in the block (:func:`block`).
"""

from __future__ import annotations

import re

from .structs import dataclass

_WS = " \t\r"  # git's isspace (its own, not C's: no \v, no \f), less the line break
_KEY = re.compile(r"[A-Za-z0-9-]+[ \t]*:")
GENERATED = ("Signed-off-by: ", "(cherry picked from commit ")
SCISSORS = "# ------------------------ >8 ------------------------"


@dataclass(frozen=True)
class Entry:
    """A line of a trailer block, with its continuation lines: ``line`` its first line's index in the lines read;
    ``key`` the trailer's key ("" for a line that is no trailer); ``value`` as git reads it (for a line that is no
    trailer, the line stripped); ``written`` as it is written back: ``Key: value`` for one written so, else the line
    as written, its continuation lines joined to it by one space."""

    line: int
    key: str
    value: str
    written: str


def is_patch_break(line: str) -> bool:
    """A line that ends a mail's commit message, as ``git am`` reads it: ``---`` then only white space, or ``--- ``
    and a name."""
    if not line.startswith("---"):
        return False
    rest = line[3:]
    return not rest.strip(_WS) or (rest[:1] == " " and rest[1:2] not in ("", *_WS))


def _separator(line: str) -> int:
    """The index of the ``:`` that makes ``line`` a trailer; -1 for none."""
    m = _KEY.match(line)
    return m.end() - 1 if m else -1


def _blank(line: str) -> bool:
    return not line.strip(_WS)


def message_end(lines: list[str], lo: int, hi: int) -> int:
    """Where the message ``lines[lo:hi]`` ends for its trailers: before a trailing run of comment and empty lines
    (an old ``Conflicts:`` block, its tab-indented paths, among them), or a scissors line and all after it."""
    cut = next((i for i in range(lo, hi) if lines[i].startswith(SCISSORS)), hi)
    tail: int | None = None
    conflicts = False
    for i in range(lo, cut):
        line = lines[i]
        if line.startswith("#") or line == "":
            tail = i if tail is None else tail
        elif line == "Conflicts:":
            conflicts = True
            tail = i if tail is None else tail
        elif conflicts and line.startswith("\t"):
            continue
        elif tail is not None:
            tail, conflicts = None, False
    return cut if tail is None else tail


def block_start(lines: list[str], lo: int, end: int) -> int | None:
    """The index of the first line of the trailer block of the message body ``lines[lo:end]`` (``lo``: the line
    after the title's blank line; ``end``: :func:`message_end`); None where it has none."""
    trailers = others = maybe = 0  # maybe: white-space-led lines, continuations of a trailer above them or not
    recognized = seen = False
    for i in range(end - 1, lo - 2, -1):
        line = lines[i] if i >= lo else ""  # (lo - 1: the blank line after the title)
        if line.startswith("#"):
            others, maybe = others + maybe, 0
            continue
        if _blank(line):
            if not seen:
                continue
            others += maybe
            return i + 1 if (recognized and trailers * 3 >= others) or (trailers and not others) else None
        seen = True
        if line.startswith(GENERATED):
            trailers, maybe, recognized = trailers + 1, 0, True
        elif _separator(line) >= 1:
            trailers, maybe = trailers + 1, 0
        elif line[0] in _WS:
            maybe += 1
        else:
            others, maybe = others + 1 + maybe, 0
    return None


def block(lines: list[str], lo: int, hi: int) -> tuple[int, list[Entry], int]:
    """The trailer block of the message body ``lines[lo:hi]`` (from the line after the title's blank line to the end
    of the message): (its first line's index, ``hi`` where it has none; its entries, in order, blank lines left out;
    the index its message ends at, :func:`message_end`)."""
    end = message_end(lines, lo, hi)
    start = block_start(lines, lo, end)
    if start is None:
        return hi, [], end
    parts: list[tuple[int, int, list[str]]] = []  # (first line, separator index or -1, its lines)
    for i in range(start, end):
        line = lines[i]
        if parts and parts[-1][1] >= 1 and (line == "" or line[0] in _WS):
            parts[-1][2].append(line)
        else:
            parts.append((i, _separator(line), [line]))
    out = []
    for i, sep, said in parts:
        first = said[0]
        if sep < 1:
            if not _blank(first):
                out.append(Entry(i, "", first.strip(_WS), first.rstrip(_WS)))
            continue
        key = first[:sep].strip(_WS)
        raw = "\n".join([first[sep + 1:], *said[1:]]).strip(_WS + "\n")
        value = re.sub(r"\n[ \t\n\r]*", " ", raw).strip(_WS)
        as_said = first[len(key)] == ":" and first[len(key) + 1:len(key) + 2] in (" ", "\t")  # ("Key: value")
        written = f"{key}: {value}".rstrip(_WS) if as_said else \
            " ".join([first.rstrip(_WS)] + [s.strip(_WS) for s in said[1:] if not _blank(s)])
        out.append(Entry(i, key, value, written))
    return start, out, end
