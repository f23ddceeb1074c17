"""Canonical relative paths, and walking them under a root without following a symbolic link.

One definition for every path that names a file of a target: a patch's ``---``/``+++`` lines, a
``[binary]`` entry, the manifest's and the journal's records. A canonical path is relative, uses
``/`` only, has no empty, ``.`` or ``..`` segment, no trailing ``/``, no backslash, no control or
formatting character (a tab, a newline, a right-to-left override: the path would show as another), and does
not enter the tool's own state folder. Two spellings of one file would otherwise be two keys in the manifest
(a fix silently dropped), and ``..`` or an absolute path would reach outside the target.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from hashlib import _Hash as Hash

STATE_DIR = ".fixpack"
JOURNAL = "journal.json"  # a run's journal in it (fixpack.groups, fixpack.transaction)


ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
ID_MAX = 100  # characters: a fix or profile name is part of file names (.rebase/<name>.undo.json, reports)
VERSION_MAX = 2**63 - 1  # a fix's version is a TOML integer: 64-bit signed
VERSION_RULE = f"an integer from 1 to {VERSION_MAX}"


def link_to(path: str | os.PathLike[str]) -> str:
    """Where the symbolic link ``path`` leads, for a message: a link that changed since it was looked at (a folder
    again, gone: a race with another program) says so instead of raising (``os.readlink``'s EINVAL, ENOENT)."""
    try:
        return os.readlink(path)
    except OSError:
        return "(no link now: it changed while fixpack looked at it)"


def is_version(value: object) -> bool:
    """Whether ``value`` can be a fix's version (``fix.toml``, ``variant.toml``, the manifest): an int, not a
    bool, from 1 to ``VERSION_MAX``."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= VERSION_MAX


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a fix id or profile name (None when it can)."""
    if not isinstance(name, str) or not ID_RE.fullmatch(name):
        return "names are lower-case letters, digits, '.', '_', '-', starting with a letter or digit"
    if len(name) > ID_MAX:
        return f"{len(name)} characters, more than the {ID_MAX} a name may have"
    return None


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a canonical path inside a target (None when it is one)."""
    if not isinstance(path, str) or path == "":
        return "an empty path"
    if "\\" in path:
        return "a backslash (paths use '/' only)"
    if "\x00" in path:
        return "a NUL byte"
    hidden = next((c for c in path if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")), None)
    if hidden is not None and unicodedata.category(hidden) == "Cs":  # (a byte read with surrogateescape)
        return "a byte that is not UTF-8 (a file of a Python package is named in UTF-8)"
    if hidden is not None:
        return (f"a control or formatting character, U+{ord(hidden):04X} {unicodedata.name(hidden, '')}".rstrip() +
                " (the path shows as another, or not at all, where it is printed)")
    if path.startswith("/"):
        return "an absolute path (paths are relative to the target root)"
    if path.endswith("/"):
        return "a trailing '/'"
    parts = path.split("/")
    if "" in parts:
        return "a doubled '/'"
    if "." in parts:
        return "a '.' segment"
    if ".." in parts:
        return "a '..' segment" + (" (climbs out of the target)" if climbs_out(parts) else "")
    if parts[0] == STATE_DIR:
        return f"the tool's own state folder {STATE_DIR}/"
    return None


def climbs_out(parts: list[str] | tuple[str, ...]) -> bool:
    """Whether a '..' of the path ``parts`` leads above where the path starts (``pkg/../../x``; ``pkg/../pkg/x``
    stays inside: not canonical, but no escape)."""
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            return True
    return False


def link_on_the_way(root: Path, rel: str) -> str | None:
    """The first segment of ``root/rel`` (rel canonical) that is a symbolic link, as a relative path;
    None when every existing segment is a real folder or file. Missing segments end the walk: a file
    a run creates has no link on its way."""
    current = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return "/".join(parts[: i + 1])
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            return None  # a file where a folder is expected: the caller's read or write fails plainly
    return None


def file_on_the_way(root: Path, rel: str) -> str | None:
    """The first folder on the way to ``root/rel`` (rel canonical) that is something else now (a file, a link), as a
    relative path: ``rel`` cannot be there, and removing ``rel`` means removing that; None when every folder on the
    way is a real one or missing."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        try:
            st = os.lstat(root.joinpath(*parts[:i]))
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return "/".join(parts[:i])
    return None


def folder_link(root: Path, path: Path) -> str | None:
    """The first folder on the way from ``root`` to ``path`` (a file inside it: a pack's own file, read or
    written) that is a symbolic link, as a relative path ("fixes/x"); None when every folder on the way is a
    real one (the file itself is :func:`not_a_pack_file`'s to judge). A pack's files are read and written in
    the pack's own folder: a linked ``fixes/``, fix or variant folder, or ``profiles/`` could lead anywhere."""
    parent = path.parent.relative_to(root).as_posix()
    return None if parent == "." else link_on_the_way(root, parent)


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when something is there that is no regular file, a symbolic link followed: "a folder",
    "a FIFO (named pipe)", ..., "a symbolic link to X, which is missing" (or "... which is a folder", ...);
    None for a regular file (or a link to one) and when nothing is there. Reads nothing: a FIFO would block
    a read until something writes to it."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    if not stat.S_ISLNK(st.st_mode):
        return next((what for test, what in _KINDS if test(st.st_mode)), "not a regular file")
    link = f"a symbolic link to {link_to(path)}"
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{link}, which is missing" if exc.errno == 2 else f"{link}, which cannot be reached ({exc.strerror})"
    if stat.S_ISREG(st.st_mode):
        return None
    return f"{link}, which is " + next((what for test, what in _KINDS if test(st.st_mode)), "not a regular file")


def not_a_file_here(path: Path) -> str | None:
    """What is at ``path`` for a reader that never follows a link there (``follow=False``): "a symbolic link to X"
    for any link, else :func:`not_a_file`'s words (None: a regular file, or nothing)."""
    return f"a symbolic link to {link_to(path)}" if path.is_symlink() else not_a_file(path)


def not_a_pack_file(path: Path) -> str | None:
    """What is at ``path`` for a reader of the pack's own files (a profile, ``fix.toml``, ``variant.toml``,
    ``fixes/series``, a lock): :func:`not_a_file`'s words, and "a symbolic link to X" for a link to a regular
    file too. A pack's file is read where it is, never through a link, as a patch file and a ``[binary]`` source
    are: a link could lead to any file of the machine. None: a regular file, or nothing."""
    return not_a_file(path) or not_a_file_here(path)


class TooLargeError(ValueError):
    """A file larger than its reader's cap (``size`` bytes, ``limit`` the cap), refused without reading it
    (:func:`read_regular` with a limit; :func:`fixpack.documents.read_capped`)."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        super().__init__(f"{path}: {size} bytes, more than {limit}")
        self.path, self.size, self.limit = path, size, limit

    def said(self, kind: str) -> str:
        """The words after the file's name: "N bytes, more than the 4 MiB a pack's <kind> may have"."""
        cap = f"{self.limit >> 20} MiB" if self.limit >= 1 << 20 and not self.limit % (1 << 20) else \
            f"{self.limit} bytes"
        return f"{self.size} bytes, more than the {cap} {kind} may have"


def _open_regular(path: Path, follow: bool) -> tuple[BinaryIO, int, os.stat_result]:
    """``path`` open for reading without blocking (``follow=False``: never through a link at ``path``, ELOOP), its
    descriptor and its fstat; anything that is no regular file is an OSError (EINVAL), closed unread."""
    import errno

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), fd, st


