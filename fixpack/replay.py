"""Unwinding a target's recorded fixes and replaying its chain over the files they leave: how apply and status
tell each fix's state on a target (one with no manifest has nothing to unwind: its chain replays onto the
files as they are).

:func:`unwind` reverse-applies the fixes the manifest records, last one first (a later fix may edit an earlier
one's context), with the lock's evidence (:meth:`fixpack.evaluate.FixEvidence.from_lock`): a fix on a file
whose sha256 is no longer the manifest's (:func:`tampered_files`), or whose patch does not reverse, is
tampered; a recorded fix that shares a file with one is not re-checked (its pre-image cannot be rebuilt).
:func:`replay` then gives each fix of the chain its state (:class:`fixpack.evaluate.Evaluation`): a recorded
fix that replays onto the unwound files is applied, one that does not is tampered; a fix with no record whose
files hash to post-images the lock records is ours, applied by a run whose manifest entry was lost. The
evaluation (applier, diff adapter) loads when a fix is placed, not when this module is imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .model import Fix, Pack
from .records import Lock, LockFix, Manifest, ManifestFix, Recorded
from .report import FixReport
from .safepath import file_on_the_way, shown_path
from .states import Action, State
from .structs import dataclass, replace
from .tree import Tree, file_hashes

T = TypeVar("T")

if TYPE_CHECKING:  # the evaluation (applier, diff adapter) loads when a patch is placed: status may need none
    from .evaluate import Evaluation, Pass
    from .run import Context


def unwind(applied: list[Fix], tree: Tree, tampered_files: set[str], lock: Lock, manifest: Manifest | None,
           check: Callable[[Fix, Tree, Pass], None]) -> tuple[Tree | None, dict[str, list[str]], dict[str, str],
                                                              dict[str, TakenOff]]:
    """Reverse-apply the recorded fixes, last first, each from the offsets ``manifest`` records it was laid at (none:
    0; ``check`` sees one that does not come off, on files no one changed: it may raise). Returns the tree before them
    (None when one of them does not reverse), per fix that failed why, per fix that could not be checked the tampered
    fix it shares a file with (its pre-image cannot be rebuilt), and per fix taken off where its hunks were and the
    files it left (:class:`TakenOff`); fixes on other files are still checked, so one hand-edited file does not make
    every earlier fix look tampered."""
    from .evaluate import FixEvidence, run_pass

    base = tree.fork()
    broken: dict[str, list[str]] = {}
    blocked: dict[str, str] = {}  # file -> the tampered fix that could not be unwound from it
    unchecked: dict[str, str] = {}
    moved: dict[str, TakenOff] = {}
    for fix in reversed(applied):
        hit = sorted(set(fix.touched_paths()) & tampered_files)
        shared = [p for p in fix.touched_paths() if p in blocked]
        if shared and not hit:
            unchecked[fix.id] = blocked[shared[0]]
            for p in fix.touched_paths():
                blocked.setdefault(p, blocked[shared[0]])
            continue
        rev = run_pass(fix, base, reverse=True, evidence=FixEvidence.from_lock(lock.fix(fix.id)),
                       at=None if hit else laid_at(manifest, fix))  # (a file changed since: no record holds there)
        if not hit and not rev.ok:
            check(fix, base, rev)
        if hit or not rev.ok:
            broken[fix.id] = tampered_why(hit, rev, fix, tree.root)
            for p in fix.touched_paths():
                blocked.setdefault(p, fix.id)
            continue
        base.adopt(rev.tree)
        moved[fix.id] = TakenOff(taken_off_at(rev, turned=True), {n.flat: n.turned for n in rev.hunks},
                                 {p: base.read(p) for p in fix.touched_paths()})
    return (None if broken else base), broken, unchecked, moved


@dataclass(frozen=True)
class TakenOff:
    """Where :func:`unwind` took a recorded fix off: per file the offset of its first hunk there (``first``:
    :func:`laid_where_taken_off`), per hunk (its index among the fix's, in :meth:`fixpack.model.Fix.file_patches`
    order) its own offset (``hunks``), and the fix's files as the taking off left them (``left``)."""

    first: dict[str, int]
    hunks: dict[int, int]
    left: dict[str, str | None]

    def pins(self, tree: Tree) -> dict[int, int]:
        """The hunks' offsets, where ``tree`` holds the fix's files as the taking off left them (the fixes before it
        laid again as they were): laid again there, each hunk goes back where it was, whatever twin of its pre-image
        the file holds elsewhere (:func:`replay`). Else none (a fix put before it since changed them: placed anew)."""
        return self.hunks if all(tree.read(p) == text for p, text in self.left.items()) else {}


