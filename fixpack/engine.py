"""The engine's entry points: apply, status, revert, and the lock (fingerprints) of a profile.

Each returns a :class:`fixpack.report.Report` (results as data, its exit code its own) or raises a
:class:`fixpack.errors.FixpackError`; nothing here prints, exits or reads the environment. A run
computes every file in memory first (:class:`fixpack.tree.Tree`); it writes only when the whole
selection reaches the profile's state, under the target's lock, journalled (:mod:`fixpack.transaction`).
"""

from __future__ import annotations

from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from . import components, lockfile
from .advice import add_next_steps, journal_steps, note_stale, other_patch, run_writes, stale_entry
from .errors import BadInputError, MismatchError
from .fsio import FileChange, forget_state
from .kept import as_recorded
from .lock_hints import relock_command
from .manifest_trust import check_fix_files, record_replays
from .model import Fix, Profile
from .patchfiles import check_deleted_then_touched, parse_fixes
from .plan import TargetPlan, dry_notes, manifest_changed, manifest_rel, new_manifest, note_journal
from .records import Kept, Lock, Manifest, Recorded, dumps
from .replay import (
    as_laid,
    fix_report,
    hunks_laid,
    laid_where_taken_off,
    manifest_entry,
    placed_off,
    popped,
    post_checked,
    release_again,
    replay,
    tampered_files,
    tampered_said,
    tampered_why,
    unwind,
)
from .report import FixReport, Report
from .run import Context, Request, note_named_defaults, prepare, soft_lock
from .runlock import run_lock
from .safepath import shown_path
from .state import journal_originals, leftover_journal, manifest_path, read_manifest
from .states import CONFLICT_STATES, Action, State, TargetStatus
from .status_fast import is_clean_release, locked_files, rewritten, with_release_files
from .strict import next_steps
from .structs import replace
from .targets import FoundTarget
from .transaction import temp_paths_free
from .tree import Tree, decode, file_hashes
from .writeall import recover_interrupted, write_all

if TYPE_CHECKING:  # the evaluation (applier, diff adapter) loads when a patch is placed: status may need none
    from collections.abc import Callable, Mapping


def _chain(ctx: Context, ft: FoundTarget, manifest: Manifest | None, wanted: tuple[str, ...]) -> tuple[Fix, ...]:
    target = ft.spec.name
    recorded = manifest.applied_ids() if manifest else set()
    unknown = recorded - set(ctx.pack.fixes)
    if unknown:
        raise BadInputError(f"the manifest {manifest_path(ft.root, target)} records fixes this pack does not have: "
                            f"{', '.join(sorted(unknown))}. Use the pack that applied them (revert with it)")
    for entry in manifest.fixes if manifest else ():
        fix = ctx.pack.fixes.get(entry.id)
        if manifest and entry.state is Recorded.APPLIED and fix and not fix.recorded_as(entry.patch_sha256):
            if fix.vouched_wrongly(entry.patch_sha256):  # the image has the pack's patch; the lock's fingerprint lies
                key = ("fix", fix.id)
                lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock, vouch=False,
                                            keep=key.__eq__)  # (at its line, as apply says it)
            raise BadInputError(other_patch(ctx, ft, manifest, entry, fix))
    ids = [f for f in set(wanted) | recorded if ctx.pack.fixes[f].target == target]
    parse_fixes(ctx.pack, ctx.profile, ids)  # the recorded ones too (the selected ones are parsed already)
    chain = ctx.pack.ordered(tuple(ids))
    check_deleted_then_touched(chain)
    return chain


# --- evaluating a target ----------------------------------------------------------------------


