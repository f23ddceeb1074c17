"""An in-memory overlay over a target root: reads fall through to disk, writes stay in memory.

Every file of a run is computed here first; only when the whole profile applies does the engine
turn the overlay into :class:`fixpack.fsio.FileChange` records and write them. Text is decoded with
``surrogateescape`` so that any byte sequence round-trips exactly.
"""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

from .binpatch import MAX_BINARY_BYTES
from .errors import BadInputError, MismatchError
from .fsio import FileChange
from .safepath import STATE_DIR, TooLargeError, link_on_the_way, link_to, not_a_file, path_problem, read_regular

_ABSENT = object()


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


MAX_IMAGE_FILE_BYTES = MAX_BINARY_BYTES  # the largest file of a target a run reads: a fix's new binary file's cap


def _on_disk(dest: Path) -> bytes | None:
    """The bytes of the target's file ``dest`` (None: no regular file there), read without blocking and no further
    than ``MAX_IMAGE_FILE_BYTES``: a larger one (a core dump, a planted file) is MismatchError (exit 3) naming it,
    its size told, never read whole into memory."""
    if not dest.is_file():
        return None
    try:
        return read_regular(dest, MAX_IMAGE_FILE_BYTES)
    except TooLargeError as exc:
        raise MismatchError(f"{dest}: {exc.said('a file of the target that a fix or component reads')} (no source "
                            f"file of a release is): put the release's file back there, then run again") from None


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
            raise MismatchError(link_refused(self.root, self._real_root, link, path))
        what = not_a_file(dest)  # read nothing first: a FIFO would block the read
        if what is not None:
            raise MismatchError(f"{dest} is {what}, not a regular file: the run reads and writes this path as a "
                                f"file (of a fix or a component of the profile). Move it away, or put the release's "
                                f"file back there, then run again")
        self._checked.add(path)
        return dest

    def read(self, path: str) -> str | None:
        if path in self._text:
            return self._text[path]
        data = _on_disk(self._disk(path))
        return decode(data) if data is not None else None

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
            data = _on_disk(dest)
            on_disk = decode(data) if data is not None else None
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


def link_refused(root: Path, real_root: Path, link: str, path: str) -> str:
    """Why ``path`` is refused when ``root/link`` (the file itself, or a folder on its way) is a symbolic link:
    which link, where it points, and the way on, a command: replace it with a real file or folder holding what it
    points to (``cp``), or remove it where a copy cannot stand for it (a link to nothing, a loop, into the target's
    state folder, a folder that holds the link, a folder where the file is patched). A link out of the target may
    also be left as it is by pointing ``--root`` at a copy without it. Never raises."""
    from shlex import quote  # for this message only

    file = link == path
    dst = root / link
    try:
        real: Path | None = dst.resolve(strict=True)
    except (OSError, RuntimeError):  # a link to nothing, or a loop (RuntimeError before Python 3.13)
        real = None
    inside = real is not None and (real == real_root or real_root in real.parents)
    outside = "" if inside else f", outside the target root {root}"
    where = "" if real is None else f", which resolves to {real}{outside}"
    head = (f"{dst} ({'the file' if file else f'a folder on the way to {path}'}) is a symbolic link to "
            f"{link_to(dst)}{where}; "
            f"fixpack reads and writes regular files in real folders only (writing would replace the link, and "
            f"writing through it would change what it points to). ")
    state = real_root / STATE_DIR
    rm = f"rm {quote(str(dst))}"
    after = ("then run again (where the release has what it stood for, that run names the command that puts it "
             "back)")
    if not dst.is_symlink():  # a folder or file again since it was seen (a race): no command for it
        return head + "It is no link now (another program changes it while fixpack runs): run again once it is done"
    if real is None:
        return head + f"It points to nothing, or loops: remove it ({rm}), {after}"
    if real == state or state in real.parents:
        return head + (f"It leads into the target's state folder {STATE_DIR}/, which no release has: remove it "
                       f"({rm}), {after}")
    holder = dst.parent.resolve()
    if real == holder or real in holder.parents:
        return head + f"It points to a folder that holds it (a loop): remove it ({rm}), {after}"
    if file and not real.is_file():
        kind = "a folder" if real.is_dir() else "no regular file"
        return head + f"It points to {kind}, where a fix patches a file: remove it ({rm}), {after}"
    if not file and not real.is_dir():
        return head + f"It points to no folder, where a folder is on the way: remove it ({rm}), {after}"
    cmd = (f"cp --remove-destination {quote(str(real))} {quote(str(dst))}" if file else
           f"rm {quote(str(dst))} && cp -a {quote(str(real))} {quote(str(dst))}")
    return head + (f"Replace the link with a real {'file' if file else 'folder'} holding what it points to ({cmd}), "
                   f"then run again" + ("" if inside else ", or point --root at a copy without it"))
