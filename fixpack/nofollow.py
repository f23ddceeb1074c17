"""Writes under a root through folders opened one from the other without following a symbolic link: a target's
files (a run's writes, removals, its rollback and the folders a deletion empties), its state folder's journal and
backups, and a pack's files that a rebase writes. A folder swapped for a link between a caller's checks and the
write (another program racing the run) is an OSError (ELOOP, naming it), never written, read or removed through;
every call passes the fault hook (:func:`fixpack.fsio.io_point`) as :mod:`fixpack.fsio`'s primitives do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from .fsio import NO_LINK, TMP_SUFFIX, fsync_fd, io_point, make_parents, write_all


def rename_at(fd: int, src: str, dst: str, path: Path) -> None:
    """Rename ``src`` to ``dst``, both names in the open folder ``fd`` (``path``: ``dst``'s, for the hook)."""
    io_point(path)
    os.rename(src, dst, src_dir_fd=fd, dst_dir_fd=fd)


def write_under(root: Path, rel: str, data: bytes | None, new: bool = False, mode: int | None = None,
                owner: tuple[int, int] | None = None, sync_dir: bool = True) -> None:
    """Write ``data`` to ``root/rel`` as :func:`atomic_write` does (a temp file beside it, fsync, rename; the folder
    fsynced unless ``sync_dir`` is False: the caller syncs it), or remove it (``data`` None; nothing there: nothing
    done), with every folder from ``root`` on opened from the one before without following a symbolic link
    (``O_NOFOLLOW``): a link put in place of one, even between a caller's look and this write, is an OSError (ELOOP,
    naming it), never written or removed through. Missing folders are made (0o755). The file keeps its mode, owner and
    extended attributes unless ``mode`` / ``owner`` (uid, gid) say otherwise (0o644 and the running user's when new);
    ``new``: the file must not be there (a hard link of the temp file, not a rename: FileExistsError where one
    appeared). ``rel``: "/"-separated, canonical."""
    *folders, name = rel.split("/")
    try:
        fd = _walk(root, folders, data is not None, rel)
    except FileNotFoundError:
        if data is None:
            return  # nothing to remove
        raise
    try:
        if data is None:
            try:
                io_point(root / rel)
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                return
        else:
            _write_at(fd, name, root / rel, data, new, mode, owner)
        if sync_dir:
            io_point(root / rel)
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None,
                 sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` through a temp file beside it, fsync and rename (:func:`write_under`'s write, in
    ``path``'s folder, made first where missing; the folders on the way are followed as given: a pack's, a report's).

    The file keeps its mode, owner and extended attributes unless ``mode`` / ``owner`` (uid, gid) say otherwise. The
    temp file is created exclusively and never through a link, and a link at ``path`` is replaced, never written
    through; when any step fails the temp file is removed before the error goes up. With ``sync_dir`` False the caller
    fsyncs the folder itself (a transaction does it once per folder, before its journal goes).
    """
    make_parents(path.parent)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _write_at(fd, path.name, path, data, False, mode, owner)
        if sync_dir:
            io_point(path)
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_at(fd: int, name: str, path: Path, data: bytes, new: bool, mode: int | None,
              owner: tuple[int, int] | None) -> None:
    """:func:`write_under`'s write of ``data`` as ``name`` in the open folder ``fd`` (``path``: its name in errors)."""
    try:
        st: os.stat_result | None = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    regular = st is not None and stat.S_ISREG(st.st_mode)
    if st is not None and regular:
        mode = stat.S_IMODE(st.st_mode) if mode is None else mode
        owner = (st.st_uid, st.st_gid) if owner is None else owner
    tmp = f".{name}{TMP_SUFFIX}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=fd)
    _create_at(fd, tmp, path, data, mode if mode is not None else 0o644, owner, name if regular else None)
    try:
        if new:  # never over a file that appeared since the caller looked
            io_point(path)
            os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=fd)
        else:
            rename_at(fd, tmp, name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


def _keep_xattrs_at(fd: int, name: str, out: int) -> None:
    """Give the open temp file ``out`` the extended attributes of ``name`` in the folder ``fd`` (the file it replaces,
    opened without following a link): an ACL, an SELinux label, ``user.*``, each where the file system and the user's
    rights allow (one that cannot be set is left out, as before: a rename gives the new file none); never
    ``security.capability``, which the kernel drops from a file written to."""
    try:
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    except OSError:
        return
    try:
        names = os.listxattr(src)
    except (OSError, AttributeError):
        names = []
    try:
        for key in names:
            if key == "security.capability":
                continue
            with contextlib.suppress(OSError):
                os.setxattr(out, key, os.getxattr(src, key))
    finally:
        os.close(src)


def move_under(src: Path, root: Path, rel: str) -> None:
    """Rename the file ``src`` (a backup, on the same file system) to ``root/rel``, the folders on the way opened
    as :func:`write_under` opens them (made where missing; a link among them: OSError ELOOP), the folder fsynced."""
    *folders, name = rel.split("/")
    fd = _walk(root, folders, True, rel)
    try:
        io_point(root / rel)
        os.rename(src, name, dst_dir_fd=fd)
        io_point(root / rel)
        os.fsync(fd)
    finally:
        os.close(fd)


def prune_under(root: Path, rel: str) -> None:
    """Remove the folder ``root/rel`` and those above it up to ``root`` while they are empty (a deletion left them
    so), each through its parent opened as :func:`write_under` opens it: never a folder a link leads to."""
    folders = rel.split("/") if rel not in ("", ".") else []
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    try:
        for part in folders[:-1]:
            try:
                fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
            except OSError:
                return
        for part, fd in zip(reversed(folders), reversed(fds)):
            try:
                os.rmdir(part, dir_fd=fd)
            except OSError:  # not empty (or no folder): done
                return
    finally:
        for fd in fds:
            os.close(fd)


def _walk(root: Path, folders: list[str], make: bool, rel: str) -> int:
    """The folder ``root/folders...`` opened (a descriptor the caller closes), each part from the one before
    without following a link: ELOOP naming one that is; FileNotFoundError for a missing one unless ``make``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open(root, flags)
    try:
        for i, part in enumerate(folders):
            try:
                inner = _open_folder(fd, part, flags, make)
            except OSError as exc:  # (Linux says ENOTDIR for a link opened with O_DIRECTORY | O_NOFOLLOW)
                if isinstance(exc, FileNotFoundError):
                    raise
                try:
                    link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                except OSError:
                    link = False
                if link:
                    raise OSError(errno.ELOOP, f"{'/'.join(folders[: i + 1])} is a symbolic link (never written "
                                               f"through: remove it)", str(root / rel)) from exc
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_folder(fd: int, part: str, flags: int, make: bool) -> int:
    """The folder ``part`` in the folder ``fd``, opened without following a link; made first where missing and
    ``make`` (else FileNotFoundError)."""
    try:
        return os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
    except FileNotFoundError:
        if not make:
            raise
        os.mkdir(part, 0o755, dir_fd=fd)
        return os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)


def back_up_under(root: Path, rel: str, backup: str) -> tuple[bytes, os.stat_result] | None:
    """The regular file ``root/rel`` read (its bytes and stat) and given a second name ``root/backup`` (a hard link;
    a copy with its permission bits where the file system cannot link), both reached as :func:`write_under` reaches
    them; None where no regular file is there (none, or a link or something else: the run writes a new one)."""
    *folders, name = rel.split("/")
    *held, kept = backup.split("/")
    try:
        fd = _walk(root, folders, False, rel)
    except FileNotFoundError:
        return None
    try:
        try:
            src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link (ELOOP) or a FIFO it cannot read: no regular file
            if exc.errno in (errno.ELOOP, errno.ENXIO):
                return None
            raise
        try:
            st = os.fstat(src)
            if not stat.S_ISREG(st.st_mode):
                return None
            data = b"".join(iter(lambda: os.read(src, 1 << 20), b""))
        finally:
            os.close(src)
        to = _walk(root, held, True, backup)
        try:
            io_point(root / backup)
            try:
                os.link(name, kept, src_dir_fd=fd, dst_dir_fd=to, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in NO_LINK:
                    raise
                _create_at(to, kept, root / backup, data, stat.S_IMODE(st.st_mode) & 0o777)
        finally:
            os.close(to)
        return data, st
    finally:
        os.close(fd)


def _create_at(fd: int, name: str, path: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None,
               xattrs_of: str | None = None) -> None:
    """A new file ``name`` (none may be there; never through a link) in the open folder ``fd``, holding ``data``,
    fsynced, with ``owner`` (where it may be given) and ``mode`` (not through the umask), and the extended attributes
    of ``xattrs_of`` (the file it replaces, in that folder); removed again when a step fails. ``path``: its name in
    errors."""
    io_point(path)
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
    try:
        try:
            write_all(out, data, path)
            fsync_fd(out, path)
            if owner is not None and owner != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):  # not root: the file is ours anyway
                    os.fchown(out, *owner)  # before the mode: a chown clears set-id bits
            os.fchmod(out, mode)
            if xattrs_of is not None:
                _keep_xattrs_at(fd, xattrs_of, out)
        finally:
            os.close(out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
        raise


def folder_under(root: Path, rel: str) -> None:
    """Make the folder ``root/rel`` (and those on the way) as :func:`write_under` reaches them."""
    os.close(_walk(root, rel.split("/"), True, rel))


def clear_under(root: Path, rel: str, flat: bool = False) -> None:
    """Remove the folder ``root/rel`` with what it holds, the folders on the way opened as :func:`write_under` opens
    them and each entry removed through its folder's descriptor: a link in it is removed as the entry it is, never
    followed (a folder swapped for a link on the way is ELOOP: nothing outside is removed). ``flat``: files only, a
    folder in it an OSError (left for the next run). Nothing there: nothing done."""
    *folders, name = rel.split("/")
    try:
        parent = _walk(root, folders, False, rel)
    except FileNotFoundError:
        return
    try:
        _clear_at(parent, name, flat)
    finally:
        os.close(parent)


def _clear_at(parent: int, name: str, flat: bool) -> None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except FileNotFoundError:
        return
    try:
        for entry in os.listdir(fd):  # (no fault hook: a backup that will not go is said, never a failed run)
            if not flat and stat.S_ISDIR(os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode):
                _clear_at(fd, entry, flat)
            else:
                os.unlink(entry, dir_fd=fd)  # (a folder raises: left)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)