def _evaluate_target(ctx: Context, ft: FoundTarget, wanted: tuple[str, ...], dry: bool) -> TargetPlan:
    """Every fix of the target's chain, in series order, with its state; the tree ends as the chain.

    Fixes the manifest records (and those it lost that the files hold at the lock's states, :func:`popped`, or on
    drifted files, :func:`placed_off`) are first unwound from the files, last one first (a later fix may edit an
    earlier one's context), which verifies each of them; the chain is then replayed from the unwound tree with the
    newly selected fixes in their places."""
    tree, manifest, pending = _load_state(ctx, ft)
    if ctx.report.command == "status" and manifest is not None and not pending:
        held = _status_held(ctx, ft, tree, manifest, wanted)
        if held is not None:
            return held
    recorded_components = manifest  # a reinstalled target leaves the components' files where they are
    if manifest is not None and is_clean_release(tree, manifest, ctx.lock):
        note_stale(ctx, ft)
        manifest = None
    lost, settled = popped(ctx.lock, ft.spec.name, tree, manifest)  # no entry records them, though the files hold them
    chain = _chain(ctx, ft, manifest, wanted + lost)
    lost += placed_off(chain, tree, ctx.lock, manifest, lost, settled)  # ... on drifted files
    recorded = (manifest.applied_ids() if manifest else set()) | set(lost)
    applied = [f for f in chain if f.id in recorded]
    changed = tampered_files(tree, manifest)  # (since the manifest was written: tampered)
    base, broken, unchecked, moved = unwind(applied, tree, changed, ctx.lock, manifest,
                                            partial(record_replays, manifest_path(ft.root, ft.spec.name), manifest))
    plan = TargetPlan(tree, manifest, [], True, pending)
    if base is not None:
        tree.adopt(base)
    for fix in chain:
        off = moved.get(fix.id) if base is not None else None
        if off is not None:
            laid_where_taken_off(tree, off.first)
        ev = replay(fix, tree, ctx.lock, fix in applied, broken, unchecked, fix.id in lost,
                    off.pins(tree) if off and fix.id not in lost else None)  # (a lost one: its taking off guessed)
        fr = _no_record_while(fix_report(fix, ev, fix.id in wanted, dry, fix.id in ctx.profile.opt_in), fix, changed)
        ctx.report.fixes.append(fr)
        refused = ctx.report.strict and (ev.state is State.DRIFTED or (ev.state is State.APPLIED and bool(ev.drifted)))
        if refused:  # one to lay or one laid on a drifted file (the replay's ev.drifted): a mismatch under --strict
            fr.state = State.DRIFTED
            fr.action = Action.NONE  # refused: it would not be applied (the others' would-apply holds once it is)
            comps = {c.id for c in recorded_components.components} if recorded_components else set()
            ctx.drift.append((fr, ft, fix, ev.drifted, recorded | comps, set(broken), ev.state is State.APPLIED))
            plan.reached = False
        if ev.state in (State.ABSENT, State.DRIFTED, State.APPLIED):
            if base is not None:  # a refused one too: nothing is written, the later fixes are judged on top of it
                tree.adopt(post_checked(ctx, fix, tree, ev))
            if not refused:
                plan.entries.append(manifest_entry(fix, tree, Recorded.APPLIED, ev))
        elif ev.state is State.UPSTREAMED:
            plan.entries.append(manifest_entry(fix, tree, Recorded.UPSTREAMED))
        else:
            plan.reached = False
    for fid, why in release_again(plan.entries, ctx.lock, ft.spec.name).items():  # (refused: a conflict)
        fr, plan.reached = ctx.report.fix(fid), False
        fr.state, fr.action, fr.messages = State.CONFLICT, Action.NONE, [why]
    _found_opt_ins(ctx, ft, tree, wanted, plan, (broken, unchecked), dry, changed)
    build = None if ctx.report.command == "status" or not plan.reached else ctx.layouts
    reports, plan.components, reached = components.evaluate(ctx.profile, ft, tree, recorded_components, ctx.components,
                                                            build, dry, ctx.lock, ctx.relock)
    ctx.report.fixes += reports
    plan.reached = plan.reached and reached
    return plan


