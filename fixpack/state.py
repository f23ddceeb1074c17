"""What the image holds, on disk: atomic writes, the run lock, the journal and the manifest.

Everything the engine keeps lives in ``<root>/.fixpack/``:

- ``<target>.manifest.json``: the profile, pins, and each applied fix with its hashes;
- ``journal.json`` and ``journal/``: written before the first file is touched and removed after the
  manifest; a run that dies in between leaves them, and the next run rolls the target back to the
  bytes it had before (then plans again from there).

The run lock is an advisory ``flock`` on the target's root folder itself: no command creates or
removes it, so a run waiting for it and a run arriving later wait on the same lock (a lock *file*
that a revert removed let two writers in at once), and there is no file a planted link could
redirect. Writers take it exclusively; status and dry runs take it shared.

State on disk is untrusted input (an image layer can carry a ``.fixpack/``): the manifest and the
journal are checked against one schema each, every path they name must be canonical, inside the
target and reached without a symbolic link, and backups are read only from the journal's own folder
by their entry's index. Damaged state is a :class:`DamagedStateError` (exit 3) before anything is
written.

Files are written with a temporary file in the same folder, ``fsync`` and ``rename``, so a reader
sees the old or the new bytes, never a mix. A write that fails part-way (no space, read-only file
system, permission, I/O error) is rolled back from the journal inside the same run.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .errors import BadInputError, BusyError, DamagedStateError, EnvironmentProblem, FixpackError, MismatchError
from .safepath import STATE_DIR, link_on_the_way, path_problem

JOURNAL = "journal.json"
BACKUPS = "journal"
TMP_SUFFIX = ".fixpack-tmp"
MAX_STATE_BYTES = 64 << 20  # a manifest or journal larger than this is not one this tool wrote

FAULT_ENV = "FIXPACK_FAULT_AT"  # crash-test hook: os._exit at the Nth write point (tests only)
IO_FAULT_ENV = "FIXPACK_IO_FAULT"  # I/O-fault hook: "N:ENOSPC" fails the Nth I/O call, "N:EROFS+" every one from N
_fault_counter = 0
_io_counter = 0


def fault_point() -> None:
    """A write point. With $FIXPACK_FAULT_AT=N the process dies here, uncleanly, at the N-th point."""
    global _fault_counter
    limit = os.environ.get(FAULT_ENV)
    if not limit:
        return
    _fault_counter += 1
    if _fault_counter == int(limit):
        os._exit(137)


def _io_point(path: Path | str) -> None:
    """An I/O call about to happen. With $FIXPACK_IO_FAULT=N:ERRNO it fails here with that errno, as the
    kernel would (disk full, read-only remount, permission, I/O error), at the N-th call (or from the
    N-th on with a trailing ``+``). Tests and tools/stress.py use it; unset, it costs one lookup."""
    global _io_counter
    spec = os.environ.get(IO_FAULT_ENV)
    if not spec:
        return
    _io_counter += 1
    at, _, name = spec.partition(":")
    sticky = name.endswith("+")
    if _io_counter == int(at) or (sticky and _io_counter > int(at)):
        code = getattr(errno, name.rstrip("+") or "EIO")
        raise OSError(code, os.strerror(code), str(path))


# --- I/O primitives: every write goes through one of these (and so through the fault hook) -------

def _write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    if os.environ.get(IO_FAULT_ENV):  # a failing write has usually written part of its bytes already
        half = len(view) // 2
        os.write(fd, view[:half])
        view = view[half:]
        _io_point(path)
    while view:
        view = view[os.write(fd, view):]


def _fsync(fd: int, path: Path) -> None:
    _io_point(path)
    os.fsync(fd)


def _replace(src: Path, dst: Path) -> None:
    _io_point(dst)
    os.replace(src, dst)


def _unlink(path: Path) -> None:
    _io_point(path)
    os.unlink(path)


def _mkdir(path: Path) -> None:
    _io_point(path)
    os.mkdir(path, 0o755)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _fsync(fd, folder)
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TMP_SUFFIX}")


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _make_parents(folder: Path) -> None:
    missing = []
    while not _exists(folder):
        missing.append(folder)
        folder = folder.parent
    for f in reversed(missing):
        _mkdir(f)


def _unlink_quietly(path: Path) -> None:
    try:
        if _exists(path):
            os.unlink(path)
    except OSError:  # cleaning up after a failure: the next run removes what is left
        pass


# --- the state folder ---------------------------------------------------------------------------

def state_dir(root: Path) -> Path:
    """``<root>/.fixpack``; refuses one that is a link or not a folder (state stays inside the target)."""
    folder = root / STATE_DIR
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return folder
    if stat.S_ISLNK(st.st_mode):
        raise MismatchError(f"{folder} is a symbolic link (to {os.readlink(folder)}); fixpack keeps its state inside "
                            f"the target only. Remove the link")
    if not stat.S_ISDIR(st.st_mode):
        raise DamagedStateError(folder, "it is not a folder (fixpack keeps its state in a folder of that name)")
    return folder


def forget_state(root: Path) -> None:
    """Remove ``.fixpack/`` once it holds nothing (after a full revert, or a rolled-back first run),
    so that a reverted target is byte for byte the one before the first apply."""
    folder = state_dir(root)
    try:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    except OSError:  # another run's file, or a read-only file system: an empty folder is harmless
        pass


# --- atomic writes --------------------------------------------------------------------------------

def atomic_write(path: Path, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None) -> None:
    """Write ``data`` to ``path`` through a temp file, fsync and rename.

    The file keeps its mode and owner unless ``mode`` / ``owner`` (uid, gid) say otherwise. The temp
    file is created exclusively and never through a link, so a planted link cannot redirect the write;
    when any step fails the temp file is removed before the error goes up.
    """
    _make_parents(path.parent)
    if _exists(path) and not path.is_symlink():
        st = path.stat()
        mode = stat.S_IMODE(st.st_mode) if mode is None else mode
        owner = (st.st_uid, st.st_gid) if owner is None else owner
    tmp = temp_path(path)
    if _exists(tmp):
        _unlink(tmp)
    _io_point(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            _write_all(fd, data, path)
            _fsync(fd, path)
        finally:
            os.close(fd)
        os.chmod(tmp, mode if mode is not None else 0o644)
        _chown(tmp, owner)
        _replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_dir(path.parent)


def _chown(path: Path, owner: tuple[int, int] | None) -> None:
    if owner is not None and owner != (os.getuid(), os.getgid()):
        try:
            os.chown(path, *owner, follow_symlinks=False)
        except PermissionError:  # not root: the file is ours anyway
            pass


def remove_file(path: Path) -> None:
    if _exists(path):
        _unlink(path)
        _fsync_dir(path.parent)


def _pycache_files(path: Path) -> list[Path]:
    cache = path.parent / "__pycache__"
    if path.suffix != ".py" or cache.is_symlink() or not cache.is_dir():
        return []
    return sorted(cache.glob(f"{path.stem}.*.pyc"))


def drop_pycache(path: Path) -> None:
    """Remove ``__pycache__/<stem>.*.pyc`` next to a patched module, so no stale bytecode runs."""
    for pyc in _pycache_files(path):
        if _exists(pyc):
            _unlink(pyc)


def _drop_pycache_quietly(path: Path) -> None:
    """During a rollback the original bytes are what matters; a .pyc that stays is checked against the
    source's mtime and size by Python anyway."""
    try:
        drop_pycache(path)
    except OSError:
        pass


