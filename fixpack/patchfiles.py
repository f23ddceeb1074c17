"""The patch files of a fix: read and hashed when the pack is loaded, parsed then or when a run first uses
them (:func:`parse_fixes`), and checked: declared binary content, no symlink, paths inside the target's
package folder. Every problem names its file and line.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .documents import MAX_PATCH_BYTES, TooLargeError, key_line, text_for_lines
from .errors import BadInputError, Collector, PackError, PatchParseError, raise_unreadable
from .model import BINARY_IN_PATCH, SOURCE_HINT, Fix, Pack, PatchFile, Profile, binary_source, source_file_problem
from .safepath import link_on_the_way, link_to, not_a_file, not_a_file_here, path_problem, read_regular

if TYPE_CHECKING:
    from .binpatch import PackBudget
    from .patchmodel import FilePatch


class Where:
    """A fix.toml (or variant.toml) and the lines of its ``patches`` key and ``[binary]`` table, looked
    up by ``line_of`` (key, table -> 1-based line) only when a problem is reported: a pack of 500 fixes
    loaded without a problem scans no text for lines."""

    def __init__(self, path: Path, line_of: Callable[[str, str], int | None]) -> None:
        self.path, self._line_of = path, line_of

    @property
    def patches_line(self) -> int | None:
        return self._line_of("patches", "")

    @property
    def binary_line(self) -> int | None:
        return self._line_of("binary", "")

    def binary_entry_line(self, target_path: str) -> int | None:
        """The line of ``"target_path" = ...`` in the ``[binary]`` table, else the table's."""
        return self._line_of(target_path, "binary") or self.binary_line


class Binary:
    """A fix's ``[binary]`` table (target path -> source) as its fix.toml (``where``) declares it, shared
    by the fix and every variant: a source resolves in the fix's own folder (:func:`binary_source`), and
    every problem with it is named at fix.toml's line, whichever patch file found it."""

    def __init__(self, folder: Path, table: dict[str, str], where: Where, budget: PackBudget | None = None) -> None:
        self.folder, self.table, self.where = folder, table, where
        self.budget = budget  # the binary bytes of the pack's patches parsed (its load's)

    def source(self, target_path: str) -> Path:
        return binary_source(self.folder, self.table[target_path])


def _source_problem(folder: Path, src: str) -> str | None:
    """Why ``src`` (a ``[binary]`` source) is not a file name inside the fix's folder ``folder`` (None when
    it is one): a source outside it would copy any file of the machine into the target."""
    parts = src.split("/")
    if src == "" or "\\" in src or "\x00" in src:
        return "is not a file name (empty, or with a backslash or a NUL byte)"
    if src.startswith("/"):
        return "is an absolute path: name the file relative to the fix's folder"
    if ".." in parts:
        return "has a '..' segment: it climbs out of the fix's folder"
    if "" in parts or "." in parts:
        return "has an empty or '.' segment"
    if link_on_the_way(folder, src) is not None:
        return "is, or lies under, a symbolic link: it could lead to any file of the machine"
    if folder.resolve() not in binary_source(folder, src).resolve().parents:
        return "lies outside the fix's folder"
    return None


def check_binary(binary: Binary, errors: Collector) -> None:
    """``[binary]`` maps a canonical target path to a file of the fix's own folder (``src``; "patch": the
    data is in the patch). A bad target path is named as such, a bad source as the fix's source file,
    each at its line of fix.toml."""
    where = binary.where
    for target_path, src in sorted(binary.table.items()):
        problem = path_problem(target_path)
        if problem:
            errors.add(f"[binary] target path {target_path!r} (the file written in the target): {problem}",
                       where.path, where.binary_entry_line(target_path))
        if src == BINARY_IN_PATCH:
            continue
        problem = _source_problem(binary.folder, src)
        if problem:
            errors.add(f"[binary] {target_path!r}: the fix's source file {src!r} {problem}", where.path,
                       where.binary_entry_line(target_path),
                       f"put the file in the fix's folder {binary.folder} and name it relative to it")
            continue
        path = binary_source(binary.folder, src)
        problem = source_file_problem(path)
        if problem:
            errors.add(f"[binary] {target_path!r}: the fix's source file {src!r} ({path}) {problem}", where.path,
                       where.binary_entry_line(target_path), SOURCE_HINT)


