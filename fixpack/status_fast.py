"""The status fast path: a target whose manifest, files and lock agree needs no hunk placed.

The lock holds each touched file's sha256 after every fix of the profile's chain, on the clean release.
When every fix of a target's chain is recorded applied, and on each file the chain's fixes are the first
ones of the profile's chain that touch it, the lock knows what the files must hold: the last of them's
post-image. Files that hold exactly that are the chain applied to the release byte for byte, so unwinding
and replaying it (what status does otherwise) can only find each fix pinned at its stated lines and say
"already applied". Anything else (a hash that differs, an entry the lock does not vouch for) goes to the
full evaluation, which says what is wrong.

The lock's word for a fix's change is taken for the patch bytes it fingerprinted only where those are the bytes the
manifest records the fix applied from (:func:`rewritten`): patch bytes edited since, under the same version, with the
lock's ``patch_bytes_sha256`` set to them and the lock sealed again (a plain sha256), would otherwise be vouched for
as the change the image holds. Those fixes are parsed and held to the lock first, as a dry run holds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .records import Hashes, Lock, Manifest, Recorded
from .tree import Tree, file_hashes

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .model import Fix


def locked_files(lock: Lock, manifest: Manifest, target: str, chain: set[str]) -> dict[str, str | None] | None:
    """What the files must hold (path -> sha256, None: absent) when ``chain`` (fix ids of ``target``) is
    applied as the manifest records it; None when the lock cannot vouch for it: a chain fix not recorded
    applied or with another patch than the lock's, one the release held already, a file another fix of
    the profile touches before a chain fix does, or manifest hashes that are not those; and where an entry is not the
    one apply writes on those files (another order than the series', another version, its files' sha256 not the
    lock's post-images of the fix, offsets: laid at the stated lines), which the full evaluation says it would
    write again."""
    recorded = {e.id: e for e in manifest.fixes}
    locked = [f for f in lock.fixes if f.target == target]
    by_id = {f.id: f for f in locked}
    if set(recorded) != chain or not chain <= set(by_id):
        return None
    if [e.id for e in manifest.fixes] != [f.id for f in locked if f.id in chain]:
        return None  # (not the series' order, as apply writes it)
    for fid in chain:
        entry, fix = recorded[fid], by_id[fid]
        if entry.state is not Recorded.APPLIED or entry.patch_sha256 != fix.patch_sha256 or fix.upstreamed():
            return None
        if entry.version != fix.version or dict(entry.files) != fix.post() or entry.offsets or entry.hunk_offsets:
            return None  # (not the entry apply writes on these files: it would write it again, as status says)
    expected: dict[str, str | None] = {}
    clean: dict[str, str | None] = {}
    closed: set[str] = set()  # files a fix outside the chain touches: no chain fix may come after it there
    for fix in locked:
        for f in fix.files:
            clean.setdefault(f.path, f.pre)
            if fix.id not in chain:
                closed.add(f.path)
            elif f.path in closed:
                return None
            else:
                expected[f.path] = f.post
    if dict(manifest.files) != expected or _is_clean(expected, clean):
        return None
    return expected


def _is_clean(expected: Hashes, clean: Hashes) -> bool:
    """The chain leaves every file as the release had it (a later fix undoing an earlier one): the full
    evaluation then takes the manifest for a stale one."""
    return all(clean.get(p) == h for p, h in expected.items())


def with_release_files(lock: Lock, target: str, expected: dict[str, str | None],
                       others: list[str]) -> dict[str, str | None] | None:
    """``expected`` (:func:`locked_files`) with the release's sha256 of each file that a fix of ``others`` (opt-ins
    of ``target`` outside the chain) touches and the chain does not: an opt-in applied by hand, or whose manifest
    entry was lost, then differs, and the full evaluation finds it. None when the lock does not know one of them."""
    release, out = lock.release_files(target), dict(expected)
    for fid in others:
        entry = lock.fix(fid)
        if entry is None:
            return None
        for path in entry.post():
            out.setdefault(path, release.get(path))
    return out


def is_clean_release(tree: Tree, manifest: Manifest, lock: Lock) -> bool:
    """Every file the manifest lists is byte for byte the clean release's (the lock's first pre-image): the fixes it
    records are not there (the image was put back to the release by hand). Not so for a manifest that records no
    applied fix and the release's own hashes (only upstreamed fixes: the release is what it describes); one that
    records an applied fix on the release's bytes (planted, or written by hand) is stale too: no fix leaves every
    file it edits as the release has it."""
    clean = lock.release_files()
    files = manifest.files
    if not files or any(p not in clean for p in files):
        return False
    return all(h == clean[p] for p, h in file_hashes(tree, list(files)).items()) and \
        (any(clean[p] != h for p, h in files.items()) or bool(manifest.applied_ids()))


def rewritten(manifest: Manifest, chain: Iterable[Fix]) -> list[str]:
    """The fixes of ``chain`` whose patch bytes (:attr:`~fixpack.model.Fix.bytes_sha256`) are not those ``manifest``
    records them applied from (its entry's ``patch_bytes_sha256``; none in a manifest from before it was kept, or no
    entry): the lock's word for those bytes is not the image's, so their patches are to be parsed and held to it."""
    applied_from = {e.id: e.patch_bytes_sha256 for e in manifest.fixes}
    return [f.id for f in chain if applied_from.get(f.id) != f.bytes_sha256]