def laid_at(manifest: Manifest | None, fix: Fix) -> Mapping[int, tuple[int, ...]] | None:
    """:func:`hunks_laid` of ``fix``'s entry in ``manifest``; None where no entry records it (a fix whose record was
    lost)."""
    entry = manifest.entry(fix.id) if manifest else None
    return hunks_laid(fix, entry) if entry else None


def hunks_laid(fix: Fix, entry: ManifestFix) -> dict[int, tuple[int, ...]]:
    """Per file patch of ``fix`` (the index of its first hunk among the fix's, :meth:`fixpack.model.Fix.file_patches`
    order), the offsets its hunks are taken off from (:func:`fixpack.evaluate.run_pass`'s ``at``), as ``entry``
    records them (:meth:`~fixpack.records.ManifestFix.laid`): each hunk's, where it records one for every hunk the
    fix has on the file (across its patch files), else the file's first hunk's alone (the running offset goes on from
    it)."""
    laid, fps = entry.laid(), list(fix.file_patches())
    out: dict[int, tuple[int, ...]] = {}
    flat, taken = 0, dict[str, int]()
    for fp in fps:
        offsets, at = laid.get(fp.path, (0,)), taken.get(fp.path, 0)
        every = sum(len(f.hunks) for f in fps if f.path == fp.path)
        out[flat] = offsets[at:at + len(fp.hunks)] if len(offsets) == every > 1 else offsets[:1]
        taken[fp.path], flat = at + len(fp.hunks), flat + len(fp.hunks)
    return out


def laid_offsets(side: Pass) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """A manifest entry's ``offsets`` (:func:`taken_off_at`, where not 0) and ``hunk_offsets`` (each hunk's, in a file
    whose hunks lie at offsets not all the same) from the pass ``side`` that laid the fix (or found it in), as the
    reversal measures them (a forward pass's :attr:`~fixpack.evaluate.HunkNote.turned`: hunks laid out of order)."""
    turned = not side.hunks or side.hunks[0].side == "pre-image"  # (a forward pass)
    each: dict[str, list[int]] = {}
    for n in sorted(side.hunks, key=lambda n: n.flat):  # (the patch's order: a reversed pass notes its last file first)
        each.setdefault(n.path, []).append(n.turned if turned else n.offset)
    return ({p: n for p, n in taken_off_at(side, turned).items() if n},
            {p: tuple(v) for p, v in each.items() if len(set(v)) > 1})


def taken_off_at(side: Pass, turned: bool = False) -> dict[str, int]:
    """Per file, the offset from its stated line at which the pass ``side`` placed a fix's first hunk there; with
    ``turned``, the offset a pass the other way finds it at (to lay again forward where a reversal took it off)."""
    out: dict[str, int] = {}
    for n in sorted(side.hunks, key=lambda n: n.flat):  # (its first hunk in the patch's order, of its first patch)
        out.setdefault(n.path, n.turned if turned else n.offset)
    return out


def laid_where_taken_off(tree: Tree, moved: dict[str, int]) -> None:
    """Before a fix taken off ``tree`` is laid again: each of its files' running offset set to the one its taking off
    measured (:func:`taken_off_at`). The file is as it was then (the fixes before it laid again), so its stated
    lines are off by that much: a line added above a hunk anchored to the file's start is the case (searched, such a
    hunk goes only at its stated line plus the running offset, and the reversed pass found its post-image there)."""
    for path, offset in moved.items():
        tree.set_delta(path, offset)


