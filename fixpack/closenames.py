"""The names an unknown name is near, as the messages for one put them ("close matches: a, b", or "no close
match"): a misspelt fix, profile, key or command. Scored by :mod:`difflib` (loaded only for such a message)."""

from __future__ import annotations

NO_CLOSE = "no close match"
EMPTY = "an empty name"  # every name begins with "": none is near it
SHOWN = 6  # the most names one message suggests


def close_matches(name: str, names: list[str], n: int, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``names`` nearest ``name`` (difflib's ratio, at least ``cutoff``; the nearest first, then by
    name), and any as near as the n-th: a cut among equals dropped one as near as those shown (``v0.3.0`` scores
    alike against every v0.3x.0 profile, and v0.30.0 was the one left out)."""
    import difflib

    scored = sorted((-difflib.SequenceMatcher(None, name.casefold(), x.casefold()).ratio(), x) for x in names)
    kept = [(s, x) for s, x in scored if -s >= cutoff]
    return [x for s, x in kept if s <= kept[min(n, len(kept)) - 1][0]][:SHOWN] if kept else []


def close_names(name: str, names: tuple[str, ...] | list[str]) -> str:
    """"close matches: a, b" (three of ``names`` near ``name``, or more as near as the third), or "no close
    match": for a name not found. The same name in other case, or the name of a profile's file given as a path
    (``profiles/v0.30.0.toml``), comes first; then a name the given one begins (``v0.30`` of ``v0.30.0``): difflib
    scores every profile alike there."""
    if not name.strip():
        return EMPTY
    base = name.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)  # profiles/v0.30.0.toml: its file's name
    stem = base[0] if len(base) == 2 and base[1] in ("toml", "lock") else name
    same = sorted(n for n in names if n.casefold() in (name.casefold(), stem.casefold()))  # V0.30.0, a path
    prefixed = sorted(n for n in names if n.startswith(name))
    close = list(dict.fromkeys(same + prefixed[:3] + close_matches(name, list(names), 3, 0.5)))[:SHOWN]
    return f"close matches: {', '.join(close)}" if close else NO_CLOSE
