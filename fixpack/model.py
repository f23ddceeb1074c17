"""The pack's model: frozen dataclasses, built by :mod:`fixpack.loader` and never mutated."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from .binpatch import MAX_BINARY_BYTES
from .errors import Collector, raise_unreadable
from .safepath import TooLargeError, link_to, not_a_file, read_regular
from .structs import dataclass, field, replace

if TYPE_CHECKING:  # the diff adapter is loaded by the first parse, not with the model
    from .patchmodel import FilePatch

BINARY_IN_PATCH = "patch"  # [binary] "path" = "patch": the data is in the patch (git diff --binary)
UPSTREAM_STATUSES = ("pending", "submitted", "accepted", "backport", "denied", "inappropriate")


def binary_source(fix_folder: Path, src: str) -> Path:
    """The file a ``[binary] "path" = "src"`` entry of ``fixes/<id>/fix.toml`` names: ``fixes/<id>/src``,
    for the fix and every variant of it alike (the table is fix.toml's; a variant's folder
    ``fixes/<id>/<profile>/`` holds only its patches and ``variant.toml``). The one resolution the
    loader's checks, the fingerprints and the evaluation use; the loader refuses a ``src`` that leaves
    the fix's folder."""
    return fix_folder / src


SOURCE_HINT = ("put the new file's own bytes there, a regular file of at most "
               f"{MAX_BINARY_BYTES >> 20} MiB (MAX_BINARY_BYTES): a fix carries small binary files")


def source_file_problem(path: Path, exc: Exception | None = None) -> str | None:
    """Why the ``[binary]`` source ``path`` (inside the fix's folder) cannot be read as the new file's bytes, told
    without reading it (None when it can, or nothing is there: a missing file is named where a patch adds it): a
    symbolic link, something that is no regular file (a FIFO would block the read), or a file larger than
    ``MAX_BINARY_BYTES``, by its size. ``exc``: the read's error, when :func:`source_bytes` failed."""
    if isinstance(exc, TooLargeError):
        return f"is {exc.size} bytes, more than the {MAX_BINARY_BYTES >> 20} MiB a binary file may have"
    if path.is_symlink():
        return f"is a symbolic link to {link_to(path)}: it could lead to any file of the machine"
    what = not_a_file(path)
    if what is not None:
        return f"is {what}, not a regular file"
    try:
        size = os.lstat(path).st_size
    except OSError:
        return f"cannot be read: {exc.strerror}" if isinstance(exc, OSError) else None
    if size > MAX_BINARY_BYTES:
        return f"is {size} bytes, more than the {MAX_BINARY_BYTES >> 20} MiB a binary file may have"
    return f"cannot be read: {exc.strerror}" if isinstance(exc, OSError) else None


def source_bytes(fix: Fix, src: str) -> bytes:
    """The bytes of the fix's ``[binary]`` source ``src``: a regular file of at most ``MAX_BINARY_BYTES``, opened
    without blocking and never through a link (the loader named any other; this holds for one put there since).
    Raises PackError naming fix.toml, the file and why."""
    path = binary_source(fix.folder, src)
    try:
        return read_regular(path, MAX_BINARY_BYTES, follow=False)
    except (OSError, TooLargeError) as exc:
        if isinstance(exc, OSError):  # permissions or the disk: exit 5, not a problem of the pack
            raise_unreadable(path, exc)
        errors, named = Collector(), ", ".join(repr(t) for t, s in fix.binary if s == src)
        errors.add(f"[binary] {named}: the fix's source file {src!r} ({path}) {source_file_problem(path, exc)}",
                   fix.folder / "fix.toml", None, SOURCE_HINT)
        errors.raise_if_any(f"the pack at {fix.folder.parent.parent} is invalid")
        raise