def read_regular(path: Path, limit: int | None = None, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (a link followed), opened without blocking: a FIFO put there
    since :func:`not_a_file` looked is an OSError (EINVAL) rather than a read that waits for ever. ``limit``:
    a file larger is TooLargeError, its size told by the open file, never read (at most ``limit + 1`` bytes
    are, should it grow meanwhile). ``follow=False``: a symbolic link at ``path`` itself is an OSError
    (ELOOP, ``O_NOFOLLOW``), never read through (the state's files; a file the tool may replace)."""
    f, fd, st = _open_regular(path, follow)
    with f:
        if limit is None:
            return f.read()
        if st.st_size > limit:
            raise TooLargeError(path, st.st_size, limit)
        data = f.read(limit + 1)
        if len(data) > limit:  # it grew since the fstat
            raise TooLargeError(path, max(os.fstat(fd).st_size, len(data)), limit)
        return data


def holds_bytes(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file (not a link) holding exactly ``data``: read as :func:`read_regular` reads
    it, no further than ``len(data)`` and one byte (a FIFO, a link, a larger file, nothing there: False)."""
    try:
        return read_regular(path, len(data), follow=False) == data
    except (OSError, TooLargeError):
        return False


HASH_BLOCK = 1 << 20  # the bytes of a file :func:`sha256_regular` holds at a time


def hash_regular(path: Path, h: Hash, follow: bool = False) -> None:
    """Feed the bytes of the regular file ``path`` to ``h``, opened as :func:`read_regular` opens it (without
    blocking, never through a link unless ``follow``; anything else an OSError) and read in blocks of
    ``HASH_BLOCK``: a file of any size is hashed without being held."""
    f, _fd, _st = _open_regular(path, follow)
    with f:
        for block in iter(lambda: f.read(HASH_BLOCK), b""):
            h.update(block)


def sha256_regular(path: Path, follow: bool = False) -> str:
    """The sha256 (hex) of the regular file ``path``, read in blocks (:func:`hash_regular`)."""
    h = hashlib.sha256()
    hash_regular(path, h, follow)
    return h.hexdigest()


def shown_path(path: str | None) -> str:
    """``path`` as a message shows it: as it is, or in double quotes where it begins or ends in whitespace. git makes
    such a name (``diff --git a/x.py  b/x.py `` with a TAB after it on the ``---``/``+++`` lines), and a message that
    printed it raw read as another file ("x.py : no such file"). Control characters never get here (refused at
    parse, :func:`path_problem`); a double quote inside a quoted name is escaped."""
    p = path or ""
    return f'"{p.replace(chr(34), chr(92) + chr(34))}"' if p != p.strip() else p
