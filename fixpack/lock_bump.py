"""A fix's patch changed without a version bump: ``lock`` refuses to record another change under the version a
previous lock records for the fix (the lock on disk and the one committed in git HEAD of the pack: removing the
lock file, or moving a version back down past the lock on disk, gets past nothing); ``lock --check`` names each
stale entry at its lock line, with the version line to bump before locking."""

from __future__ import annotations

import json
from collections.abc import Callable

from .errors import BadInputError, StaleLockError
from .lock_hints import Redo, order_changes, path_at, regenerate_hint
from .lock_seal import change_said, hunks_edited, sides_of, target_edited, told
from .lock_where import lock_line, stale_at
from .lockfile import bump_note, previous_locks, read_lock, version_at
from .model import Fix, Profile
from .records import Lock, LockFix


def refuse_unbumped(profile: Profile, lock: Lock,
                    found: tuple[list[tuple[Lock, str]], list[str]] | None = None) -> list[str]:
    """Raise BadInputError (exit 2, nothing written) when ``lock`` (one ``lock`` is about to write) records a fix
    at a version a previous lock (:func:`~fixpack.lockfile.previous_locks`: the one on disk, and the one
    committed in git HEAD) records for it with another change: its patch changed without a version bump. A
    manifest records a fix by version and change, so an image that holds the old patch at that version would be
    told it holds "another patch than this pack's" of the same version, with no way to tell which. As a
    component's source changed under its version is refused (:func:`~fixpack.lockfile.write`). A change that is
    the old one as an older fixpack hashed it (:meth:`fixpack.model.Fix.recorded_as`) is no change. Returns the
    warnings to print: a lock committed in HEAD that could not be compared with, and why. ``found``: what
    :func:`~fixpack.lockfile.previous_locks` returned, when the caller has it already (else looked up)."""
    previous, warnings = found if found is not None else previous_locks(profile)
    suspects: dict[str, list[tuple[LockFix, str]]] = {}
    for have, where in previous:
        for new in lock.fixes:
            old = have.fix(new.id)
            if old is not None and old.version == new.version and old.patch_sha256 != new.patch_sha256:
                suspects.setdefault(new.id, []).append((old, where))
    if not suspects:
        return warnings
    fixes = _pack_fixes(profile)
    said = []
    for new in lock.fixes:
        fix = fixes.get(new.id)
        olds = [(o, w) for o, w in suspects.get(new.id, []) if fix is not None and not fix.recorded_as(o.patch_sha256)]
        if fix is None or not olds:
            continue
        records = "; ".join(f"{_locked(profile, where, new.id)} records version {old.version} with change "
                            f"{old.patch_sha256[:12]}" for old, where in olds)
        said.append(f"fix {new.id}: its patch changed since the lock was made ({records}, the pack's patch is change "
                    f"{new.patch_sha256[:12]}) but its version did not (version {new.version} in the lock, "
                    f"{new.version} in {version_at(fix, profile)}); bump it there (version = "
                    f"{max([new.version, *(v.version for v in _all_versions(previous, new.id))]) + 1})")
    if said:
        raise BadInputError(f"{'; '.join(said)}, then lock again: an image that holds the old patch under the same "
                            f"version could not be told from one with the new; nothing was written")
    return warnings


def _all_versions(previous: list[tuple[Lock, str]], fix_id: str) -> list[LockFix]:
    """The entries the previous locks hold for ``fix_id`` (a bump goes past each of their versions)."""
    return [f for have, _where in previous for f in [have.fix(fix_id)] if f is not None]


def _locked(profile: Profile, where: str, fix_id: str) -> str:
    """``where`` (a previous lock), with the line of ``fix_id``'s entry when it is the lock on disk."""
    if where != str(profile.lock_path):  # (the lock committed in HEAD: its file is not on disk)
        return where
    line = lock_line(profile.lock_path, '"fixes"', f'"id": {json.dumps(fix_id)}')
    return f"{where}:{line}" if line else where


def _pack_fixes(profile: Profile) -> dict[str, Fix]:
    """The pack's fixes for ``profile`` (loaded only when an entry differs)."""
    from .loader import load_pack

    return dict(load_pack(profile.path.parent.parent).for_profile(profile.name).fixes)


def stale_said(profile: Profile, fresh: Lock, have: Lock, ids: list[str]) -> list[str]:
    """``lock --check``: each fix of ``ids`` whose entry in ``fresh`` (one generated now) differs from the one
    ``have`` (the committed lock) records, at its lock line (the profile's line when the lock lacks it), as
    ``check`` says it: a patch changed under the same version says the version line to bump before locking."""
    a, b = {f.id: f for f in fresh.fixes}, {f.id: f for f in have.fixes}
    fixes: dict[str, Fix] | None = None
    out = []
    for fid in ids:
        new, old = a.get(fid), b.get(fid)
        if old is None:
            what = f"{fid}: not in the lock"
        elif new is None:
            fixes = fixes or _pack_fixes(profile)
            what = f"{fid}: {_moved(profile, fixes.get(fid), old) or 'in the lock but not in the profile'}"
        elif old.version != new.version or old.patch_sha256 != new.patch_sha256:
            fix = (fixes := fixes or _pack_fixes(profile)).get(fid)  # (over the very bytes it records: edited by hand)
            what = f"{fid}: {change_said(fix, old, profile, version_at) if fix else 'patch or version changed'}"
            if fix is not None and fix.version == new.version:
                what += bump_note(fix, profile, old)
        elif old.target != new.target and (moved := _moved(profile, (fixes := fixes or _pack_fixes(profile)).get(fid),
                                                           old)):
            what = f"{fid}: {moved}"
        elif edited := hunks_edited(profile.lock_path, old, sides_of(new)):
            what = f"{fid}: {'; '.join(edited)}"  # (the patch's own: not the release copy's)
        else:
            what = f"{fid}: other fingerprints on the release copy than the lock records{_files_differ(new, old)}"
        path, line = stale_at(profile, have, ("fix", fid))
        out.append(f"{path}:{line}: {what}" if line else f"{path}: {what}")
    return out


