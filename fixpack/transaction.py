"""The transaction that writes a run: every change journalled (backups, then ``journal.json``), written
atomically, and rolled back inside the same run when a write fails (:func:`write_transaction`); the checks
before it (writable, enough space). The journal's format and the recovery are :mod:`fixpack.state`'s.

A write that fails part-way (no space, read-only file system, permission, I/O error) is rolled back from
the journal, then raised as an :class:`EnvironmentProblem` (exit 5) naming the file and the errno.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .documents import loads_json
from .errors import DamagedStateError, EnvironmentProblem, FixpackError, MismatchError, Terminated, io_advice, io_said
from .fsio import (
    FileChange,
    exists,
    fault_point,
    fsync_dir,
    pycache_files,
    set_mode_owner,
    state_dir,
    state_put_back,
    temp_folder,
    temp_path,
    unlink_quietly,
)
from .groups import BACKUPS
from .kept import emptied_folders, kept_of
from .nofollow import back_up_under, clear_under, folder_under, prune_under, write_under
from .records import Kept, dumps
from .rollback import recover
from .safepath import JOURNAL, STATE_DIR
from .state import discard_leftovers, journal_path

if TYPE_CHECKING:
    from .groups import Group
    from .targets import FoundTarget

# --- checks before writing ------------------------------------------------------------------------

def check_writable(root: Path, changes: list[FileChange]) -> None:
    """Raise EnvironmentProblem, before anything is written, if a file or its folder is read-only."""
    problems = []
    for c in changes:
        dest = root / c.path
        folder = dest.parent
        while not folder.exists():
            folder = folder.parent
        if not os.access(folder, os.W_OK):  # the folder is what keeps the file from being written: named
            problems.append(f"{folder}/ (a folder the run writes in)")
        elif dest.exists() and not os.access(dest, os.W_OK):
            problems.append(str(dest))
        elif pycache_files(dest) and not os.access(dest.parent / "__pycache__", os.W_OK):
            problems.append(str(dest.parent / "__pycache__"))  # its stale bytecode could not be removed
    if not os.access(root, os.W_OK):  # (its state folder is made or written there)
        problems.insert(0, f"{root}/ (a folder the run writes in)")
    if problems:
        problems = list(dict.fromkeys(problems))  # a folder once, for all of its files
        raise EnvironmentProblem(f"the target is not writable (permissions, an immutable file or a read-only file "
                                 f"system): {', '.join(problems[:5])}{' ...' if len(problems) > 5 else ''}; nothing "
                                 f"was changed. Run as a user who may write it, or on a writable copy of the image")


def check_before_write(root: Path, changes: list[FileChange]) -> list[FileChange]:
    """What :func:`write_transaction` refuses before it writes (a read-only file or folder, something at a file's temp
    path, too little space), raised for a run of several targets before it writes the first of them (a refusal over
    the second leaves the first as it was). ``changes`` not empty. Returns them with the stale bytecode the
    transaction removes: ``write_transaction(..., checked=True)`` takes that list (and checks only the space again)."""
    check_writable(root, changes)
    return _checked(root, changes, anything=True)


def _checked(root: Path, changes: list[FileChange], anything: bool) -> list[FileChange]:
    """``changes`` and the stale bytecode of the modules they change (removed in the transaction, with a backup: a
    rolled-back run leaves the .pyc files as they were too), refused for a temp path taken or too little space."""
    changes = changes + _stale_bytecode(root, changes)
    check_temp_paths(root, changes, anything=anything)
    check_free_space(root, changes)
    return changes


def check_temp_paths(root: Path, changes: list[FileChange], anything: bool = False) -> None:
    """MismatchError (exit 3), before anything is written, for a folder where a file's temp file goes (each file is
    written beside itself, ``.NAME.fixpack-tmp``, then renamed over it): the write failed there, and so did the
    rollback, which removes a killed write's temp file first (a journal left, every later run exit 1). With
    ``anything`` (a target: only a journalled run writes there, and the rollback before this removed what a killed
    one left), a file or link there is refused too: it is someone else's, and the write would have removed it."""
    for c in changes:
        tmp = temp_folder(root / c.path)
        if tmp is not None:
            raise MismatchError(f"{tmp} is a folder where fixpack writes {c.path}'s temp file (each file is written "
                                f"beside itself, then renamed over it); nothing was written. Move the folder away "
                                f"(nothing of fixpack's is in it), then run again")
        tmp = temp_path(root / c.path)
        if anything and exists(tmp):
            how = ("a file is written beside itself, then renamed over it" if c.data is not None else
                   "this run removes it, and a rollback of a killed run looks for a write's temp file there")
            raise MismatchError(f"{tmp} is where fixpack {'writes' if c.data is not None else 'looks for'} {c.path}'s "
                                f"temp file ({how}), and something is there that no run of fixpack left (a killed "
                                f"run's is removed by the rollback before this); nothing was written. Move it away, "
                                f"then run again")


