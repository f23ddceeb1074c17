"""Preparing a run: the request; the pack, the profile and the selection (fixes and components) loaded
and checked; the lock; each target located and checked against its pin (:func:`prepare`). Shared by
the engine and the SBOM commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from . import lockfile
from .errors import (
    BadInputError,
    DamagedStateError,
    FixpackError,
    MismatchError,
    PackError,
    UnknownNameError,
    UnreadableError,
)
from .loader import load_pack, load_profile, profiles_pinning, select
from .lock_hints import Redo, path_at, relock_command
from .lock_where import target_key_line
from .model import Fix, Pack, Profile, TargetSpec
from .pack_journal import WORK_DIR, killed_mid_write, load_pack_journal, open_edits
from .patchfiles import check_deleted_then_touched, parse_fixes
from .profile_components import select_components, split_names
from .progress import QUIET, Progress
from .records import Lock, Manifest
from .report import FixReport, Report, TargetReport
from .runlock import DEFAULT_WAIT
from .safepath import file_on_the_way
from .state import journal_path
from .states import State, TargetStatus
from .structs import dataclass, field, replace
from .targets import FoundTarget, check_pin, commits_agree, locate, refuse_one_folder_twice

NO_LOCK = Lock("", {}, ())


@dataclass
class Request:
    """What a run is asked to do.

    ``roots`` maps target names to ``--root`` paths; ``only_targets`` restricts the run to those
    targets (the others are reported as skipped); ``env_root`` is a folder of release copies, one
    sub-folder per target (``--copies``, ``$GAUDI_FIXES_ROOT``); ``lock_wait`` the seconds to wait for
    another run's lock.
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
    lock_wait: float = DEFAULT_WAIT
    progress: Progress = QUIET
    upstreamed: tuple[str, ...] = ()  # lock: fixes a rebase found the release holds (kept listed, as found)
    rejects: Path | None = None  # apply --reject DIR: where the refused hunks are written (the advice names it)


@dataclass
class Context:
    pack: Pack
    profile: Profile
    selected: tuple[str, ...]
    lock: Lock
    found: dict[str, FoundTarget]
    report: Report
    lock_wait: float = DEFAULT_WAIT
    components: tuple[str, ...] = ()  # the components this run installs (profile order)
    layouts: dict[str, object] = field(default_factory=dict)  # wheels.Layout, built once per run, by component id
    progress: Progress = QUIET
    relock: Redo | None = None  # the lock command with the run's words, rendered when a lock error is raised
    skipped: Callable[[], dict[str, FoundTarget]] | None = None  # the --target-skipped targets, located on demand
    # the run's own command as a message suggests it: rerun(word, strict, more opt-ins) (strict.strict_drift)
    rerun: Callable[..., str] | None = None
    # drifted fixes under --strict, their message written once the run's every target is evaluated (strict.next_steps):
    # (report, target, fix, the files that drift it, the fixes the manifest records, the tampered ones, whether it is
    # in already: laid on the drifted files by a run without --strict)
    drift: list[tuple[FixReport, FoundTarget, Fix, list[str], set[str], set[str], bool]] = field(default_factory=list)
    # the opt-ins that the run's failing fixes were locked on top of and it does not apply, all targets (series
    # order; strict.next_steps): every "name them too" and "run again" command of those fixes names them all;
    # behind_of: each failing fix's own (with the opt-ins those were locked on top of, all the way down)
    behind: tuple[str, ...] = ()
    behind_of: dict[str, list[str]] = field(default_factory=dict)
    rejects: Path | None = None  # Request.rejects


# --- preparing a run --------------------------------------------------------------------------