def _status_held(ctx: Context, ft: FoundTarget, tree: Tree, manifest: Manifest,
                 wanted: tuple[str, ...]) -> TargetPlan | None:
    """Status of a target whose files hold what the lock says its recorded chain leaves there (no hunk is
    placed: :mod:`fixpack.status_fast`); None when they do not, for the full evaluation to say why."""
    recorded = {e.id for e in manifest.fixes}
    if not recorded <= set(ctx.pack.fixes):
        return None
    chain = ctx.pack.ordered(tuple(f for f in set(wanted) | recorded if ctx.pack.fixes[f].target == ft.spec.name))
    ids = {f.id for f in chain}
    expected = locked_files(ctx.lock, manifest, ft.spec.name, ids)
    others = [f for f in ctx.profile.opt_in if f not in ids and ctx.pack.fixes[f].target == ft.spec.name]
    expected = None if expected is None else with_release_files(ctx.lock, ft.spec.name, expected, others)
    if expected is None or file_hashes(tree, list(expected)) != expected:
        return None
    edited = rewritten(manifest, chain)  # (bytes the image's were not applied from: the lock's word is not enough)
    if edited:  # held to the lock as a dry run holds the fixes it parses (exit 2 where it was sealed over them)
        parse_fixes(ctx.pack, ctx.profile, edited)
        lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock)
    for fix in chain:
        kept = [] if fix.id in wanted else ["not selected in this run; kept (revert removes it)"]
        ctx.report.fixes.append(FixReport(fix.id, fix.version, fix.target, fix.id in ctx.profile.opt_in,
                                          fix.id in wanted, State.APPLIED, Action.NONE, [], ["already applied", *kept],
                                          []))
    reports, entries, reached = components.evaluate(ctx.profile, ft, tree, manifest, ctx.components, None, True,
                                                    ctx.lock, ctx.relock)
    ctx.report.fixes += reports
    return TargetPlan(tree, manifest, [], reached, False, entries, held=True)


def _load_state(ctx: Context, ft: FoundTarget) -> tuple[Tree, Manifest | None, bool]:
    """The target's files and manifest as the next writing run will start from them: when a killed
    run left a journal, its originals are laid over the disk in memory (nothing is written here)."""
    tree, pending = Tree(ft.root), leftover_journal(ft.root)
    mpath = manifest_rel(ft)
    originals = journal_originals(ft.root, run_writes(ctx, ft.root))  # the manifest as the rollback leaves it
    kept = originals.get(mpath)
    manifest = read_manifest(ft.root, ft.spec.name) if mpath not in originals else \
        Manifest.from_json(kept, ft.root / mpath) if kept is not None else None
    for path, data in originals.items():
        if path != mpath and not path.startswith(mpath.rpartition("/")[0] + "/"):  # (another target's manifest)
            tree.write(path, decode(data) if data is not None else None)
    if manifest is not None:
        check_fix_files(ctx, manifest, ft.root / mpath, tree)
        components.check_records(ctx.profile, ctx.lock, manifest, ft.root / mpath)
    return tree, manifest, pending


# --- apply / status -------------------------------------------------------------------------------

def apply(req: Request) -> Report:
    """Apply the profile's defaults plus ``req.opt_ins`` (or, with ``dry_run``, check them only).

    The report's ``exit_code`` is 0 only when every selected fix ends applied or upstreamed.
    Raises FixpackError for bad input (exit 2), damaged state (3) or an unwritable / busy target (5).
    """
    ctx = prepare(req, "apply")
    with ExitStack() as locks:
        locks.enter_context(ctx.report.said_truly())  # a refusal after the rollback below says what it wrote
        locks.enter_context(journal_steps(ctx))  # a damaged journal's steps name this target's commands
        # a writing run holds every target's lock exclusively from its first look to its last write (one
        # per root folder, in a fixed order), so it evaluates once and nobody changes what it planned
        for root in sorted({ft.root.resolve() for ft in ctx.found.values()}):
            locks.enter_context(run_lock(root, shared=req.dry_run, wait=ctx.lock_wait, progress=ctx.progress))
        if not req.dry_run:
            recover_interrupted(ctx)
        plans = {name: _evaluate_target(ctx, ft, ctx.selected, req.dry_run) for name, ft in ctx.found.items()}
        lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock)  # (each fix it parsed: its change)
        dry_notes(ctx, plans)
        note_named_defaults(ctx, req.opt_ins)
        next_steps(ctx, {name: plan.manifest for name, plan in plans.items()})
        if req.dry_run:  # (what the run refuses before it writes, as it would)
            temp_paths_free(ctx.report.ok, ((ft, plans[n].tree.changes()) for n, ft in ctx.found.items()))
        if not ctx.report.ok or req.dry_run:
            return ctx.report.close()
        # a fix recorded now has been placed (its patches parsed): held to them, not to a lock that vouched for it
        laid = {f.id for f in ctx.report.fixes if f.action is Action.APPLIED}
        lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, keep=lambda k: k[1] in laid, vouch=False)
        writes = [(ft, *_target_changes(ctx, ft, plans[name])) for name, ft in ctx.found.items()]
        write_all(ctx, [w for w in writes if w[1]])
    return ctx.report.close()