def temp_paths_free(ok: bool, targets: Iterable[tuple[FoundTarget, list[FileChange]]],
                    manifest: bytes | None = b"") -> None:
    """For a dry run: each target (with the changes a run would write) refused as :func:`write_transaction` refuses
    it before it writes, for something at a file's temp path (:func:`check_temp_paths`: its manifest, written
    (``manifest`` b"") or removed (None), and bytecode a run removes included), so that status and a dry run say what
    the run will. A killed run's own temp file (:func:`fixpack.state.killed_write_temp`) is left out: the run rolls
    that back first. ``ok``: whether the run got that far (else nothing is checked)."""
    from .rollback import killed_write_temp
    from .state import manifest_path

    for ft, changes in targets if ok else ():
        if changes:
            mpath = manifest_path(ft.root, ft.spec.name).relative_to(ft.root).as_posix()
            every = [*changes, FileChange(mpath, manifest), *_stale_bytecode(ft.root, changes)]
            mine = killed_write_temp(ft.root)
            check_temp_paths(ft.root, [c for c in every if temp_path(ft.root / c.path) != mine], anything=True)


def space_needed(root: Path, changes: list[FileChange], block: int) -> int:
    """Bytes a transaction may need at its peak: a backup of every file it replaces, every new file's
    bytes, the journal, each rounded up to whole blocks (an upper bound: cheap, and the bytes to
    write are in memory)."""
    def blocks(n: int) -> int:
        return (n + block - 1) // block * block + block

    need = blocks(len(dumps({"entries": [{"path": c.path} for c in changes]})) * 2)
    for c in changes:
        dest = root / c.path
        if dest.is_file() and not dest.is_symlink():
            need += blocks(dest.stat().st_size)
        need += blocks(len(c.data)) if c.data is not None else 0
    return need


def check_free_space(root: Path, changes: list[FileChange]) -> None:
    """Raise EnvironmentProblem before anything is written when the file system cannot hold the run."""
    st = os.statvfs(root)
    block = st.f_frsize or st.f_bsize or 4096
    free = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * block
    need = space_needed(root, changes, block)
    inodes = st.f_ffree if os.geteuid() == 0 else st.f_favail
    inodes_short = st.f_files > 0 and inodes < 2 * len(changes) + 4
    if need > free or inodes_short:
        what = (f"{need // 1024} KiB, {free // 1024} KiB free" if need > free else
                f"{2 * len(changes) + 4} inodes (files), {inodes} free")
        raise EnvironmentProblem(f"{root}: not enough space on its file system for this run (needs up to {what}); "
                                 f"nothing was changed. Free space and run again")


# --- the transaction ------------------------------------------------------------------------------

