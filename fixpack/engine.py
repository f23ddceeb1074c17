"""The engine's entry points: apply, status, revert, and the lock (fingerprints) of a profile.

Each returns a :class:`fixpack.report.Report` (results as data) or raises a
:class:`fixpack.errors.FixpackError`; nothing here prints or exits. A run computes every file in
memory first (:class:`fixpack.tree.Tree`); it writes only when the whole selection reaches the
profile's state, under the target's lock, journalled (:mod:`fixpack.state`).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import __version__
from .diff import sha256_text
from .errors import (EXIT_CONFLICT, EXIT_MISMATCH, BadInputError, FixpackError, MismatchError, StaleLockError)
from .evaluate import TRUSTED, Evaluation, FixEvidence, State, decide, file_hashes, run_pass
from .loader import load_pack, load_profile, select
from .model import Fix, Pack, Profile, TargetSpec
from .report import FixReport, Report, TargetReport
from .state import (FileChange, STATE_DIR, check_writable, dumps, journal_originals, leftover_journal,
                    manifest_path, parse_manifest, read_manifest,
                    recover, run_lock, write_transaction, forget_state)
from .targets import FoundTarget, check_pin, locate
from .tree import Tree, decode

ENV_ROOT = "GAUDI_FIXES_ROOT"
LOCK_SCHEMA = 1
MANIFEST_SCHEMA = 1


@dataclass
class Request:
    """What a run is asked to do.

    ``roots`` maps target names to ``--root`` paths; ``only_targets`` restricts the run to those
    targets (the others are reported as skipped); ``env_root`` is ``$GAUDI_FIXES_ROOT``.
    """

    pack_root: Path
    profile: str
    opt_ins: tuple[str, ...] = ()
    roots: dict[str, Path] = field(default_factory=dict)
    only_targets: tuple[str, ...] = ()
    dry_run: bool = False
    strict: bool = False
    all_opt_in: bool = False
    env_root: Path | None = None

    @classmethod
    def from_env(cls, **kw: Any) -> "Request":
        env = os.environ.get(ENV_ROOT)
        return cls(env_root=Path(env) if env else None, **kw)


@dataclass
class Context:
    pack: Pack
    profile: Profile
    selected: tuple[str, ...]
    lock: dict[str, Any]
    found: dict[str, FoundTarget]
    report: Report


# --- preparing a run --------------------------------------------------------------------------

def _prepare(req: Request, command: str, need_lock: bool = True) -> Context:
    pack = load_pack(req.pack_root)
    profile = load_profile(pack, req.profile)
    pack = pack.for_profile(profile.name)
    selected = select(pack, profile, req.opt_ins, req.all_opt_in)
    names = {t.name for t in profile.targets}
    for name in list(req.roots) + list(req.only_targets):
        if name not in names:
            raise BadInputError(f"unknown target {name!r} for profile {profile.name!r} "
                                f"(its targets: {', '.join(sorted(names))})")
    _check_deleted_then_touched(pack.ordered(selected))
    lock = read_lock(profile) if need_lock else {}
    if need_lock:
        check_lock_matches(pack, profile, lock)
    report = Report(command, profile.name, dry_run=req.dry_run)
    found: dict[str, FoundTarget] = {}
    for spec in profile.targets:
        treport, ft = _find_target(spec, req)
        report.targets.append(treport)
        if ft is not None and treport.status == "found":
            found[spec.name] = ft
    return Context(pack, profile, selected, lock, found, report)


def _find_target(spec: TargetSpec, req: Request) -> tuple[TargetReport, FoundTarget | None]:
    pin = {"version": spec.pin.version, "commit": spec.pin.commit}
    if req.only_targets and spec.name not in req.only_targets:
        return TargetReport(spec.name, "skipped", pin=pin, message="not selected (--target)"), None
    ft = locate(spec, req.roots.get(spec.name), req.env_root)
    if ft is None:
        msg = (f"not found: no --root {spec.name}=PATH, no ${ENV_ROOT}/{spec.name}, and {spec.distribution} is not "
               f"installed in {sys.executable}. Point --root at it, or restrict the run with --target")
        return TargetReport(spec.name, "missing", pin=pin, message=msg), None
    tr = TargetReport(spec.name, "found", str(ft.root), ft.how, ft.version, ft.commit, pin, list(ft.evidence))
    try:
        check_pin(ft)
    except MismatchError as exc:
        tr.status, tr.message = "mismatch", str(exc)
    return tr, ft


def _chain(ctx: Context, target: str, manifest: dict[str, Any] | None, wanted: tuple[str, ...]) -> tuple[Fix, ...]:
    recorded = {f["id"] for f in (manifest or {}).get("fixes", []) if f.get("state") == "applied"}
    unknown = recorded - set(ctx.pack.fixes)
    if unknown:
        raise BadInputError(f"the manifest of target {target} records fixes this pack does not have: "
                            f"{', '.join(sorted(unknown))}. Use the pack that applied them (revert with it)")
    for entry in (manifest or {}).get("fixes", []):
        fix = ctx.pack.fixes.get(entry["id"])
        if entry.get("state") == "applied" and fix and fix.patch_sha256 != entry.get("patch_sha256"):
            raise BadInputError(
                f"target {target} holds {fix.id} v{entry.get('version')}, applied with another patch than this "
                f"pack's v{fix.version}. Revert with the pack that applied it, then apply with this one")
    ids = [f for f in set(wanted) | recorded if ctx.pack.fixes[f].target == target]
    chain = ctx.pack.ordered(tuple(ids))
    _check_deleted_then_touched(chain)
    return chain


def _check_deleted_then_touched(chain: tuple[Fix, ...]) -> None:
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


# --- evaluating a target ----------------------------------------------------------------------

@dataclass
class TargetPlan:
    tree: Tree
    manifest: dict[str, Any] | None
    entries: list[dict[str, Any]]
    errors: list[int]
    pending_journal: bool


def _evaluate_target(ctx: Context, ft: FoundTarget, wanted: tuple[str, ...], strict: bool,
                     dry: bool) -> TargetPlan:
    """Every fix of the target's chain, in series order, with its state; the tree ends as the chain.

    Fixes the manifest records are first unwound from the files, last one first (a later fix may
    edit an earlier one's context), which verifies each of them; the chain is then replayed from the
    unwound tree with the newly selected fixes in their places.
    """
    name = ft.spec.name
    tree, manifest, pending = _load_state(ft)
    if manifest is not None and _is_clean_release(tree, manifest, ctx.lock):
        _note(ctx, name, f"the files are the clean release: the manifest at {manifest_path(ft.root, name)} is stale "
                         f"(the target was reinstalled?) and is replaced by this run")
        manifest = None
    chain = _chain(ctx, name, manifest, wanted)
    recorded = {f["id"]: f for f in (manifest or {}).get("fixes", [])}
    applied = [f for f in chain if recorded.get(f.id, {}).get("state") == "applied"]
    base, broken, unchecked = _unwind(applied, tree, _tampered_files(tree, manifest), ctx.lock)
    plan = TargetPlan(tree, manifest, [], [], pending)
    if base is not None:
        tree.adopt(base)
    for fix in chain:
        ev = _replay(fix, tree, ctx.lock, fix in applied, broken, unchecked)
        fr = _fix_report(fix, ev, fix.id in wanted, dry)
        ctx.report.fixes.append(fr)
        if ev.state is State.DRIFTED and strict:
            fr.messages.append("--strict: a drifted fix is an image mismatch")
            plan.errors.append(EXIT_MISMATCH)
        elif ev.state in (State.ABSENT, State.DRIFTED, State.APPLIED):
            if base is not None:
                tree.adopt(ev.forward.tree)
            plan.entries.append(_manifest_entry(fix, tree, "applied"))
        elif ev.state is State.UPSTREAMED:
            plan.entries.append(_manifest_entry(fix, tree, "upstreamed"))
        else:
            plan.errors.append(EXIT_MISMATCH if ev.state is State.TAMPERED else EXIT_CONFLICT)
    return plan


def _load_state(ft: FoundTarget) -> tuple[Tree, dict[str, Any] | None, bool]:
    """The target's files and manifest as the next writing run will start from them: when a killed
    run left a journal, its originals are laid over the disk in memory (nothing is written here)."""
    tree = Tree(ft.root)
    manifest = read_manifest(ft.root, ft.spec.name)
    pending = leftover_journal(ft.root)
    mpath = manifest_path(ft.root, ft.spec.name).relative_to(ft.root).as_posix()
    for path, data in journal_originals(ft.root).items():
        if path == mpath:
            manifest = parse_manifest(data, ft.root / mpath) if data is not None else None
        else:
            tree.write(path, decode(data) if data is not None else None)
    return tree, manifest, pending


def _is_clean_release(tree: Tree, manifest: dict[str, Any], lock: dict[str, Any]) -> bool:
    """Every file the manifest lists is byte for byte the clean release's (the lock's first pre-image)."""
    clean: dict[str, str | None] = {}
    for fix in lock.get("fixes", []):
        for f in fix.get("files", []):
            clean.setdefault(f["path"], f.get("pre"))
    files = manifest.get("files", {})
    if not files or any(p not in clean for p in files):
        return False
    return all(h == clean[p] for p, h in file_hashes(tree, list(files)).items()) and \
        any(clean[p] != h for p, h in files.items())


def _note(ctx: Context, target: str, message: str) -> None:
    """Add ``message`` to the target's report once (apply evaluates a target again under its lock)."""
    t = next(t for t in ctx.report.targets if t.name == target)
    if message not in (t.message or "").split("; "):
        t.message = f"{t.message}; {message}" if t.message else message