def popped(lock: Lock, target: str, tree: Tree, manifest: Manifest | None) -> tuple[tuple[str, ...], set[str]]:
    """The fixes of ``target`` that ``manifest`` (None: none) does not record as applied though ``tree`` holds them at
    the lock's states, and the files of their chains. A later fix may change a line of an earlier one's context, so
    that the earlier one's post-image is in the files as a whole no longer, nor its pre-image: the chain replayed
    forward on the files as they are called it a conflict, though its files were the chain's own bytes. So the chain
    is taken off its files as quilt pops a series, last first, by the lock's sha256 alone (no patch is placed): a fix
    whose files are its post-images is in (they become its pre-images), one whose files are not is not, and every
    file must end as the release's. Fixes linked by a file they share are one chain; the others are left out (for
    the full evaluation, which says what is wrong): a chain whose files are not the lock's states (drifted, edited by
    hand), or where one is at a state its chain has twice (a fix undoing another: which are in cannot be told), or
    whose sha256 is not the one the manifest records (an edit in a recorded fix's file is tampered, whatever it
    made), or that a fix the manifest records as applied is not in. Series order."""
    fixes = [f for f in lock.fixes if f.target == target and not f.upstreamed()]
    release, states = lock.release_files(target), dict[str, list[str | None]]()
    for f in fixes:
        for p, h in f.post().items():
            states.setdefault(p, [release[p]]).append(h)
    # (read in series order: a link or an unreadable file is named where the chain first meets it, as apply does)
    now, recorded = file_hashes(tree, list(states)), manifest.applied_ids() if manifest else set()
    kept = dict(manifest.files) if manifest else {}  # a file changed since the manifest was written: tampered
    found: set[str] = set()
    files: set[str] = set()
    for chain in _linked(fixes, lambda f: f.post()):  # (no two share a file: each is taken off on its own)
        paths = {p for f in chain for p in f.post()}
        if any(states[p].count(now[p]) != 1 or now[p] != kept.get(p, now[p]) for p in paths):
            continue
        there: list[str] = []
        for f in reversed(chain):  # each file's state is once in its chain: the fixes up to it are in, not the others
            hit = [now[p] == h for p, h in f.post().items()]
            if all(hit):
                there.append(f.id)
                now.update(f.pre())
            elif any(hit):  # in on one of its files, not on another
                break
        else:
            ids = {f.id for f in chain}
            if all(now[p] == release[p] for p in paths) and ids & recorded <= set(there) and set(there) - recorded:
                found |= set(there) - recorded
                files |= paths
    return tuple(f.id for f in fixes if f.id in found), files


def _linked(fixes: Sequence[T], files: Callable[[T], Iterable[str]]) -> list[list[T]]:
    """``fixes`` in groups, each the fixes that share a file (``files`` gives a fix's) with another of them, in series
    order."""
    groups: list[tuple[set[str], list[int]]] = []
    for i, f in enumerate(fixes):
        paths = set(files(f))
        joined = [g for g in groups if g[0] & paths]
        groups = [g for g in groups if not g[0] & paths] + [
            (paths.union(*(g[0] for g in joined)), sorted([i, *(j for g in joined for j in g[1])]))]
    return [[fixes[i] for i in g[1]] for g in groups]


