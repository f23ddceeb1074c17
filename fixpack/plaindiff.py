"""A diff without ``diff --git`` lines, as ``diff -u`` and quilt write it, read as ``git am`` and ``quilt push`` read it
and written into the pack in git's form, with git's ``a/`` and ``b/`` prefixes.

Forms read (each file's section: a ``---`` line, a ``+++`` line, hunks):

- ``--- a/X`` / ``+++ b/X`` (``diff -ru a b``, ``quilt refresh -p ab``): the file ``X``;
- ``--- X`` / ``+++ X`` (``diff -u`` run in the release's root, ``-p0``): the file ``X``;
- ``--- X.orig`` / ``+++ X`` (a file copied before the edit, ``-p0``): the file ``X``;
- quilt's own (``quilt refresh``, ``-p1``): ``Index: D/X`` and a line of ``=``, then ``--- D.orig/X`` /
  ``+++ D/X``, where ``D`` is the tree's folder; a new or deleted file's section names ``D/X`` beside
  ``/dev/null``. The file is ``X``; so it is in ``diff -ruN OLD NEW``'s ``--- OLD/X`` / ``+++ NEW/X``.

A section of the first two forms is read as it stands; those of the last two are rewritten to the first, a line for a
line (so every line number a message names is the file's), before the patch is read (:func:`as_prefixed`).
"""

from __future__ import annotations

import re

from .diffpaths import GIT_LINE, PREFIX, index_line_at

# what to do about a section of a plain diff whose two names differ otherwise than the module's forms allow
PLAIN_NAMES = ("a diff without 'diff --git' lines names one file on both sides, as X / X, X.orig / X, a/X / b/X, or "
               "two trees' folders OLD/X / NEW/X, the same two in every section (quilt's D.orig/X / D/X): fix the "
               "path, or regenerate the patch with git diff / format-patch")
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)? ?([+-])(\d\d)(\d\d)")
_PAIR = re.compile(r"([^\t]*)(\t.*)?")


def _split(line: str) -> tuple[str, str]:
    """A ``---`` / ``+++`` line's path and what follows it (a tab and the file's time, or nothing)."""
    m = _PAIR.fullmatch(line[4:])
    assert m is not None  # (the pattern takes any text)
    return m.group(1), m.group(2) or ""


def is_epoch(stamp: str | None) -> bool:
    """Whether a ``---`` / ``+++`` line's time (``2024-01-02 10:00:00.000000000 +0100``, its tab dropped) is the epoch
    in any zone: how ``diff -N`` writes the side of a file that does not exist (git apply reads it as /dev/null). A side
    without a time, or with another, names a file that exists, empty or not."""
    from datetime import datetime, timedelta, timezone

    m = _STAMP.fullmatch((stamp or "").strip())
    if m is None:
        return False
    year, month, day, hour, minute, second, sign, zh, zm = m.groups()
    zone = timezone((1 if sign == "+" else -1) * timedelta(hours=int(zh), minutes=int(zm)))
    when = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=zone)
    return when == datetime(1970, 1, 1, tzinfo=timezone.utc)