def load_patch(folder: Path, name: str, binary: Binary, where: Where, errors: Collector,
               lazy: Path | None = None) -> PatchFile | None:
    """A patch file of a fix (``folder``: its own, or a variant's), parsed now, or (``lazy``: the pack's
    root) on first use of its files. ``where`` is the toml that lists it, ``binary`` the fix's table."""
    path = folder / name
    if Path(name).name != name:
        errors.add(f"patch {name!r} is not a plain file name: patches live in the fix's own folder {folder}",
                   where.path, where.patches_line, "name the file only, and keep it in that folder")
        return None
    data = _patch_bytes(path, where, errors)
    if data is None:
        return None

    parsed: list[tuple[FilePatch, ...]] = []  # once (a copy of the PatchFile reads it again): counted once

    def reader() -> tuple[FilePatch, ...]:
        if not parsed:
            found = Collector()
            files = _patch_files(path, data, binary, found)
            found.raise_if_any(f"the pack at {lazy} is invalid")
            parsed.append(files or ())
        return parsed[0]
    if lazy is not None:  # the bytes are read (and hashed) now, parsed when a run needs them
        return PatchFile(path, hashlib.sha256(data).hexdigest(), reader=reader)
    files = _patch_files(path, data, binary, errors)
    return PatchFile(path, hashlib.sha256(data).hexdigest(), files) if files is not None else None


def _patch_bytes(path: Path, where: Where, errors: Collector) -> bytes | None:
    """The bytes of the patch file ``path``, or None with the problem added to ``errors``: missing, or something
    that is no regular file, named unread (a FIFO would block the read), a symbolic link, never followed (as a
    ``[binary]`` source: it could lead to any file of the machine), or larger than ``MAX_PATCH_BYTES``, told by
    its size, unread."""
    name, folder = path.name, path.parent
    if path.is_symlink():
        errors.add(f"patch {name!r} in {folder} is a symbolic link to {link_to(path)}: a patch is read only "
                   f"from the fix's own folder, never through a link", where.path, where.patches_line,
                   "put the patch file itself there")
        return None
    what = not_a_file(path)
    if what is not None:
        errors.add(f"patch {name!r} in {folder} is {what}, not a regular file", where.path, where.patches_line,
                   "put the patch file itself there")
        return None
    if not path.exists():
        from shlex import quote  # (only a missing patch is said so)

        errors.add(f"patch {name!r} does not exist in {folder}", where.path, where.patches_line,
                   f"put the patch file back (in a git checkout of the pack: git checkout HEAD -- "
                   f"{quote(str(path))}, which undoes a git rm too), or take it out of 'patches'")
        return None
    try:
        data = read_regular(path, MAX_PATCH_BYTES)
    except TooLargeError as exc:
        errors.add(f"patch {name!r} in {folder}: {exc.said('a patch file')}", where.path, where.patches_line,
                   "a fix's patch is KBs, a few MB with binary data: split the change into several patches, or "
                   "put a new large binary file in the fix's folder as its [binary] source")
        return None
    except OSError as exc:
        raise_unreadable(path, exc)
        errors.add(f"patch {name!r} in {folder} cannot be read: {exc.strerror}", where.path, where.patches_line)
        return None
    if data.startswith(b"\xef\xbb\xbf"):  # as fix.toml and the series (documents.utf8_text): git reads no such
        errors.add("a UTF-8 byte order mark (BOM) opens the patch", path, 1,  # patch; it was taken, and format
                   "remove it: save the file as UTF-8 without a BOM")  # --check alone called it stale
        return None
    return data


