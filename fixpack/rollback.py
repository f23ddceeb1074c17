"""Rolling back what a killed or failed run left in a target or a pack: each file its journal names put back as
it was (a file's backup moved back with a rename: no new space needed on a full disk; a file the run made
removed), and the temp file of the write the run was doing removed, that one alone (:func:`killed_write_temp`).
The journal itself is read and checked by :mod:`fixpack.state` before a file is touched. The journal of a run over
several targets that was complete (:class:`fixpack.state.Group`) is removed instead, no file touched (:func:`settle`).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import EnvironmentProblem, FixpackError, MismatchError, io_advice, io_said
from .fsio import (
    chown_to,
    drop_pycache_quietly,
    exists,
    fsync_dir,
    set_mode_owner,
    temp_path,
    unlink,
)
from .groups import group_at, group_done, group_pending
from .nofollow import move_under, write_under
from .safepath import holds_bytes
from .state import (
    Journal,
    JournalEntry,
    Writes,
    backups_dir,
    discard_leftovers,
    journal_there,
    load_journal,
)


def recover(root: Path, writes: Writes | None = None) -> list[str]:
    """Roll back what an interrupted run left (a journal). Returns the paths it changed (put back or removed): not
    those its journal names that the run had not touched yet, nor those a killed rollback put back; idempotent.
    ``writes``: the paths this profile's run could have written (:func:`load_journal`).

    The whole journal is checked before the first file is touched. Backups are moved back with a
    rename (no new space needed on a full disk); a rollback killed half way leaves the journal, and
    the entries already put back are recognised by their sha256.
    """
    return roll_back(root, load_journal(root, writes))


def settle(root: Path, writes: Writes | None, journal: Journal | None = None) -> list[str] | None:
    """What a writing run does first with a journal a killed run left in ``root``: :func:`recover` (the paths it
    changed), or, for the journal of a run over several targets that was complete (:attr:`Journal.done`), remove it
    and its backups, no file touched (None). The first target's journal of such a run, which says it was complete,
    goes only once no other target holds that run's journal (that one's next run would roll it back, half of a
    complete run): MismatchError (exit 3: the state of the targets, which a run over all of them settles) while one
    does, nothing written; the caller settles the others first. ``journal``: the one in ``root`` as the caller loaded
    it (:func:`fixpack.state.load_journal`: its entries and backups read and checked once); None: loaded here."""
    journal = journal or load_journal(root, writes)
    if journal is None or journal.group is None or not journal.done:
        return roll_back(root, journal)
    pending = group_pending(journal.group) if journal.group.index == 0 else []
    if pending:
        one = len(pending) == 1
        raise MismatchError(
            f"{journal.path} says that the run over several targets that left it was complete, and "
            f"{', '.join(pending)} still hold{'s' if one else ''} that run's journal: removed first, this one would "
            f"leave {'that target' if one else 'those targets'} to be rolled back by the next run there, half of the "
            f"run undone. Nothing was written. Run apply or revert over every target of that run together (a --root "
            f"for each of {', '.join(journal.group.roots)}): it removes every journal, the files as they are")
    try:
        unlink(journal.path)
        fsync_dir(journal.path.parent)
    except OSError as exc:
        raise _kept(exc, root, f"cannot remove {journal.path}, the journal of a complete run over several targets",
                    "it is kept, and the next run removes it") from exc
    _discard(root)
    return None


def pending_note(root: Path) -> str:
    """What status and dry runs say a run left: a journal (the next run rolls it back, or removes that of a complete
    run over several targets), or backups alone (removed)."""
    if journal_there(root):
        group = group_at(root)
        if group is not None and group_done(group):
            return ("a run over several targets left its journal once its writes were complete (it was killed, or "
                    "could not remove it): the next apply or revert over every target of that run removes it (the "
                    "target holds that run's result)")
        return "an interrupted run left a journal; the next apply or revert rolls it back first"
    return (f"a run left backups in {root / '.fixpack' / 'journal'} that no journal names (it was complete, or killed "
            f"before it wrote its journal: no file of the target is half-written); the next run removes them")


def roll_back(root: Path, journal: Journal | None) -> list[str]:
    """:func:`recover` with the journal already loaded (None: there is none, only leftovers to discard). Raises
    EnvironmentProblem (exit 5) when a file cannot be put back (a read-only file system, a full disk): the journal is
    kept, and the next run rolls back again (the files put back so far are recognised by their sha256)."""
    if journal is None:
        _discard(root)
        return []
    try:
        mine = _in_progress(root, journal.entries)  # (a killed write leaves its temp file beside that one alone)
        changed = [e.path for e in journal.entries if _restore(root, e, e is mine)]
        for d, k in sorted(journal.removed_dirs.items(), key=lambda dk: -dk[0].count("/")):
            if exists(root / d):  # made again by a file put back in it: the mode and owner it had before the run
                set_mode_owner(root / d, k.mode, k.owner)
        for d in sorted(journal.dirs, key=lambda d: -d.count("/")):  # before the journal goes: a rollback killed
            try:  # after it would leave them
                (root / d).rmdir()
            except OSError:  # not empty (something else lives there now) or gone: leave it
                pass
        unlink(journal.path)
        fsync_dir(journal.path.parent)
    except OSError as exc:
        raise _kept(exc, root, f"cannot roll back the interrupted run that {journal.path} records",
                    "the journal is kept, and the next run rolls it back") from exc
    _discard(root)
    return changed


def _discard(root: Path) -> None:
    """:func:`discard_leftovers`, its failed I/O (a read-only file system) EnvironmentProblem (exit 5)."""
    try:
        discard_leftovers(root)
    except OSError as exc:
        raise _kept(exc, root, f"cannot remove the backups a run left in {backups_dir(root)}",
                    "they are kept (no journal names them: no file of the target is half-written), and the next run "
                    "removes them") from exc


def _kept(exc: OSError, root: Path, cannot: str, kept: str) -> EnvironmentProblem:
    """A rollback's failed I/O (exit 5): what it ``cannot`` do, the file and errno, what is ``kept`` for the next run,
    and what to do about the errno."""
    return EnvironmentProblem(f"{cannot}: {io_said(exc, exc.filename or root)}; {kept}. "
                              f"{io_advice(exc).capitalize()} and run again")


def killed_write_temp(root: Path) -> Path | None:
    """The temp file a killed run's journal in ``root`` says is that run's own (:func:`_in_progress`), which its
    rollback removes; None without a journal, with one that cannot be read (the run says why), or with a complete
    run's (:attr:`Journal.done`: no write of it was under way)."""
    if not journal_there(root):
        return None
    try:
        journal = load_journal(root)
    except FixpackError:
        return None
    e = _in_progress(root, journal.entries) if journal is not None and not journal.done else None
    return temp_path(root / e.path) if e is not None else None