def prepare(req: Request, command: str, need_lock: bool = True) -> Context:
    """The run's pack, profile, selection, lock and targets. Only the selected fixes' patches are parsed
    (revert's and status's: none here; they parse what they read), so a malformed patch of a fix the run
    does not touch is no obstacle to it. A pack a killed refresh or import left half written (its journal) is
    damaged state: rolled back first by ``edit --abort`` or the next refresh or import."""
    refuse_half_written(req.pack_root)
    pack = load_pack(req.pack_root, profile=req.profile)
    profile = load_profile(pack, req.profile, check_paths=False)
    pack = pack.for_profile(profile.name)
    fix_names, comp_names = split_names(profile, req.opt_ins)
    _command_as_fix(req, pack, fix_names)
    selected = select(pack, profile, fix_names, req.all_opt_in)
    components = select_components(profile, comp_names, selected)
    names = {t.name for t in profile.targets}
    for name, given in [(n, f"--root {n}=...") for n in req.roots] + [(n, f"--target {n}") for n in req.only_targets]:
        if name not in names:
            raise BadInputError(f"{given}: unknown target {name!r} for profile {profile.name!r} "
                                f"(its targets: {', '.join(sorted(names))})")
    if command not in ("revert", "status"):  # status parses what it evaluates (none when the lock vouches)
        parse_fixes(pack, profile, selected)
        check_deleted_then_touched(pack.ordered(selected))
    lock = NO_LOCK
    redo = partial(relock_command, profile, req.only_targets, pack=pack)  # the user's pack and targets
    if need_lock:
        lock = lockfile.read_lock(profile, redo)
        if command == "status":  # a fix whose target or patch bytes are not the lock's: read first, as apply reads it
            listed = profile.default + profile.opt_in  # (a problem of the pack said at its line, not as a stale lock)
            parse_fixes(pack, profile, [f.id for f in lock.fixes if f.id in listed and (
                f.target != pack.fixes[f.id].target or f.patch_bytes_sha256 != pack.fixes[f.id].bytes_sha256)])
        lockfile.check_lock_matches(pack, profile, lock, redo)
    report = Report(command, profile.name, dry_run=req.dry_run, strict=req.strict)
    found: dict[str, FoundTarget] = {}
    for spec in profile.targets:
        treport, ft = find_target(spec, req)
        report.targets.append(treport)
        if ft is None or treport.status is not TargetStatus.FOUND:
            continue
        try:  # (the pin is a prefix; the lock has the release's commit as far as the copy named it)
            check_locked_commit(profile, lock, ft)
            found[spec.name] = ft
        except MismatchError as exc:
            treport.status = TargetStatus.MISMATCH
            treport.note(str(exc))
    refuse_one_folder_twice(list(found.values()))
    return Context(pack, profile, selected, lock, found, report, req.lock_wait, components, progress=req.progress,
                   relock=redo, skipped=partial(locate_skipped, profile, req),
                   rerun=partial(_rerun, req, profile, pack), rejects=req.rejects)


def refuse_half_written(pack_root: Path) -> None:
    """A pack a killed refresh or import left while writing (its journal ``<pack>/.fixpack/journal.json``) may be
    half written: DamagedStateError (exit 3) with the way back that keeps an edit's work (:func:`half_written_way`);
    a damaged or planted journal's own DamagedJournalError, whose steps put the pack back by hand. Only leftovers
    (a run killed before its journal was written, or once it was done) leave the pack whole: no refusal."""
    if killed_mid_write(pack_root):
        raise DamagedStateError(journal_path(pack_root).parent, "a refresh or import was killed while writing the "
                                                                "pack, which may be half written",
                                half_written_way(pack_root) + "; then run this command again")


def half_written_way(pack_root: Path) -> str:
    """How to roll back a killed pack update (raises the journal's DamagedJournalError where it is damaged). The
    fixes whose ``fix.toml`` the journal names are what the killed refresh or import wrote (a later fix it moved
    has its patches only): the refresh again of an edit in progress among them (it rolls the write back, then
    writes it all; ``edit --abort`` would also drop the edit's work tree); with no edit in progress ``edit
    --abort`` (it only rolls back then); else the killed command again, said with what it wrote."""
    from .progname import command, pack_words

    journal = load_pack_journal(pack_root)
    edits = open_edits(pack_root / WORK_DIR)
    if journal is not None and journal.by:  # what the killed command recorded
        word, fix = journal.by
        if word == "refresh" and fix in edits:
            return (f"run the killed refresh again, which rolls its write back first and then writes it all: "
                    f"{command('refresh', fix, *pack_words(pack_root))} (edit --abort would also drop the edit's work "
                    f"tree)")
        if fix not in edits:
            return (f"roll back the killed {word} of {fix}: {command('edit', '--abort', fix, *pack_words(pack_root))} "
                    f"(no edit of {fix} is open: it only rolls back); then {word} it again")
        return f"run the killed import of {fix} again: it rolls the write back first, then writes it all"
    entries = [e.path.split("/") for e in (journal.entries if journal else ())]
    wrote = sorted({p[1] for p in entries if p[0] == "fixes" and len(p) > 2 and p[-1] == "fix.toml"})
    touched = sorted({p[1] for p in entries if p[0] == "fixes" and len(p) > 2})
    theirs = [e for e in edits if e in wrote]
    if theirs:
        return (f"run the killed refresh again, which rolls its write back first and then writes it all: "
                f"{' or '.join(command('refresh', e, *pack_words(pack_root)) for e in theirs)} (edit --abort would "
                f"also drop the edit's work tree)")
    if not edits:
        return f"roll it back: {command('edit', '--abort', *pack_words(pack_root))}"
    if wrote:
        return (f"run the killed import of {', '.join(wrote)} again: it rolls the write back first, then writes it "
                f"all; the edits in progress ({', '.join(edits)}) are not what it wrote, and edit --abort would drop "
                f"{'its work tree' if len(edits) == 1 else 'one of their work trees'}")
    it = f" (it wrote fixes/{', fixes/'.join(touched)})" if touched else ""
    return (f"run the refresh or import that was killed again{it}: it rolls the write back first, then writes it "
            f"all; edit --abort would drop {'an edit' if len(edits) > 1 else 'the edit'}'s work tree "
            f"({', '.join(edits)} in progress)")