def placed_off(chain: tuple[Fix, ...], tree: Tree, lock: Lock, manifest: Manifest | None, found: tuple[str, ...],
               settled: set[str]) -> tuple[str, ...]:
    """The fixes of ``chain`` (one target's, series order: the run's and those the manifest records) that no entry of
    ``manifest`` records (None: none), nor :func:`popped` found (``found``, ``settled``: the files it decided by the
    lock's sha256), though ``tree`` holds them on drifted files: taken off as :func:`popped` takes them, last first, but
    by placement (the lock's evidence): a recorded fix where its patch reverses, one with no record where its post-image
    is there and its pre-image is not (:func:`fixpack.evaluate.decide` says so: both there is ambiguous, and stops it)
    and the release held its pre-image. The case: a later fix that changes an earlier one's added line, on a file
    drifted since (an edit above it), with the manifest lost: the files are none of the lock's states, and the earlier
    fix's post-image is whole no longer, nor its pre-image. Fixes linked by a file they share are one group; a group
    counts only when laying the fixes taken off again, forward, first first, on what the taking off left gives
    ``tree``'s bytes (each pre-image found once there too), and every fix of it the manifest records is among them, and
    one of them at least is not found on ``tree`` as it is (else :func:`replay` finds each), or one found so did not
    come off once the later ones had (its post-image whole only at a twin a later fix left whole: judged without them,
    ambiguous), or a recorded fix came off under them (files as the manifest has them). Series order."""
    from .evaluate import FixEvidence, decide, run_pass

    recorded = manifest.applied_ids() if manifest else set()
    todo = [f for f in chain if f.id not in recorded and f.id not in found and not set(f.touched_paths()) <= settled]
    release = lock.release_files(chain[0].target) if todo else {}
    out: set[str] = set()
    for group in _linked(chain, lambda f: f.touched_paths()):
        paths = sorted({p for f in group for p in f.touched_paths()})
        now = file_hashes(tree, paths)
        if not any(f in todo for f in group) or now == {p: release.get(p) for p in paths}:
            continue  # (nothing to find, or every file the release's: nothing is in)
        evidence = {f.id: FixEvidence.from_lock(lock.fix(f.id)) for f in group}
        back, there, moved = tree.fork(), [], dict[str, dict[str, int]]()
        for f in reversed(group):
            if f.id in recorded:
                rev: Pass | None = run_pass(f, back, reverse=True, evidence=evidence[f.id], at=laid_at(manifest, f))
            else:
                ev = decide(f, back, evidence[f.id], False)
                rev = ev.reverse if ev.state is State.UPSTREAMED and _not_upstreams(f, lock) else None
            if rev is not None and rev.ok:
                there.append(f)
                back.adopt(rev.tree)
                moved[f.id] = taken_off_at(rev, turned=True)
        if not there or not {f.id for f in group} & recorded <= {f.id for f in there}:
            continue
        for f in reversed(there):  # laid again, first first: the same bytes, or the taking off was no unwinding
            laid_where_taken_off(back, moved[f.id])
            fwd = run_pass(f, back, reverse=False, evidence=evidence[f.id])
            if not fwd.ok:
                break
            back.adopt(fwd.tree)
        else:
            new = [f for f in there if f in todo]
            alone = {f for f in todo if f in group and  # (found on the files as they are: docstring)
                     decide(f, tree, evidence[f.id], False).state is State.UPSTREAMED}
            under = any(f.id in recorded for f in there) and not tampered_files(tree, manifest) & set(paths)
            if file_hashes(back, paths) == now and (not all(f in alone for f in new) or alone - set(there) or under):
                out |= {f.id for f in new}
    return tuple(f.id for f in chain if f.id in out)