def patch_again(pf: PatchFile, during: str = "since the pack was loaded", then: str = "run the command again") -> bytes:
    """The bytes of the patch file ``pf`` the load read, read again as the load read them (:func:`read_regular`:
    no further than ``MAX_PATCH_BYTES``, without blocking, never through a link) for every use after the load:
    one changed since (larger, a link, a FIFO, other bytes) is BadInputError naming it, what it is now, and
    ``then`` (what to do; the caller's words on what was written), never read whole nor waited on. ``during``:
    when it changed, in the message's words."""
    try:
        data = read_regular(pf.path, MAX_PATCH_BYTES, follow=False)
    except TooLargeError as exc:
        now = f"it is now {exc.said('a patch file')}"
    except OSError as exc:
        what = not_a_file_here(pf.path)
        now = f"it is now {what}" if what else "it is gone" if not os.path.lexists(pf.path) else \
            f"it cannot be read: {exc.strerror}"
    else:
        if hashlib.sha256(data).hexdigest() == pf.sha256:
            return data
        now = "its bytes are no longer those the load read"
    raise BadInputError(f"{pf.path}: changed {during} ({now}; it is no longer the patch file the pack's load "
                        f"read): {then}")


def _patch_files(path: Path, data: bytes, binary: Binary, errors: Collector) -> tuple[FilePatch, ...] | None:
    """The file patches of a patch file's bytes, each problem added to ``errors`` (None: unreadable)."""
    from .diff import parse_patch  # the diff adapter (and unidiff) load with the first patch parsed

    table, where = binary.table, binary.where
    try:
        parsed = parse_patch(data, str(path), binary.budget)
    except PatchParseError as exc:
        for p in exc.problems or []:
            errors.add(p.message, path, p.line, p.hint)
        if not exc.problems:
            errors.add(str(exc), path)
        return None
    if not parsed.files:
        errors.add("the patch changes no file", path, None, "regenerate it with git format-patch")
        return None
    for fp in parsed.files:
        source = BINARY_IN_PATCH if fp.data is not None else "<file in the fix folder>"
        if fp.binary and fp.path not in table:
            errors.add(f"binary change to {fp.path!r} is not declared: {fp.path} is a binary file, and binary files "
                       f"are changed only where fix.toml says so", path, fp.diff_line,
                       f"declare it in fix.toml: [binary] \"{fp.path}\" = \"{source}\"")
        elif fp.data is not None and table[fp.path] != BINARY_IN_PATCH:
            errors.add(f"{fp.path!r}: the patch carries its data (GIT binary patch)", where.path,
                       where.binary_entry_line(fp.path),
                       f"declare it as [binary] \"{fp.path}\" = \"{BINARY_IN_PATCH}\"")
        elif fp.binary and fp.data is None and fp.kind != "add":
            errors.add(f"binary change to existing file {fp.path!r} without its data", path, fp.diff_line,
                       "regenerate the patch with git diff --binary (or git format-patch --binary)")
        elif fp.binary and fp.data is None and not os.path.lexists(binary.source(fp.path)):  # (else: named)
            errors.add(f"[binary] {fp.path!r}: the fix's source file {table[fp.path]!r} is missing: no "
                       f"{binary.source(fp.path)} ({path.name} adds the file without its bytes)", where.path,
                       where.binary_entry_line(fp.path), "put the file's bytes there, in the fix's own folder")
        if symlink_change(fp):
            errors.add(f"symlink change to {fp.path!r} is not supported", path, fp.diff_line,
                       "ship the link target as a regular file")
    return parsed.files


def symlink_change(fp: FilePatch) -> bool:
    """Whether a file patch makes, changes or removes a symbolic link (git's mode 120000), which no fix ships."""
    return "120000" in (fp.old_mode, fp.new_mode)


def parse_fixes(pack: Pack, profile: Profile, ids: tuple[str, ...] | list[str] | set[str]) -> None:
    """Parse the patches of the fixes ``ids`` (a run's chain, from a pack loaded for ``profile``) and check
    that each changes files of its target's package only. Raises PackError listing every problem."""
    errors = Collector()
    packages = {t.name: t.package for t in profile.targets}
    for fid in sorted(ids):
        fix = pack.fixes[fid]
        before = len(errors.problems)
        for patch in fix.patches:
            try:
                patch.files  # noqa: B018 (parsed here, once: cached on the patch)
            except PackError as exc:
                errors.problems += exc.problems
        if len(errors.problems) == before and fix.target in packages:
            check_package_paths(fix, packages[fix.target], errors, profile.target(fix.target).version_path, packages)
    errors.raise_if_any(f"the pack at {pack.root} is invalid")


