"""File I/O for the engine's writes: atomic writes (temp file, fsync, rename), removals, the state
folder, stale bytecode, and the two fault hooks every write passes through.

The hooks are for tests and ``tools/stress.py`` only: ``$FIXPACK_FAULT_AT=N`` kills the process
uncleanly at the N-th write point; ``$FIXPACK_IO_FAULT=N:ERRNO`` makes the N-th I/O call fail with
that errno (``N:ERRNO+``: every call from the N-th). Unset, each costs one lookup. They are the only
environment the engine reads, so that a crash can be injected into a real, separate process.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import DamagedStateError, MismatchError
from .safepath import JOURNAL, STATE_DIR, link_to
from .structs import dataclass

TMP_SUFFIX = ".fixpack-tmp"
FAULT_ENV = "FIXPACK_FAULT_AT"  # crash-test hook: os._exit at the Nth write point (tests only)
IO_FAULT_ENV = "FIXPACK_IO_FAULT"  # I/O-fault hook: "N:ENOSPC" fails the Nth I/O call, "N:EROFS+" every one from N
_fault_counter = 0
_io_counter = 0


@dataclass(frozen=True)
class FileChange:
    """A file to write (``data``) or remove (``data is None``), relative to the target root; ``mode`` and
    ``owner`` (uid, gid) for a file it creates (None: the file's own, or 0o644 and the running user's)."""

    path: str
    data: bytes | None
    mode: int | None = None
    owner: tuple[int, int] | None = None


def reset_fault_counters() -> None:
    """Start counting write points and I/O calls from zero (a test, or a forked run of the stress tool)."""
    global _fault_counter, _io_counter
    _fault_counter = _io_counter = 0


def io_calls() -> int:
    """How many I/O calls went through the hook since the counters were reset (while a hook is set)."""
    return _io_counter


def fault_point() -> None:
    """A write point. With $FIXPACK_FAULT_AT=N the process dies here, uncleanly, at the N-th point."""
    global _fault_counter
    limit = os.environ.get(FAULT_ENV)
    if not limit:
        return
    _fault_counter += 1
    if _fault_counter == _hook_number(FAULT_ENV, limit, "N kills the run at its N-th write point"):
        os._exit(137)


def _hook_number(env: str, value: str, what: str) -> int:
    """A test hook's count (``$env`` = ``value``); BadInputError (exit 2) for one that is not a number."""
    if not value.isascii() or not value.isdigit():
        from .errors import BadInputError

        raise BadInputError(f"${env}={value!r}: a test hook ({what}) takes a number; unset it ({env}= or unset {env})")
    return int(value)


def io_point(path: Path | str) -> None:
    """An I/O call about to happen. With $FIXPACK_IO_FAULT=N:ERRNO it fails here with that errno, as the
    kernel would (disk full, read-only remount, permission, I/O error), at the N-th call (or from the
    N-th on with a trailing ``+``). Tests and tools/stress.py use it; unset, it costs one lookup."""
    global _io_counter
    spec = os.environ.get(IO_FAULT_ENV)
    if not spec:
        return
    _io_counter += 1
    at, _, name = spec.partition(":")
    what = "N:ERRNO fails the N-th I/O call with ERRNO (a name such as ENOSPC), N:ERRNO+ every one from it"
    n = _hook_number(IO_FAULT_ENV, at, what)
    word = name.removesuffix("+") or "EIO"
    code = getattr(errno, word, None) if word.startswith("E") else None
    if not isinstance(code, int):
        from .errors import BadInputError

        raise BadInputError(f"${IO_FAULT_ENV}={spec!r}: {word!r} is no errno name; a test hook ({what}): unset it")
    if _io_counter == n or (name.endswith("+") and _io_counter > n):
        raise OSError(code, os.strerror(code), str(path))


# --- I/O primitives: every write goes through one of these (and so through the fault hook) -------

def write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    if os.environ.get(IO_FAULT_ENV):  # a failing write has usually written part of its bytes already
        half = len(view) // 2
        os.write(fd, view[:half])
        view = view[half:]
        io_point(path)
    while view:
        view = view[os.write(fd, view):]


def fsync_fd(fd: int, path: Path) -> None:
    io_point(path)
    os.fsync(fd)


def unlink(path: Path) -> None:
    io_point(path)
    os.unlink(path)


def mkdir(path: Path) -> None:
    io_point(path)
    os.mkdir(path, 0o755)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsync_fd(fd, folder)
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TMP_SUFFIX}")