def replay(fix: Fix, tree: Tree, lock: Lock, recorded: bool, broken: dict[str, list[str]],
           unchecked: dict[str, str], lost: bool = False, pins: Mapping[int, int] | None = None) -> Evaluation:
    """``fix``'s state on ``tree`` (the unwound files with the chain's earlier fixes replayed): ``recorded``, whether
    the manifest records it as applied (or ``lost``: no entry does, though the files hold it, :func:`popped`);
    ``broken`` and ``unchecked`` as :func:`unwind` returns them; ``pins``: per hunk, the offset it is laid again at
    (:meth:`TakenOff.pins`)."""
    from .evaluate import Evaluation, FixEvidence, decide, run_pass

    evidence = replace(FixEvidence.from_lock(lock.fix(fix.id)), laid=pins or {})
    if fix.id in broken:
        empty = run_pass(fix, tree, reverse=True, evidence=evidence)
        return Evaluation(State.TAMPERED, empty, empty, [tampered_said(broken[fix.id])])
    if recorded and broken:
        ev = decide(fix, tree, evidence, True)
        why = (f"not re-checked: it shares a file with tampered fix {unchecked[fix.id]}" if fix.id in unchecked
               else "its hunks reverse cleanly; another fix is tampered")
        return Evaluation(State.APPLIED, ev.forward, ev.reverse, [f"recorded as applied ({why})"])
    ev = decide(fix, tree, evidence, False)
    if not recorded and ev.state is State.UPSTREAMED and _ours(fix, tree, lock):
        return _found(ev, tree, "applied by an earlier run whose manifest entry was lost, or by hand (its files, with "
                                "the fixes before it in place, are this pack's post-images, sha256 as in the lock); "
                                "apply records it again, status and a dry run only report it")
    if not recorded and ev.state is State.UPSTREAMED and _not_upstreams(fix, lock):  # drifted: not the lock's files
        return _found(ev, tree, (
            "applied, though not as this profile's chain leaves it, and not recorded: its post-image is in files that "
            "are not this profile's post-images (another profile's run, or an edit by hand, with its manifest lost). "
            "The pinned release does not hold it (the lock found its pre-image there), so it is not upstream's: apply "
            "records it as applied, and revert then takes it out; status and a dry run only report it"),
            _off_lock(fix, tree, lock))
    if recorded:
        if ev.state in (State.ABSENT, State.DRIFTED):  # a drifted one was laid on files not the lock's: said so
            said = [(LOST_DRIFTED if ev.state is State.DRIFTED else LOST_CHAIN) if lost else "already applied"]
            if ev.state is State.DRIFTED:
                said.append("laid on a drifted file, not as the lock has it: " + "; ".join(ev.messages))
            return Evaluation(State.APPLIED, ev.forward, ev.reverse, said, ev.drifted)
        return Evaluation(State.TAMPERED, ev.forward, ev.reverse,
                          ["the manifest records it as applied, but it does not replay: " + "; ".join(ev.messages)])
    return ev


LOST_CHAIN = ("applied by an earlier run whose manifest entry was lost, or by hand (its files, taken off last fix "
              "first, are the lock's states along the chain down to the release's, sha256 as in the lock); apply "
              "records it again, status and a dry run only report it")


LOST_DRIFTED = ("applied by an earlier run whose manifest entry was lost, or by hand, on files drifted since (taken "
                "off last fix first by placement, each post-image found once, the files lay the same fixes again byte "
                "for byte); apply records it again, status and a dry run only report it")


def _off_lock(fix: Fix, tree: Tree, lock: Lock) -> list[str]:
    """``fix``'s files whose sha256 on ``tree`` is none the lock records for them (the release's, or a fix's post-
    image along the chain): what makes a fix found applied there drifted under ``--strict``."""
    states: dict[str, set[str | None]] = {}
    for f in lock.fixes:
        for path, h in [*f.pre().items(), *f.post().items()]:
            states.setdefault(path, set()).add(h)
    now = file_hashes(tree, fix.touched_paths())
    return sorted(p for p, h in now.items() if h not in states.get(p, set()))


def _found(ev: Evaluation, tree: Tree, said: str, drifted: list[str] | None = None) -> Evaluation:
    """An unrecorded fix whose post-image ``tree`` holds (``ev`` says upstreamed): applied, its run's record lost,
    and laid nowhere again. Its forward pass is left out (the chain goes on from ``tree`` as it is): a hunk that only
    adds lines after its context finds that context again once applied (at the file's end, or at its stated line),
    so the forward pass may succeed a second time, and its tree holds the added lines twice."""
    from .evaluate import Evaluation, Pass

    return Evaluation(State.APPLIED, Pass(True, tree.fork()), ev.reverse, [said], drifted or [])


