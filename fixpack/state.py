"""What the image holds, on disk: atomic writes, the run lock, the journal and the manifest.

Everything the engine keeps lives in ``<root>/.fixpack/``:

- ``lock``: an advisory ``flock`` held for the whole of a writing run (a second run fails at once);
- ``<target>.manifest.json``: the profile, pins, and each applied fix with its hashes;
- ``journal.json`` and ``journal/``: written before the first file is touched and removed after the
  manifest; a run that dies in between leaves them, and the next run rolls the target back to the
  bytes it had before (then plans again from there).

Files are written with a temporary file in the same folder, ``fsync`` and ``rename``, so a reader
sees the old or the new bytes, never a mix.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .errors import BusyError, EnvironmentProblem, MismatchError

STATE_DIR = ".fixpack"
FAULT_ENV = "FIXPACK_FAULT_AT"  # crash-test hook: os._exit at the Nth write point (tests only)
_fault_counter = 0


def fault_point() -> None:
    """A write point. With $FIXPACK_FAULT_AT=N the process dies here, uncleanly, at the N-th point."""
    global _fault_counter
    limit = os.environ.get(FAULT_ENV)
    if not limit:
        return
    _fault_counter += 1
    if _fault_counter == int(limit):
        os._exit(137)


def state_dir(root: Path) -> Path:
    """``<root>/.fixpack``; refuses one that is a link (state must not be written outside the target)."""
    folder = root / STATE_DIR
    if folder.is_symlink():
        raise MismatchError(f"{folder} is a symbolic link (to {os.readlink(folder)}); fixpack keeps its state inside "
                            f"the target only. Remove the link")
    return folder


def atomic_write(path: Path, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None) -> None:
    """Write ``data`` to ``path`` through a temp file, fsync and rename.

    The file keeps its mode and owner unless ``mode`` / ``owner`` (uid, gid) say otherwise. The temp
    file is created exclusively and never through a link, so a planted link cannot redirect the write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_symlink():
        st = path.stat()
        mode = stat.S_IMODE(st.st_mode) if mode is None else mode
        owner = (st.st_uid, st.st_gid) if owner is None else owner
    tmp = path.with_name(f".{path.name}.fixpack-tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode if mode is not None else 0o644)
    if owner is not None and owner != (os.getuid(), os.getgid()):
        try:
            os.chown(tmp, *owner)
        except PermissionError:  # not root: the file is ours anyway
            pass
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def remove_file(path: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_pycache(path: Path) -> None:
    """Remove ``__pycache__/<stem>.*.pyc`` next to a patched module, so no stale bytecode runs."""
    if path.suffix != ".py":
        return
    cache = path.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(f"{path.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)


LOCK_WAIT_ENV = "FIXPACK_LOCK_WAIT"  # seconds a run waits for another one's lock (default 10)


@contextmanager
def run_lock(root: Path, shared: bool = False) -> Iterator[None]:
    """Hold ``<root>/.fixpack/lock``: exclusively to write, shared to read a consistent state.

    Waits up to $FIXPACK_LOCK_WAIT seconds (default 10) for another run, then raises BusyError.
    A shared lock creates nothing: with no lock file there is no writer to wait for.
    """
    folder = state_dir(root)
    if shared and not (folder / "lock").is_file():
        yield
        return
    try:
        if not shared:
            folder.mkdir(exist_ok=True)
        fh = open(folder / "lock", "r" if shared else "a+")
    except OSError as exc:
        raise EnvironmentProblem(f"cannot create {folder / 'lock'}: {exc.strerror}. The target is not writable; "
                                 f"run where {root} may be written") from exc
    try:
        _acquire(fh, folder, shared)
        if not shared:
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
        yield
    finally:
        fh.close()


def _acquire(fh: Any, folder: Path, shared: bool) -> None:
    deadline = time.monotonic() + float(os.environ.get(LOCK_WAIT_ENV, "10"))
    while True:
        try:
            fcntl.flock(fh.fileno(), (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                raise BusyError(f"another fixpack run holds {folder / 'lock'} (pid {holder}); wait for it to "
                                f"finish and run again") from exc
            time.sleep(0.05)


def forget_state(root: Path) -> None:
    """Remove ``.fixpack/`` once it holds nothing but the lock file (after a full revert)."""
    folder = state_dir(root)
    if folder.is_dir() and {p.name for p in folder.iterdir()} <= {"lock"}:
        (folder / "lock").unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:  # another run created something meanwhile: leave it
            pass


# --- manifest -----------------------------------------------------------------------------------

def manifest_path(root: Path, target: str) -> Path:
    return state_dir(root) / f"{target}.manifest.json"


def read_manifest(root: Path, target: str) -> dict[str, Any] | None:
    path = manifest_path(root, target)
    if not path.is_file():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MismatchError(f"{path}: the manifest is not valid JSON ({exc}); the image state is unknown. "
                            f"Reinstall the target, or remove the manifest if the files are clean") from exc
    fixes = data.get("fixes") if isinstance(data, dict) else None
    if not isinstance(fixes, list) or not isinstance(data.get("files", {}), dict) or not all(
            isinstance(f, dict) and isinstance(f.get("id"), str) and f.get("state") in ("applied", "upstreamed")
            and isinstance(f.get("files", {}), dict) for f in fixes):
        raise MismatchError(f"{path}: not a valid fixpack manifest (each fix needs an id, a state and its file "
                            f"hashes); the image state is unknown. Reinstall the target and remove {path.parent}")
    return data


def dumps(data: Any) -> bytes:
    """The deterministic JSON form used for manifests, journals and locks."""
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


# --- journal and transactional writes -----------------------------------------------------------

@dataclass(frozen=True)
class FileChange:
    """A file to write (``data``) or remove (``data is None``), relative to the target root."""

    path: str
    data: bytes | None
    mode: int | None = None


def _journal(root: Path) -> Path:
    return state_dir(root) / "journal.json"


def recover(root: Path) -> list[str]:
    """Roll back what an interrupted run left (a journal). Returns the paths restored; idempotent."""
    jpath = _journal(root)
    if not jpath.is_file():
        shutil.rmtree(state_dir(root) / "journal", ignore_errors=True)
        return []
    entries = json.loads(jpath.read_text("utf-8"))["entries"]
    backups = state_dir(root) / "journal"
    restored = []
    for e in entries:
        dest = root / e["path"]
        dest.with_name(f".{dest.name}.fixpack-tmp").unlink(missing_ok=True)
        if e["existed"]:
            owner = tuple(e["owner"]) if e.get("owner") else None
            atomic_write(dest, (backups / str(e["backup"])).read_bytes(), e["mode"], owner)
        else:
            remove_file(dest)
        drop_pycache(dest)
        restored.append(e["path"])
    jpath.unlink()
    _fsync_dir(jpath.parent)
    shutil.rmtree(backups, ignore_errors=True)
    return restored


def journal_originals(root: Path) -> dict[str, bytes | None]:
    """What an interrupted run's journal will restore: path -> original bytes (None: did not exist).

    Read only; lets status and dry runs show the state the next apply starts from.
    """
    jpath = _journal(root)
    if not jpath.is_file():
        return {}
    backups = state_dir(root) / "journal"
    out: dict[str, bytes | None] = {}
    for e in json.loads(jpath.read_text("utf-8"))["entries"]:
        out[e["path"]] = (backups / str(e["backup"])).read_bytes() if e["existed"] else None
    return out


def leftover_journal(root: Path) -> bool:
    """A journal, or backups a run killed after removing its journal left behind."""
    return _journal(root).is_file() or (state_dir(root) / "journal").is_dir()


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
    if not os.access(root, os.W_OK):
        problems.insert(0, str(root))
    if problems:
        raise EnvironmentProblem(f"the target is not writable (permissions, an immutable file or a read-only file "
                                 f"system): {', '.join(problems[:5])}{' ...' if len(problems) > 5 else ''}; nothing "
                                 f"was changed. Run where it may be written, or apply to a writable copy")


def write_transaction(root: Path, changes: list[FileChange]) -> None:
    """Write every change, journalled, so that a crash at any point can be rolled back by :func:`recover`.

    The caller holds :func:`run_lock`. The manifest is one of the changes (written last).
    """
    backups = state_dir(root) / "journal"
    shutil.rmtree(backups, ignore_errors=True)
    backups.mkdir(parents=True)
    entries = []
    for i, c in enumerate(changes):
        dest = root / c.path
        existed = dest.is_file()
        entry: dict[str, Any] = {"path": c.path, "existed": existed, "backup": i, "mode": None, "owner": None}
        if existed:
            st = dest.stat()
            entry["mode"], entry["owner"] = stat.S_IMODE(st.st_mode), [st.st_uid, st.st_gid]
            atomic_write(backups / str(i), dest.read_bytes(), 0o600)
        entries.append(entry)
    fault_point()
    atomic_write(_journal(root), dumps({"entries": entries}), 0o644)
    fault_point()
    for c in changes:
        dest = root / c.path
        if c.data is None:
            remove_file(dest)
        else:
            atomic_write(dest, c.data, c.mode)
        drop_pycache(dest)
        fault_point()
    _journal(root).unlink()
    _fsync_dir(state_dir(root))
    fault_point()
    shutil.rmtree(backups, ignore_errors=True)