def status(req: Request) -> Report:
    """What ``apply`` with the same request would do, without writing: the same selection (defaults,
    ``req.opt_ins``, ``req.all_opt_in``), the same states, actions and exit code. The profile's other
    opt-in fixes and components of the found targets are listed after it as ``skipped`` (not selected)."""
    ctx = prepare(replace(req, dry_run=True), "status")  # (the caller's request is left as it was)
    plans = {}
    for name, ft in ctx.found.items():
        with journal_steps(ctx), run_lock(ft.root, shared=True, wait=ctx.lock_wait, progress=ctx.progress):
            plans[name] = _evaluate_target(ctx, ft, ctx.selected, dry=True)
    lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock)  # (each fix it parsed: its change)
    dry_notes(ctx, plans)
    _list_unselected(ctx)
    note_named_defaults(ctx, req.opt_ins)
    next_steps(ctx, {name: plan.manifest for name, plan in plans.items()})
    temp_paths_free(ctx.report.ok, ((ft, plans[n].tree.changes()) for n, ft in ctx.found.items()))  # as apply
    return ctx.report.close()


def _found_opt_ins(ctx: Context, ft: FoundTarget, tree: Tree, wanted: tuple[str, ...], plan: TargetPlan,
                   tampered: tuple[dict[str, list[str]], dict[str, str]], dry: bool, changed: set[str]) -> None:
    """An opt-in this run does not select and no manifest entry lists may be in the files (a run whose record is gone,
    or a hand edit): found whole (our post-images), it is reported and recorded, so that revert removes it; found in
    part, it is reported in its state (partial: exit 4, nothing written), as revert names it, not as skipped. Looked
    for by the lock's hashes first (:func:`fixpack.lost.unrecorded`: an opt-in whose files are not ours costs hashes
    only)."""
    from .lost import partial_parse, partly_said, unrecorded

    listed = {f.id for f in ctx.report.fixes}
    extra = [f for f in ctx.pack.ordered(ctx.profile.opt_in)
             if f.target == ft.spec.name and f.id not in wanted and f.id not in listed]
    held, part = unrecorded(extra, tree, ctx.lock, partial_parse(ctx)) if extra else ([], {})
    parse_fixes(ctx.pack, ctx.profile, [f.id for f in extra if f.id in held or f.id in part])
    for fix in (f for f in extra if f.id in held or f.id in part):
        ev = replay(fix, tree, ctx.lock, False, *tampered)
        fr = _no_record_while(fix_report(fix, ev, False, dry, True), fix, changed)
        if ev.state is State.APPLIED and fix.id in held:
            plan.entries.append(manifest_entry(fix, tree, Recorded.APPLIED, ev))
        elif fix.id in part and ev.state in CONFLICT_STATES:  # (its action none: fix_report's for these states)
            plan.reached = False
            fr.messages.insert(0, partly_said(part[fix.id]))
        else:
            continue
        ctx.report.fixes.append(fr)


