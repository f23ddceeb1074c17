"""The checks of one journal entry that are not about its shape (:mod:`fixpack.state` reads the journal and calls
them): what a rollback would remove, put back, or give a mode and owner. A journal is untrusted input; each check
raises the DamagedStateError ``bad(what)`` builds (its entry named), before the rollback touches anything."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .errors import DamagedStateError
from .fsio import temp_folder
from .safepath import file_on_the_way, sha256_regular

Bad = Callable[[str], DamagedStateError]


def check_created(root: Path, path: str, sha: str | None, size: int | None, bad: Bad) -> None:
    """A file the run created (``existed: false``) is removed by a rollback. With the sha256 of what the run wrote (a
    run records one, and its size in bytes): only while absent (killed before its rename) or holding those bytes
    (changed since: not the run's); a file of another size is not read (a huge one planted there is not hashed
    under the run lock). Without a sha256 (an older fixpack's journal; a deletion of a file that was not there): as
    before."""
    if sha is None:
        return
    try:
        now_size = os.lstat(root / path).st_size
        now = "" if size is not None and now_size != size else sha256_regular(root / path)
    except (FileNotFoundError, NotADirectoryError):  # nothing there, or a file where a folder on its way was
        return
    except OSError as exc:
        raise bad(f"{path} cannot be read ({exc.strerror}): a rollback would delete it") from None
    if now != sha:
        held = f"sha256 {now[:12]}..." if now else f"{now_size} bytes, not {size}"
        raise bad(f"it says the run created {path} with sha256 {sha[:12]}..., but {path} holds other bytes now "
                  f"({held}): a rollback would delete a file changed since the run (copy it away first to keep "
                  f"those bytes: the steps below put the files as they were before the run)")


def check_way_back(root: Path, path: str, bad: Bad) -> None:
    """A file the run replaced or removed is put back at ``path``: every folder on the way must be a folder, or
    absent (made again). A file there (put since the run) stopped the rollback half way with an internal error."""
    at = file_on_the_way(root, path)
    if at is not None:
        raise bad(f"{at} is not a folder, but {path} goes in it: a rollback cannot put {path} back (move {at} "
                  f"away, then run again)")
    tmp = temp_folder(root / path) if at is None else None
    if tmp is not None:  # a rollback removes a killed write's temp file there first
        raise bad(f"{tmp} is a folder where {path}'s temp file goes, which a rollback removes: a rollback cannot put "
                  f"{path} back (move the folder away, then run again)")


def _lmode(path: Path) -> int:
    """``path``'s st_mode, not following a link (0: nothing there)."""
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return 0


def check_mode_owner(root: Path, path: str, backup: Path, mode: int | None, owner: tuple[int, int] | None,
                     bad: Bad) -> None:
    """A rollback gives a file back its mode and owner; from an untrusted journal only what cannot raise
    anyone's rights. The file a run replaced keeps its mode and owner (the run writes by rename, with both
    kept) and its backup is a hard link to the original: each still has them. So: no setuid, setgid, sticky,
    execute or group / other write bit that neither the file nor its backup has now (a rollback never widens
    who may write or run it, nor as whom; a set-id file a fix modifies keeps its bits through a rollback); an
    owner that is the file's or its backup's now, or the running user's (a no-op): never a chown to another
    user; and, where the backup is there, the backup's permission bits (a planted mode 0 left a file unreadable).
    Anything else was not written by fixpack: damaged state."""
    have = 0
    owners = {(os.getuid(), os.getgid())}
    for where in (root / path, backup):
        try:
            st = os.lstat(where)
        except (FileNotFoundError, NotADirectoryError):
            continue
        have |= stat.S_IMODE(st.st_mode)
        owners.add((st.st_uid, st.st_gid))
    if mode is not None and mode & 0o7133 & ~have:
        raise bad(f"'mode' {oct(mode)} sets bits {path} and its backup do not have (setuid, setgid, sticky, execute, "
                  f"or group / other write)")
    kept = _lmode(backup)
    if mode is not None and stat.S_ISREG(kept) and (mode ^ kept) & 0o777:
        raise bad(f"'mode' {oct(mode)} is not its backup's ({oct(stat.S_IMODE(kept))}), which keeps the original's "
                  f"permission bits (a hard link to it, or a copy given them): a rollback would give {path} modes it "
                  f"never had")
    if owner is not None and owner not in owners:
        raise bad(f"'owner' {list(owner)} is neither {path}'s owner nor its backup's")