def _unwind(applied: list[Fix], tree: Tree, tampered_files: set[str],
            lock: dict[str, Any]) -> tuple[Tree | None, dict[str, list[str]], dict[str, str]]:
    """Reverse-apply the recorded fixes, last first. Returns the tree before them (None when one of
    them does not reverse), per fix that failed why, and per fix that could not be checked the
    tampered fix it shares a file with (its pre-image cannot be rebuilt); fixes on other files are
    still checked, so one hand-edited file does not make every earlier fix look tampered."""
    base = tree.fork()
    broken: dict[str, list[str]] = {}
    blocked: dict[str, str] = {}  # file -> the tampered fix that could not be unwound from it
    unchecked: dict[str, str] = {}
    for fix in reversed(applied):
        hit = sorted(set(fix.touched_paths()) & tampered_files)
        shared = [p for p in fix.touched_paths() if p in blocked]
        if shared and not hit:
            unchecked[fix.id] = blocked[shared[0]]
            for p in fix.touched_paths():
                blocked.setdefault(p, blocked[shared[0]])
            continue
        rev = run_pass(fix, base, reverse=True, evidence=_evidence(lock, fix.id))
        if hit or not rev.ok:
            broken[fix.id] = [f"{p}: differs from the manifest's sha256 (changed since it was applied)"
                              for p in hit] + rev.explain()
            for p in fix.touched_paths():
                blocked.setdefault(p, fix.id)
            continue
        base.adopt(rev.tree)
    return (None if broken else base), broken, unchecked