def requires_closure(pack: Pack, profile: Profile, names: list[str]) -> list[str]:
    """``names`` and the opt-in fixes they require (``requires``, all the way down; a default fix is selected
    anyway and is not named)."""
    out = list(names)
    for name in out:  # grows as it goes: the requires of the requires
        out += [r for r in (pack.fixes[name].requires if name in pack.fixes else ())
                if r not in out and r in profile.opt_in]
    return out


def _rerun(req: Request, profile: Profile, pack: Pack, word: str, strict: bool, more: tuple[str, ...] = (),
           dry: bool | None = None, only: str = "") -> str:
    """Command ``word`` (apply, status, revert) as a message suggests it after this run: the program as it runs
    here, the profile, the pack (absolute: the command runs from any folder), targets, roots and copies, a
    ``--lock-wait`` given; for apply and status also ``--strict`` (``strict``), ``--all-opt-in``, the opt-in names
    and ``more``; for apply ``--dry-run`` where this run was one (a command copied from a dry run's message writes
    nothing either), or as ``dry`` says. Output options (``--json``, ``--reject``, ``--sbom``) are not repeated. The
    fixes ``more`` names bring the opt-ins they require (:func:`requires_closure`): a selection without them is
    refused. ``only``: that target alone (``--target``), not the run's."""
    dry = req.dry_run if dry is None else dry
    req = replace(req, only_targets=(only,)) if only else req
    names = requires_closure(pack, profile, list(dict.fromkeys([*req.opt_ins, *more])))
    return _suggested(req, profile.name, word, strict, names,
                      ("--lock-wait", f"{req.lock_wait:g}") if req.lock_wait != DEFAULT_WAIT else (),
                      ("--dry-run",) * (dry and word == "apply"))


