"""Where a stale lock entry is named (:func:`stale_at`): a line of the lock, the profile or fixes/series, for the
messages of :mod:`fixpack.lockfile`, :mod:`fixpack.lock_bump` and the pack check."""

from __future__ import annotations

from pathlib import Path

from .documents import read_capped, text_for_lines
from .model import Profile
from .records import Lock


def stale_at(profile: Profile, lock: Lock, key: tuple[str, str]) -> tuple[Path, int | None]:
    """Where a stale entry of the lock (``key``, as :func:`fixpack.lockfile.stale_entries` gives it) is named: its
    ``"id"`` line in the lock, else (the lock lacks it, or a pin changed) the profile's line for it: where the profile
    lists the fix, the component's table, the pin's key that changed (its target's table when the key is not there);
    for the series' order (kind ``order``), the fix's line in fixes/series."""
    import json

    from .documents import key_line  # only when a lock is stale

    kind, name = key
    if kind == "order":  # the fix's line in fixes/series
        series = profile.path.parent.parent / "fixes" / "series"
        return series, next((n for n, ln in enumerate(text_for_lines(series).splitlines(), 1) if ln.strip() == name),
                            None)
    held = lock.fix(name) if kind == "fix" else lock.component(name) if kind == "component" else None
    if held is not None:
        section = '"fixes"' if kind == "fix" else '"components"'
        return profile.lock_path, lock_line(profile.lock_path, section, f'"id": {json.dumps(name)}')
    text = text_for_lines(profile.path)
    if kind == "fix":
        line = next((n for n, ln in enumerate(text.splitlines(), 1) if json.dumps(name) in ln), None)
    elif kind == "component":
        line = key_line(text, name, "components")
    else:
        target, pin_key = name.rsplit(".", 1)
        line = key_line(text, pin_key, f"targets.{target}") or key_line(text, target, "targets")
    return profile.path, line


def lock_line(lock: Path, section: str, want: str) -> int | None:
    """The line that starts with ``want`` after the line that opens ``section`` ("" for anywhere) in the
    lock (its JSON is written one key a line); None when the lock cannot be read or has no such line."""
    lines = _lines(lock)
    if lines is None:
        return None
    start = next((n for n, ln in enumerate(lines) if ln.strip().startswith(section)), None) if section else 0
    if start is None:
        return None
    return next((n for n, ln in enumerate(lines[start:], start + 1) if ln.strip().startswith(want)), None)


def target_key_line(lock: Path, target: str, key: str) -> int | None:
    """The line of ``key`` in the lock's entry for ``target`` (``"targets"`` -> ``"vllm"`` -> ``"commit"``:
    :func:`fixpack.lock_seal.line_of_keys`); None when the lock cannot be read or is not laid out as ``lock`` writes
    it."""
    from .lock_seal import line_of_keys

    lines = _lines(lock)
    return line_of_keys(lines, ("targets", target, key)) if lines is not None else None


def _lines(lock: Path) -> list[str] | None:
    """The lock's lines; None when it cannot be read (its messages then name no line)."""
    try:
        return read_capped(lock).decode("utf-8").splitlines()
    except (OSError, ValueError):  # (TooLargeError and UnicodeDecodeError are ValueErrors)
        return None
