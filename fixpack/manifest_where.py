"""Where a manifest says something: the line (1-based) of a key in one of its fix entries, for a message about
that entry, or of one of its own keys (``profile``). A manifest is written one key a line
(:meth:`fixpack.records.Manifest.to_json`); one reshaped by hand may not be, and then no line is told (None). An
entry of ``fixes`` runs from its opening brace to its closing one, at the depth of the list's items."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from .documents import MAX_STATE_BYTES
from .safepath import read_regular


class EntryProblem(str):
    """A manifest's problem in one of its fix entries: its words, with ``at``, (the entry's number, 1-based; the key
    it lies at), so that the message can name its line (:func:`entry_line`); (0, a path): in its own ``files``."""

    at: tuple[int, str] | tuple[int, str, str]  # (with a key in the object the key holds: a path in its offsets)

    def __new__(cls, words: str, at: tuple[int, str] | tuple[int, str, str]) -> EntryProblem:
        said = super().__new__(cls, words)
        said.at = at
        return said


def _keyed(key: str) -> tuple[str, str]:
    """How a line holding ``key`` as a JSON key begins: as fixpack writes it (non-ASCII escaped) or as an editor may
    (as it is)."""
    return f"{json.dumps(key)}:", f"{json.dumps(key, ensure_ascii=False)}:"


def _entries(lines: list[str]) -> Iterator[tuple[int, list[tuple[int, int, str]]]]:
    """Each entry of the manifest's ``fixes`` list, laid out as fixpack writes it (``"fixes": [`` on a line of its
    own, each entry's braces on lines of their own): the line of its opening brace (1-based) and its lines, each as
    (line, depth: 1 for the entry's own keys, 2 for those of an object in it such as ``files``, text stripped).
    Nothing from a line laid out otherwise (a manifest reshaped by hand) on: no line is told there, not a wrong one."""
    start = next((n for n, ln in enumerate(lines) if ln.strip().startswith('"fixes":')), None)
    if start is None or lines[start].strip() != '"fixes": [':
        return
    depth, brace = 0, 0
    entry: list[tuple[int, int, str]] = []
    for n, ln in enumerate(lines[start + 1:], start + 2):
        text = ln.strip()
        if depth == 0:
            if text != "{":
                return  # the end of the list ("]"), or an entry laid out otherwise
            depth, brace, entry = 1, n, []
            continue
        if text.startswith("{"):
            return  # an object opened on a line of its own inside an entry: not fixpack's layout
        if depth == 1 and text in ("}", "},"):
            yield brace, entry
            depth = 0
            continue
        entry.append((n, depth, text))
        depth += text.count("{") + text.count("[") - text.count("}") - text.count("]")
        if depth < 1:
            return


def manifest_line(path: Path, fix_id: str, file: str, key: str = "files") -> int | None:
    """The line where the manifest at ``path`` names ``file`` in fix ``fix_id``'s entry (in its ``key``: ``files``,
    ``hunk_offsets``), or None when it cannot be told. Read as the run read it: the state's cap, never through a
    link (a larger one has no line)."""
    lines = _lines(path)
    names = f'"id": {json.dumps(fix_id)}'
    for _brace, entry in _entries(lines):
        if any(d == 1 and text.rstrip(",") == names for _n, d, text in entry):
            return _inner(entry, key, file)
    return None


def _inner(entry: list[tuple[int, int, str]], key: str, inner: str) -> int | None:
    """The line of ``inner`` in the object the entry's ``key`` holds; None where it has none."""
    at = next((i for i, (_n, d, text) in enumerate(entry) if d == 1 and text.startswith(_keyed(key))), None)
    for n, d, text in entry[at + 1:] if at is not None else ():  # its own lines, up to the entry's next key
        if d != 2:
            break
        if text.startswith(_keyed(inner)):
            return n
    return None


def entry_line(raw: bytes, number: int, key: str, inner: str = "") -> int | None:
    """The line of ``key`` in the ``number``-th (1-based) entry of the manifest's ``fixes`` (its bytes ``raw``), else
    of the entry's opening brace; ``inner``: of that key in the object ``key`` holds (a path in its ``offsets``), else
    of ``key``; number 0: of the path ``key`` in the manifest's own ``files``. None when it cannot be told."""
    try:
        lines = raw.decode("utf-8").splitlines()
    except ValueError:
        return None
    if number == 0:
        start = next((n for n, ln in enumerate(lines) if ln == '  "files": {'), None)
        end = next((n for n in range(start or 0, len(lines)) if lines[n] in ("  },", "  }")), len(lines))
        return None if start is None else next((n + 1 for n in range(start + 1, end) if lines[n][:4] == "    "
                                                and lines[n][4:].startswith(_keyed(key))), None)
    for n, (brace, entry) in enumerate(_entries(lines), 1):
        if n == number:
            at = next((k for k, d, text in entry if d == 1 and text.startswith(_keyed(key))), None)
            return (_inner(entry, key, inner) if inner else None) or at or brace
    return None


def top_files_line(path: Path, file: str) -> int | None:
    """The line of ``file`` in the manifest's own ``files`` (at ``path``, read as :func:`manifest_line` reads it);
    None when it cannot be told."""
    raw = _read(path)
    return entry_line(raw, 0, file) if raw is not None else None


def top_line(path: Path, key: str) -> int | None:
    """The line of the manifest's own ``key`` (``"key":`` at its first level, two spaces in) in the file at ``path``,
    read as :func:`manifest_line` reads it; None when it cannot be told."""
    lines = _lines(path)
    return next((n for n, ln in enumerate(lines, 1) if ln.startswith("  ") and ln[2:].startswith(_keyed(key))), None)


def _read(path: Path) -> bytes | None:
    """The manifest's bytes, read as the run read them: the state's cap, never through a link; None where that fails
    (a larger one has no line)."""
    try:
        return read_regular(path, MAX_STATE_BYTES, follow=False)
    except (OSError, ValueError):  # (TooLargeError is a ValueError)
        return None


def _lines(path: Path) -> list[str]:
    """The manifest's lines, read as :func:`_read` reads it; none where that fails or it is no UTF-8."""
    raw = _read(path)
    try:
        return raw.decode("utf-8").splitlines() if raw is not None else []
    except ValueError:
        return []