def _in_progress(root: Path, entries: tuple[JournalEntry, ...]) -> JournalEntry | None:
    """The entry a killed run was writing: the first, in the journal's order (the run's), whose file it had not
    replaced yet (holding its bytes as they were, or, made by the run, not there). Only a temp file beside it
    (``.NAME.fixpack-tmp``: a write is a temp file renamed over its file) can be that run's."""
    for e in entries:
        dest = root / e.path
        if e.restored:
            continue
        if (not e.existed and not exists(dest)) or (e.existed and _holds(dest, e)):
            return e
    return None


def _restore(root: Path, e: JournalEntry, writing: bool = False) -> bool:
    """Put the entry's file back as it was before the run; whether that changed the file. ``writing``: the entry the
    killed run was writing, whose temp file, a regular file, is the run's and goes (a link, a FIFO or a file beside
    any other entry is someone's: kept, and the next write beside it refuses it)."""
    dest = root / e.path
    tmp = temp_path(dest)
    if writing and exists(tmp) and stat.S_ISREG(os.lstat(tmp).st_mode):
        unlink(tmp)
    if not e.existed:
        changed = exists(dest)
        write_under(root, e.path, None)  # (never through a folder swapped for a link: nofollow.write_under)
    elif e.restored:  # put back by a rollback killed since, which dropped its bytecode: a .pyc there now it put back
        return False
    else:
        backup = backups_dir(root) / str(e.index)
        kept = os.lstat(backup)
        if _inode(dest) == (kept.st_dev, kept.st_ino) or _holds(dest, e):  # the run never replaced it (a rename onto
            unlink(backup)  # its own link leaves the backup; a copy of an immutable file cannot go over it), and a
            return False  # rollback run again dropped the bytecode an earlier entry put back
        changed = True
        if kept.st_nlink > 1:  # its inode has a name besides the backup, not dest's: a hard link from outside the
            # state folder, put there by hand, or the original's own link from outside the target: write the bytes to
            # dest as a new file instead of giving that inode a mode, an owner and a name in the target
            write_under(root, e.path, e.original or b"", mode=e.mode, owner=e.owner)
            unlink(backup)
        else:
            _move_back(backup, root, e)
    drop_pycache_quietly(dest)
    return changed


def _move_back(backup: Path, root: Path, e: JournalEntry) -> None:
    """Give ``backup`` the entry's mode and owner and rename it to its file in ``root`` (a copy across a mount
    point), the folders on the way opened without following a link (:func:`fixpack.nofollow.move_under`)."""
    chown_to(backup, e.owner)  # before the mode: a chown clears set-id bits
    os.chmod(backup, e.mode if e.mode is not None else 0o644)
    try:
        move_under(backup, root, e.path)
    except OSError as exc:
        if exc.errno != errno.EXDEV:  # a mount point inside the target: copy instead
            raise
        write_under(root, e.path, e.original or b"", mode=e.mode, owner=e.owner)


def _holds(dest: Path, e: JournalEntry) -> bool:
    """Whether ``dest`` is a regular file with exactly the entry's bytes, mode and owner (a write that failed on it
    left it as it was)."""
    try:
        st = os.lstat(dest)
    except OSError:
        return False
    return stat.S_IMODE(st.st_mode) == e.mode and (e.owner is None or (st.st_uid, st.st_gid) == e.owner) and \
        holds_bytes(dest, e.original or b"")


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino
