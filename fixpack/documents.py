"""The one place the engine parses JSON and TOML text (the state's manifest and journal, locks, SBOMs, a
rebase's files, profiles, ``fix.toml``): a document nested deeper than the parser can follow (Python's
recursion limit) is refused as one more malformed document, a :class:`json.JSONDecodeError` or
``tomllib.TOMLDecodeError`` that each caller's handler already turns into its file's error (exit 2 for the
pack, 3 for the state), with the line where the nesting gets too deep; never a RecursionError (exit 1)."""

from __future__ import annotations

import json
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (some Gaudi images): the same parser as a package
    import tomli as tomllib  # type: ignore[no-redef]

TOO_DEEP = "nested too deeply to read"
_NAMED_AT = 100  # the depth the error's line is taken at: past any document this tool writes or reads


class TooDeepTomlError(tomllib.TOMLDecodeError):
    """A TOML document nested too deeply; its message names the line and column, as tomllib's own do."""

    def __init__(self, msg: str) -> None:
        ValueError.__init__(self, msg)  # (TOMLDecodeError's own signature differs between versions)


def loads_json(text: str | bytes) -> Any:
    """``json.loads``, with a document nested too deeply a :class:`json.JSONDecodeError` (a ValueError)."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError(TOO_DEEP, doc, too_deep_at(doc, toml=False)) from None


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads``, with a document nested too deeply a ``TOMLDecodeError`` naming its line."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        at = too_deep_at(text, toml=True)
        line = text.count("\n", 0, at) + 1
        raise TooDeepTomlError(f"{TOO_DEEP} (at line {line}, column {at - text.rfind(chr(10), 0, at)})") from None


def too_deep_at(text: str, toml: bool) -> int:
    """The offset in ``text`` where arrays, objects or inline tables first nest past ``_NAMED_AT`` levels
    (else the deepest point): strings and (TOML) comments skipped, a line's best guess for a message."""
    depth = deepest = at = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote or c == "\n":
                quote = ""
        elif c == '"' or (toml and c == "'"):
            quote = c
        elif toml and c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
                if depth > _NAMED_AT:
                    return i
        elif c in "]}":
            depth -= 1
        i += 1
    return at