def as_prefixed(text: str) -> str:
    """``text`` (a patch file) with each section of two trees' folders (quilt's ``D.orig/X`` / ``D/X``, ``diff -ruN
    OLD NEW``'s ``OLD/X`` / ``NEW/X``), and each ``X.orig`` / ``X`` pair, in the ``a/X`` / ``b/X`` form, line for line;
    any other text as it is. A patch with ``diff --git`` lines is git's: as it is. The two folders are learnt from the
    patch's pairs that differ in their first folder only (one such two, else none is rewritten: which folder a path
    lies in would be a guess); a new or deleted file's section is rewritten only under one of them."""
    if "\ndiff --git " in f"\n{text}":
        return text
    lines = text.split("\n")
    pairs = [(i, _split(lines[i]), _split(lines[i + 1])) for i in range(len(lines) - 1)
             if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ")]
    folders = {(o.split("/", 1)[0], n.split("/", 1)[0]) for _i, (o, _t), (n, _u) in pairs
               if "/" in o and "/" in n and '"' not in o[:1] + n[:1] and o.split("/", 1)[0] != n.split("/", 1)[0]
               and o.split("/", 1)[1] == n.split("/", 1)[1]}
    folder = folders.pop() if len(folders) == 1 else None
    for i, (old, old_rest), (new, new_rest) in pairs:
        a: str | None = None
        if folder is not None:
            a, b = (p if p == "/dev/null" else _under(p, folder) for p in (old, new))
        elif old == f"{new}.orig" and not new.startswith('"'):
            a = b = new
        if a is not None and b is not None and (a, b) != ("/dev/null", "/dev/null"):
            lines[i] = f"--- {a if a == '/dev/null' else 'a/' + a}{old_rest}"
            lines[i + 1] = f"+++ {b if b == '/dev/null' else 'b/' + b}{new_rest}"
    return "\n".join(lines)


def _under(path: str, folders: tuple[str, str]) -> str | None:
    """``path`` without the first folder of either side (``folders``: the old tree's, the new tree's), or None when it
    is under neither."""
    leads = () if path.startswith('"') else (f"{folders[0]}/", f"{folders[1]}/")  # (a quoted path: as it is)
    for lead in leads:
        if path.startswith(lead) and len(path) > len(lead):
            return path[len(lead):]
    return None


def _side(prefix: str, path: str) -> str:
    """``path`` (as a ``---`` / ``+++`` line gives it, maybe git's C-quoted form) with git's side ``prefix`` in place
    of any ``a/`` or ``b/`` it has."""
    if path.startswith('"'):
        return f'"{prefix}{PREFIX.sub("", path[1:])}'
    return prefix + PREFIX.sub("", path)


def as_git(lines: list[str]) -> str:
    """A plain unified diff (``--- a/X<tab>time`` / ``+++ b/X<tab>time`` per file, a form of the module's) in the form
    ``git diff`` writes: a ``diff --git a/X b/X`` line before each file, ``a/`` and ``b/`` before the paths, the times
    and quilt's ``Index:`` lines dropped, ``new file mode`` / ``deleted file mode`` where one side is ``/dev/null``
    (git am takes the plain form the same way); the patch's lines as :func:`as_prefixed` leaves them."""
    out: list[str] = []
    for i, ln in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if ln.startswith(("diff ", "Only in ")) or index_line_at(lines, i):  # diff -ruN's command line before each
            continue  # file, and its notes; quilt's 'Index:' lines
        if ln.startswith("--- ") and nxt.startswith("+++ ") and (i + 2 >= len(lines) or lines[i + 2].startswith("@@")):
            (old, old_time), (new, new_time) = _split(ln), _split(nxt)
            at = lines[i + 2] if i + 2 < len(lines) else ""  # diff -N writes a missing side as an empty file, at the
            old, new = ("/dev/null" if at.startswith("@@ -0,0 ") and is_epoch(old_time) else old,  # epoch
                        "/dev/null" if re.match(r"@@ -\S+ \+0,0 @@", at) and is_epoch(new_time) else new)
            a, b = (None if p == "/dev/null" else p for p in (old, new))
            out.append(f"diff --git {_side('a/', a or b or '')} {_side('b/', b or a or '')}")
            out += ["new file mode 100644"] if a is None else ["deleted file mode 100644"] if b is None else []
            out.append(f"--- {'/dev/null' if a is None else _side('a/', a)}")
            out.append(f"+++ {'/dev/null' if b is None else _side('b/', b)}")
        elif ln.startswith("+++ ") and out and out[-1].startswith("+++ "):
            continue  # (written with its '---' line)
        else:
            out.append(ln)
    return "\n".join(out)


def _spaced_names(rest: str, header: list[str]) -> tuple[str, str] | None:
    """The two names of a ``diff --git`` line's ``rest`` that holds a space in a name (not C-quoted: git quotes only a
    name with a TAB, a newline, a quote or a backslash), as git splits it: a rename's from its ``rename from`` /
    ``rename to`` lines, else the same name twice (a file changed in place) at the middle, else those its ``---`` /
    ``+++`` lines give (git ends each with a TAB after such a name), where ``rest`` is just those two; else None
    (which space parts them cannot be told). ``header``: the section's lines before its first hunk."""
    said = []
    for old, new in (("rename from ", "rename to "), ("--- ", "+++ ")):
        a = next((ln[len(old):].rstrip("\t") for ln in header if ln.startswith(old)), None)
        b = next((ln[len(new):].rstrip("\t") for ln in header if ln.startswith(new)), None)
        said.append((a, b) if a is not None and b is not None and f"{a} {b}" == rest else None)
    half = len(rest) // 2
    twin = (rest[:half], rest[:half]) if len(rest) % 2 and rest[half] == " " and rest[:half] == rest[half + 1:] \
        else None
    return said[0] or twin or said[1]


def _header(lines: list[str], at: int) -> list[str]:
    """The lines of the file section whose ``diff --git`` line is ``lines[at]``, up to its first hunk."""
    end = at + 1
    while end < len(lines) and not lines[end].startswith(("@@", "diff --git ")):
        end += 1
    return lines[at + 1:end]


def git_prefixed(body: str) -> str:
    """``body`` (git's form, from its first ``diff --git`` line on) with each file section's paths behind git's ``a/``
    and ``b/`` (a patch of ``git diff --no-prefix``, or written by hand, names ``X`` where git am and patch ``-p1``
    read ``X`` less its first folder): the file each side names, as the engine reads it (an ``a/`` or ``b/`` dropped
    from each side), is the same. A name with a space is split as git splits it (:func:`_spaced_names`); a section
    whose ``diff --git`` line cannot be split is left as it is."""
    out: list[str] = []
    sides: tuple[str, str] | None = None
    lines = body.split("\n")
    for at, ln in enumerate(lines):
        if ln.startswith("diff --git "):
            m = GIT_LINE.match(ln)
            pair = (m.group(1), m.group(2)) if m else _spaced_names(ln[11:], _header(lines, at))
            sides = None if pair is None or (pair[0].lstrip('"').startswith("a/") and
                                             pair[1].lstrip('"').startswith("b/")) else pair
            out.append(ln if sides is None else f"diff --git {_side('a/', sides[0])} {_side('b/', sides[1])}")
            continue
        if sides is not None and ln.startswith(("--- ", "+++ ")) and ln[4:] != "/dev/null":
            ln = ln[:4] + _side("a/" if ln[0] == "-" else "b/", ln[4:])
        elif ln.startswith("@@"):
            sides = None  # (the section's header ends at its first hunk)
        out.append(ln)
    return "\n".join(out)