def write_transaction(root: Path, changes: list[FileChange], folders: Mapping[str, Kept] | None = None,
                      by: Mapping[str, str] | None = None, checked: bool = False, group: Group | None = None) -> str:
    """Write every change, journalled, so that a crash at any point can be rolled back by :func:`recover`,
    and a failed write is rolled back before this returns (EnvironmentProblem, exit 5). Returns "" or, when this
    run's backups could not be removed once it was complete, a note saying so (the next run removes them).
    ``folders``: the mode and owner to give a folder this run makes (one a removal had emptied: a manifest's).
    ``by``: what wrote (a pack update: its command and fix), kept in the journal for the way back after a kill.
    ``checked``: ``changes`` is what :func:`check_before_write` returned (only the free space is checked again).
    ``group``: this target's place in a run over several (:class:`fixpack.groups.Group`, in its journal): once every
    file is written the transaction stops there, its journal and backups kept (returns ""), for
    :mod:`fixpack.writeall` to commit the run (:func:`commit_group`) and remove them (:func:`finish_group`), or to
    roll it back (:func:`fixpack.rollback.recover`) should a later target fail.

    The caller holds :func:`run_lock`. The manifest is one of the changes (written last).
    """
    if not checked:  # (a pack's temp paths: a killed lock or rebase may leave its own)
        changes = _checked(root, changes, anything=by is None)
    else:  # space again: an earlier target of the run on the same file system may have taken some
        check_free_space(root, changes)
    folder = state_dir(root)
    discard_leftovers(root)  # backups of an earlier killed run whose journal was already removed
    phase = ["prepare"]  # prepare (no journal yet), write (the journal rolls back), done (it is gone)
    from .interrupts import Term, interrupt_once  # (a run that writes: status never does)

    noun = _noun(by)
    with interrupt_once():  # a second Ctrl-C (or SIGTERM) does not cut the rollback the first one set going
        try:
            return _journalled(root, changes, folder, phase, folders or {}, by, group)
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: wherever it lands, the target is left as before, or
            term = isinstance(exc, Term)  # as done
            how, kind = ("terminated (SIGTERM)", Terminated) if term else ("interrupted (Ctrl-C, SIGINT)",
                                                                           EnvironmentProblem)
            if phase[0] == "prepare":
                _abandon(root)
                raise kind(f"{root}: {how} while preparing the journal; nothing in the {noun} was changed. Run "
                           f"again") from None
            if phase[0] == "write" and exists(folder / JOURNAL):  # (gone: the run was complete)
                _roll_back(root, None, root, noun, how, kind)
            _drop_backups(root, folder / BACKUPS)
            raise kind(f"{root}: {how} after this run's writes were complete: the {noun} holds this run's result "
                       f"(fixpack status shows it)") from None


def _journalled(root: Path, changes: list[FileChange], folder: Path, phase: list[str],
                folders: Mapping[str, Kept], by: Mapping[str, str] | None = None, group: Group | None = None) -> str:
    """The transaction's steps; ``phase[0]`` says how far it got (for an interrupt)."""
    journal = folder / JOURNAL
    state = folder.relative_to(root).as_posix()  # (.fixpack: reached as the files are, never through a link)
    where = folder
    try:
        folder_under(root, f"{state}/{BACKUPS}")
        where = folder / BACKUPS
        entries, dirs = _back_up(root, changes, f"{state}/{BACKUPS}")
        emptied = {d: kept_of(root / d, True).to_json() for d in emptied_folders(
            root, {e["path"] for e, c in zip(entries, changes) if e["existed"] and c.data is None},
            {c.path for c in changes if c.data is not None})}
        fault_point()
        where = journal
        write_under(root, f"{state}/{JOURNAL}", dumps({"entries": entries, "dirs": dirs} | (
            {"removed_dirs": emptied} if emptied else {}) | ({"by": dict(by)} if by else {})
            | ({"group": group.to_json()} if group else {})), mode=0o644)
    except OSError as exc:
        _abandon(root)
        raise EnvironmentProblem(f"{io_said(exc, where)} while preparing the journal; nothing in the "
                                 f"{_noun(by)} was changed. {io_advice(exc).capitalize()} and run "
                                 f"again") from exc
    except Exception:  # not an I/O error (a bug, a bad test hook): nothing was touched yet, and nothing is left
        _abandon(root)
        raise
    phase[0] = "write"
    where = journal
    try:
        fault_point()
        written: set[Path] = set()
        for c in changes:
            where = root / c.path
            # every folder on the way opened from the one before, never through a symbolic link: a folder swapped
            # for a link since the checks (another program, racing this run) is an OSError here, rolled back
            if c.data is None:
                write_under(root, c.path, None)
                if where.parent.name != "__pycache__" or _module_gone(where):
                    prune_under(root, where.parent.relative_to(root).as_posix())
            else:
                write_under(root, c.path, c.data, mode=c.mode, owner=c.owner, sync_dir=False)
                written.add(where.parent)
            fault_point()
        for d in sorted(set(dirs) & set(folders), key=lambda d: -d.count("/")):  # made again: as they were
            where = root / d
            set_mode_owner(where, folders[d].mode, folders[d].owner)
        for parent in sorted(written):  # once per folder, before the journal goes: until then a crash rolls back
            where = parent
            fsync_dir(parent)
        if group is not None:  # kept until every target of the run is written: writeall commits the run
            return ""
        where = journal
        write_under(root, f"{state}/{JOURNAL}", None, sync_dir=False)
        phase[0] = "done"
    except OSError as exc:
        _roll_back(root, exc, where, _noun(by))
    except Exception:  # not an I/O error (a bug, a bad test hook): the files back all the same, then it goes up
        try:
            recover(root)
        except (OSError, FixpackError):  # the journal stays: the next run rolls back
            pass
        raise
    try:
        fsync_dir(folder)
    except OSError:  # the journal is gone in memory: if that is lost in a crash the next run rolls back whole
        pass
    fault_point()
    return _drop_backups(root, folder / BACKUPS)


