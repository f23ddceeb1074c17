"""Where a manifest says something: the line (1-based) of a key in one of its fix entries, for a message about
that entry. A manifest is written one key a line (:meth:`fixpack.records.Manifest.to_json`); one reshaped by
hand may not be, and then no line is told (None). An entry of ``fixes`` runs from its opening brace to its
closing one, at the depth of the list's items."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from .documents import MAX_STATE_BYTES
from .safepath import read_regular


def _entries(lines: list[str]) -> Iterator[list[tuple[int, str]]]:
    """Each entry of the manifest's ``fixes`` list: its lines (1-based) and their text, stripped."""
    start = next((n for n, ln in enumerate(lines) if ln.strip().startswith('"fixes":')), None)
    if start is None:
        return
    depth, entry = 0, []
    for n, ln in enumerate(lines[start + 1:], start + 2):
        entry.append((n, ln.strip()))
        depth += ln.count("{") + ln.count("[") - ln.count("}") - ln.count("]")
        if depth < 0:
            return  # the end of the list
        if depth == 0 and entry:
            yield entry
            entry = []


def manifest_line(path: Path, fix_id: str, file: str) -> int | None:
    """The line where the manifest at ``path`` names ``file`` in fix ``fix_id``'s entry, or None when it cannot be
    told. Read as the run read it: the state's cap, never through a link (a larger one has no line)."""
    try:
        lines = read_regular(path, MAX_STATE_BYTES, follow=False).decode("utf-8").splitlines()
    except (OSError, ValueError):  # (TooLargeError and UnicodeDecodeError are ValueErrors)
        return None
    names = f'"id": {json.dumps(fix_id)}'
    for entry in _entries(lines):
        if any(text.rstrip(",") == names for _n, text in entry):
            return next((k for k, text in entry if text.startswith(f"{json.dumps(file)}:")), None)
    return None


def entry_line(raw: bytes, number: int, key: str) -> int | None:
    """The line of ``key`` in the ``number``-th (1-based) entry of the manifest's ``fixes`` (its bytes ``raw``), else
    of the entry's first line; None when it cannot be told."""
    try:
        lines = raw.decode("utf-8").splitlines()
    except ValueError:
        return None
    for n, entry in enumerate(_entries(lines), 1):
        if n == number:
            return next((k for k, text in entry if text.startswith(f"{json.dumps(key)}:")), entry[0][0])
    return None