def _no_record_while(fr: FixReport, fix: Fix, changed: set[str]) -> FixReport:
    """``fr``, where ``fix`` is found applied with no record in a file ``changed`` since the manifest was written
    (tampered: the fix that records it refuses the run), saying apply does not record it (it said it would)."""
    hit = sorted(set(fix.touched_paths()) & changed)
    if hit:
        fr.messages = [m[:m.index("apply records it")] + f"apply does not record it while {shown_path(hit[0])} is "
                       f"tampered (changed since the manifest was written, as said of the fix that records it)"
                       if "apply records it" in m else m for m in fr.messages]
    return fr


def _list_unselected(ctx: Context) -> None:
    """The profile's opt-ins (fixes, then components) of found targets that the run neither selects
    nor finds recorded: ``skipped``, in series (then profile) order among the others."""
    listed = {(f.kind, f.id) for f in ctx.report.fixes}
    hint = "opt-in, not selected in this run: name it (or give --all-opt-in) to apply it or see its state"
    for fix in ctx.pack.ordered(ctx.profile.opt_in):
        if fix.target in ctx.found and ("fix", fix.id) not in listed:
            ctx.report.fixes.append(FixReport(fix.id, fix.version, fix.target, True, False, State.SKIPPED,
                                              messages=[hint]))
    for comp in ctx.profile.components:
        if comp.target in ctx.found and ("component", comp.id) not in listed:
            ctx.report.fixes.append(FixReport(comp.id, comp.version, comp.target, comp.opt_in, False, State.SKIPPED,
                                              messages=[components.unselected(ctx.found[comp.target])],
                                              kind="component"))
    series = {fid: i for i, fid in enumerate(ctx.pack.series)}
    comps = {c.id: i for i, c in enumerate(ctx.profile.components)}
    ctx.report.fixes.sort(key=lambda f: (f.kind != "fix", (series if f.kind == "fix" else comps).get(f.id, 0)))


def _target_changes(ctx: Context, ft: FoundTarget,
                    plan: TargetPlan) -> tuple[list[FileChange], Mapping[str, Kept]]:
    """What writing one target's plan changes (the caller holds its lock): its files, then its manifest; none when
    nothing is to be written, or the rollback alone brought the target where this run wanted it."""
    changes, folders = as_recorded(ft.root, plan.tree.changes(), plan.manifest)  # what a fix removed: as it was
    plan.entries = as_laid(plan.entries, ctx.pack, plan.manifest, plan.tree, ctx.lock)  # a found fix: as laid
    if not changes and not manifest_changed(ctx, ft, plan):
        return [], folders
    mpath = manifest_rel(ft)
    changes.append(FileChange(mpath, dumps(new_manifest(ctx, ft, plan, changes).to_json()), 0o644))
    if len(changes) == 1:  # the manifest alone: the run wrote, though every fix says "already applied"
        ctx.report.target(ft.spec.name).note(f"no file of the target changed; its manifest {changes[0].path} was "
                                             f"written again, to record what is there")
    return changes, folders


# --- revert -------------------------------------------------------------------------------------