def commit_group(root: Path) -> bool:
    """The point of no return of a run over several targets: the journal of its first target (``root``), which
    this process wrote, rewritten atomically with ``committed`` true (:class:`fixpack.groups.Group`). Raises OSError
    when it was not (its temp file gone: the run is still to be rolled back); returns False when it was, but its
    folder could not be synced (a crash may lose it: the run's journals are then kept, as they are consistent
    either way)."""
    path = journal_path(root)
    data = loads_json(path.read_bytes())
    data["group"]["committed"] = True
    write_under(root, path.relative_to(root).as_posix(), dumps(data), mode=0o644, sync_dir=False)
    try:
        fsync_dir(path.parent)
    except OSError:
        return False
    return True


def finish_group(root: Path) -> str:
    """A committed run's journal in ``root`` removed, then its backups (:func:`_drop_backups`); returns "" or a note
    naming what was left (the next run removes it). Raises OSError when the journal itself cannot be removed."""
    folder = state_dir(root)
    write_under(root, (folder / JOURNAL).relative_to(root).as_posix(), None, sync_dir=False)
    try:
        fsync_dir(folder)
    except OSError:  # the journal is gone in memory; lost in a crash, the next run sees the run complete all the same
        pass
    return _drop_backups(root, folder / BACKUPS)


def _drop_backups(root: Path, backups: Path) -> str:
    """Remove this run's backups, the flat files ``0`` .. ``n-1`` that :func:`_back_up` made, in ``backups`` (the
    state folder's, in ``root``), without shutil (its import, with the archive modules, costs more than a small
    apply). Anything that will not go (a folder planted there, a failing disk) is left for the next run
    (:func:`fixpack.state.discard_leftovers`). The folder and those on its way are opened without following a link
    (:func:`fixpack.nofollow.clear_under`): ``.fixpack`` or the folder swapped for a link is never followed (as
    ``shutil.rmtree`` refuses one). Returns "" or a note naming what was left and why."""
    try:
        clear_under(root, backups.relative_to(root).as_posix(), flat=True)
    except OSError as exc:
        return _left(backups, exc)
    return ""


def _left(backups: Path, exc: OSError) -> str:
    return (f"this run is complete, but its backups in {backups} could not be removed ({exc.strerror or exc}, "
            f"{errno.errorcode.get(exc.errno or 0, '?')}): the next run removes them (or rm -rf {backups})")


def _stale_bytecode(root: Path, changes: list[FileChange]) -> list[FileChange]:
    paths = {c.path for c in changes}
    out = []
    for c in changes:
        for pyc in pycache_files(root / c.path):
            rel = pyc.relative_to(root).as_posix()
            if rel not in paths:
                paths.add(rel)
                out.append(FileChange(rel, None))
    return out


