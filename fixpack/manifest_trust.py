"""A manifest read from a target, held to the pack before a run trusts it (state on disk is untrusted input): whose
profile wrote it, and whether each fix entry names the files its patch touches and records them as a fix leaves them.
Every refusal is raised before anything is written; a manifest whose files are the clean release is the run's to call
stale (:func:`fixpack.status_fast.is_clean_release`), whoever wrote it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from . import lockfile
from .errors import DamagedStateError, MismatchError, PackError
from .loader import pin_of
from .lock_hints import applied_from
from .manifest_where import manifest_line, top_files_line, top_line
from .model import Fix
from .records import REMOVE_MANIFEST, LockFix, Manifest, ManifestFix, Recorded
from .run import Context, hold_soft_lock
from .status_fast import is_clean_release
from .targets import commit_matches, commits_agree
from .tree import Tree, file_hashes

if TYPE_CHECKING:
    from .evaluate import Pass


def check_fix_files(ctx: Context, manifest: Manifest, path: Path, tree: Tree | None = None) -> None:
    """Raise DamagedStateError (exit 3, nothing written) when a fix's entry in the manifest at ``path`` names a
    file its patch does not touch: each run writes an entry's files from its patch, so a file added there by
    hand would be taken for the fix's (revert would leave it, status would hash it). The fix's paths are
    the lock's when the lock fingerprinted this very change (no patch is parsed), else its patch's. A fix
    this pack lacks, or recorded with another patch, is left to the checks that say so (revert's lock, first held to
    the patches: :func:`hold_soft_lock`). A manifest another profile wrote is MismatchError (exit 3): the image is in
    that profile's state, which this one does not know; DamagedStateError where that profile pins another release.

    ``tree``: the target's files, where the run has them (the SBOM's check has not). Where every file the manifest
    lists is the clean release's, the manifest is stale, whoever wrote it: nothing here refuses it. Else an entry
    recording its fix applied with every one of its files (each one the lock's record of the fix lists: a record
    edited is the lock's check to say) at the release's own sha256 is DamagedStateError: no fix leaves the files it
    edits as the release has them (a manifest written by hand), but one the lock records leaving them so (it undoes a
    fix before it in the chain)."""
    if tree is not None and is_clean_release(tree, manifest, ctx.lock):
        return
    if manifest.profile and manifest.profile != ctx.profile.name:
        _another_profile(ctx, manifest, path)
    _another_release(ctx, manifest, path)
    if tree is not None:
        _files_edited(manifest, tree, path)
    if ctx.report.command == "revert":  # (the lock's record of the fixes it reverts: held first, else not used)
        hold_soft_lock(ctx, manifest)
    release = ctx.lock.release_files(manifest.target or None)
    for entry in manifest.fixes:
        record = ctx.lock.fix(entry.id)  # (its files as the lock has them: a record edited is the lock's to say)
        own = {f.path for f in record.files} if record is not None else set()
        if entry.at_release(record, release):
            line = manifest_line(path, entry.id, next(iter(entry.files)))
            raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}fix {entry.id}'s entry records it "
                                          f"applied with each of its files at the clean release's own sha256, which no "
                                          f"fix leaves them at (written by hand?)", REMOVE_MANIFEST)
        fix = ctx.pack.fixes.get(entry.id)
        try:  # (a patch whose bytes are not those recorded is parsed here)
            if fix is None or not fix.recorded_as(entry.patch_sha256):
                continue
        except PackError as exc:
            raise applied_from(exc, fix, path, ctx.report.command) from None
        vouched = record is not None and record.patch_sha256 == fix.patch_sha256  # (the lock's record is this change's)
        touched = own if vouched else set(fix.touched_paths())
        stray = sorted(set(entry.files) - touched)
        if stray and set(stray) <= set(fix.touched_paths()):  # the lock's record left them out, not the image: said
            lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock, hold={fix.id})  # (parsed now)
        if stray:
            line = manifest_line(path, fix.id, stray[0])
            raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}fix {fix.id}'s entry names "
                                          f"{', '.join(stray)}, a file its patch does not touch (added by hand?)")
        _hunk_offsets_fit(entry, record if vouched else None, fix, path)


def _files_edited(manifest: Manifest, tree: Tree, path: Path) -> None:
    """DamagedStateError (exit 3) where the manifest's own ``files`` record a file at another sha256 than the file
    has, while the last applied fix's entry on it records the file's very sha256: ``files`` was edited, not the
    file (it was called tampered, with advice to put the release's files back). An entry lost since (its fix the
    last on the file) leaves ``files`` as the file is: not this."""
    last = {p: h for e in manifest.fixes if e.state is Recorded.APPLIED for p, h in e.files.items()}
    differ = sorted(p for p, h in manifest.files.items() if p in last and last[p] != h)
    now = file_hashes(tree, differ) if differ else {}
    edited = next((p for p in differ if now[p] == last[p]), None)
    if edited is not None:
        line = top_files_line(path, edited)
        raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}'files' records {edited} at sha256 "
                                      f"{str(manifest.files[edited])[:12]}, where the file is "
                                      f"{str(last[edited])[:12]}, as the entry of the last applied fix on it records "
                                      f"('files' edited by hand?)", REMOVE_MANIFEST)


def _hunk_offsets_fit(entry: ManifestFix, record: LockFix | None, fix: Fix, path: Path) -> None:
    """DamagedStateError (exit 3) where the entry's ``hunk_offsets`` give a file another number of offsets than the fix
    has hunks on it (the lock's ``record`` of them where it fingerprinted this change, else the parsed patch's): a run
    writes one per hunk, so the list was edited by hand, and reading it would take hunks off from the wrong lines."""
    if not entry.hunk_offsets:
        return
    on = Counter(h.file for h in record.hunks) if record is not None and record.hunks else \
        Counter(fp.path for fp in fix.file_patches() for _h in fp.hunks)
    for p, offsets in sorted(entry.hunk_offsets.items()):
        if len(offsets) != on[p]:
            line = manifest_line(path, fix.id, p, "hunk_offsets")
            raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}fix {fix.id}'s entry records "
                                          f"{len(offsets)} hunk offsets in {p}, where its patch has {on[p]} hunk"
                                          f"{'s' * (on[p] != 1)} there (edited by hand?)", REMOVE_MANIFEST)


def _another_profile(ctx: Context, manifest: Manifest, path: Path) -> None:
    """Refuse a manifest written by another profile than the run's: MismatchError, naming the profile to run with
    (or the pack that has it), or DamagedStateError where that profile pins another release than the one here."""
    t = path.name.removesuffix(".manifest.json")  # its target: another of the profile's may be in this one's state
    others = " ".join(f"--target {s.name}" for s in ctx.profile.targets if s.name != t)
    if manifest.profile not in ctx.pack.profiles:  # (another pack's, or one since removed: no --profile to give)
        raise MismatchError(f"{path}: the image is in profile {manifest.profile}'s state, which this pack "
                            f"({ctx.pack.root}) does not have: revert it with the pack that has that profile, or "
                            f"restore the image" + (f"; or leave {t} out of this run: {others}" if others else ""))
    ft, pin = ctx.found.get(t), pin_of(ctx.pack.profiles[manifest.profile], t)
    if ft is not None and pin is not None and ((pin.version and pin.version != ft.version) or
                                               (pin.commit and not commit_matches(ft.commit, pin.commit))):
        line = top_line(path, "profile")
        raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}it records profile {manifest.profile}, "
                                f"which pins {t} {pin.version} @ {pin.commit or '(no commit)'}, not the release "
                                f"here ({ft.version} @ {ft.commit}): no run of it wrote these files (the target "
                                f"reinstalled at another release since?)", REMOVE_MANIFEST)
    raise MismatchError(f"{path}: the image is in profile {manifest.profile}'s state, not {ctx.profile.name}'s; "
                        f"use --profile {manifest.profile} --target {t} (revert with it first to apply "
                        f"{ctx.profile.name})" + (f", or leave {t} out of this run: {others}" if others else ""))


def _another_release(ctx: Context, manifest: Manifest, path: Path) -> None:
    """DamagedStateError where the manifest's ``found`` (the release the run that wrote it found: version, commit)
    is not the release here: no run wrote it on these files. A manifest without it (an older fixpack's) is not held,
    nor a version or commit either side lacks; commits agree as far as the shorter goes (:func:`commits_agree`)."""
    ft = ctx.found.get(path.name.removesuffix(".manifest.json"))
    version, commit = manifest.found.get("version", ""), manifest.found.get("commit", "")
    if ft is None or not manifest.found or ((not version or version == ft.version) and
                                             (not commit or not ft.commit or commits_agree(ft.commit, commit))):
        return
    line = top_line(path, "found")
    raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}it records the release it was written on as "
                            f"{version or '(none)'} @ {commit or '(none)'}, not the release here ({ft.version} @ "
                            f"{ft.commit}): no run wrote it on these files (the target reinstalled at another release "
                            f"since?)", REMOVE_MANIFEST)


def record_replays(path: Path, manifest: Manifest | None, fix: Fix, tree: Tree, rev: Pass) -> None:
    """DamagedStateError (exit 3, nothing written) where ``fix``, recorded applied in ``manifest`` (at ``path``), does
    not come off ``tree`` from the offsets its entry records (``rev``: the reversed pass from them, which refused a
    hunk), though each of its files on ``tree`` (the fixes after it taken off) is byte for byte as the entry records
    the fix leaving it: no file was changed since it was laid, so the record of where it was laid was (its
    ``offsets`` or ``hunk_offsets`` edited). It was called tampered, with advice to undo an edit of the file."""
    entry = manifest.entry(fix.id) if manifest is not None else None
    if entry is None or rev.ok or file_hashes(tree, list(entry.files)) != dict(entry.files):
        return
    note = next((n for n in rev.refused if n.path in entry.files), None)
    file = note.path if note is not None else next(iter(entry.files))
    key = next((k for k, v in (("hunk_offsets", entry.hunk_offsets), ("offsets", entry.offsets)) if file in v), "files")
    line, laid = manifest_line(path, fix.id, file, key), entry.laid()[file]
    raise DamagedStateError(path, f"{f'line {line}: ' if line else ''}fix {fix.id}'s entry records its hunks in {file} "
                                  f"laid at offset{'s' * (len(laid) > 1)} {', '.join(f'{n:+d}' for n in laid)}, but "
                                  f"{f'its {note.number} there' if note is not None else 'it'} does not come off "
                                  f"from there, though the file is byte for byte as the entry records the fix leaving "
                                  f"it (sha256 {str(entry.files[file])[:12]}): the record was edited (by hand?), not "
                                  f"the file, or an older fixpack did not record where it laid it", REMOVE_MANIFEST)