@dataclass(frozen=True)
class Upstream:
    """Where the change stands upstream, in DEP-3 / Yocto ``Upstream-Status`` words.

    ``fixed_in`` is the first upstream release that makes the fix unnecessary ("" if unknown). The
    DEP-3 fields its patches carry: ``reason`` (why it is denied or inappropriate), ``origin`` (where the
    change comes from: ``upstream, URL``, ``vendor``, ``other``), ``bug`` (the bug's URL) and
    ``last_update`` (YYYY-MM-DD).
    """

    status: str = "pending"
    link: str = ""
    fixed_in: str = ""
    reason: str = ""
    origin: str = ""
    bug: str = ""
    last_update: str = ""


@dataclass(frozen=True)
class PatchFile:
    """One patch file of a fix: its path in the pack, its bytes' sha256 and its parsed files.

    ``parsed`` holds the files when they were parsed at load; otherwise ``reader`` parses the bytes read at
    load on first use of :attr:`files` (a run parses only the patches of the fixes it works on) and raises
    :class:`fixpack.errors.PackError` naming the file and line when they are malformed.
    """

    path: Path
    sha256: str
    parsed: tuple[FilePatch, ...] | None = field(default=None, compare=False, repr=False)
    reader: Callable[[], tuple[FilePatch, ...]] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def files(self) -> tuple[FilePatch, ...]:
        if self.parsed is not None:
            return self.parsed
        if self.reader is None:
            raise TypeError(f"PatchFile {self.path} has neither parsed files nor a reader")
        return self.reader()

    @cached_property
    def change_sha256(self) -> str:
        """The sha256 of the change itself (:func:`fixpack.patchmodel.change_sha256`): the mail header left out."""
        from .patchmodel import change_sha256

        return change_sha256(self.files)

    @cached_property
    def headed_change_sha256(self) -> str:
        """:attr:`change_sha256` with each hunk's section heading hashed too, as manifests recorded it
        before headings were left out (:func:`fixpack.patchmodel.change_sha256`)."""
        from .patchmodel import change_sha256

        return change_sha256(self.files, section_headings=True)


@dataclass(frozen=True)
class Variant:
    """A fix rebased onto another release: ``fixes/<id>/<profile>/`` holds its patches (same names as
    ``fix.toml``'s) and ``variant.toml`` its version (bumped only when the change itself changed)."""

    profile: str
    version: int
    patches: tuple[PatchFile, ...]