def _evidence(lock: dict[str, Any], fix_id: str) -> FixEvidence:
    """The lock's evidence for one fix (file hashes, hunk counts); none without a lock entry."""
    return FixEvidence.from_lock(next((f for f in lock.get("fixes", []) if f.get("id") == fix_id), None))


def _replay(fix: Fix, tree: Tree, lock: dict[str, Any], recorded: bool, broken: dict[str, list[str]],
            unchecked: dict[str, str]) -> Evaluation:
    lock_entry = _evidence(lock, fix.id)
    if fix.id in broken:
        empty = run_pass(fix, tree, reverse=True, evidence=lock_entry)
        return Evaluation(State.TAMPERED, empty, empty,
                          ["the manifest records it as applied, but " + "; ".join(broken[fix.id])])
    if recorded and broken:
        ev = decide(fix, tree, lock_entry, True)
        why = (f"not re-checked: it shares a file with tampered fix {unchecked[fix.id]}" if fix.id in unchecked
               else "its hunks reverse cleanly; another fix is tampered")
        return Evaluation(State.APPLIED, ev.forward, ev.reverse, [f"recorded as applied ({why})"])
    ev = decide(fix, tree, lock_entry, False)
    if not recorded and ev.state is State.UPSTREAMED and _ours(fix, tree, lock):
        return Evaluation(State.APPLIED, ev.forward, ev.reverse,
                          ["applied by an earlier run whose manifest entry was lost (the files are this pack's "
                           "post-images, sha256 as in the lock); recorded again"])
    if recorded:
        if ev.state in (State.ABSENT, State.DRIFTED):
            return Evaluation(State.APPLIED, ev.forward, ev.reverse, ["already applied"])
        return Evaluation(State.TAMPERED, ev.forward, ev.reverse,
                          ["the manifest records it as applied, but it does not replay: " + "; ".join(ev.messages)])
    return ev


