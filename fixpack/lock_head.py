"""The lock of a profile as committed in git HEAD of the pack's checkout: what ``lock`` compares a new lock with
(:func:`fixpack.lockfile.previous_locks`) and what a refresh counts a fix's next version from
(:mod:`fixpack.editrefresh`). Read with ``git cat-file``: no index refresh, nothing written."""

from __future__ import annotations

from .documents import MAX_PACK_TEXT_BYTES
from .errors import FixpackError, StaleLockError
from .model import Profile
from .records import Lock


def committed_lock(profile: Profile) -> tuple[Lock | None, bytes, str]:
    """``profile``'s lock committed in git HEAD, its bytes, and why it does not read as this profile's lock ("" when
    it does: then the lock is given); no bytes when none is committed there (no checkout, no git)."""
    from .gitutil import head_file  # only when a lock is written or counted from

    text = head_file(profile.lock_path, MAX_PACK_TEXT_BYTES)
    if text is None:
        return None, b"", ""
    raw = text.encode("utf-8")
    try:
        head = Lock.from_json(raw, profile.lock_path, profile.name, lambda: "")
    except FixpackError as exc:
        return None, raw, (exc.what if isinstance(exc, StaleLockError) else str(exc)).rstrip("; ")
    if head.profile != profile.name:
        return None, raw, f"it is the lock of profile {head.profile}, not {profile.name}"
    return head, raw, ""
