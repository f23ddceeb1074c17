"""Rebasing a profile's fixes onto a new upstream release: the maintainer's ``fixpack rebase``.

For each fix of the old profile (defaults and opt-ins, in the series' order), on the new release copy
with the earlier fixes already carried over (in memory, :class:`fixpack.tree.Tree`):

- **exact**: the engine's own applier places every hunk (at its line, or at an offset); the patch is
  kept byte for byte when nothing moved, else regenerated with ``git diff`` (new line numbers and context);
- **merged**: the applier cannot place it, and a 3-way merge through git is clean. Each fix gets a small
  work repository (``<work>/<fix-id>/``) whose paths mirror the target root: ``base`` holds the touched
  files as the old release had them (with the earlier fixes), branch ``fix`` one commit per patch file
  (the old post-images), branch ``upstream`` the files of the new release; ``rebased`` is ``upstream``
  with the fix's commits cherry-picked (git follows a file that upstream renamed);
- **conflict**: the cherry-pick stops; the repository is left in git's conflicted state for the
  maintainer (edit, ``git add``, ``fixpack rebase --continue``). Later fixes that touch the same files
  or ``requires`` it are **blocked**; the others go on;
- **upstreamed**: the new release holds the post-image (reverse check), or the merge leaves no change.
  The fix stays in the new profile with a comment proposing to drop it.

A file the fix touches that is gone from the new release is looked for under another path (a file new
in this release whose content is at least 50 % similar); found, the fix is carried there and the rename
reported; not found, it is a conflict (modify/delete in the work repository).

Nothing is written to the pack until every fix is carried: then the variants (``fixes/<id>/<profile>/``,
only where the patch bytes differ from ``fix.toml``'s; ``version`` bumped only when the +/- lines changed),
``profiles/<new>.toml`` and its lock, with the original bytes saved in ``<work>/state.json`` first so
that ``--abort`` restores them (and a Ctrl-C or SIGTERM while they are written puts them back at once). A
conflict resolved by hand keeps its record until the rebase is done: any later run reads the resolution again,
never merges over it.
The report (Markdown and JSON) is written in every case.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Container
from pathlib import Path

from .errors import BadInputError, EnvironmentProblem, FixpackError, MismatchError, Terminated
from .evaluate import TRUSTED, FixEvidence, decide, run_pass
from .gitutil import run as git
from .gitwork import Snap, commit_bodies, finish_resolution, git_diffs, inputs_digest, merge, snap
from .interrupts import Term, signals, terminated
from .loader import load_pack, load_profile
from .model import Fix, Pack, Profile
from .outputs import check_folder
from .patchtext import as_fix, change_lines, interdiff, patch_bytes, write_patches
from .prove import check_interpreter
from .rebase_chain import Chain
from .rebase_chain import old_steps as chain_steps
from .rebase_evidence import old_counts, twins
from .rebase_io import cannot
from .rebase_proof import Prover, prove_carried, start_prover
from .rebase_putback import check_backups_fit
from .rebase_registry import entry_path, refuse_elsewhere, register, unregister
from .rebase_result import ONE_COPY, OUTCOMES, FixOutcome, RebaseResult, TargetPair
from .rebase_session import (
    RebaseRequest,
    Session,
    backup_candidates,
    check_clean,
    continue_flags,
    find_work,
    keep_undo,
    load_session,
    resume_command,
    write_pack,
    write_report,
    written_so_far,
)
from .rebase_start import (
    checked_new_profile,
    continue_words,
    refuse_appeared,
    refuse_early,
    refuse_on_continue,
    refuse_unsaid_python,
)
from .rebase_state import STATE_SCHEMA, drop_work, made_repos, mark_work, report_folder
from .rebase_stop import ended_after, io_failed, stopped_carrying, terminated_after
from .rebase_targets import refuse_changed_since_start, target_pairs, version_le
from .rebase_undo import abort, undo
from .renames import RENAME_SIMILARITY, find_renames, remap
from .render import next_steps
from .run import refuse_half_written
from .states import State
from .structs import replace
from .tree import Tree


def start(req: RebaseRequest) -> RebaseResult:
    """Rebase ``req.profile`` onto the new release copies. Raises BadInputError on a dirty pack or
    bad input (a ``--python`` that is no interpreter, before anything is written), MismatchError when an
    old release copy is not the old profile's pin; on Ctrl-C EnvironmentProblem, on SIGTERM Terminated (exit 143),
    saying what was written and what to do (:func:`_signalled`)."""
    refuse_half_written(req.pack_root)  # a killed refresh or import: before anything is carried
    if req.python:
        check_interpreter(req.python)
    pack = load_pack(req.pack_root)
    old = load_profile(pack, req.profile)
    refuse_early(req, pack, old)
    pairs = target_pairs(req, pack, old)
    to_version, new_name, work = checked_new_profile(req, pack, old, pairs)
    report_dir = (req.report_dir or pack.root / "reports").resolve()
    if req.report_dir is not None:  # before any work: a typo'd folder is named, never made (as --reject's)
        check_folder(req.report_dir, "--report")
    state = {"schema": STATE_SCHEMA, "pack": str(pack.root), "from": old.name, "to": new_name,
             "to_version": to_version, "report_dir": str(report_dir), "phase": "merging",
             "targets": {n: {"new": str(p.new.root) if p.new else "", "old": str(p.old.root) if p.old else "",
                             "note": p.note} for n, p in pairs.items()},
             "conflicts": {}, "backups": {}, "replace": req.replace,
             "proof": {"python": req.python, "site": str(req.proof_site or ""), "clean": {},
                       "allow_unproven": req.allow_unproven}}
    check_backups_fit(state, pack.root, backup_candidates(pack, old, new_name), work / "state.json")  # before any work
    session = Session(pack.root, old.name, new_name, to_version, pairs, work, report_dir, state, req.progress,
                      given=req.work is not None, starting=True, ended=req.ended)
    try:  # first: a second start to this name, anywhere, is refused from now on (rebase_registry)
        made_root = register(pack.root, new_name, work, session.given)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {entry_path(pack.root, new_name)}, the pack's record of the rebase "
                                 f"in progress: {exc.strerror}; nothing was written") from exc
    try:
        made = not work.is_dir()
        work.mkdir(parents=not session.given, exist_ok=True)  # a --work's parent exists (check_new_work)
        mark_work(work, session.given, made)
    except OSError as exc:
        unregister(pack.root, new_name, work, tidy=made_root)
        raise EnvironmentProblem(f"cannot make the rebase's work folder {work}: {exc.strerror}; give another "
                                 f"with --work DIR") from exc
    session.save()
    try:
        return _signalled(session)
    except FixpackError as exc:
        held: list[int] = []
        if session.state["phase"] == "merging" and not session.stopped:  # nothing written, no conflict to keep:
            with signals(held, deferred=True):  # leave no trace (the folder was new or empty: what is named so,
                try:  # this run made), to the end: a Ctrl-C now waits
                    drop_work(work, session.given, pack.series)
                    unregister(pack.root, new_name, work, tidy=made_root or not session.given)
                except OSError as e:
                    drop = resume_command("abort", pack.root, new_name, work if session.given else None)
                    raise EnvironmentProblem(f"{exc}; but what the start made is not all removed "
                                             f"({cannot(e, what='remove')}): drop it with `{drop}`") from None
        if terminated(exc, held) and not isinstance(exc, Terminated):
            raise Terminated(f"{exc} (a SIGTERM while it removed its work folder waited until that was done)") from None
        raise


def resume(req: RebaseRequest) -> RebaseResult:
    """``--continue``: read the resolved work repositories, carry the rest, write when nothing conflicts.

    A hand resolution is code no proof has seen: without a stand-in image (``--python`` now, which a start given
    one needs again) it needs ``allow_unproven``. Raises BadInputError otherwise, having done nothing; on Ctrl-C or
    SIGTERM what :func:`start` raises then.
    """
    if req.work is None:  # a rebase started with --work is found by it alone: say so when it is the one
        refuse_elsewhere(req.pack_root.resolve(), req.name, "continue")
    refuse_half_written(req.pack_root)
    session = load_session(req)
    refuse_appeared(session, req.replace, req.work)
    refuse_unsaid_python(session, req.python, req.work)  # never the state's interpreter on its word
    refuse_on_continue(session)
    abort = resume_command("abort", session.pack_root, session.new_name, req.work)
    for name, ft in ((n, ft) for n, p in session.pairs.items() for ft in (p.old, p.new) if ft is not None):
        if not (ft.root.is_dir() and ft.version):  # read as an empty tree, every fix would 'conflict' or 'drop'
            raise MismatchError(f"{session.state_path}: the release copy of target {name} this rebase started from, "
                                f"{ft.root}, is gone or no longer reads as one (no version): put it back (the --root "
                                f"given, or the cache's copy: `fixpack fetch`), or drop the rebase with `{abort}`")
    refuse_changed_since_start(session.pairs, session.old_name, session.new_name, session.pack_root, abort, req.cache)
    proof = session.state.setdefault("proof", {"clean": {}})
    if req.python:  # the one given now (the start's, when it had one: refuse_unsaid_python), which may be gone
        check_interpreter(req.python)
        proof.update(python=req.python, site=str(req.proof_site or ""))
    session.report_dir = report_folder(session.state_path, session.state, session.pack_root, req.report_dir)
    if req.allow_unproven:  # kept: a later --continue as printed (or typed without it) still may write
        proof["allow_unproven"] = True
    if not proof.get("python") and not (req.allow_unproven or proof.get("allow_unproven")):
        raise BadInputError("no proof can run on the carried fixes (no stand-in image of the new release): give "
                            "--python PATH (tools/image-venv.sh VERSION DIR makes one), or --allow-unproven to write "
                            "the new profile with its fixes marked 'not proven'")
    return _signalled(session)


def _signalled(session: Session) -> RebaseResult:
    """:func:`_run` with SIGTERM unwound as Ctrl-C is (:mod:`fixpack.interrupts`): said where it lands as for Ctrl-C,
    as :class:`Terminated` (exit 143): while carrying (:func:`fixpack.rebase_stop.stopped_carrying`), while writing
    the pack (put back: :func:`fixpack.rebase_session.write_pack`), or after (:func:`terminated_after`)."""
    got: list[int] = []
    try:
        with signals(got):
            return _run(session)
    except KeyboardInterrupt as exc:
        if session.ended:  # done (or stopped on conflicts) by then: said so, never 'did not finish'
            raise ended_after(session.ended[0], session.pack_root, session.work if session.given else None,
                              terminated(exc, got)) from None
        if not terminated(exc, got):
            if session.state["phase"] in ("written", "writing"):  # the pack written, the rebase not yet ended
                raise terminated_after(session, term=False) from None
            raise
        if session.state["phase"] == "merging":  # between the carrying and the write: nothing written either
            session.stopped = True
            raise stopped_carrying(session, Term()) from None
        raise terminated_after(session) from None


def _run(session: Session) -> RebaseResult:
    """:func:`_run_to_end`, a file it cannot write (a full disk, a read-only folder) said with its errno and the
    way on (:func:`fixpack.rebase_stop.io_failed`, exit 5)."""
    try:
        return _run_to_end(session)
    except OSError as exc:
        raise io_failed(session, exc) from exc


def _run_to_end(session: Session) -> RebaseResult:
    try:
        pack, old, outcomes = _carry_all(session)
        result = RebaseResult(old.name, session.new_name, "done", list(session.pairs.values()), outcomes,
                              session.work)
        result.continue_flags = continue_flags(session.state)
        result.components = [{"id": c.id, "version": c.version, "target": c.target, "path": str(
            c.path.relative_to(session.pack_root) if c.path.is_relative_to(session.pack_root) else c.path)}
            for c in old.components]
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM before anything is written: the work so far is kept
        session.stopped = True
        raise stopped_carrying(session, exc) from None
    if any(o.outcome in ("conflict", "blocked", "broken") for o in outcomes):
        result.status = "conflicts"
        result.written = written_so_far(session)  # an earlier run stopped while writing: the report says so
        session.state["phase"] = "conflicts"
        session.save()
    else:
        result.written = write_pack(session, pack, old, outcomes)
    result.next_steps = next_steps(result)
    write_report(session, result)
    held: list[int] = []
    if result.status == "done":
        with signals(held, deferred=True):  # the ending to its end (a SIGTERM there left the work folder and the
            keep_undo(session, result.written)  # record of a rebase in progress that no command removed)
            drop_work(session.work, session.given, made_repos(session.state))
            unregister(session.pack_root, session.new_name, session.work)
    session.ended.append(result)
    if held:  # said by _signalled as a signal once the rebase was done
        raise Term() if signal.SIGTERM in held else KeyboardInterrupt()
    return result


def _carry_all(session: Session) -> tuple[Pack, Profile, list[FixOutcome]]:
    """Every fix of the old profile carried onto the new release copies (nothing is written to the pack)."""
    pack = load_pack(session.pack_root)
    old = load_profile(pack, session.old_name)
    old_view = pack.for_profile(old.name)
    ids = old.default + old.opt_in
    outcomes: list[FixOutcome] = []
    for pair in session.pairs.values():
        chain = tuple(f for f in old_view.ordered(ids) if f.target == pair.spec.name)
        if pair.rebased:
            outcomes += _rebase_target(session, pair, chain, dict(old.proof_env), pack.fixes)
        else:
            outcomes += [_not_rebased(f, pair) for f in chain]
    order = {fid: i for i, fid in enumerate(pack.series)}
    outcomes.sort(key=lambda o: order[o.id])
    for o in outcomes:
        _flag(o, old_view.fixes[o.id], session)
    return pack, old, outcomes


def _not_rebased(fix: Fix, pair: TargetPair) -> FixOutcome:
    o = FixOutcome(fix.id, fix.target, fix.opt_in, "not-rebased", fix.version, fix.version, "unchanged")
    o.evidence.append(pair.note)
    o.new_patches = patch_bytes(fix)
    return o


def _flag(o: FixOutcome, fix: Fix, session: Session) -> None:
    pair = session.pairs[fix.target]
    fixed_in = fix.upstream.fixed_in
    if pair.new is not None and fixed_in and version_le(fixed_in, pair.new.version):
        o.flags.append(f"fixed_in = {fixed_in} <= {pair.new.version}: upstream records this release as fixing it; "
                       f"check and drop the fix")
    if o.outcome == "upstreamed":
        o.flags.append("proposed for dropping: kept in the new profile with a comment; remove it by hand")


def _rebase_target(session: Session, pair: TargetPair, chain: tuple[Fix, ...],
                   proof_env: dict[str, str], known: Container[str]) -> list[FixOutcome]:
    assert pair.old is not None and pair.new is not None
    ch = Chain(pair, Tree(pair.old.root), Tree(pair.new.root), known)
    prover = start_prover(session, pair.spec.package, pair.spec.name, proof_env)
    out = []
    for fix in chain:
        old_steps = chain_steps(fix, ch.old_tree, session.old_name)
        blocker = ch.blocker(fix)
        if blocker:
            o = FixOutcome(fix.id, fix.target, fix.opt_in, "blocked", fix.version, fix.version)
            cause = ch.stuck_ids.get(blocker, blocker)
            how = "requires it" if blocker in fix.requires else "touches the same files"
            o.evidence.append(f"waits for {blocker!r} (not carried: {cause!r} conflicts); it {how}")
            ch.stick(fix, fix.touched_paths(), cause)
        else:
            started = time.monotonic()
            before = snap(ch.new_tree, sorted(set(fix.touched_paths())))
            o = _carry(session, ch, fix, old_steps, old_counts(fix, old_steps))
            if o.outcome in CARRIED:
                o = _prove(session, ch, fix, o, prover, old_steps, before)
            session.progress.note(f"{fix.id}: {o.outcome}, proof {o.proof} ({time.monotonic() - started:.1f} s)")
        out.append(o)
    if prover is not None:
        prover.drop()
    return out


CARRIED = ("exact", "merged", "resolved")


def _prove(session: Session, ch: Chain, fix: Fix, o: FixOutcome, prover: Prover | None, old_steps: list[Snap],
           before: Snap) -> FixOutcome:
    why = prove_carried(session, prover, fix, o, ch.pair.new.version if ch.pair.new else "the new release")
    return _broken(session, ch, fix, o, old_steps, before, why) if why else o


def _broken(session: Session, ch: Chain, fix: Fix, o: FixOutcome, old_steps: list[Snap], before: Snap,
            why: str) -> FixOutcome:
    """A carried fix whose proof fails: a conflict for the maintainer, with the carried change on branch
    ``rebased`` of a work repository to amend (the proof runs again on --continue)."""
    o.outcome = "broken"
    o.evidence.append(why)
    repo = session.work / fix.id
    names = [p.path.name for p in fix.patches]
    if not (repo / ".git").is_dir():
        old_v = ch.pair.old.version if ch.pair.old else "old"
        new_v = ch.pair.new.version if ch.pair.new else "new"
        merge(repo, old_steps, before, names, fix.id, ch.pair.spec.name, old_v, new_v)
    o.repo = str(repo)
    o.evidence.append(f"left in {repo}: fix the change on branch rebased (edit, then `git commit --amend`; a fix of "
                      f"one patch may also take new commits), then `{continue_words(session.state)}`, which runs "
                      f"the proof again")
    session.keep_repo(fix.id, {"repo": str(repo), "inputs": inputs_digest(old_steps, before), "patches": names})
    ch.stick(fix, fix.touched_paths(), fix.id)
    return o


def _carry(session: Session, ch: Chain, fix: Fix, old_steps: list[Snap], counts: FixEvidence) -> FixOutcome:
    o = FixOutcome(fix.id, fix.target, fix.opt_in, "conflict", fix.version, fix.version)
    renames, deleted = find_renames(fix, old_steps[0], ch.new_tree, ch.new_only)
    o.evidence += [f"{a}: renamed upstream to {b} (content {pct}% similar); the fix is carried there"
                   for a, (b, pct) in renames.items()]
    o.renames = {a: b for a, (b, _pct) in renames.items()}
    moved = remap(fix, o.renames)
    if fix.id in session.state["conflicts"]:
        return _resume_conflict(session, ch, fix, moved, old_steps, o)
    if any(fp.binary for fp in fix.file_patches()):
        return _carry_binary(ch, fix, moved, o)
    ev = decide(moved, ch.new_tree, counts, False)
    if ev.state is State.UPSTREAMED and not deleted:
        o.outcome = "upstreamed"
        new_v = ch.pair.new.version if ch.pair.new else "the new release"
        o.evidence.append(f"{new_v} holds the fix's post-image already (the patch reverse-applies)")
        return o
    if ev.state in (State.ABSENT, State.DRIFTED) and not deleted:
        return _carry_exact(session, ch, fix, moved, ev.messages, o)
    o.evidence.append(f"the applier cannot place it ({ev.state.value}): " + "; ".join(ev.forward.explain()))
    o.evidence += [f"{p}: deleted upstream (no file of >= {int(RENAME_SIMILARITY * 100)}% similar content was "
                   f"added in this release)" for p in deleted]
    return _carry_merge(session, ch, fix, moved, old_steps, o)


def _carry_exact(session: Session, ch: Chain, fix: Fix, moved: Fix, messages: list[str],
                 o: FixOutcome) -> FixOutcome:
    o.outcome = "exact"
    o.evidence += messages or ["applies at its lines"]
    paths = moved.touched_paths()
    steps = [snap(ch.new_tree, paths)]
    for pf in moved.patches:
        p = run_pass(replace(moved, patches=(pf,)), ch.new_tree, reverse=False)
        if not p.ok:  # pragma: no cover - decide() placed every hunk of the whole fix on this tree
            raise FixpackError(f"fix {fix.id}: {pf.path.name} no longer applies on its own: {p.explain()}")
        ch.new_tree.adopt(p.tree)
        steps.append(snap(ch.new_tree, paths))
    old = patch_bytes(fix)
    if not messages and not o.renames:
        new = old  # every hunk sits at its line: the patch is still right, byte for byte
    else:
        bodies = git_diffs(session.work / ".scratch" / fix.id, steps, [p.path.name for p in fix.patches])
        shutil.rmtree(session.work / ".scratch" / fix.id, ignore_errors=True)
        new = write_patches(fix, bodies, ch.known)
    _compare(o, fix, old, new)
    return o


def _carry_binary(ch: Chain, fix: Fix, moved: Fix, o: FixOutcome) -> FixOutcome:
    ev = decide(moved, ch.new_tree, None, False)
    if ev.state is State.ABSENT and not o.renames:
        ch.new_tree.adopt(ev.forward.tree)
        o.outcome = "exact"
        o.evidence.append("applies at its lines (it ships binary files: carried byte for byte)")
        old = patch_bytes(fix)
        _compare(o, fix, old, old)
        return o
    if ev.state is State.UPSTREAMED:
        o.outcome = "upstreamed"
        o.evidence.append("the new release holds the fix's post-image (it reverse-applies)")
        return o
    o.evidence += ev.messages + ["it ships binary files, which the rebase carries only when every hunk sits at "
                                 "its line: rebase this fix by hand (edit its patches), then run the rebase again"]
    ch.stick(fix, fix.touched_paths() + moved.touched_paths(), fix.id)
    return o


def _carry_merge(session: Session, ch: Chain, fix: Fix, moved: Fix, old_steps: list[Snap],
                 o: FixOutcome) -> FixOutcome:
    repo = session.work / fix.id
    names = [p.path.name for p in fix.patches]
    upstream = snap(ch.new_tree, sorted(set(fix.touched_paths()) | set(moved.touched_paths())))
    inputs = inputs_digest(old_steps, upstream)
    old_v = ch.pair.old.version if ch.pair.old else "old"
    new_v = ch.pair.new.version if ch.pair.new else "new"
    merged = merge(repo, old_steps, upstream, names, fix.id, ch.pair.spec.name, old_v, new_v)
    if merged.conflicts:
        return _conflict(session, ch, fix, moved, o, repo, merged.conflicts, inputs)
    doubt = twins(fix, merged.bodies, ch.new_tree, old_steps)
    if doubt:
        return _ambiguous(session, ch, fix, moved, o, repo, doubt, inputs)
    shutil.rmtree(repo, ignore_errors=True)
    o.evidence.append(f"3-way merge through git is clean (base: {ch.pair.old.version if ch.pair.old else ''} "
                      f"pre-image; sides: the fix's post-image and {ch.pair.new.version if ch.pair.new else ''})")
    return _adopt_bodies(ch, fix, o, merged.bodies, "merged")


def _adopt_bodies(ch: Chain, fix: Fix, o: FixOutcome, bodies: list[str], outcome: str) -> FixOutcome:
    """Take regenerated patch bodies: upstreamed when empty, else carried onto the new tree."""
    if not any(b.strip() for b in bodies):
        # the old patch does not reverse-apply here (else decide() had said so): it cannot stay listed
        o.outcome, o.keep = ("upstreamed" if outcome == "merged" else "dropped"), False
        o.evidence.append("the 3-way merge leaves no change: the new release already holds an equivalent change "
                          "(its old patch does not reverse-apply, so it is commented out in the new profile)"
                          if outcome == "merged" else "resolved to no change: commented out in the new profile")
        return o
    empty = [n for n, b in zip((p.path.name for p in fix.patches), bodies) if not b.strip()]
    if empty:
        o.outcome = "conflict"
        o.evidence.append(f"after the merge these patch files hold no change: {', '.join(empty)}; remove them "
                          f"from fixes/{fix.id}/fix.toml by hand, then run the rebase again")
        ch.stick(fix, fix.touched_paths(), fix.id)
        return o
    new = write_patches(fix, bodies, ch.known)
    carried = as_fix(fix, new)
    p = run_pass(carried, ch.new_tree, reverse=False, evidence=TRUSTED)  # made from exactly this tree
    if not p.ok or any(h.offset for h in p.hunks):
        raise FixpackError(f"fix {fix.id}: the regenerated patch does not apply exactly to the tree it was "
                           f"made from ({'; '.join(p.explain()) or 'offsets'}); this is a bug")
    ch.new_tree.adopt(p.tree)
    o.outcome = outcome
    _compare(o, fix, patch_bytes(fix), new)
    return o


def _conflict(session: Session, ch: Chain, fix: Fix, moved: Fix, o: FixOutcome, repo: Path,
              conflicts: list[str], inputs: str) -> FixOutcome:
    o.outcome = "conflict"
    o.repo = str(repo)
    o.evidence += [f"git: {c}" for c in conflicts]
    o.evidence.append(f"left as a git conflict in {repo} (branch rebased; base, fix and upstream branches "
                      f"hold the three sides)")
    session.keep_repo(fix.id, {"repo": str(repo), "inputs": inputs, "patches": [p.path.name for p in fix.patches]})
    ch.stick(fix, sorted(set(fix.touched_paths()) | set(moved.touched_paths())), fix.id)
    return o


def _ambiguous(session: Session, ch: Chain, fix: Fix, moved: Fix, o: FixOutcome, repo: Path,
               twins: list[str], inputs: str) -> FixOutcome:
    """A clean merge onto ambiguous context is a guess: keep git's result on branch ``git-merge`` and
    leave branch ``rebased`` at upstream, so that the maintainer places the change, never the tool."""
    git(repo, "branch", "-f", "git-merge", "HEAD")
    git(repo, "reset", "-q", "--hard", "upstream")
    o.evidence += twins
    o.evidence.append(f"{ONE_COPY} (branch git-merge); branch rebased is left at "
                      "upstream: apply the fix there by hand (`git cherry-pick base..fix`, then move the change to "
                      f"the copy it belongs to and `git commit --amend`), then `{continue_words(session.state)}`")
    return _conflict(session, ch, fix, moved, o, repo, [], inputs)


def _resume_conflict(session: Session, ch: Chain, fix: Fix, moved: Fix, old_steps: list[Snap],
                     o: FixOutcome) -> FixOutcome:
    rec = session.state["conflicts"][fix.id]
    repo = Path(rec["repo"])
    upstream = snap(ch.new_tree, sorted(set(fix.touched_paths()) | set(moved.touched_paths())))
    if not (repo / ".git").is_dir() or rec["inputs"] != inputs_digest(old_steps, upstream):
        # the pack or an earlier fix changed since the conflict was recorded: merge again
        del session.state["conflicts"][fix.id]
        o.evidence.append("its inputs changed since the conflict was recorded (or the work repository is "
                          "gone): merged again")
        return _carry_merge(session, ch, fix, moved, old_steps, o)
    problem = finish_resolution(repo, len(rec["patches"]), lambda p: ch.new_tree.read(p) is not None)
    if problem:
        o.outcome, o.repo = "conflict", str(repo)
        o.evidence.append(f"not resolved yet in {repo}: {problem}")
        ch.stick(fix, sorted(set(fix.touched_paths()) | set(moved.touched_paths())), fix.id)
        return o
    bodies = commit_bodies(repo, list(rec["patches"]), fix.id)
    o.evidence.append(f"conflict resolved by hand in {repo}")
    # its record stays until the rebase is done: a run stopped later (a conflict further on, an interrupted
    # write) reads the resolution here again, never merges the repository anew over it
    return _adopt_bodies(ch, fix, o, bodies, "resolved")


def _compare(o: FixOutcome, fix: Fix, old: dict[str, bytes], new: dict[str, bytes]) -> None:
    o.new_patches = new
    if new == old:
        o.patch = "unchanged"
        return
    same = all(change_lines(old[n]) == change_lines(new[n]) for n in old)
    o.patch = "moved" if same else "changed"
    o.new_version = fix.version if same else fix.version + 1
    o.interdiff = interdiff(old, new)


__all__ = ["RebaseRequest", "RebaseResult", "FixOutcome", "start", "resume", "abort", "undo", "check_clean",
           "find_work", "change_lines", "interdiff", "version_le", "OUTCOMES"]