def revert(req: Request) -> Report:
    """Unapply every fix the manifest records, in reverse order, restoring the original bytes.

    Refuses (exit 3, nothing written) when a file changed since it was applied.
    """
    from .lost import refuse_unrecorded  # (revert's only: status and apply do without it)

    ctx = prepare(req, "revert", need_lock=False)
    ctx.lock = soft_lock(ctx, req)
    with ExitStack() as locks:
        locks.enter_context(ctx.report.said_truly())
        locks.enter_context(journal_steps(ctx))
        # one lock per root folder (two targets may share a site-packages), taken in a fixed order;
        # planning and writing happen under it, so no other run changes what was planned
        for root in sorted({ft.root.resolve() for ft in ctx.found.values()}):
            locks.enter_context(run_lock(root, shared=req.dry_run, wait=ctx.lock_wait, progress=ctx.progress))
        if not req.dry_run and ctx.report.ok:
            recover_interrupted(ctx)
        work: list[tuple[FoundTarget, Tree, Manifest]] = []
        manifests: dict[str, Manifest | None] = {}
        for ft in ctx.found.values():
            tree, manifest, pending = _load_state(ctx, ft)  # a dry run sees the journal's originals
            note_journal(ctx, ft.spec.name, pending)
            manifests[ft.spec.name] = manifest
            if manifest is None:
                refuse_unrecorded(ctx, ft, tree)
                continue
            if is_clean_release(tree, manifest, ctx.lock):  # as apply and status see it: nothing of ours is there
                note_stale(ctx, ft)
                ctx.report.fixes += [stale_entry(ctx, ft, e) for e in manifest.fixes]
            else:
                _plan_revert(ctx, ft, tree, manifest, req.dry_run)
            if ctx.report.ok:  # the recorded fixes are reverted on ``tree``: is any other left in?
                refuse_unrecorded(ctx, ft, tree, manifest)
            ctx.report.fixes += components.revert(ctx.profile, manifest, tree, req.dry_run)
            work.append((ft, tree, manifest))
        add_next_steps(ctx, manifests)
        if req.dry_run:
            temp_paths_free(ctx.report.ok, ((ft, tree.changes()) for ft, tree, _manifest in work), None)
        if not ctx.report.ok or req.dry_run:
            return ctx.report.close()
        writes = []
        for ft, tree, manifest in work:
            changes, folders = as_recorded(ft.root, tree.changes(), manifest)  # what a fix removed: as it was
            writes.append((ft, [*changes, FileChange(manifest_rel(ft), None)], folders))
        # (a Ctrl-C once a target's writes were complete too: its manifest is gone, its folder goes)
        write_all(ctx, writes, after=forget_state)
        for ft in ctx.found.values():
            if manifests[ft.spec.name] is None:  # nothing to revert: an empty .fixpack/ (left by hand) goes too
                forget_state(ft.root)
    return ctx.report.close()


def _plan_revert(ctx: Context, ft: FoundTarget, tree: Tree, manifest: Manifest, dry: bool) -> None:
    """Reverse the manifest's fixes on ``tree``, last first: only their patches are parsed."""
    from .evaluate import FixEvidence, run_pass

    tampered = tampered_files(tree, manifest)
    for entry in reversed(manifest.fixes):
        fix = ctx.pack.fixes.get(entry.id)
        if fix is None:
            raise BadInputError(f"the manifest at {manifest_path(ft.root, ft.spec.name)} records {entry.id} "
                                f"v{entry.version}, a fix this pack does not have; revert with the pack that "
                                f"applied it")
        if not fix.recorded_as(entry.patch_sha256):
            raise BadInputError(other_patch(ctx, ft, manifest, entry, fix))
    parse_fixes(ctx.pack, ctx.profile, [e.id for e in manifest.fixes if e.state is Recorded.APPLIED])
    for entry in reversed(manifest.fixes):
        fix = ctx.pack.fixes[entry.id]
        state = State.APPLIED if entry.state is Recorded.APPLIED else State.UPSTREAMED
        fr = FixReport(fix.id, fix.version, fix.target, fix.opt_in, True, state)
        ctx.report.fixes.insert(0, fr)
        if entry.state is not Recorded.APPLIED:
            fr.messages.append("upstreamed: not ours to revert")
            continue
        bad = sorted(set(fix.touched_paths()) & tampered)
        rev = run_pass(fix, tree, reverse=True, evidence=FixEvidence.from_lock(ctx.lock.fix(fix.id)),
                       at=None if bad else hunks_laid(fix, entry))  # (a file changed since: no record holds there)
        if bad:
            fr.state = State.TAMPERED
            fr.messages.append(tampered_said(tampered_why(bad, rev, fix, tree.root)))
            continue
        if not rev.ok:
            record_replays(manifest_path(ft.root, ft.spec.name), manifest, fix, tree, rev)
            fr.state = State.AMBIGUOUS if rev.present else State.CONFLICT
            fr.messages += rev.explain()
            fr.refused = [h.refusal() for h in rev.refused]
            continue
        tree.adopt(rev.tree)
        fr.action = Action.WOULD_REVERT if dry else Action.REVERTED


# --- the lock: fingerprints along the chain -------------------------------------------------------