# --- the run lock ---------------------------------------------------------------------------------

LOCK_WAIT_ENV = "FIXPACK_LOCK_WAIT"  # seconds a run waits for another one's lock (default 10)


def lock_wait_seconds() -> float:
    """$FIXPACK_LOCK_WAIT as seconds (default 10); bad input (exit 2) when it is not a number >= 0."""
    raw = os.environ.get(LOCK_WAIT_ENV, "10")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise BadInputError(f"${LOCK_WAIT_ENV}={raw!r}: not a number of seconds; set it to e.g. 10, or unset it")
    return value


@contextmanager
def run_lock(root: Path, shared: bool = False) -> Iterator[None]:
    """Hold the run lock of ``root``: exclusively to write, shared to read a consistent state.

    The lock is a ``flock`` on the root folder, opened without following a link. Waits up to
    $FIXPACK_LOCK_WAIT seconds (default 10) for another run, then raises BusyError.
    """
    wait = lock_wait_seconds()
    try:
        fd = os.open(root.resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise EnvironmentProblem(f"{root}: cannot open the target's folder to lock it ({exc.strerror}); run as a "
                                 f"user who may read it") from exc
    try:
        _acquire(fd, root, shared, wait)
        yield
    finally:
        os.close(fd)  # releases the flock


def _acquire(fd: int, root: Path, shared: bool, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                raise BusyError(f"another fixpack run holds the lock on {root} (waited {wait:g} s, "
                                f"${LOCK_WAIT_ENV}); wait for it to finish and run again") from exc
            time.sleep(0.02)


# --- reading state files --------------------------------------------------------------------------

_SHA = re.compile(r"^[0-9a-f]{64}$")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
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


def _json(raw: bytes, path: Path) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DamagedStateError(path, f"bytes that are not UTF-8 at byte offset {exc.start}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DamagedStateError(path, f"not valid JSON (line {exc.lineno}: {exc.msg})") from exc


def _sha_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and bool(_SHA.match(value)))


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- manifest -----------------------------------------------------------------------------------

def manifest_path(root: Path, target: str) -> Path:
    return state_dir(root) / f"{target}.manifest.json"


def read_manifest(root: Path, target: str) -> dict[str, Any] | None:
    """The target's manifest, checked against its schema; None when there is none."""
    path = manifest_path(root, target)
    raw = _read_state_file(path)
    return None if raw is None else parse_manifest(raw, path)


def parse_manifest(raw: bytes, path: Path) -> dict[str, Any]:
    data = _json(raw, path)
    problem = _manifest_problem(data)
    if problem:
        raise DamagedStateError(path, f"not a valid fixpack manifest: {problem}")
    assert isinstance(data, dict)
    return data


def _files_problem(files: Any, what: str) -> str | None:
    if not isinstance(files, dict):
        return f"{what} is not an object of path -> sha256"
    for p, h in files.items():
        problem = path_problem(p)
        if problem:
            return f"{what} names {p!r}: {problem}"
        if not _sha_or_none(h):
            return f"{what}: the hash of {p} is not a sha256"
    return None


def _manifest_fix_problem(f: Any) -> str | None:
    if not isinstance(f, dict) or not isinstance(f.get("id"), str) or not _ID.match(f["id"]):
        return "not an object with a fix id"
    if f.get("state") not in ("applied", "upstreamed"):
        return f"{f['id']}: state {f.get('state')!r} is neither 'applied' nor 'upstreamed'"
    if not _int(f.get("version")) or not isinstance(f.get("patch_sha256"), str) or not _SHA.match(f["patch_sha256"]):
        return f"{f['id']}: needs an integer version and the patch's sha256"
    return _files_problem(f.get("files"), f"{f['id']}'s files")


def _manifest_problem(data: Any) -> str | None:
    if not isinstance(data, dict) or not isinstance(data.get("fixes"), list):
        return "not a JSON object with a list of fixes"
    files = data.get("files", {})
    problem = _files_problem(files, "'files'")
    if problem:
        return problem
    seen: set[str] = set()
    applied_files: set[str] = set()
    for n, f in enumerate(data["fixes"], 1):
        problem = _manifest_fix_problem(f)
        if problem:
            return f"fix entry {n}: {problem}"
        if f["id"] in seen:
            return f"fix {f['id']} is recorded twice"
        seen.add(f["id"])
        if f["state"] == "applied":
            applied_files |= set(f["files"])
    if set(files) != applied_files:
        # each run writes 'files' as the union of its applied fixes' files: an entry was removed or edited
        return "its 'files' are not the files of its applied fixes (an entry removed or edited by hand?)"
    return next((f"{k!r} is not a string" for k in ("profile", "target", "tool", "tool_version")
                 if k in data and not isinstance(data[k], str)), None)


def dumps(data: Any) -> bytes:
    """The deterministic JSON form used for manifests, journals and locks."""
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


# --- the journal ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class FileChange:
    """A file to write (``data``) or remove (``data is None``), relative to the target root."""

    path: str
    data: bytes | None
    mode: int | None = None


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
    if _exists(backups) and (backups.is_symlink() or not backups.is_dir()):
        raise DamagedStateError(backups, "it is not a folder (fixpack keeps the journal's backups there)")
    raw = _read_state_file(jpath)
    if raw is None:
        return None
    data = _json(raw, jpath)
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
    if not isinstance(e["existed"], bool) or not _int(e["backup"]) or e["backup"] != i:
        raise bad("'existed' must be true or false and 'backup' the entry's own index")
    if not (mode is None or _int(mode) and 0 <= mode <= 0o7777) or (e["existed"] and mode is None):
        raise bad("'mode' is not a file mode")
    if owner is not None and not (isinstance(owner, list) and len(owner) == 2 and all(_int(x) and x >= 0
                                                                                        for x in owner)):
        raise bad("'owner' is not [uid, gid]")
    if not _sha_or_none(sha):
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
    if not _exists(folder) or folder.is_symlink() or not folder.is_dir():
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
    return any(_exists(folder / n) for n in (JOURNAL, BACKUPS, JOURNAL + TMP_SUFFIX)) or \
        _exists(temp_path(folder / JOURNAL))


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
    _unlink(journal.path)
    _fsync_dir(journal.path.parent)
    _discard_leftovers(root)
    for d in sorted(journal.dirs, key=lambda d: -d.count("/")):
        try:
            (root / d).rmdir()
        except OSError:  # not empty (something else lives there now) or gone: leave it
            pass
    return [e.path for e in journal.entries]


def _restore(root: Path, e: JournalEntry) -> None:
    dest = root / e.path
    if _exists(temp_path(dest)):
        _unlink(temp_path(dest))
    if not e.existed:
        remove_file(dest)
    elif not e.restored:
        backup = _backups(root) / str(e.index)
        os.chmod(backup, e.mode if e.mode is not None else 0o644)
        _chown(backup, e.owner)
        try:
            _make_parents(dest.parent)
            _replace(backup, dest)
            _fsync_dir(dest.parent)
        except OSError as exc:
            if exc.errno != errno.EXDEV:  # a mount point inside the target: copy instead
                raise
            atomic_write(dest, e.original or b"", e.mode, e.owner)
    _drop_pycache_quietly(dest)


def _discard_leftovers(root: Path) -> None:
    """Remove backups and a half-written journal that no journal refers to, then an empty state folder."""
    folder = state_dir(root)
    backups = folder / BACKUPS
    if _exists(backups):
        if backups.is_symlink() or not backups.is_dir():
            raise DamagedStateError(backups, "it is not a folder (fixpack keeps the journal's backups there)")
        shutil.rmtree(backups)  # does not follow links inside
    tmp = temp_path(folder / JOURNAL)
    if _exists(tmp):
        if tmp.is_dir() and not tmp.is_symlink():
            raise DamagedStateError(tmp, "it is a folder")
        _unlink(tmp)
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
        elif _pycache_files(dest) and not os.access(dest.parent / "__pycache__", os.W_OK):
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
        _make_parents(folder / BACKUPS)
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
        for c in changes:
            where = root / c.path
            if c.data is None:
                remove_file(where)
                if where.parent.name != "__pycache__":
                    _prune_empty(root, where.parent)
            else:
                atomic_write(where, c.data, c.mode)
            fault_point()
        where = journal
        _unlink(journal)
    except OSError as exc:
        _roll_back(root, exc, where)
    try:
        _fsync_dir(folder)
    except OSError:  # the journal is gone in memory: if that is lost in a crash the next run rolls back whole
        pass
    fault_point()
    shutil.rmtree(folder / BACKUPS, ignore_errors=True)  # left over, they are removed by the next run


def _stale_bytecode(root: Path, changes: list[FileChange]) -> list[FileChange]:
    paths = {c.path for c in changes}
    out = []
    for c in changes:
        for pyc in _pycache_files(root / c.path):
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
            atomic_write(backups / str(i), data, 0o600)
        elif c.data is not None:
            dirs |= _missing_dirs(root, dest.parent)
        entries.append(entry)
    return entries, sorted(dirs)


def _missing_dirs(root: Path, folder: Path) -> set[str]:
    out = set()
    while folder != root and not _exists(folder):
        out.add(folder.relative_to(root).as_posix())
        folder = folder.parent
    return out


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
        _unlink_quietly(_journal_path(root))  # written, but its folder's fsync failed: no file was touched
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