def as_laid(entries: list[ManifestFix], pack: Pack, manifest: Manifest | None, tree: Tree,
            lock: Lock) -> list[ManifestFix]:
    """The manifest entries apply worked out on ``tree`` (the files its chain ends as), as apply from the release
    records them: in series order (a found opt-in's entry came after the chain's), each file's sha256 as the chain
    left it after the entry's fix. A fix found applied with no record in ``manifest`` (:func:`_found`) is laid
    nowhere: its change is in the files all along, so the entry of a fix before it on one of its files took that
    file's bytes with the later change in them (with a lost manifest, every fix of a file took its last bytes), and
    the next apply wrote the manifest again. Those entries (their files' sha256 and the offsets their first hunks lie
    at) are worked out again on a copy of ``tree``, the fixes after them taken out last first (those on the files
    concerned only: the others commute with them); where one does not reverse, the entries stay as they were."""
    from .evaluate import FixEvidence, run_pass

    where, recorded = {fid: i for i, fid in enumerate(pack.series)}, manifest.applied_ids() if manifest else set()
    ordered = sorted(entries, key=lambda e: where.get(e.id, len(where)))
    out = list(ordered)
    found = [i for i, e in enumerate(out) if e.state is Recorded.APPLIED and e.id not in recorded]
    stale = [i for i, e in enumerate(out) if any(j > i and set(out[j].files) & set(e.files) for j in found)]
    if not stale:
        return out
    paths, grew = set().union(*(out[i].files for i in stale)), True
    while grew:  # with the files of each fix after the first of them that changes one of those files
        more = set().union(*(e.files for e in out[stale[0] + 1:] if paths & set(e.files))) - paths
        paths, grew = paths | more, bool(more)
    back = tree.fork()
    for i in range(len(out) - 1, stale[0] - 1, -1):
        e = out[i]
        if not paths & set(e.files):
            continue
        out[i] = replace(e, files=file_hashes(back, list(e.files)))
        if e.state is Recorded.APPLIED:  # (its offsets too: where it lies once the fixes after it are out)
            rev = run_pass(pack.fixes[e.id], back, reverse=True, evidence=FixEvidence.from_lock(lock.fix(e.id)),
                           at=hunks_laid(pack.fixes[e.id], e))
            if not rev.ok:
                return ordered
            first, each = laid_offsets(rev)
            out[i] = replace(out[i], offsets=first, hunk_offsets=each)
            back.adopt(rev.tree)
    return out


def post_checked(ctx: Context, fix: Fix, before: Tree, ev: Evaluation) -> Tree:
    """``ev``'s forward tree (``fix`` laid on ``before``), once each file it makes from the pre-image the lock records
    for it is the post-image the lock records too, as it is where the lock is what ``lock`` wrote: a post-image sha256
    edited and sealed again (the seal is a plain sha256 anyone can recompute) is StaleLockError (exit 2) at its line,
    before anything is written (:func:`fixpack.lock_seal.post_edited`). Held so: a fix this run lays (absent or
    drifted), not one a manifest records (its files are there already: status vouches for them by the lock's last
    post-images alone). A file made of one that is not the lock's pre-image (a drifted image, an opt-in not selected
    before it; a renamed file is made of its old path's) makes other bytes by right: it is not held to the lock's,
    unless it is the very post-image the lock records, every hunk at its stated lines (a patch laid there makes that
    of one pre-image only): then the lock's pre-image sha256 was edited and sealed again, and the clean release was
    about to be called drifted (:func:`fixpack.lock_seal.pre_edited`)."""
    entry = ctx.lock.fix(fix.id)
    if entry is None or ev.state not in (State.ABSENT, State.DRIFTED):
        return ev.forward.tree
    from .lock_seal import record_edited

    if record_edited(ctx.profile.lock_path, entry, fix, True):  # its record first (a status parses it only here)
        from .lockfile import check_lock_matches

        check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock, hold={fix.id})  # (said as a stale lock is)
    paths, locked = [f.path for f in entry.files], entry.pre()
    pre, post = file_hashes(before, paths), file_hashes(ev.forward.tree, paths)
    came = {fp.new_path: fp.old_path for fp in fix.file_patches() if fp.old_path and fp.new_path}  # (a rename's)
    for f in entry.files:
        src = came.get(f.path, f.path)  # the file its bytes are made of
        wrong_post = pre.get(src) == locked.get(src) and post[f.path] != f.post
        stated = not any(h.offset for h in ev.forward.hunks if h.path in (f.path, src))  # (moved: another window)
        if wrong_post or stated and f.post is not None and pre.get(src) != locked.get(src) and post[f.path] == f.post:
            from .lock_hints import regenerate_hint  # only for a lock edited so (a deletion tells no pre-image)
            from .lock_seal import post_edited, pre_edited

            n = next(i for i, e in enumerate(ctx.lock.fixes) if e.id == fix.id)  # (the entry lock.fix gives)
            at, hint = (ctx.profile.lock_path, len(ctx.lock.fixes), n, fix.id), \
                regenerate_hint(ctx.profile, ctx.relock, ctx.pack)
            if wrong_post:
                raise post_edited(*at, f.path, f.post, post[f.path], hint)
            raise pre_edited(*at, src, locked.get(src), pre.get(src), hint)
    _counts_checked(ctx, fix, entry, before, pre)
    return ev.forward.tree