def _suggested(req: Request, profile: str, word: str, strict: bool, names: list[str],
               given: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> str:
    """The words of command ``word`` a message suggests, rendered: the program as it runs here, the profile, the
    pack (absolute: the command runs from any folder), the run's targets, roots and copies, then ``given``; for
    apply and status also ``--strict`` (``strict``), ``--all-opt-in`` as the run had it, ``flags`` and ``names``
    (revert takes none of them)."""
    from os.path import abspath

    from .progname import command, run_words

    words = [word, "--profile", profile, "--pack", abspath(req.pack_root),
             *run_words(req.only_targets, req.roots, req.env_root), *given]
    if word != "revert":
        words += ["--strict"] * strict + ["--all-opt-in"] * req.all_opt_in + [*flags, *names]
    return command(*words)


def locate_skipped(profile: Profile, req: Request) -> dict[str, FoundTarget]:
    """The targets ``--target`` leaves out, located as a run that names them would locate them (``--root``,
    ``--copies``, the running Python) and matching their pin: a killed run that named them may have left a
    journal of their files on a root this run shares (a site-packages holds both). Looked up only for such a
    journal (:func:`fixpack.advice.run_writes`)."""
    out = {}
    for spec in profile.targets:
        if not req.only_targets or spec.name in req.only_targets:
            continue
        try:
            ft = locate(spec, req.roots.get(spec.name), req.env_root)
            if ft is not None:
                check_pin(ft)
                out[spec.name] = ft
        except FixpackError:  # not there, or another release: no run of this profile wrote it
            continue
    return out


def soft_lock(ctx: Context, req: Request) -> Lock:
    """The lock when it is there and matches the pack, else none: revert works without one (it then
    places every hunk by search), so that a stale lock never keeps an image from being restored. A lock
    that is missing, stale or hand-edited is said on every found target (each one's hunks are placed without
    it), with what to do, in the error's own lines (a pack error lists each problem on a line of its own, as
    apply and status print it)."""
    try:
        lock = lockfile.read_lock(ctx.profile, ctx.relock)
        lockfile.check_lock_matches(ctx.pack, ctx.profile, lock, ctx.relock)
    except FixpackError as exc:
        return _without_lock(ctx, exc)
    return lock


def _without_lock(ctx: Context, exc: FixpackError) -> Lock:
    """NO_LOCK, said on every found target: revert goes on without the lock, for ``exc``."""
    said = exc.said if isinstance(exc, UnreadableError) else str(exc)  # (not its "nothing was written")
    said = f"the pack could not be checked against it: {said}" if isinstance(exc, PackError) else said
    for name in ctx.found:
        ctx.report.target(name).note(f"revert went on without the lock (it places every hunk by search): {said}")
    return NO_LOCK


def hold_soft_lock(ctx: Context, manifest: Manifest) -> None:
    """Revert's: the lock's record of each fix ``manifest`` records (one of this pack's, with its patch) held to its
    patches, parsed here (revert parses them anyway), before revert uses it (the files it says are the fix's, its
    evidence): a record that is not the patch's (a lock edited and sealed again) is a stale lock, and revert goes on
    without it (``ctx.lock`` NO_LOCK, said as :func:`soft_lock` says it), from the manifest and its backups. A patch
    that does not parse is left to the revert to say. A change the lock vouched for that the manifest's entry and the
    patches both differ from (:meth:`~fixpack.model.Fix.vouched_wrongly`: its fingerprint edited) is the patches'
    own again, and so held: the lock is stale."""
    if ctx.lock is NO_LOCK:
        return
    ours = [(e, ctx.pack.fixes[e.id]) for e in manifest.fixes if e.id in ctx.pack.fixes]
    try:  # (vouched_wrongly leaves the change the patches' own: held to the lock below, which is then found stale)
        ids = [e.id for e, f in ours if f.recorded_as(e.patch_sha256) or f.vouched_wrongly(e.patch_sha256)]
        parse_fixes(ctx.pack, ctx.profile, ids)
    except PackError:
        return
    try:
        lockfile.check_lock_matches(ctx.pack, ctx.profile, ctx.lock, ctx.relock, hold=ids)
    except FixpackError as exc:
        ctx.lock = _without_lock(ctx, exc)


def _command_as_fix(req: Request, pack: Pack, names: tuple[str, ...]) -> None:
    """``apply_all.py status`` (``fixpack apply ... revert``): a command's name where opt-in fixes go. Raises
    UnknownNameError naming the command that runs it as written: the program as it runs here, with the
    run's profile, pack, targets, roots, copies, ``--strict``, ``--all-opt-in`` and other names (those that
    command takes)."""
    word = next((n for n in names if n in ("apply", "status", "revert") and n not in pack.fixes), None)
    if word is None:
        return
    wait = ("--lock-wait", f"{req.lock_wait:g}") if req.lock_wait != DEFAULT_WAIT else ()  # as _rerun gives it
    others = [n for n in req.opt_ins if n != word]
    raise UnknownNameError(f"unknown fix {word!r}: names after the options are opt-in fixes. For {word!r}, run: "
                           f"{_suggested(req, req.profile, word, req.strict, others, wait)}")


def locked_paths(ctx: Context, fix_id: str) -> set[str]:
    """The files the lock records for fix ``fix_id`` (none where the lock lacks it)."""
    entry = ctx.lock.fix(fix_id)
    return set(entry.pre()) if entry else set()


def opt_ins_behind(ctx: Context, fix: Fix, files: list[str], recorded: set[str]) -> tuple[list[str], str]:
    """The opt-in fixes the lock placed ``fix`` on top of that this run does not apply (before it in the series, on
    its target, touching one of ``files`` by the lock's file list, neither selected nor recorded as applied), and
    that said ("" where there are none)."""
    before = ctx.pack.series[:ctx.pack.series.index(fix.id)]
    behind = [f for f in before if f in ctx.profile.opt_in and f not in ctx.selected and f not in recorded
              and ctx.pack.fixes[f].target == fix.target and locked_paths(ctx, f) & set(files)]
    on = sorted({f for b in behind for f in locked_paths(ctx, b)} & set(files))  # where those are, of files
    return behind, (f"the lock placed {fix.id} on top of opt-in {', '.join(behind)} (before it in the pack, on "
                    f"{', '.join(on)}), which this run does not apply" if behind else "")


def created_there(ft: FoundTarget, fix: Fix) -> list[str]:
    """The files ``fix`` creates that are on ``ft`` already, or the file where a folder one goes in is (the release
    lacks them)."""
    there = set()
    for p in (fp.new_path for fp in fix.file_patches() if fp.old_path is None and fp.new_path):
        way = p if (ft.root / p).exists() else file_on_the_way(ft.root, p)
        if way:
            there.add(way)
    return sorted(there)


def refusing_files(ft: FoundTarget, fix: Fix, fr: FixReport) -> tuple[list[str], list[str]]:
    """The files of ``fix`` on ``ft`` that are missing (a file the patch changes that is not there refuses the fix
    without a hunk to show for it), and every file that refused it (``fr.refused``'s and those; every file the fix
    touches where none can be told)."""
    gone = sorted({fp.old_path for fp in fix.file_patches() if fp.old_path and not (ft.root / fp.old_path).is_file()})
    return gone, sorted({str(r["file"]) for r in fr.refused} | set(gone)) or list(fix.touched_paths())


def named_too(ctx: Context, behind: list[str], own: list[str] | None = None) -> tuple[tuple[str, ...], str]:
    """The opt-ins a command names for one failing fix, and why, said: ``behind`` (those the lock placed it on top
    of), ``own`` (with those they were locked on top of or require in turn; default ``behind``) and the other
    failing fixes' (``ctx.behind``)."""
    own = own or behind
    deeper = [f for f in own if f not in behind]
    others = [f for f in ctx.behind if f not in own]
    turn = "that one needs" if len(behind) == 1 else "those need"
    parts = ([f"{', '.join(deeper)}, which {turn} in turn"] * bool(deeper)
             + [f"{', '.join(others)}, which another fix's line names"] * bool(others))
    return (*own, *others), f" (with {', and '.join(parts)})" if parts else ""


def behind_files(ctx: Context, fix: Fix, files: list[str]) -> list[str]:
    """The files on which a failing fix's missing opt-ins are looked for: ``files``, those that refused it
    (:func:`refusing_files`); under ``--strict`` every file the lock records for it too (a drift is a mismatch)."""
    return sorted(set(files) | locked_paths(ctx, fix.id)) if ctx.report.strict else files


def name_too(ctx: Context, behind: list[str], word: str = "", strict: bool | None = None,
             own: list[str] | None = None) -> str:
    """"name them too: COMMAND": the run's command (``word``, default the run's own) with the opt-ins of
    :func:`named_too` added, each said."""
    assert ctx.rerun is not None
    names, also = named_too(ctx, behind, own)
    strict = ctx.report.strict if strict is None else strict
    command = ctx.rerun(word or ctx.report.command, strict, names)
    return f"name {'it' if len(behind) == 1 else 'them'} too{also}: {command}"


def note_named_defaults(ctx: Context, names: tuple[str, ...]) -> None:
    """A default fix (or component) named on the command line as if it were an opt-in is selected anyway:
    say so on its line, once, rather than take the name silently. A fix or component named on the command line
    whose target this run does not reach (left out by ``--target``, or not found) gets a ``skipped`` line that
    says so and how to include it, rather than vanishing from the report."""
    for fr in ctx.report.fixes:
        if fr.id in names and not fr.opt_in:
            fr.messages.insert(0, f"named on the command line, but a default {fr.kind} of profile {ctx.profile.name}: "
                                  f"selected whether named or not (name only opt-ins)")
    listed = {fr.id for fr in ctx.report.fixes}
    comps = {c.id: c for c in ctx.profile.components}
    # a target found but not at the profile's pin: its own line says why; giving it again would not help
    given = {t.name for t in ctx.report.targets if t.status is TargetStatus.MISMATCH}
    why = {t.name: "not at the profile's pin, as said above" if t.name in given else "; ".join(t.notes[:1]) or
           t.status.value for t in ctx.report.targets}
    looked = {t.name for t in ctx.report.targets if t.status is TargetStatus.MISSING}  # selected, but not found
    for name in dict.fromkeys(names):
        item = ctx.pack.fixes.get(name) or comps.get(name)
        if item is None or name in listed or item.target in ctx.found:
            continue
        kind = "fix" if name in ctx.pack.fixes else "component"
        t = item.target
        ctx.report.fixes.append(FixReport(
            name, item.version, t, comps[name].opt_in if kind == "component" else name in ctx.profile.opt_in, False,
            State.SKIPPED, kind=kind,
            messages=[f"named on the command line, but its target {t} is not in this run ({why.get(t, 'not found')})"
                      + ("" if t in given else f": give --root {t}=PATH (where it is) to include it" if t in looked
                         else f": give --target {t} (and --root {t}=PATH where it is not installed here) to include "
                              f"it")]))


def find_target(spec: TargetSpec, req: Request) -> tuple[TargetReport, FoundTarget | None]:
    pin = {"version": spec.pin.version, "commit": spec.pin.commit}
    if req.only_targets and spec.name not in req.only_targets:
        return TargetReport(spec.name, TargetStatus.SKIPPED, pin=pin, notes=["not selected (--target)"]), None
    ft = locate(spec, req.roots.get(spec.name), req.env_root)
    if ft is None:
        msg = (f"not found: no --root {spec.name}=PATH, and the folder of copies (--copies or $GAUDI_FIXES_ROOT) has "
               f"no {req.env_root / spec.name} (a run given one takes no target installed here: give --root "
               f"{spec.name}=PATH, or no folder of copies to use the one installed in {sys.executable})"
               if req.env_root else
               f"not found: no --root {spec.name}=PATH, and {spec.distribution} is not installed in "
               f"{sys.executable}. Point --root at it") + ("" if req.only_targets else ", or restrict the run "
                                                                                    "with --target")
        return TargetReport(spec.name, TargetStatus.MISSING, pin=pin, notes=[msg]), None
    tr = TargetReport(spec.name, TargetStatus.FOUND, str(ft.root), ft.how, ft.version, ft.commit, pin,
                      list(ft.evidence))
    try:
        check_pin(ft)
    except MismatchError as exc:
        tr.status = TargetStatus.MISMATCH
        tr.note(str(exc) + _pinned_elsewhere(req, ft))
    return tr, ft


def check_locked_commit(profile: Profile, lock: Lock, ft: FoundTarget) -> None:
    """Raise MismatchError (exit 3) when the image's commit is not the one the lock was made on, compared in full
    as far as both name it (:func:`~fixpack.targets.commits_agree`): the profile's pin is a prefix (``ced6857a``),
    so an image whose commit differs past it (``gced6857ae`` for the lock's ``gced6857af``) passed its check."""
    locked = str((lock.targets.get(ft.spec.name) or {}).get("commit", ""))
    if not locked or not ft.commit or commits_agree(ft.commit, locked):
        return
    at = path_at(profile.lock_path, target_key_line(profile.lock_path, ft.spec.name, "commit"))
    raise MismatchError(
        f"target {ft.spec.name} at {ft.root}: commit {ft.commit} is not the one the lock was made on: "
        f"{at} records {locked} (evidence: {'; '.join(ft.evidence) or 'none found'}); both begin with "
        f"the profile's pin {ft.spec.pin.commit}, the digits after it differ (another commit of the same prefix). "
        f"Use the image the lock was made on (commit {locked}; `lock --check` on a clean copy of the release tells "
        f"whether the lock says it right), or a profile for this commit (its full commit as the pin in "
        f"[targets.{ft.spec.name}], and a lock made on its clean copy)")


def _pinned_elsewhere(req: Request, ft: FoundTarget) -> str:
    """The profiles of this pack that pin the release found (`` Profile X pins this release: --profile X.``),
    or nothing: the next step of a pin mismatch, when the pack has one."""
    names = [n for n in profiles_pinning(req.pack_root / "profiles", ft.spec.name, ft.version, ft.commit)
             if n != req.profile]
    if not names:
        return ""
    return f" Profile {' or '.join(names)} pins this release: --profile {names[0]}."
