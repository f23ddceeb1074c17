"""A fix's patch changed without a version bump: ``lock`` refuses to record another change under the version the
previous lock records for the fix (the lock on disk, else the one committed in git HEAD of the pack: removing
the lock file gets past nothing)."""

from __future__ import annotations

from .errors import BadInputError
from .lockfile import lock_line, previous_lock, version_at
from .model import Profile
from .records import Lock


def refuse_unbumped(profile: Profile, lock: Lock) -> None:
    """Raise BadInputError (exit 2, nothing written) when ``lock`` (one ``lock`` is about to write) records a fix
    at the version the previous lock (:func:`~fixpack.lockfile.previous_lock`: the one on disk, else the one
    committed in git HEAD) records for it with another change: its patch changed without a version bump. A
    manifest records a fix by version and change, so an image that holds the old patch at that version would be
    told it holds "another patch than this pack's" of the same version, with no way to tell which. As a
    component's source changed under its version is refused (:func:`~fixpack.lockfile.write`). A change that is
    the old one as an older fixpack hashed it (:meth:`fixpack.model.Fix.recorded_as`) is no change. Nothing
    when there is no previous lock."""
    previous = previous_lock(profile)
    if previous is None:
        return
    have, where = previous
    suspects = [(old, new) for new in lock.fixes for old in [have.fix(new.id)]
                if old is not None and old.version == new.version and old.patch_sha256 != new.patch_sha256]
    if not suspects:
        return
    import json

    from .loader import load_pack  # only when a fix's change differs under its version

    fixes = load_pack(profile.path.parent.parent).for_profile(profile.name).fixes
    said = []
    for old, new in suspects:
        fix = fixes.get(new.id)
        if fix is None or fix.recorded_as(old.patch_sha256):
            continue
        at = version_at(fix, profile)
        line = lock_line(profile.lock_path, '"fixes"', f'"id": {json.dumps(new.id)}') if where == str(
            profile.lock_path) else None  # (the lock committed in HEAD: its file is not on disk)
        locked = f"{where}:{line}" if line else where
        said.append(f"fix {new.id}: its patch changed since the lock was made ({locked} records version "
                    f"{old.version} with change {old.patch_sha256[:12]}, the pack's patch is change "
                    f"{new.patch_sha256[:12]}) but its version did not (version {old.version} in the lock, "
                    f"{new.version} in {at}); bump it there (version = {new.version + 1})")
    if said:
        raise BadInputError(f"{'; '.join(said)}, then lock again: an image that holds the old patch under the same "
                            f"version could not be told from one with the new; nothing was written")