def _counts_checked(ctx: Context, fix: Fix, entry: LockFix, before: Tree, pre: dict[str, str | None]) -> None:
    """Where every file ``fix`` reads is byte for byte on ``before`` the pre-image the lock (its ``entry``) records for
    it (``pre``:
    the sha256 there of the files the lock records), each hunk's occurrences there are what ``lock`` counted, and the
    lock records them: a ``pre_count`` or ``post_count`` that differs was edited by hand and sealed again,
    StaleLockError (exit 2) at its line, before anything is written. Elsewhere (a drifted file, an opt-in before it
    left out) the counts cannot be told there, and are the lock's word. Its hunks are the lock's already
    (:func:`post_checked` held its record to its patch first)."""
    if all(h.pre_count is None for h in entry.hunks):
        return
    locked, reads = entry.pre(), [fp.old_path for fp in fix.file_patches() if fp.old_path]
    if any(p not in locked or p not in pre or pre[p] != locked[p] for p in reads):
        return
    from .evaluate import TRUSTED, run_pass
    from .lock_seal import counts_edited

    counted = run_pass(fix, before, reverse=False, evidence=TRUSTED, count=True)
    edited = counts_edited(ctx.profile.lock_path, entry, counted.counts) if counted.ok else []
    if edited:
        from .lock_hints import stale_lock_error

        raise stale_lock_error(ctx.profile, ctx.lock, ctx.relock, [(("fix", fix.id), f"{fix.id}: {'; '.join(edited)}")])


def _ours(fix: Fix, tree: Tree, lock: Lock) -> bool:
    """Each touched file hashes to a post-image the lock records for it along the chain: our bytes,
    not upstream's (a release that took the change upstream would not match byte for byte)."""
    posts: dict[str, set[str | None]] = {}
    for entry in lock.fixes:
        for f in entry.files:
            if f.pre != f.post:  # an upstreamed fix's entry records the release's own bytes
                posts.setdefault(f.path, set()).add(f.post)
    now = file_hashes(tree, fix.touched_paths())
    return bool(now) and all(p in posts and h in posts[p] for p, h in now.items())


def _not_upstreams(fix: Fix, lock: Lock) -> bool:
    """The lock (made on the pinned release, which the run's target is at) records the fix as changing its files
    there: the release held its pre-image, not its post-image (an entry whose files are unchanged, pre == post,
    is a fix the lock took as upstreamed)."""
    entry = lock.fix(fix.id)
    return entry is not None and not entry.upstreamed()


def tampered_files(tree: Tree, manifest: Manifest | None) -> set[str]:
    """The files the manifest records whose sha256 on ``tree`` is no longer the one it records."""
    recorded = dict(manifest.files) if manifest else {}
    now = file_hashes(tree, list(recorded))
    return {p for p, h in recorded.items() if now[p] != h}