@dataclass(frozen=True)
class Fix:
    """A versioned change to one target: metadata from ``fix.toml`` and its patches in order."""

    id: str
    version: int
    summary: str
    why: str
    target: str
    requires: tuple[str, ...]
    conflicts: tuple[str, ...]
    opt_in: bool
    upstream: Upstream
    patches: tuple[PatchFile, ...]
    folder: Path
    env: tuple[tuple[str, str], ...] = ()
    binary: tuple[tuple[str, str], ...] = ()  # (path in target, file in the fix folder)
    variants: tuple[Variant, ...] = ()
    retired: str = ""  # why the fix is kept in the series though no profile lists it ("" : not retired)

    def for_profile(self, profile: str) -> Fix:
        """This fix as profile ``profile`` uses it: its variant's patches and version, if it has one."""
        for v in self.variants:
            if v.profile == profile:
                return replace(self, version=v.version, patches=v.patches, variants=())
        return replace(self, variants=())

    @cached_property
    def patch_sha256(self) -> str:
        """The fix's change fingerprint (lock and manifest): sha256 over its patches' change hashes in
        order, then its :attr:`binary_sources`. It changes with any diff line, hunk range, file name or
        mode and with a ``[binary]`` file's bytes, not with a patch's mail header, a hunk's section heading
        or ``fix.toml``'s metadata (summary, why, upstream status). Parses the patches, unless
        :meth:`vouch_change` gave it first."""
        return self.parsed_change()

    @cached_property
    def bytes_sha256(self) -> str:
        """sha256 over its patch files' sha256 (hex, one per line, in order), then its
        :attr:`binary_sources`: the bytes as read, mail header included. No parsing."""
        return hashlib.sha256("\n".join([*(p.sha256 for p in self.patches), *self.binary_sources]).encode()).hexdigest()

    @cached_property
    def binary_sources(self) -> tuple[str, ...]:
        """One line per ``[binary]`` file of the fix's folder (a new binary file's bytes: its patch says
        only "Binary files differ"), in ``fix.toml``'s sorted order: ``binary <target path> <sha256 of the
        file's bytes>`` (``missing`` in place of the hash), read once per loaded fix. Empty
        for a fix without one, so that its fingerprints are its patches' alone, as before such files
        counted."""
        out = []
        for target_path, src in self.binary:
            if src == BINARY_IN_PATCH:
                continue
            path = binary_source(self.folder, src)
            if not path.exists() and not path.is_symlink():
                digest = "missing"
            else:  # capped, never through a link (PackError: one put there since the loader looked)
                digest = hashlib.sha256(source_bytes(self, src)).hexdigest()
            out.append(f"binary {target_path} {digest}")
        return tuple(out)

    def vouch_change(self, change: str) -> None:
        """Take ``change`` as :attr:`patch_sha256` without parsing: the lock saw these very bytes
        (:attr:`bytes_sha256`) and fingerprinted their change as ``change`` (same bytes, same change)."""
        self.__dict__["patch_sha256"] = change

    def vouched_wrongly(self, sha: str) -> bool:
        """Whether a manifest's ``patch_sha256`` ``sha``, not this fix's change as :meth:`vouch_change` took it from the
        lock, is the change its patches give (parsing them): the lock's fingerprint of these very bytes was edited and
        the lock sealed again (the patches parsed, :attr:`patch_sha256` is then theirs: :meth:`parsed_change`). False
        where the change was worked out from the patches (it is theirs)."""
        vouched = self.__dict__.get("patch_sha256")
        return vouched is not None and sha != vouched and sha == self.parsed_change()

    def parsed_change(self) -> str:
        """:attr:`patch_sha256` worked out from the patches (parsing them), whatever :meth:`vouch_change` gave; it is
        :attr:`patch_sha256` from then on (a change the lock vouched for, once found not the patches', is not kept:
        revert, going on without such a lock, then finds a manifest's entry of the lock's change another patch's)."""
        from .patchmodel import sha256_text

        change = sha256_text("\n".join([*(p.change_sha256 for p in self.patches), *self.binary_sources]))
        self.__dict__["patch_sha256"] = change
        return change

    def all_patches(self) -> list[tuple[PatchFile, str | None]]:
        """Each patch file of the fix and of its variants, with the profile of its variant (None: the fix's own)."""
        return [(p, None) for p in self.patches] + [(p, v.profile) for v in self.variants for p in v.patches]

    def parsed(self) -> bool:
        """Whether its patches are parsed already (a run's selected fixes, each one it placed): its change and its
        files, worked out from them, cost no parse."""
        return all(p.parsed is not None or "files" in p.__dict__ for p in self.patches)

    def recorded_as(self, sha: str) -> bool:
        """A manifest's ``patch_sha256`` names this fix's change: its change fingerprint, or one an older
        manifest recorded: the sha256 over its patches' bytes (before fingerprints left the mail header
        out), or the change fingerprint with the hunks' section headings (before those were left out)."""
        return sha == self.bytes_sha256 or sha == self.patch_sha256 or sha == self._headed_sha256()

    def _headed_sha256(self) -> str:
        """:attr:`patch_sha256` as it was computed with the hunks' section headings."""
        from .patchmodel import sha256_text

        return sha256_text("\n".join([*(p.headed_change_sha256 for p in self.patches), *self.binary_sources]))

    def file_patches(self) -> tuple[FilePatch, ...]:
        return tuple(fp for p in self.patches for fp in p.files)

    def touched_paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(path for fp in self.file_patches() for path in fp.paths()))


@dataclass(frozen=True)
class Source:
    """Where a clean release copy of a target comes from: a PyPI sdist or a git repository."""

    pypi: str = ""
    git: str = ""
    ref: str = ""