def _moved(profile: Profile, fix: Fix | None, entry: LockFix) -> str:
    """Where ``entry`` (the lock's) names another target than ``fix`` (of ``profile``, by its fix.toml): the
    lock edited by hand and sealed again (``lock --check --target`` compares it as the named targets' either way),
    said as ``check`` and ``status`` say it (:func:`~fixpack.lock_seal.target_edited`); "" else."""
    if fix is None or fix.id not in profile.default + profile.opt_in or fix.target == entry.target:
        return ""
    return target_edited(profile.lock_path, entry, fix)


def _files_differ(new: LockFix, old: LockFix) -> str:
    """Which of a fix's files the two entries fingerprint otherwise (``lock --check``: a fix of three files said only
    that some differed): each path with the side (pre-image, post-image) whose sha256 differs, or its hunks'."""
    a, b = {f.path: f for f in new.files}, {f.path: f for f in old.files}
    said = []
    for path in sorted(set(a) | set(b)):
        n, o = a.get(path), b.get(path)
        if n is None or o is None:
            said.append(f"{path} ({'the lock' if n is None else 'the release copy'} alone has it)")
            continue
        sides = [w for w, x, y in (("pre-image", n.pre, o.pre), ("post-image", n.post, o.post)) if x != y]
        hunks = [h for h in new.hunks if h.file == path] != [h for h in old.hunks if h.file == path]
        # a patch laid at its stated lines makes its post-image of one pre-image only (a deletion tells none)
        if sides == ["pre-image"] and not hunks and n.post is not None:
            sides = [f"pre-image (the copy's file, of which the fix makes the post-image the lock records, is "
                     f"{told(n.pre, o.pre)}, the lock's {told(o.pre, n.pre)}: the lock was edited by hand and sealed "
                     f"again)"]
        if hunks and not sides and _counts_alone(new, old, path):  # (the copy's file is the lock's pre-image)
            sides, hunks = ["hunks' counts of their sides in the pre- and post-image (the copy's file is the lock's "
                            "pre-image, of which these counts are what lock writes: the lock was edited by hand and "
                            "sealed again)"], False
        sides += ["hunks"] * hunks
        if sides:
            said.append(f"{path}: its {' and '.join(sides)}")
    return f": {'; '.join(said)}" if said else ""


def _counts_alone(new: LockFix, old: LockFix, path: str) -> bool:
    """Whether ``path``'s hunks in the two entries differ in their sides' counts alone (their sha256 the same)."""
    a, b = ([(h.hunk, h.pre, h.post) for h in e.hunks if h.file == path] for e in (new, old))
    return a == b


def check_fresh(profile: Profile, fresh: Lock, redo: Redo | None = None,
                scope: Callable[[Lock], Lock] | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """Raise StaleLockError when the committed lock (its entries ``scope`` keeps: ``lock --check --target``
    compares the named targets') differs from ``fresh`` (one generated now; ``redo``: as for :func:`read_lock`).
    Return the ids of the fixes whose patch was reworded since (a mail header or
    message: the same change, so the lock is fresh, but its ``patch_bytes_sha256`` shortcut no longer names
    these bytes, and apply parses those patches until ``lock`` is run again), and, apart, each fix whose entry has no
    ``patch_bytes_sha256`` at all (a lock from before it was kept, or the key removed by hand: nothing was reworded)
    with where its entry is (``LOCK:LINE``, its id's line)."""
    have = read_lock(profile, redo)
    have = scope(have) if scope is not None else have
    a, b = {f.id: f for f in fresh.fixes}, {f.id: f for f in have.fixes}
    diff = sorted(fid for fid in set(a) | set(b) if a.get(fid) != b.get(fid))
    diff += sorted({f"component {c.id}" for c in set(fresh.components) ^ set(have.components)})  # each id once
    # the series reordered: lock writes the entries in the new order (release_files reads it)
    order = order_changes([f.id for f in fresh.fixes if f.id in b], have)
    diff = ["the order of the fixes (fixes/series changed)"] * bool(order) + diff
    if diff or dict(fresh.targets) != dict(have.targets):
        said = "".join(f"; {s}" for s in [what for _, what in order]
                       + stale_said(profile, fresh, have, [d for d in diff if d in a or d in b]))
        raise StaleLockError(f"{profile.lock_path} is stale (differs for: {', '.join(diff) or 'targets'}){said}; "
                             f"{regenerate_hint(profile, redo)}")
    changed = sorted(fid for fid in set(a) & set(b) if a[fid].patch_bytes_sha256 != b[fid].patch_bytes_sha256)
    return [fid for fid in changed if b[fid].patch_bytes_sha256], \
        [(fid, path_at(*stale_at(profile, have, ("fix", fid)))) for fid in changed if not b[fid].patch_bytes_sha256]