def _ours(fix: Fix, tree: Tree, lock: dict[str, Any]) -> bool:
    """Each touched file hashes to a post-image the lock records for it along the chain: our bytes,
    not upstream's (a release that took the change upstream would not match byte for byte)."""
    posts: dict[str, set[str | None]] = {}
    for entry in lock.get("fixes", []):
        for f in entry.get("files", []):
            if f.get("pre") != f.get("post"):  # an upstreamed fix's entry records the release's own bytes
                posts.setdefault(f["path"], set()).add(f.get("post"))
    now = file_hashes(tree, fix.touched_paths())
    return bool(now) and all(p in posts and h in posts[p] for p, h in now.items())


def _tampered_files(tree: Tree, manifest: dict[str, Any] | None) -> set[str]:
    recorded: dict[str, str | None] = (manifest or {}).get("files", {})
    now = file_hashes(tree, list(recorded))
    return {p for p, h in recorded.items() if now[p] != h}


def _fix_report(fix: Fix, ev: Evaluation, selected: bool, dry: bool) -> FixReport:
    action = "none"
    if ev.state in (State.ABSENT, State.DRIFTED):
        action = "would-apply" if dry else "applied"
    messages = list(ev.messages)
    if not selected and ev.state is State.APPLIED:
        messages.append("not selected in this run; kept (revert removes it)")
    return FixReport(fix.id, fix.version, fix.target, fix.opt_in, selected, ev.state.value, action,
                     [h.as_dict() for h in ev.offsets], messages, [h.refusal() for h in ev.refused])


def _manifest_entry(fix: Fix, tree: Tree, state: str) -> dict[str, Any]:
    return {"id": fix.id, "version": fix.version, "patch_sha256": fix.patch_sha256, "state": state,
            "files": file_hashes(tree, fix.touched_paths())}


def _new_manifest(ctx: Context, ft: FoundTarget, plan: TargetPlan) -> dict[str, Any]:
    files: dict[str, str | None] = {}
    for e in plan.entries:
        if e["state"] == "applied":
            files.update(file_hashes(plan.tree, list(e["files"])))
    return {"schema": MANIFEST_SCHEMA, "tool": "fixpack", "tool_version": __version__, "profile": ctx.profile.name,
            "target": ft.spec.name, "pin": {"version": ft.spec.pin.version, "commit": ft.spec.pin.commit},
            "found": {"version": ft.version, "commit": ft.commit}, "fixes": plan.entries, "files": files}


# --- apply / status -------------------------------------------------------------------------------