def _back_up(root: Path, changes: list[FileChange], backups: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Each change's journal entry, the file it replaces given a second name in ``root/backups`` (read only once the
    journal names it, with its sha256), both reached without following a link (:func:`fixpack.nofollow.back_up_under`:
    a folder swapped for one meanwhile would have taken another file's bytes as the backup)."""
    entries = []
    dirs: set[str] = set()
    for i, c in enumerate(changes):
        dest = root / c.path
        held = back_up_under(root, c.path, f"{backups}/{i}")
        entry: dict[str, Any] = {"path": c.path, "existed": held is not None, "backup": i, "mode": None,
                                 "owner": None, "sha256": None}
        if held is not None:
            data, st = held
            entry.update(mode=stat.S_IMODE(st.st_mode), owner=[st.st_uid, st.st_gid],
                         sha256=hashlib.sha256(data).hexdigest())
        elif c.data is not None:  # what it writes: a rollback removes only those bytes (journal_checks.check_created)
            dirs |= _missing_dirs(root, dest.parent)
            entry.update(sha256=hashlib.sha256(c.data).hexdigest(), size=len(c.data))
        entries.append(entry)
    fsync_dir(root / backups)  # one folder sync for every backup, before the journal that names them
    return entries, sorted(dirs)


def _missing_dirs(root: Path, folder: Path) -> set[str]:
    out = set()
    while folder != root and not exists(folder):
        out.add(folder.relative_to(root).as_posix())
        folder = folder.parent
    return out


def _module_gone(pyc: Path) -> bool:
    """The source of a ``__pycache__/<module>.<tag>.pyc`` was removed: its ``__pycache__`` (and a package
    folder left empty) may go too, as when a component is uninstalled."""
    return not exists(pyc.parent.parent / (pyc.name.split(".", 1)[0] + ".py"))


def _abandon(root: Path) -> None:
    """After a failure before the journal existed: remove the backups and temp files (the target is
    untouched)."""
    try:
        unlink_quietly(journal_path(root))  # written, but its folder's fsync failed: no file was touched
        discard_leftovers(root)
    except (OSError, FixpackError):  # still failing (read-only now): the next run removes them
        pass


def _noun(by: Mapping[str, str] | None) -> str:
    """What a transaction writes: a pack (an update says what it writes by) or a target."""
    return "pack" if by else "target"


_NEXT_RUN = {"target": "run fixpack again (apply or revert): it rolls the target back",
             "pack": "run the refresh or import again (fixpack status names the way back): it rolls the pack back"}


def _roll_back(root: Path, exc: OSError | None, where: Path, noun: str, how: str = "",
               kind: type[FixpackError] = EnvironmentProblem) -> None:
    """A write failed part-way (``exc``; None: a signal, ``how`` it came, no errno: an interrupt is no failed write):
    put every file back from the journal now, then report it (``kind``: Terminated for SIGTERM, exit 143). ``noun``:
    what ``root`` is (a target, a pack)."""
    what = f"{io_said(exc, where)} while writing" if exc else f"{root}: {how} while writing"
    try:
        recover(root)
    except (OSError, FixpackError) as again:
        raise kind(f"{what}; rolling back failed{' too' if exc else ''} ({_not_rolled_back(root, exc, again, noun)}"
                   ) from exc
    after = f". {io_advice(exc).capitalize()} and run again" if exc else " (fixpack status shows it). Run again"
    raise kind(f"{what}; the run was rolled back: the {noun} holds its bytes from before the "
                             f"run{after}") from exc


def _not_rolled_back(root: Path, exc: OSError | None, again: OSError | FixpackError, noun: str) -> str:
    """Why a failed run's rollback stopped (``again``), where its journal is left and what to do, for
    :func:`_roll_back`'s message: a state folder swapped for a link (or made a file) while the run wrote keeps the
    journal where the link leads (or nowhere it can tell), so the way back puts that folder back first; a damaged
    state's "nothing was written" is the rollback's, not the run's, and is left out."""
    damaged = isinstance(again, DamagedStateError)
    said = str(again).removesuffix(" (nothing was written)") if damaged else str(again)
    state = root / STATE_DIR
    left = f"The journal {state / JOURNAL} is left"
    first = io_advice(exc) + ", then " if exc else ""
    try:
        to: str | None = os.readlink(state)
    except OSError:  # (no link: EINVAL, ENOENT)
        to = None
    if to is not None:
        left = f"The journal is left where the link {state} leads ({root / to / JOURNAL})"
        first = (f"if that folder is this run's state, moved by another program, put it back "
                 f"({state_put_back(root, to)}); {first}")
    elif os.path.lexists(state) and not os.path.isdir(state):
        left = f"{state} is no folder now, so the journal this run wrote there is not in it"
        first = f"put the run's state folder back in its place if another program moved it; {first}"
    return (f"{said}). {left}: {first}{_NEXT_RUN[noun]} to its bytes before this run first"
            + ("; where that run still finds the state damaged, it names the files to put back by hand"
               if damaged else ""))
