"""An in-memory overlay over a target root: reads fall through to disk, writes stay in memory.

Every file of a run is computed here first; only when the whole profile applies does the engine
turn the overlay into :class:`fixpack.fsio.FileChange` records and write them. Text is decoded with
``surrogateescape`` so that any byte sequence round-trips exactly.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from .errors import BadInputError, MismatchError
from .fsio import FileChange
from .safepath import STATE_DIR, link_on_the_way, not_a_file, path_problem

_ABSENT = object()


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class Tree:
    """The files of one target root as a run sees them (disk plus pending changes)."""

    def __init__(self, root: Path, _real_root: Path | None = None, _checked: set[str] | None = None) -> None:
        self.root = root
        self._real_root = _real_root or root.resolve()
        self._text: dict[str, str | None] = {}
        self._mode: dict[str, int] = {}
        self._owner: dict[str, tuple[int, int]] = {}  # a file a rename makes: its source's owner
        self._delta: dict[str, int] = {}  # running offset per file, left by the fixes placed so far
        self._checked = _checked if _checked is not None else set()  # paths already found inside the root

    def _disk(self, path: str) -> Path:
        """``root/path`` once it is known to be a canonical path reached without a symbolic link and
        naming a regular file (or nothing yet): a link could lead out of the target, or into the
        tool's own state folder, and writing would replace the link with a file."""
        dest = self.root / path
        if path in self._checked:
            return dest
        problem = path_problem(path)
        if problem:
            raise BadInputError(f"{path!r} is not a canonical path inside the target {self.root}: {problem}")
        link = link_on_the_way(self.root, path)
        if link is not None:
            real = (self.root / link).resolve()
            if real != self._real_root and self._real_root not in real.parents:
                raise MismatchError(_outside_link(self.root, link, real, path))
            raise MismatchError(_inside_link(self.root, link, real, path))
        what = not_a_file(dest)  # read nothing first: a FIFO would block the read
        if what is not None:
            raise MismatchError(f"{dest} is not a regular file ({what}); a fix changes files only. Fix the image")
        self._checked.add(path)
        return dest

    def read(self, path: str) -> str | None:
        if path in self._text:
            return self._text[path]
        dest = self._disk(path)
        return decode(dest.read_bytes()) if dest.is_file() else None

    def mode(self, path: str) -> int | None:
        if path in self._mode:
            return self._mode[path]
        dest = self._disk(path)
        return stat.S_IMODE(dest.stat().st_mode) if dest.is_file() else None

    def owner(self, path: str) -> tuple[int, int] | None:
        if path in self._owner:
            return self._owner[path]
        dest = self._disk(path)
        st = dest.stat() if dest.is_file() else None
        return (st.st_uid, st.st_gid) if st else None

    def write(self, path: str, text: str | None, mode: int | None = None,
              owner: tuple[int, int] | None = None) -> None:
        self._disk(path)
        self._text[path] = text
        if mode is not None:
            self._mode[path] = mode
        if owner is not None:
            self._owner[path] = owner

    def fork(self) -> Tree:
        other = Tree(self.root, self._real_root, self._checked)
        other._text = dict(self._text)
        other._mode = dict(self._mode)
        other._owner = dict(self._owner)
        other._delta = dict(self._delta)
        return other

    def adopt(self, other: Tree) -> None:
        self._text = other._text
        self._mode = other._mode
        self._owner = other._owner
        self._delta = other._delta

    def delta(self, path: str) -> int:
        """The running offset in ``path``: how far the last hunk placed in it lay from its stated line
        (a later fix's stated lines are off by as much, as GNU patch carries it inside one patch)."""
        return self._delta.get(path, 0)

    def set_delta(self, path: str, offset: int) -> None:
        self._delta[path] = offset

    def changes(self) -> list[FileChange]:
        """The pending changes that differ from disk, in path order."""
        out = []
        for path in sorted(set(self._text) | set(self._mode)):
            dest = self.root / path
            on_disk = decode(dest.read_bytes()) if dest.is_file() else None
            text = self._text.get(path, on_disk)
            disk_mode = stat.S_IMODE(dest.stat().st_mode) if dest.is_file() else None
            mode = self._mode.get(path, disk_mode)
            if text == on_disk and (text is None or mode == disk_mode):
                continue
            owner = self._owner.get(path) if on_disk is None else None  # a file there keeps its own
            out.append(FileChange(path, None if text is None else encode(text), mode, owner))
        return out


def file_hashes(tree: Tree, paths: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """Each path's sha256 in ``tree`` now (None: the file does not exist)."""
    out: dict[str, str | None] = {}
    for p in paths:
        text = tree.read(p)
        out[p] = hashlib.sha256(encode(text)).hexdigest() if text is not None else None
    return out


def _copy_in_place(root: Path, link: str, real: Path, path: str) -> str:
    """The command that replaces the link ``root/link`` with a real file (``link`` is ``path``) or folder
    holding what it points to (``real``)."""
    from shlex import quote  # for these messages only

    src, dst = quote(str(real)), quote(str(root / link))
    return f"cp --remove-destination {src} {dst}" if link == path else f"rm {dst} && cp -a {src} {dst}"


def _inside_link(root: Path, link: str, real: Path, path: str) -> str:
    """Why ``path`` is refused when ``root/link`` is a symbolic link to a place inside the target: which link,
    where it points, and the command that replaces it with a copy of that (writing through it would change the
    place it points to as well, and writing the file would replace the link). A link into the target's state
    folder (planted: no release has one) is to be removed, not copied."""
    from shlex import quote  # for this message only

    head = (f"{root / link} is a symbolic link (to {os.readlink(root / link)}), on the way to {path}; fixpack "
            f"reads and writes regular files in real folders only (writing would replace the link). ")
    state = root.resolve() / STATE_DIR
    if not real.exists():
        return head + (f"It points to nothing ({real} does not exist): remove it (rm {quote(str(root / link))}) and "
                       f"put the release's {'file' if link == path else 'folder'} in its place, then run again")
    if real == state or state in real.parents:
        return head + (f"It leads into the target's state folder {STATE_DIR}/, which no release has: remove it "
                       f"(rm {quote(str(root / link))}), then run again")
    return head + (f"Replace the link with a real {'file' if link == path else 'folder'} holding what it points "
                   f"to ({_copy_in_place(root, link, real, path)}), then run again")


def _outside_link(root: Path, link: str, real: Path, path: str) -> str:
    """Why ``path`` is refused when ``root/link`` (a folder on its way, or the file itself) is a symbolic
    link that leads out of the target: which link, where it points, and what to do."""
    what = "the file" if link == path else f"a folder on the way to {path}"
    cmd = _copy_in_place(root, link, real, path)
    return (f"{root / link} ({what}) is a symbolic link to {os.readlink(root / link)}, which resolves to {real}, "
            f"outside the target root {root}; fixpack neither reads nor writes through a link out of the "
            f"target. Replace the link with a real {'file' if link == path else 'folder'} holding what "
            f"it points to ({cmd}), or point --root at a copy without it")