def apply(req: Request) -> Report:
    """Apply the profile's defaults plus ``req.opt_ins`` (or, with ``dry_run``, check them only).

    The report's ``exit_code`` is 0 only when every selected fix ends applied or upstreamed.
    Raises FixpackError for bad input (exit 2) or an unwritable / busy target (exit 5).
    """
    ctx = _prepare(req, "apply")
    errors = _target_errors(ctx)
    plans: dict[str, TargetPlan] = {}
    for name, ft in ctx.found.items():
        with run_lock(ft.root, shared=True):
            plans[name] = _evaluate_target(ctx, ft, ctx.selected, req.strict, req.dry_run)
        errors += plans[name].errors
    _note_journals(ctx, plans)
    if errors or req.dry_run:
        return _finish(ctx.report, errors)
    for name, ft in ctx.found.items():
        plan = plans[name]
        changes = plan.tree.changes()
        if changes or plan.pending_journal or _manifest_changed(ctx, ft, plan):
            check_writable(ft.root, changes)  # before the lock file is created
            _write_target(ctx, ft, req)
    return _finish(ctx.report, [])


def _recover_interrupted(ctx: Context) -> None:
    """Roll back what a killed run left, before looking at the files (the tree may be torn). The
    caller holds the targets' locks."""
    for ft in ctx.found.values():
        if leftover_journal(ft.root):
            restored = recover(ft.root)
            if restored:
                t = next(t for t in ctx.report.targets if t.name == ft.spec.name)
                t.message = f"rolled back an interrupted run ({len(restored)} files restored)"


def status(req: Request) -> Report:
    """What the image holds: every fix of the profile (opt-ins included), against manifest and files."""
    req = replace(req, dry_run=True, all_opt_in=True)  # the caller's request is left as it was
    ctx = _prepare(req, "status")
    errors = _target_errors(ctx)
    plans = {}
    for name, ft in ctx.found.items():
        with run_lock(ft.root, shared=True):
            plans[name] = _evaluate_target(ctx, ft, ctx.selected, req.strict, dry=True)
        errors += plans[name].errors
    _note_journals(ctx, plans)
    return _finish(ctx.report, errors)


def _note_journals(ctx: Context, plans: dict[str, TargetPlan]) -> None:
    for t in ctx.report.targets:
        if t.name in plans and plans[t.name].pending_journal:
            t.message = ("an interrupted run left a journal; the next apply rolls it back first"
                         + (f"; {t.message}" if t.message else ""))


def _target_errors(ctx: Context) -> list[int]:
    return [EXIT_MISMATCH for t in ctx.report.targets if t.status in ("missing", "mismatch")]


def _finish(report: Report, errors: list[int]) -> Report:
    if errors:
        report.exit_code = EXIT_MISMATCH if EXIT_MISMATCH in errors else max(errors)
        bad_t = [f"{t.name}: {t.status}" for t in report.targets if t.status in ("missing", "mismatch")]
        bad_f = [f"{f.id}: {f.state}" for f in report.fixes if f.state in ("conflict", "partial", "tampered",
                                                                             "ambiguous")
                 or (f.state == "drifted" and any("--strict" in m for m in f.messages))]
        report.error = "nothing was written; " + "; ".join(bad_t + bad_f)
        for f in report.fixes:  # nothing was written: say what would have happened
            f.action = {"applied": "would-apply", "reverted": "would-revert"}.get(f.action, f.action)
    return report


def _manifest_changed(ctx: Context, ft: FoundTarget, plan: TargetPlan) -> bool:
    new = _new_manifest(ctx, ft, plan)
    old = plan.manifest or {}
    keys = ("fixes", "files", "profile")
    return any(new.get(k) != old.get(k) for k in keys) and bool(plan.entries or plan.manifest)


def _write_target(ctx: Context, ft: FoundTarget, req: Request) -> None:
    with run_lock(ft.root):
        recover(ft.root)
        # evaluate again under the lock: another run may have written since the first look
        before = len(ctx.report.fixes)
        plan = _evaluate_target(ctx, ft, ctx.selected, req.strict, dry=False)
        fresh = ctx.report.fixes[before:]
        del ctx.report.fixes[before:]
        _replace_fix_reports(ctx.report, fresh)
        if plan.errors:
            raise MismatchError(f"target {ft.spec.name} changed while this run was planning; nothing was written. "
                                f"Run again")
        changes = plan.tree.changes()
        if not changes and not _manifest_changed(ctx, ft, plan):
            return  # the rollback alone brought the target where this run wanted it
        mpath = manifest_path(ft.root, ft.spec.name).relative_to(ft.root).as_posix()
        changes.append(FileChange(mpath, dumps(_new_manifest(ctx, ft, plan)), 0o644))
        check_writable(ft.root, changes)
        write_transaction(ft.root, changes)