def temp_folder(path: Path) -> Path | None:
    """``path``'s temp path (:func:`temp_path`) when a folder is there (not a link to one), else None: the write
    beside ``path`` fails there, and so would a rollback, which removes a killed write's temp file first."""
    tmp = temp_path(path)
    try:
        return tmp if stat.S_ISDIR(os.lstat(tmp).st_mode) else None
    except (FileNotFoundError, NotADirectoryError):
        return None


def exists(path: Path) -> bool:
    return os.path.lexists(path)


def make_parents(folder: Path) -> None:
    missing = []
    while not exists(folder):
        missing.append(folder)
        folder = folder.parent
    for f in reversed(missing):
        mkdir(f)


def unlink_quietly(path: Path) -> None:
    try:
        if exists(path):
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
        to = link_to(folder)
        way = "Remove the link"
        if os.path.isfile(root / to / JOURNAL):  # (read for the message only, never used as state)
            way = (f"It leads to a folder with a journal: if that is this target's state folder, moved by another "
                   f"program (a run that died leaves a journal to roll back), put it back ({state_put_back(root, to)}) "
                   f"and run again; else remove the link")
        raise MismatchError(f"{folder} is a symbolic link (to {to}); fixpack keeps its state inside the target only. "
                            f"{way}")
    if not stat.S_ISDIR(st.st_mode):
        raise DamagedStateError(folder, "it is not a folder (fixpack keeps its state in a folder of that name)")
    return folder


def state_put_back(root: Path, to: str) -> str:
    """The shell command that puts the folder a state folder swapped for a link leads to (``to``, the link's text:
    relative to ``root``, or absolute) back in the link's place, ``<root>/.fixpack``."""
    import shlex  # only for a message

    folder = root / STATE_DIR
    return f"rm -- {shlex.quote(str(folder))} && mv -T -- {shlex.quote(str(root / to))} {shlex.quote(str(folder))}"


def forget_state(root: Path) -> None:
    """Remove ``.fixpack/`` once it holds nothing (after a full revert, or a rolled-back first run),
    so that a reverted target is byte for byte the one before the first apply."""
    folder = state_dir(root)
    try:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    except OSError:  # another run's file, or a read-only file system: an empty folder is harmless
        pass


# --- writes --------------------------------------------------------------------------------

NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}


def chown_to(path: Path, owner: tuple[int, int] | None) -> None:
    if owner is not None and owner != (os.getuid(), os.getgid()):
        try:
            os.chown(path, *owner, follow_symlinks=False)
        except PermissionError:  # not root: the file is ours anyway
            pass


def set_mode_owner(folder: Path, mode: int, owner: tuple[int, int] | None) -> None:
    """Give a real folder (never a link: lstat first, chown without following) ``mode`` and, running as root,
    ``owner``: a folder a run made again, as it was before (its record: :mod:`fixpack.kept`)."""
    st = os.lstat(folder)
    if stat.S_ISDIR(st.st_mode):
        io_point(folder)
        if owner is not None and os.geteuid() == 0:
            chown_to(folder, owner)  # before the mode: a chown may clear set-id bits
        os.chmod(folder, mode)


def remove_file(path: Path) -> None:
    if exists(path):
        unlink(path)
        fsync_dir(path.parent)


def pycache_files(path: Path) -> list[Path]:
    cache = path.parent / "__pycache__"
    if path.suffix != ".py" or cache.is_symlink() or not cache.is_dir():
        return []
    return sorted(p for p in cache.glob(f"{path.stem}.*.pyc") if _regular(p))  # bytecode only: a folder or link of
    # that name is no bytecode a run removes (a folder made the rollback fail on its own journal's entry)


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def drop_pycache(path: Path) -> bool:
    """Remove ``__pycache__/<stem>.*.pyc`` next to a patched module (no stale bytecode runs); whether there was any."""
    found = pycache_files(path)
    for pyc in found:
        if exists(pyc):
            unlink(pyc)
    return bool(found)


def drop_pycache_quietly(path: Path) -> None:
    """During a rollback the original bytes are what matters; a .pyc that stays is checked against the
    source's mtime and size by Python anyway. A ``__pycache__`` this leaves empty goes too (an import since the
    killed run made it): the folders around it can go then, as a run's own deletions would leave them."""
    try:
        if drop_pycache(path):
            (path.parent / "__pycache__").rmdir()
    except OSError:  # not empty (other modules' bytecode), or gone: leave it
        pass


