"""A patch's parsed form: its file sections (:class:`FilePatch`) with their hunks (:class:`Hunk`), its mail header
(:class:`PatchHeader`), and the sha256 of the change it carries (:func:`change_sha256`). :mod:`fixpack.diff` makes
them from a patch file's bytes; the engine, the lock and the path checks read them without loading the parser
(unidiff) or the diff syntax checks."""

from __future__ import annotations

import hashlib

from .binpatch import BinaryPatch
from .structs import dataclass


@dataclass(frozen=True)
class Hunk:
    """One hunk. Line numbers are 1-based, as in the ``@@ -a,b +c,d @@`` header.

    ``old_lines`` is the pre-image (context and removed lines), ``new_lines`` the post-image
    (context and added lines); each line keeps its ``\\n`` unless the file ends without one.
    """

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    leading_context: int
    trailing_context: int
    diff_line: int  # 1-based line of the @@ header inside the patch file
    text: str = ""  # the hunk as the patch writes it (its @@ line and body), for .rej files

    def sha_pre(self) -> str:
        return sha256_text("".join(self.old_lines))

    def sha_post(self) -> str:
        return sha256_text("".join(self.new_lines))


@dataclass(frozen=True)
class FilePatch:
    """The change to one file. ``old_path``/``new_path`` are None for an added/deleted file."""

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...]
    old_mode: str | None
    new_mode: str | None
    binary: bool
    diff_line: int
    data: BinaryPatch | None = None  # a git binary patch's data (``GIT binary patch``), both ways

    @property
    def path(self) -> str:
        """The path the change ends at (the old path for a deletion)."""
        return self.new_path or self.old_path or ""

    @property
    def in_place(self) -> bool:
        """The file is changed (or renamed), neither created nor deleted."""
        return self.old_path is not None and self.new_path is not None

    @property
    def kind(self) -> str:
        if self.old_path is None:
            return "add"
        if self.new_path is None:
            return "delete"
        if self.old_path != self.new_path:
            return "rename"
        return "modify"

    def paths(self) -> tuple[str, ...]:
        return tuple(p for p in dict.fromkeys((self.old_path, self.new_path)) if p)


@dataclass(frozen=True)
class PatchHeader:
    """The mail header and DEP-3 description above the first ``diff --git`` line."""

    subject: str
    description: str
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ParsedPatch:
    header: PatchHeader
    files: tuple[FilePatch, ...]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8", "surrogateescape"))


def change_sha256(files: tuple[FilePatch, ...], section_headings: bool = False) -> str:
    """sha256 of the change a patch carries, not of its words: per file its kind, paths and modes, each
    hunk's ranges (``@@ -a,b +c,d @@``, as unidiff writes them) and every ``' '``/``'+'``/``'-'`` line, and
    a binary file's data. The mail header (From, Subject, body, trailers), ``index`` lines, git's
    signature and each hunk's section heading (the text after the second ``@@``: the enclosing function's
    line, which git picks with its diff driver and the engine neither places nor checks) are left out, so
    rewording a patch, or regenerating it where git names another function, keeps it; any changed diff
    line, hunk range, name or mode changes it.

    ``section_headings`` True hashes each ``@@`` line whole, heading included: the fingerprint manifests
    recorded before headings were left out (a hunk without one hashes the same either way)."""
    h = hashlib.sha256()
    for fp in files:
        h.update(repr((fp.kind, fp.old_path, fp.new_path, fp.old_mode, fp.new_mode, fp.binary)).encode())
        if fp.data is not None:
            d = fp.data
            h.update(repr((d.old_id, d.new_id, d.forward.kind, d.reverse.kind)).encode())
            h.update(d.forward.data + b"\0" + d.reverse.data)
        for hunk in fp.hunks:
            text = hunk.text if section_headings else _without_heading(hunk.text)
            h.update(b"\0" + text.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _without_heading(text: str) -> str:
    """A hunk's text with its ``@@`` line cut after the ranges' closing ``@@`` (its section heading dropped)."""
    head, nl, body = text.partition("\n")
    end = head.find("@@", 2)
    return (head[: end + 2] if head.startswith("@@") and end > 0 else head) + nl + body