def _replace_fix_reports(report: Report, fresh: list[FixReport]) -> None:
    by_id = {f.id: f for f in fresh}
    report.fixes = [by_id.pop(f.id, f) for f in report.fixes] + list(by_id.values())


# --- revert -------------------------------------------------------------------------------------

def revert(req: Request) -> Report:
    """Unapply every fix the manifest records, in reverse order, restoring the original bytes.

    Refuses (exit 3, nothing written) when a file changed since it was applied.
    """
    ctx = _prepare(req, "revert", need_lock=False)
    ctx.lock = _soft_lock(ctx.pack, ctx.profile)
    errors = _target_errors(ctx)
    with ExitStack() as locks:
        # one lock per root folder (two targets may share a site-packages), taken in a fixed order;
        # planning and writing happen under it, so no other run changes what was planned
        for root in sorted({ft.root.resolve() for ft in ctx.found.values()}):
            locks.enter_context(run_lock(root, shared=req.dry_run))
        if not req.dry_run and not errors:
            _recover_interrupted(ctx)
        work: list[tuple[FoundTarget, Tree]] = []
        for name, ft in ctx.found.items():
            tree, manifest, _pending = _load_state(ft)  # a dry run sees the journal's originals
            if manifest is None:
                continue
            errors += _plan_revert(ctx, ft, tree, manifest, req.dry_run)
            work.append((ft, tree))
        if errors or req.dry_run:
            return _finish(ctx.report, errors)
        for ft, tree in work:
            changes = tree.changes()
            mpath = manifest_path(ft.root, ft.spec.name).relative_to(ft.root).as_posix()
            changes.append(FileChange(mpath, None))
            check_writable(ft.root, changes)
            write_transaction(ft.root, changes)
            forget_state(ft.root)
    return _finish(ctx.report, [])


def _plan_revert(ctx: Context, ft: FoundTarget, tree: Tree, manifest: dict[str, Any], dry: bool) -> list[int]:
    tampered = _tampered_files(tree, manifest)
    errors: list[int] = []
    for entry in reversed(manifest["fixes"]):
        fix = ctx.pack.fixes.get(entry["id"])
        if fix is None or fix.patch_sha256 != entry.get("patch_sha256"):
            raise BadInputError(f"the manifest at {manifest_path(ft.root, ft.spec.name)} records {entry['id']} "
                                f"v{entry.get('version')} with another patch than this pack has; revert with the "
                                f"pack that applied it")
        fr = FixReport(fix.id, fix.version, fix.target, fix.opt_in, True, entry["state"])
        ctx.report.fixes.insert(0, fr)
        if entry["state"] != "applied":
            fr.messages.append("upstreamed: not ours to revert")
            continue
        bad = sorted(set(fix.touched_paths()) & tampered)
        if bad:
            fr.state = State.TAMPERED.value
            fr.messages += [f"{p}: changed since it was applied; restore it or reinstall the target" for p in bad]
            errors.append(EXIT_MISMATCH)
            continue
        rev = run_pass(fix, tree, reverse=True, evidence=_evidence(ctx.lock, fix.id))
        if not rev.ok:
            fr.state = State.AMBIGUOUS.value if rev.present else State.CONFLICT.value
            fr.refused = [h.refusal() for h in rev.refused]
            fr.messages += rev.explain()
            errors.append(EXIT_CONFLICT)
            continue
        tree.adopt(rev.tree)
        fr.action = "would-revert" if dry else "reverted"
    return errors


def _soft_lock(pack: Pack, profile: Profile) -> dict[str, Any]:
    """The lock when it is there and matches the pack, else {}: revert works without one (it then
    places every hunk by search), so that a stale lock never keeps an image from being restored."""
    try:
        lock = read_lock(profile)
        check_lock_matches(pack, profile, lock)
    except FixpackError:
        return {}
    return lock