def tampered_why(files: list[str], rev: Pass, fix: Fix, root: Path) -> list[str]:
    """Why a recorded fix is tampered (status, apply and revert alike): each changed file of ``root``, then each hunk
    ``rev`` (the fix reversed on the tree) no longer reverses. A file the fix deletes, made again, is said as such;
    one gone is said gone (a file where a folder on its way was: named), and not said again to be missing."""
    deletes = {fp.old_path for fp in fix.file_patches() if fp.new_path is None}
    said, gone = [], set()
    for p in files:
        shown = shown_path(p)  # (a name that ends in a space is quoted)
        if p in deletes:
            said.append(f"{shown}: exists, though fix {fix.id} deletes it (made again since it was applied)")
        elif not os.path.lexists(root / p):
            way = file_on_the_way(root, p)
            gone.add(shown)
            said.append(f"{shown}: gone ({way} is no folder now)" if way else
                        f"{shown}: gone (removed since it was applied)")
        else:
            said.append(f"{shown}: differs from the manifest's sha256 (changed since it was applied)")
    return said + [m for m in rev.explain(edited=True) if not any(m.startswith(f"{g}: no such file") for g in gone)]


def tampered_said(why: list[str]) -> str:
    return "the manifest records it as applied, but " + "; ".join(why)


def release_again(entries: list[ManifestFix], lock: Lock, target: str) -> dict[str, str]:
    """Per applied entry of ``entries`` (the manifest a run would write) that leaves each of its files at the
    release's own sha256, where the lock records the fix leaving them otherwise: why it is refused. A drift doubled a
    line the fix takes out (appended again since the release), so that laying it gave the release's bytes back: the
    next run could not tell the file from the release (the fix laid a second time, or its record read as damaged:
    :func:`fixpack.manifest_trust.check_fix_files`)."""
    release, out = lock.release_files(target), {}
    for e in entries:
        if e.at_release(lock.fix(e.id), release):
            them = "them" if len(e.files) > 1 else "it"
            out[e.id] = (f"laid on this tree, it leaves {', '.join(map(shown_path, e.files))} byte for byte as the "
                         f"release has {them}, which the lock says it does not (a line it takes out was there twice, "
                         f"one appended since the release?): a later run could not tell that from the release itself, "
                         f"and would lay it again. Put the file back to the release, or rebase the fix for this tree")
    return out


def fix_report(fix: Fix, ev: Evaluation, selected: bool, dry: bool, opt_in: bool) -> FixReport:
    """``fix``'s line of the report; ``opt_in``: the profile lists it under opt_in (what the run selects by; a fix
    whose fix.toml says default may be an opt-in of a profile)."""
    laid = ev.state in (State.ABSENT, State.DRIFTED)
    action = (Action.WOULD_APPLY if dry else Action.APPLIED) if laid else Action.NONE
    messages = list(ev.messages)
    if not selected and ev.state is State.APPLIED:
        messages.append("not selected in this run; kept (revert removes it)")
    return FixReport(fix.id, fix.version, fix.target, opt_in, selected, ev.state, action,
                     [h.as_dict() for h in ev.offsets], messages, [h.refusal() for h in ev.refused])


def manifest_entry(fix: Fix, tree: Tree, state: Recorded, ev: Evaluation | None = None) -> ManifestFix:
    """``fix``'s manifest entry in ``state``, with its files' hashes in ``tree``, the patch bytes its change is
    from (status takes the lock's word for those bytes alone: :func:`fixpack.status_fast.rewritten`) and, from ``ev``
    (its evaluation: its forward pass where it laid the fix, else the reversed pass that found it in), the offset
    its first hunk was laid at in each file where it is not 0."""
    first, each = laid_offsets(ev.forward if ev.forward.hunks else ev.reverse) if ev else ({}, {})
    return ManifestFix(fix.id, fix.version, fix.patch_sha256, state, file_hashes(tree, fix.touched_paths()),
                       fix.bytes_sha256, first, each)