@dataclass(frozen=True)
class Pin:
    """The upstream a profile is written against. ``commit`` may be abbreviated (7+ hex digits)."""

    version: str
    commit: str
    branch: str = ""


@dataclass(frozen=True)
class TargetSpec:
    """A target of a profile: the import package (a folder under the root), its distribution name,
    where its version module lies (relative to the root), its pin and its release source."""

    name: str
    package: str
    distribution: str
    pin: Pin
    source: Source
    version_module: str = ""

    @property
    def version_path(self) -> str:
        """The version module's path under the root (``version_module``, else ``<package>/_version.py``):
        the file the found version is read from, which no fix may change."""
        return self.version_module or f"{self.package}/_version.py"


@dataclass(frozen=True)
class Component:
    """A package a profile installs besides its fixes (the port's plugin, the kernels' package): built
    from ``path`` (a folder with a ``pyproject.toml``, or a ``.whl``, relative to the pack's root) and laid
    out in its ``target``'s site-packages folder as ``pip install --no-deps`` would; ``requires`` names
    the fixes (or components) that must be in the image with it."""

    id: str
    path: Path
    version: str
    target: str
    requires: tuple[str, ...] = ()
    opt_in: bool = False
    summary: str = ""


@dataclass(frozen=True)
class Profile:
    """A release pair: targets with pins, the default fixes, the opt-in fixes it allows."""

    name: str
    path: Path
    description: str
    targets: tuple[TargetSpec, ...]
    default: tuple[str, ...]
    opt_in: tuple[str, ...]
    proof_env: tuple[tuple[str, str], ...] = ()  # [proof] env: what the proof tests need set (offline switches)
    components: tuple[Component, ...] = ()

    def component(self, cid: str) -> Component | None:
        return next((c for c in self.components if c.id == cid), None)

    def target(self, name: str) -> TargetSpec:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def lock_path(self) -> Path:
        return self.path.with_suffix(".lock")

    def opt_ins_before_defaults(self, series: tuple[str, ...]) -> list[tuple[str, str]]:
        """Each ``(opt-in id, default id)`` of this profile that ``series`` (fix ids in the pack's order) puts the
        opt-in first, by the opt-in's place then the default's; an id ``series`` lacks is left out. Opt-in fixes
        follow the default ones: a default fix written on top of an opt-in drifts (or does not apply) on every
        image without that opt-in."""
        at = {fid: n for n, fid in enumerate(series)}
        opt, dflt = (sorted((f for f in ids if f in at), key=at.__getitem__) for ids in (self.opt_in, self.default))
        return [(o, d) for o in opt for d in dflt if at[o] < at[d]]


@dataclass(frozen=True)
class Pack:
    """The whole pack: the series order, every fix by id, every profile by name."""

    root: Path
    series: tuple[str, ...]
    fixes: dict[str, Fix] = field(hash=False)
    profiles: dict[str, Path] = field(hash=False)

    def for_profile(self, profile: str) -> Pack:
        """The pack as profile ``profile`` sees it: each fix with that profile's variant, if any."""
        return replace(self, fixes={k: f.for_profile(profile) for k, f in self.fixes.items()})

    def ordered(self, ids: set[str] | frozenset[str] | tuple[str, ...]) -> tuple[Fix, ...]:
        """The fixes named in ``ids``, in the series' order."""
        wanted = set(ids)
        return tuple(self.fixes[i] for i in self.series if i in wanted)

    def with_sharers(self, ids: list[str], files: set[str]) -> list[str]:
        """``files`` (paths) and every file of a fix in ``ids`` that changes one of them, until none is added, sorted:
        what goes back to the release with ``files`` so that none of those fixes is left in part of its files (its
        hunks in some, its files' release text in others: partial)."""
        grown = True
        while grown:
            grown = False
            for fid in ids:
                paths = set(self.fixes[fid].touched_paths())
                if paths & files and not paths <= files:
                    files, grown = files | paths, True
        return sorted(files)
