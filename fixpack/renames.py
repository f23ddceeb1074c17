"""Files that upstream renamed: where a file a fix changes went in the new release (a new file of at
least 50 % similar content, same suffix), and the fix with its paths moved there."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from pathlib import Path

from .gitwork import Snap
from .model import Fix
from .patchmodel import FilePatch
from .structs import replace
from .tree import Tree

RENAME_SIMILARITY = 0.5


def find_renames(fix: Fix, base: Snap, new_tree: Tree, candidates: Callable[[], list[str]]
                 ) -> tuple[dict[str, tuple[str, int]], list[str]]:
    """Files the fix changes that the new release lacks: where they went (path, similarity %), or gone.

    ``base`` holds the touched files on the old release; ``candidates`` lists the files new in the new
    release (called only when a file is missing).
    """
    renames: dict[str, tuple[str, int]] = {}
    deleted: list[str] = []
    for fp in fix.file_patches():
        if fp.kind not in ("modify", "rename") or fp.old_path in renames or fp.old_path in deleted:
            continue
        assert fp.old_path is not None
        before = base.get(fp.old_path, (None, None))[0]
        if before is None or new_tree.read(fp.old_path) is not None:
            continue
        found = _similar_file(new_tree, candidates(), fp.old_path, before)
        if found:
            renames[fp.old_path] = found
        else:
            deleted.append(fp.old_path)
    return renames, deleted


def new_files(old_root: Path, new_root: Path, package: str) -> list[str]:
    """The files under ``<new_root>/<package>`` that ``<old_root>/<package>`` lacks."""
    old = set(_files(old_root, package))
    return [p for p in _files(new_root, package) if p not in old]


def _files(root: Path, package: str) -> list[str]:
    out = []
    for folder, dirs, files in os.walk(root / package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = Path(folder).relative_to(root).as_posix()
        out += [f"{rel}/{f}" for f in sorted(files)]
    return out


def _similar_file(new_tree: Tree, candidates: list[str], path: str, text: str) -> tuple[str, int] | None:
    """The new file most similar to ``text`` (same suffix; a same-named file wins a tie), if >= 50 %."""
    a = text.splitlines()
    best: tuple[float, bool, str] | None = None
    for cand in candidates:
        if Path(cand).suffix != Path(path).suffix:
            continue
        other = new_tree.read(cand)
        if other is None:
            continue
        sm = difflib.SequenceMatcher(None, a, other.splitlines(), autojunk=False)
        if sm.real_quick_ratio() < RENAME_SIMILARITY or sm.quick_ratio() < RENAME_SIMILARITY:
            continue
        ratio = sm.ratio()
        key = (ratio, Path(cand).name == Path(path).name, cand)
        if ratio >= RENAME_SIMILARITY and (best is None or key[:2] > best[:2]):
            best = key
    return (best[2], int(best[0] * 100)) if best else None


def remap(fix: Fix, renames: dict[str, str]) -> Fix:
    """The fix with its file patches moved to the paths upstream renamed the files to."""
    if not renames:
        return fix

    def move(fp: FilePatch) -> FilePatch:
        old = renames.get(fp.old_path or "", fp.old_path)
        new = renames.get(fp.new_path or "", fp.new_path) if fp.new_path == fp.old_path else fp.new_path
        return replace(fp, old_path=old, new_path=new)
    return replace(fix, patches=tuple(replace(p, parsed=tuple(move(fp) for fp in p.files)) for p in fix.patches))