def fingerprint_chain(req: Request, keep: bool = True) -> tuple[Lock, Profile]:
    """Fingerprints of the whole chain (defaults and every opt-in, in series order) on clean release
    copies. Raises ConflictError/MismatchError when a fix does not apply exactly to the release copy. With
    ``--target`` (and ``keep``), the other targets' entries are kept from the lock on disk
    (:func:`fixpack.lock_scope.keep_others`: exit 2 when they cannot be)."""
    ctx = prepare(replace(req, all_opt_in=True), "lock", need_lock=False)
    chain = ctx.pack.ordered(ctx.selected)
    with_fixes = {f.target for f in chain}
    for t in ctx.report.targets:
        # a target with no fix in the profile has nothing to fingerprint; it may be absent here
        if t.status in (TargetStatus.MISSING, TargetStatus.MISMATCH) and t.name in with_fixes:
            raise MismatchError(f"cannot fingerprint target {t.name}: {t.message}")
    from .release import refuse_changed_copy  # only for a lock

    for name in sorted(with_fixes & ctx.found.keys()):
        refuse_changed_copy(ctx.found[name], ctx.profile.name, ctx.pack.root)
    lock = lockfile.fingerprint(ctx.pack, ctx.profile, chain, ctx.found, req.upstreamed)
    if keep and req.only_targets:
        from . import lock_scope  # only for a lock of some of the targets

        redo = partial(relock_command, ctx.profile, req.only_targets, req.roots, req.env_root, ctx.pack)
        lock = lock_scope.keep_others(ctx.pack, ctx.profile, lock, req.only_targets, redo)
    return lock, ctx.profile


def write_lock(req: Request, before: Callable[[bytes], None] | None = None) -> Path:
    """Write ``profiles/<profile>.lock`` from the clean release copies the request points at; ``before``, if given,
    is called with the lock's bytes just before they are written (a rebase records them: rebase_putback)."""
    lock, profile = fingerprint_chain(req)
    return lockfile.write(profile, lock, before=before)


def check_lock_fresh(req: Request) -> list[str]:
    """Raise StaleLockError when the committed lock differs from one generated now; return the fixes whose
    patch was only reworded since (lock_bump.check_fresh's first list)."""
    from . import lock_scope
    from .lock_bump import check_fresh

    lock, profile = fingerprint_to_check(req)
    redo = partial(lock_scope.relock, profile, req.only_targets, req.roots, req.env_root)
    return check_fresh(profile, lock, redo, partial(lock_scope.scoped, profile, req.only_targets, fresh=lock))[0]


def fingerprint_to_check(req: Request, shown: dict[str, Path] | None = None) -> tuple[Lock, Profile]:
    """:func:`fingerprint_chain` for ``lock --check``. A fix that does not apply to the copy is a conflict
    (exit 4) only when the committed lock matches the pack: a pack changed since its lock is a stale lock
    (exit 2), as ``check``, ``apply`` and ``status`` say it, with the conflict a new lock would meet there and
    the command that regenerates it (with the ``--root`` copies ``shown``, else the request's; a missing or
    damaged lock: exit 2 too, as they say)."""
    from . import lock_scope
    from .errors import ConflictError
    from .loader import load_pack, load_profile

    try:
        return fingerprint_chain(req, keep=False)
    except ConflictError as exc:
        pack = load_pack(req.pack_root, profile=req.profile)
        profile = load_profile(pack, req.profile, check_paths=False)
        pack = pack.for_profile(profile.name)
        roots = req.roots if shown is None else shown
        redo = partial(lock_scope.relock, profile, req.only_targets, roots, req.env_root, pack)
        lock = lockfile.read_lock(profile, redo)  # (--target: the named targets' entries alone)
        lockfile.check_lock_matches(pack, profile, lock, redo, blocked=str(exc),  # (the patches are parsed here)
                                    keep=lock_scope.named(pack, profile, lock, req.only_targets), vouch=False)
        raise


__all__ = ["Request", "apply", "status", "revert", "write_lock", "check_lock_fresh", "fingerprint_chain",
           "fingerprint_to_check"]
