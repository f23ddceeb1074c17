"""The modes and owners of what a run removes, so that what makes it again gives them back.

A fix that deletes a file (or renames it away) takes the file's mode and owner with it, and a deletion that
leaves a folder empty removes the folder (as ``git apply`` does). The patch says only ``100644`` or ``100755``,
so a revert that wrote the file from it alone would give a ``600`` file ``644`` and the running user (root in an
image build) as its owner. So each run records them before it writes:

- the manifest (``removed_files`` / ``removed_dirs``, :class:`fixpack.records.Manifest`) keeps them from the
  apply that removed them until the revert that makes them again (:func:`records_after`, :func:`as_recorded`);
- the journal (``removed_dirs``) keeps the folders a run may empty, so that a killed run's rollback, which puts
  the files back from their backups (hard links that keep mode and owner), gives the folders theirs too.

Both are untrusted input: a mode is permission bits only (a folder's may have setgid and sticky; never setuid),
an owner is a pair of ids, and both are used only from a state file the running user owns (one fixpack wrote,
or one only that user could have put there: never a file another user planted to be given a mode or an owner
by a run as root); an owner is given only by a run as root. Anything else falls back to the behaviour of
before these records: the patch's mode, a new folder's mode, the running user.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from .fsio import FileChange, exists, pycache_files
from .manifest_shape import DIR_BITS, FILE_BITS
from .records import Hashes, Kept, Manifest
from .structs import replace


def kept_of(path: Path, folder: bool) -> Kept:
    """What ``path`` has now (lstat: never through a link)."""
    st = os.lstat(path)
    return Kept(stat.S_IMODE(st.st_mode) & (DIR_BITS if folder else FILE_BITS), (st.st_uid, st.st_gid))


def owned_by_us(path: Path) -> bool:
    """Whether the state file ``path`` belongs to the running user (its records may be used)."""
    try:
        return os.lstat(path).st_uid == os.geteuid()
    except OSError:
        return False


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def emptied_folders(root: Path, gone: set[str], created: set[str]) -> list[str]:
    """The folders (below ``root``) that removing the files ``gone`` may leave empty, deepest first: each holds
    nothing but those files, its ``__pycache__`` and such folders, and no file the run creates lies in it. (A
    ``__pycache__`` that stays makes a folder stay: this may name more than go, never fewer.)"""
    busy = {d for p in created for d in _parents(p)}
    out: list[str] = []
    for d in sorted({d for p in gone for d in _parents(p)} - busy, key=lambda d: -d.count("/")):
        try:
            if not stat.S_ISDIR(os.lstat(root / d).st_mode):
                continue
            names = os.listdir(root / d)
        except OSError:
            continue
        if all(f"{d}/{n}" in gone or f"{d}/{n}" in out or n == "__pycache__" for n in names):
            out.append(d)
    return out


def records_after(root: Path, changes: list[FileChange], old: Manifest | None,
                  files: Hashes) -> tuple[dict[str, Kept], dict[str, Kept]]:
    """The manifest's ``removed_files`` and ``removed_dirs`` after a run that writes ``changes`` (before it,
    on disk): each file its applied fixes leave absent (``files`` without a sha256) that this run removes, as
    it is now; one an earlier run removed, as ``old`` recorded it; and the folders those removals empty."""
    now = {c.path for c in changes if c.data is None and exists(root / c.path)}
    rfiles: dict[str, Kept] = {}
    for p in sorted(p for p, h in files.items() if h is None):
        if p in now:
            rfiles[p] = kept_of(root / p, False)
        elif old is not None and p in old.removed_files and not exists(root / p):
            rfiles[p] = old.removed_files[p]
    pyc = {c.relative_to(root).as_posix() for p in now for c in pycache_files(root / p)}
    emptied = emptied_folders(root, now | pyc, {c.path for c in changes if c.data is not None})
    rdirs = {d: kept_of(root / d, True) for d in emptied if any(p.startswith(d + "/") for p in rfiles)}
    for d, k in (old.removed_dirs if old is not None else {}).items():
        if d not in rdirs and not exists(root / d) and any(p.startswith(d + "/") for p in rfiles):
            rdirs[d] = k
    return rfiles, dict(sorted(rdirs.items()))


def as_recorded(root: Path, changes: list[FileChange],
                manifest: Manifest | None) -> tuple[list[FileChange], Mapping[str, Kept]]:
    """``changes`` with each file it makes again (absent now) given the mode and, as root, the owner the
    manifest recorded when a fix removed it; and the folders' (for those the run makes again)."""
    if manifest is None:
        return changes, {}
    root_run = os.geteuid() == 0
    out = []
    for c in changes:
        k = manifest.removed_files.get(c.path)
        if c.data is not None and k is not None and not exists(root / c.path):
            c = replace(c, mode=k.mode, owner=k.owner if root_run else None)
        out.append(c)
    return out, manifest.removed_dirs