def outside_package(path: str, package: str, version_path: str = "") -> str:
    """Why a fix may not change ``path`` ("" when it may): it lies outside the target's package folder ``package``,
    or it is ``version_path``, the module the found version is read from (:func:`check_package_paths`)."""
    if not path.startswith(package + "/"):
        return f"outside the target's package folder {package}/"
    return "the version module the pin is checked against" if path == version_path else ""


def check_package_paths(fix: Fix, package: str, errors: Collector, version_path: str = "",
                        others: Mapping[str, str] | None = None) -> None:
    """Every file a fix changes lies inside its target's package folder (``<package>/...``): the root may
    be a site-packages folder, where another path would change another distribution, or the tool's own
    state (``.fixpack/``). None changes ``version_path``, the module the found version is read from: once
    applied, the image would no longer show its pin, and apply, status and revert would refuse it.
    ``others`` (the profile's other targets, name -> package folder): where every file the fix changes lies
    in one of theirs, the fix names the wrong target, said once at fix.toml's ``target`` line."""
    if _wrong_target(fix, package, errors, others or {}):
        return
    for patch in fix.patches:
        for fp in patch.files:
            for p in fp.paths():
                why = outside_package(p, package, version_path)
                if why and p != version_path:
                    errors.add(f"{patch.path.name} changes {p!r}, {why}", patch.path, fp.diff_line,
                               f"patch files under {package}/ only")
                elif why:
                    errors.add(f"{patch.path.name} changes {p!r}, {why}: once applied, the image would no longer show "
                               f"the pinned version, and apply, status and revert would refuse it", patch.path,
                               fp.diff_line, "leave the version module as the release has it (the manifest in "
                                             ".fixpack/ records what the image carries)")
    for target_path, _src in fix.binary:
        if not target_path.startswith(package + "/"):
            errors.add(f"binary file {target_path!r} lies outside the target's package folder {package}/",
                       fix.folder / "fix.toml", None, f"place it under {package}/")


def _wrong_target(fix: Fix, package: str, errors: Collector, others: Mapping[str, str]) -> bool:
    """Whether every file ``fix`` changes (its patches' paths and binary files) lies in the package folder of
    one other target of ``others`` and none in its own ``package``: then that is one finding, at fix.toml's
    ``target`` line (True), not one per patch file."""
    paths = [p for patch in fix.patches for fp in patch.files for p in fp.paths()]
    paths += [target_path for target_path, _src in fix.binary]
    owners = {name for name, pkg in others.items() if pkg != package and all(p.startswith(pkg + "/") for p in paths)}
    if not paths or len(owners) != 1:
        return False
    (name,) = owners
    toml = fix.folder / "fix.toml"
    line = key_line(text_for_lines(toml), "target")
    errors.add(f'target = "{fix.target}" (package folder {package}/), but every file its patches change lies under '
               f"{others[name]}/, the package folder of target {name!r}", toml, line,
               f'set target = "{name}" in fix.toml, or write the patches against {package}/')
    return True


def check_deleted_then_touched(chain: tuple[Fix, ...]) -> None:
    """BadInputError (exit 2) where a fix of ``chain`` (series order) touches a file an earlier fix deletes or renames
    away: the run would meet it as a missing file, half way through the chain."""
    deleted: dict[str, str] = {}
    for fix in chain:
        for path in fix.touched_paths():
            if path in deleted:
                raise BadInputError(f"fix {fix.id!r} touches {path}, which fix {deleted[path]!r} deletes earlier in "
                                    f"the series; select only one of them or rewrite {fix.id!r}")
        for fp in fix.file_patches():
            if fp.kind == "delete":
                deleted[fp.path] = fix.id
            elif fp.kind == "rename" and fp.old_path:
                deleted[fp.old_path] = fix.id