# --- the lock: fingerprints along the chain -------------------------------------------------------

def read_lock(profile: Profile) -> dict[str, Any]:
    path = profile.lock_path
    if not path.is_file():
        raise StaleLockError(f"{path}: no lock for profile {profile.name!r}. Generate it from a clean release "
                             f"copy: fixpack lock --profile {profile.name} --root NAME=PATH")
    raw = path.read_bytes()
    try:
        data: dict[str, Any] = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StaleLockError(f"{path}: bytes that are not UTF-8 at byte offset {exc.start}; regenerate it with "
                             f"fixpack lock --profile {profile.name}") from exc
    except json.JSONDecodeError as exc:
        raise StaleLockError(f"{path}:{exc.lineno}: the lock is not valid JSON ({exc.msg}); regenerate it with "
                             f"fixpack lock --profile {profile.name}") from exc
    fixes = data.get("fixes") if isinstance(data, dict) else None
    if not isinstance(fixes, list) or not all(_lock_entry_ok(f) for f in fixes):
        raise StaleLockError(f"{path}: not a fixpack lock (a JSON object with a list of fixes); regenerate it with "
                             f"fixpack lock --profile {profile.name} --root NAME=PATH")
    if data.get("digest") != _lock_digest(data):
        raise StaleLockError(f"{path}: its fingerprints do not match its digest (edited by hand?); regenerate it "
                             f"from a clean release copy: fixpack lock --profile {profile.name} --root NAME=PATH")
    return data


def _lock_entry_ok(f: Any) -> bool:
    """The shape the engine reads from a lock entry (a digest only proves the entry was not edited
    after sealing, not that a sealed lock is well formed)."""
    def files_ok(files: Any) -> bool:
        return isinstance(files, list) and all(
            isinstance(x, dict) and isinstance(x.get("path"), str)
            and all(x.get(k) is None or isinstance(x.get(k), str) for k in ("pre", "post")) for x in files)
    return (isinstance(f, dict) and isinstance(f.get("id"), str) and files_ok(f.get("files", []))
            and isinstance(f.get("hunks", []), list))


def check_lock_matches(pack: Pack, profile: Profile, lock: dict[str, Any]) -> None:
    """Raise StaleLockError when a fix's version or patch bytes differ from what the lock recorded."""
    recorded = {f["id"]: f for f in lock.get("fixes", [])}
    stale = []
    for fid in profile.default + profile.opt_in:
        fix = pack.fixes[fid]
        entry = recorded.get(fid)
        if entry is None:
            stale.append(f"{fid}: not in the lock")
        elif entry.get("patch_sha256") != fix.patch_sha256 or entry.get("version") != fix.version:
            stale.append(f"{fid}: patch or version changed since the lock was generated")
    for fid in set(recorded) - set(profile.default + profile.opt_in):
        stale.append(f"{fid}: in the lock but not in the profile")
    if stale:
        raise StaleLockError(f"{profile.lock_path} is stale: {'; '.join(sorted(stale))}. Regenerate it from a clean "
                             f"release copy: fixpack lock --profile {profile.name} --root NAME=PATH")


def generate_lock(req: Request) -> dict[str, Any]:
    return _generate_lock(req)[0]


