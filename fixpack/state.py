"""What the image holds, on disk: the manifest, the journal and the transaction that writes a run.

Everything the engine keeps lives in ``<root>/.fixpack/``:

- ``<target>.manifest.json``: the profile, pins, and each applied fix with its hashes
  (:class:`fixpack.records.Manifest`);
- ``journal.json`` and ``journal/``: written before the first file is touched and removed after the
  manifest; a run that dies in between leaves them, and the next run rolls the target back to the
  bytes it had before (then plans again from there).

State on disk is untrusted input (an image layer can carry a ``.fixpack/``): the manifest and the
journal are checked against one schema each, every path they name must be canonical, inside the
target and reached without a symbolic link, and backups are read only from the journal's own folder
by their entry's index. Damaged state is a :class:`DamagedStateError` (exit 3) before anything is
written.

A write that fails part-way (no space, read-only file system, permission, I/O error) is rolled back
from the journal inside the same run (:func:`write_transaction`), which then raises an
:class:`EnvironmentProblem` (exit 5) naming the file and the errno.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from .errors import DamagedStateError, EnvironmentProblem, FixpackError
from .fsio import (
    TMP_SUFFIX,
    FileChange,
    atomic_write,
    chown_to,
    drop_pycache_quietly,
    exists,
    fault_point,
    forget_state,
    fsync_dir,
    link_or_copy,
    make_parents,
    pycache_files,
    remove_file,
    replace_file,
    state_dir,
    temp_path,
    unlink,
    unlink_quietly,
)
from .records import Manifest, dumps, is_int, load_json, sha_or_none
from .safepath import link_on_the_way, path_problem
from .structs import dataclass

JOURNAL = "journal.json"
BACKUPS = "journal"
MAX_STATE_BYTES = 64 << 20  # a manifest or journal larger than this is not one this tool wrote
_MANIFEST_NAME = re.compile(r"^\.fixpack/[A-Za-z0-9][A-Za-z0-9._-]*\.manifest\.json$")





def _read_state_file(path: Path) -> bytes | None:
    """The bytes of a state file, None when it does not exist; never through a link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise DamagedStateError(path, f"it is a symbolic link (to {os.readlink(path)}); state is never read "
                                      f"through a link")
    if not stat.S_ISREG(st.st_mode):
        raise DamagedStateError(path, "it is not a regular file")
    if st.st_size > MAX_STATE_BYTES:
        raise DamagedStateError(path, f"{st.st_size} bytes, more than any state this tool writes")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror}); run as a user who may read the "
                                 f"target") from exc


# --- manifest -----------------------------------------------------------------------------------

def manifest_path(root: Path, target: str) -> Path:
    return state_dir(root) / f"{target}.manifest.json"


def read_manifest(root: Path, target: str) -> Manifest | None:
    """The target's manifest, checked against its schema; None when there is none."""
    path = manifest_path(root, target)
    raw = _read_state_file(path)
    return None if raw is None else Manifest.from_json(raw, path)


# --- the journal ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class JournalEntry:
    """One file a run is about to change: what it held before (``original``: None if it did not exist).

    ``restored`` is set when the backup is gone because an interrupted rollback already put it back
    (the file then hashes to the entry's sha256).
    """

    path: str
    existed: bool
    index: int
    mode: int | None
    owner: tuple[int, int] | None
    sha256: str | None
    original: bytes | None
    restored: bool


@dataclass(frozen=True)
class Journal:
    path: Path
    entries: tuple[JournalEntry, ...]
    dirs: tuple[str, ...]  # folders the run created, removed again on rollback when empty


JOURNAL_KEYS = {"path", "existed", "backup", "mode", "owner", "sha256"}


def _journal_path(root: Path) -> Path:
    return state_dir(root) / JOURNAL


def _backups(root: Path) -> Path:
    return state_dir(root) / BACKUPS


def load_journal(root: Path) -> Journal | None:
    """The journal an interrupted run left, checked entry by entry; None when there is none."""
    jpath = _journal_path(root)
    backups = _backups(root)
    if exists(backups) and (backups.is_symlink() or not backups.is_dir()):
        raise DamagedStateError(backups, "it is not a folder (fixpack keeps the journal's backups there)")
    raw = _read_state_file(jpath)
    if raw is None:
        return None
    data = load_json(raw, jpath)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or set(data) - {"entries", "dirs"}:
        raise DamagedStateError(jpath, "not a fixpack journal (a JSON object with a list of entries)")
    entries = tuple(_journal_entry(root, jpath, i, e) for i, e in enumerate(data["entries"]))
    paths = [e.path for e in entries]
    if len(set(paths)) != len(paths):
        raise DamagedStateError(jpath, "a file is listed twice")
    dirs = data.get("dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) and _journal_path_problem(root, d) is None
                                             for d in dirs):
        raise DamagedStateError(jpath, "'dirs' is not a list of canonical folders inside the target")
    return Journal(jpath, entries, tuple(dirs))