def _generate_lock(req: Request) -> tuple[dict[str, Any], Profile]:
    """Fingerprints of the whole chain (defaults and every opt-in, in series order) on clean release copies.

    Per fix: the patch hash, each touched file's pre-image and post-image sha256 along the chain, and
    each hunk's pre-image and post-image sha256. Raises ConflictError/MismatchError when a fix does
    not apply exactly to the release copy.
    """
    req = replace(req, all_opt_in=True)
    ctx = _prepare(req, "lock", need_lock=False)
    with_fixes = {ctx.pack.fixes[f].target for f in ctx.selected}
    for t in ctx.report.targets:
        # a target with no fix in the profile has nothing to fingerprint; it may be absent here
        if t.status in ("missing", "mismatch") and t.name in with_fixes:
            raise MismatchError(f"cannot fingerprint target {t.name}: {t.message}")
    fixes = []
    for name, ft in ctx.found.items():
        if read_manifest(ft.root, name) is not None:
            raise MismatchError(f"{ft.root} holds a fixpack manifest: fingerprints come from a clean release copy")
        tree = Tree(ft.root)
        for fix in ctx.pack.ordered(ctx.selected):
            if fix.target != name:
                continue
            ev = decide(fix, tree, TRUSTED, False)
            if ev.state is State.UPSTREAMED:
                # the release holds it already (a rebase keeps it listed, proposed for dropping): as found
                found = file_hashes(tree, fix.touched_paths())
                fixes.append(_lock_entry(fix, found, found))
                continue
            if ev.state is not State.ABSENT:
                from .errors import ConflictError
                raise ConflictError(f"fix {fix.id} is {ev.state.value} on the release copy {ft.root}: "
                                    f"{'; '.join(ev.messages) or 'see status'}. Rebase it before locking")
            pre = file_hashes(tree, fix.touched_paths())
            counted = run_pass(fix, tree, reverse=False, evidence=TRUSTED, count=True)
            tree.adopt(counted.tree)
            post = file_hashes(tree, fix.touched_paths())
            fixes.append(_lock_entry(fix, pre, post, counted.counts))
    targets = {name: {"version": ft.version, "commit": ft.commit} for name, ft in sorted(ctx.found.items())
               if name in with_fixes}
    data = {"schema": LOCK_SCHEMA, "profile": ctx.profile.name, "generated_by": f"fixpack {__version__}",
            "targets": targets, "fixes": fixes}
    data["digest"] = _lock_digest(data)
    return data, ctx.profile


def _lock_digest(data: dict[str, Any]) -> str:
    """sha256 over the lock's fingerprints: a hand edit (rather than ``fixpack lock``) shows as a mismatch."""
    return sha256_text(json.dumps({"targets": data.get("targets"), "fixes": data.get("fixes")}, sort_keys=True))


def _lock_entry(fix: Fix, pre: dict[str, str | None], post: dict[str, str | None],
                counts: dict[int, tuple[int, int]] | None = None) -> dict[str, Any]:
    """A fix's fingerprints; ``counts`` (per hunk, in order) are its pre-image's occurrences in the file
    before it and its post-image's after it: the evidence that lets a drifted file refuse a twin."""
    flat = [(fp, i, h) for fp in fix.file_patches() for i, h in enumerate(fp.hunks)]
    hunks = [{"file": fp.path, "hunk": i + 1, "pre": h.sha_pre(), "post": h.sha_post(),
              **({"pre_count": counts[n][0], "post_count": counts[n][1]} if counts and n in counts else {})}
             for n, (fp, i, h) in enumerate(flat)]
    return {"id": fix.id, "version": fix.version, "target": fix.target, "patch_sha256": fix.patch_sha256,
            "files": [{"path": p, "pre": pre[p], "post": post[p]} for p in fix.touched_paths()], "hunks": hunks}


def write_lock(req: Request) -> Path:
    data, profile = _generate_lock(req)
    profile.lock_path.write_bytes(dumps(data))
    return profile.lock_path


def check_lock_fresh(req: Request) -> None:
    """Raise StaleLockError when the committed lock differs from one generated now."""
    fresh, profile = _generate_lock(req)
    have = read_lock(profile)
    fresh_fixes = {f["id"]: f for f in fresh["fixes"]}
    have_fixes = {f["id"]: f for f in have.get("fixes", [])}
    diff = sorted(fid for fid in set(fresh_fixes) | set(have_fixes) if fresh_fixes.get(fid) != have_fixes.get(fid))
    if diff or fresh["targets"] != have.get("targets"):
        raise StaleLockError(f"{profile.lock_path} is stale (differs for: {', '.join(diff) or 'targets'}). "
                             f"Regenerate: fixpack lock --profile {profile.name} --root NAME=PATH")


__all__ = ["Request", "apply", "status", "revert", "generate_lock", "write_lock", "check_lock_fresh",
           "FixpackError", "STATE_DIR", "sha256_text"]