def _journal_path_problem(root: Path, path: str) -> str | None:
    """Why a journal may not name ``path``: it must be a canonical path of the target reached without a
    link, or the manifest in the state folder."""
    problem = None if isinstance(path, str) and _MANIFEST_NAME.match(path) else path_problem(path)
    if problem:
        return f"{path!r} is {problem}"
    link = link_on_the_way(root, path)
    if link:
        return f"{path} goes through the symbolic link {link}"
    try:
        st = os.lstat(root / path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return None if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else f"{path} is not a regular file"


def _journal_entry(root: Path, jpath: Path, i: int, e: Any) -> JournalEntry:
    def bad(what: str) -> DamagedStateError:
        return DamagedStateError(jpath, f"entry {i + 1}: {what}")

    if not isinstance(e, dict) or set(e) - JOURNAL_KEYS or not {"path", "existed", "backup"} <= set(e):
        raise bad(f"not an object with path, existed and backup (allowed keys: {', '.join(sorted(JOURNAL_KEYS))})")
    problem = _journal_path_problem(root, e["path"])
    if problem:
        raise bad(problem)
    if (root / e["path"]).is_dir() and not (root / e["path"]).is_symlink():
        raise bad(f"{e['path']} is a folder")
    mode, owner, sha = e.get("mode"), e.get("owner"), e.get("sha256")
    if not isinstance(e["existed"], bool) or not is_int(e["backup"]) or e["backup"] != i:
        raise bad("'existed' must be true or false and 'backup' the entry's own index")
    if not (mode is None or is_int(mode) and 0 <= mode <= 0o7777) or (e["existed"] and mode is None):
        raise bad("'mode' is not a file mode")
    if owner is not None and not (isinstance(owner, list) and len(owner) == 2 and all(is_int(x) and x >= 0
                                                                                        for x in owner)):
        raise bad("'owner' is not [uid, gid]")
    if not sha_or_none(sha):
        raise bad("'sha256' is not a sha256")
    original, restored = _original(root, e["path"], i, e["existed"], sha, bad)
    return JournalEntry(e["path"], e["existed"], i, mode, tuple(owner) if owner else None, sha, original, restored)


def _original(root: Path, path: str, i: int, existed: bool, sha: str | None,
              bad: Any) -> tuple[bytes | None, bool]:
    """The bytes an entry restores, read from ``.fixpack/journal/<index>`` only (never a path the journal
    names), checked against the entry's sha256."""
    if not existed:
        return None, False
    folder = _backups(root)
    if not exists(folder) or folder.is_symlink() or not folder.is_dir():
        raise bad(f"its backups folder {folder} is missing or not a folder")
    raw = _read_state_file(folder / str(i))
    if raw is None:
        # an interrupted rollback moved the backup back already: the file must hold exactly those bytes
        now = _read_state_file(root / path) if sha else None
        if sha and now is not None and hashlib.sha256(now).hexdigest() == sha:
            return now, True
        raise bad(f"the backup of {path} ({folder / str(i)}) is missing")
    if sha and hashlib.sha256(raw).hexdigest() != sha:
        raise bad(f"the backup of {path} does not match its sha256")
    return raw, False


def journal_originals(root: Path) -> dict[str, bytes | None]:
    """What an interrupted run's journal will restore: path -> original bytes (None: did not exist).

    Read only; lets status and dry runs show the state the next apply starts from.
    """
    journal = load_journal(root)
    return {} if journal is None else {e.path: e.original for e in journal.entries}


def leftover_journal(root: Path) -> bool:
    """A journal, or backups a run killed after removing its journal left behind."""
    folder = state_dir(root)
    return any(exists(folder / n) for n in (JOURNAL, BACKUPS, JOURNAL + TMP_SUFFIX)) or \
        exists(temp_path(folder / JOURNAL))


def recover(root: Path) -> list[str]:
    """Roll back what an interrupted run left (a journal). Returns the paths restored; idempotent.

    The whole journal is checked before the first file is touched. Backups are moved back with a
    rename (no new space needed on a full disk); a rollback killed half way leaves the journal, and
    the entries already put back are recognised by their sha256.
    """
    journal = load_journal(root)
    if journal is None:
        _discard_leftovers(root)
        return []
    for e in journal.entries:
        _restore(root, e)
    unlink(journal.path)
    fsync_dir(journal.path.parent)
    _discard_leftovers(root)
    for d in sorted(journal.dirs, key=lambda d: -d.count("/")):
        try:
            (root / d).rmdir()
        except OSError:  # not empty (something else lives there now) or gone: leave it
            pass
    return [e.path for e in journal.entries]


def _restore(root: Path, e: JournalEntry) -> None:
    dest = root / e.path
    if exists(temp_path(dest)):
        unlink(temp_path(dest))
    if not e.existed:
        remove_file(dest)
    elif not e.restored:
        backup = _backups(root) / str(e.index)
        os.chmod(backup, e.mode if e.mode is not None else 0o644)
        chown_to(backup, e.owner)
        try:
            make_parents(dest.parent)
            replace_file(backup, dest)
            fsync_dir(dest.parent)
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # a mount point inside the target: copy instead
                raise
            atomic_write(dest, e.original or b"", e.mode, e.owner)
    drop_pycache_quietly(dest)


def _discard_leftovers(root: Path) -> None:
    """Remove backups and a half-written journal that no journal refers to, then an empty state folder."""
    folder = state_dir(root)
    backups = folder / BACKUPS
    if exists(backups):
        if backups.is_symlink() or not backups.is_dir():
            raise DamagedStateError(backups, "it is not a folder (fixpack keeps the journal's backups there)")
        import shutil  # (and its archive modules) only when there is something to remove

        shutil.rmtree(backups)  # does not follow links inside
    tmp = temp_path(folder / JOURNAL)
    if exists(tmp):
        if tmp.is_dir() and not tmp.is_symlink():
            raise DamagedStateError(tmp, "it is a folder")
        unlink(tmp)
    forget_state(root)


# --- checks before writing ------------------------------------------------------------------------

def check_writable(root: Path, changes: list[FileChange]) -> None:
    """Raise EnvironmentProblem, before anything is written, if a file or its folder is read-only."""
    problems = []
    for c in changes:
        dest = root / c.path
        folder = dest.parent
        while not folder.exists():
            folder = folder.parent
        if not os.access(folder, os.W_OK) or (dest.exists() and not os.access(dest, os.W_OK)):
            problems.append(str(dest))
        elif pycache_files(dest) and not os.access(dest.parent / "__pycache__", os.W_OK):
            problems.append(str(dest.parent / "__pycache__"))  # its stale bytecode could not be removed
    if not os.access(root, os.W_OK):
        problems.insert(0, str(root))
    if problems:
        raise EnvironmentProblem(f"the target is not writable (permissions, an immutable file or a read-only file "
                                 f"system): {', '.join(problems[:5])}{' ...' if len(problems) > 5 else ''}; nothing "
                                 f"was changed. Run where it may be written, or apply to a writable copy")


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
    inodes_short = st.f_files > 0 and (st.f_ffree if os.geteuid() == 0 else st.f_favail) < 2 * len(changes) + 4
    if need > free or inodes_short:
        what = f"{need // 1024} KiB" if need > free else f"{2 * len(changes) + 4} inodes"
        raise EnvironmentProblem(f"{root}: not enough space on its file system for this run (needs up to {what}, "
                                 f"{free // 1024} KiB free); nothing was changed. Free space and run again")


# --- the transaction ------------------------------------------------------------------------------

_ADVICE = {errno.ENOSPC: "free space on its file system", errno.EDQUOT: "free space or raise the quota",
           errno.EROFS: "remount it read-write", errno.EACCES: "run as a user who may write it",
           errno.EPERM: "run as a user who may write it (or clear an immutable flag)",
           errno.EIO: "check the disk"}


def _io_message(exc: OSError, where: Path) -> str:
    name = errno.errorcode.get(exc.errno or 0, "?")
    return f"{where}: {os.strerror(exc.errno) if exc.errno else exc} ({name})"


def _advice(exc: OSError) -> str:
    return _ADVICE.get(exc.errno or 0, "remove the cause")


def write_transaction(root: Path, changes: list[FileChange]) -> None:
    """Write every change, journalled, so that a crash at any point can be rolled back by :func:`recover`,
    and a failed write is rolled back before this returns (EnvironmentProblem, exit 5).

    The caller holds :func:`run_lock`. The manifest is one of the changes (written last).
    """
    # stale bytecode of changed modules is removed inside the transaction, with a backup: a rolled-back
    # run leaves the .pyc files as they were too
    changes = changes + _stale_bytecode(root, changes)
    check_free_space(root, changes)
    folder = state_dir(root)
    journal = folder / JOURNAL
    where = folder
    _discard_leftovers(root)  # backups of an earlier killed run whose journal was already removed
    try:
        make_parents(folder / BACKUPS)
        where = folder / BACKUPS
        entries, dirs = _back_up(root, changes)
        fault_point()
        where = journal
        atomic_write(journal, dumps({"entries": entries, "dirs": dirs}), 0o644)
    except OSError as exc:
        _abandon(root)
        raise EnvironmentProblem(f"{_io_message(exc, where)} while preparing the journal; nothing in the target was "
                                 f"changed. {_advice(exc).capitalize()} and run again") from exc
    fault_point()
    where = journal
    try:
        written: set[Path] = set()
        for c in changes:
            where = root / c.path
            if c.data is None:
                remove_file(where)
                if where.parent.name != "__pycache__" or _module_gone(where):
                    _prune_empty(root, where.parent)
            else:
                atomic_write(where, c.data, c.mode, sync_dir=False)
                written.add(where.parent)
            fault_point()
        for parent in sorted(written):  # once per folder, before the journal goes: until then a crash rolls back
            where = parent
            fsync_dir(parent)
        where = journal
        unlink(journal)
    except OSError as exc:
        _roll_back(root, exc, where)
    try:
        fsync_dir(folder)
    except OSError:  # the journal is gone in memory: if that is lost in a crash the next run rolls back whole
        pass
    fault_point()
    _drop_backups(folder / BACKUPS)


def _drop_backups(backups: Path) -> None:
    """Remove this run's backups, the flat files ``0`` .. ``n-1`` that :func:`_back_up` made, without
    shutil (its import, with the archive modules, costs more than a small apply). Anything that will not go
    (a folder planted there, a failing disk) is left: the next run's :func:`_discard_leftovers` removes it."""
    try:
        with os.scandir(backups) as entries:
            for entry in entries:
                os.unlink(entry.path)  # never follows a link; a folder raises and is left
        os.rmdir(backups)
    except OSError:
        pass


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


def _back_up(root: Path, changes: list[FileChange]) -> tuple[list[dict[str, Any]], list[str]]:
    entries = []
    dirs: set[str] = set()
    backups = _backups(root)
    for i, c in enumerate(changes):
        dest = root / c.path
        existed = dest.is_file() and not dest.is_symlink()
        entry: dict[str, Any] = {"path": c.path, "existed": existed, "backup": i, "mode": None, "owner": None,
                                 "sha256": None}
        if existed:
            st = dest.stat()
            data = dest.read_bytes()
            entry.update(mode=stat.S_IMODE(st.st_mode), owner=[st.st_uid, st.st_gid],
                         sha256=hashlib.sha256(data).hexdigest())
            link_or_copy(dest, backups / str(i), data)  # read only once the journal names it, with its sha256
        elif c.data is not None:
            dirs |= _missing_dirs(root, dest.parent)
        entries.append(entry)
    fsync_dir(backups)  # one folder sync for every backup, before the journal that names them
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


def _prune_empty(root: Path, folder: Path) -> None:
    """Remove folders a deletion left empty, up to the root, as ``git apply`` does: a revert of a fix
    that added ``pkg/new/x.py`` leaves no ``pkg/new/`` (a release copy has no empty folders)."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty: done
            return
        folder = folder.parent


def _abandon(root: Path) -> None:
    """After a failure before the journal existed: remove the backups and temp files (the target is
    untouched)."""
    try:
        unlink_quietly(_journal_path(root))  # written, but its folder's fsync failed: no file was touched
        _discard_leftovers(root)
    except (OSError, FixpackError):  # still failing (read-only now): the next run removes them
        pass


def _roll_back(root: Path, exc: OSError, where: Path) -> None:
    """A write failed part-way: put every file back from the journal now, then report the failure."""
    try:
        recover(root)
    except (OSError, FixpackError) as again:
        raise EnvironmentProblem(
            f"{_io_message(exc, where)} while writing; rolling back failed too ({again}). The journal "
            f"{_journal_path(root)} is left: {_advice(exc)}, then run fixpack again (apply or revert): it rolls "
            f"the target back to its bytes before this run first") from exc
    raise EnvironmentProblem(f"{_io_message(exc, where)} while writing; the run was rolled back: the target holds "
                             f"its bytes from before the run. {_advice(exc).capitalize()} and run again") from exc
