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
that ``--abort`` restores them. The report (Markdown and JSON) is written in every case.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import os
import re
import shutil
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import __version__
from .diff import FilePatch, diff_body, format_patch, parse_patch, sha256_bytes
from .errors import EXIT_CONFLICT, BadInputError, FixpackError, GitError
from .applier import occurrences, split_lines
from .evaluate import TRUSTED, FixEvidence, State, decide, run_pass
from .gitutil import init_repo, run as git
from .loader import ID_RE, load_pack, load_profile
from .model import Fix, Pack, PatchFile, Profile, TargetSpec
from .pack_tools import header_fields, normalize_text
from .release import fetch
from .state import atomic_write, dumps, read_manifest, remove_file
from .targets import FoundTarget, check_pin, normalize_commit, read_facts, resolve_root
from .tree import Tree, decode, encode

STATE_SCHEMA = 1
REPORT_SCHEMA = 1
WORK_DIR = ".rebase"
RENAME_SIMILARITY = 0.5
# outcomes in the report, and what each means
OUTCOMES = {
    "exact": "applies with the engine's applier (at its lines or at an offset); patch regenerated if it moved",
    "merged": "applies only after a 3-way merge through git; patch regenerated from the merge",
    "resolved": "conflicted; resolved by hand in the work repository; patch regenerated from it",
    "conflict": "3-way merge conflicts; left as a git conflict in the work repository",
    "blocked": "not tried: it touches the files of, or requires, a fix that conflicts",
    "upstreamed": "the new release already holds the change: proposed for dropping",
    "dropped": "resolved by hand to no change: left out of the new profile (commented)",
    "not-rebased": "its target was not rebased in this run: carried unchanged",
}

Snap = dict[str, tuple[str | None, int | None]]  # path -> (text or None when absent, mode)


# --- requests and results ---------------------------------------------------------------------

@dataclass
class RebaseRequest:
    """What ``fixpack rebase`` is asked to do.

    ``roots``: new release copies (``--root NAME=PATH``); ``to_version``: the new version of the PyPI
    target (fetched when no ``--root`` is given); ``old_roots``: the old release copies (the 3-way base;
    fetched at the old pin when not given); ``name``: the new profile (default ``v<to_version>``);
    ``work``: the work folder (default ``<pack>/.rebase/<name>/``); ``report_dir``: where the report
    goes (default ``<pack>/reports/``).
    """

    pack_root: Path
    profile: str = ""
    to_version: str = ""
    roots: dict[str, Path] = field(default_factory=dict)
    old_roots: dict[str, Path] = field(default_factory=dict)
    cache: Path | None = None
    name: str = ""
    work: Path | None = None
    report_dir: Path | None = None
    allow_dirty: bool = False
    only_targets: tuple[str, ...] = ()


@dataclass
class TargetPair:
    """One target of the profile: its old and new release copies, or why it is not rebased."""

    spec: TargetSpec
    old: FoundTarget | None = None
    new: FoundTarget | None = None
    note: str = ""

    @property
    def rebased(self) -> bool:
        return self.new is not None

    def as_dict(self) -> dict[str, Any]:
        def side(ft: FoundTarget | None) -> dict[str, str] | None:
            return None if ft is None else {"root": str(ft.root), "version": ft.version,
                                            "commit": normalize_commit(ft.commit)}
        return {"name": self.spec.name, "rebased": self.rebased, "old": side(self.old), "new": side(self.new),
                "note": self.note}


@dataclass
class FixOutcome:
    """One row of the report."""

    id: str
    target: str
    opt_in: bool
    outcome: str
    old_version: int
    new_version: int
    patch: str = "-"  # unchanged | moved (line numbers / context only) | changed (the change itself) | -
    evidence: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    repo: str = ""
    interdiff: str = ""
    variant: str = ""
    keep: bool = True  # listed in the new profile (False: commented out, with the reason)
    new_patches: dict[str, bytes] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "target": self.target, "opt_in": self.opt_in, "outcome": self.outcome,
                "old_version": self.old_version, "new_version": self.new_version, "patch": self.patch,
                "evidence": self.evidence, "flags": self.flags, "renames": self.renames, "repo": self.repo,
                "variant": self.variant, "in_new_profile": self.keep, "interdiff": self.interdiff}


@dataclass
class RebaseResult:
    from_profile: str
    to_profile: str
    status: str  # done | conflicts
    targets: list[TargetPair]
    fixes: list[FixOutcome]
    work: Path
    written: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    report_md: Path | None = None
    report_json: Path | None = None
    markdown: str = ""

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "done" else EXIT_CONFLICT

    def as_dict(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "tool_version": __version__, "command": "rebase",
                "from_profile": self.from_profile, "to_profile": self.to_profile, "status": self.status,
                "exit_code": self.exit_code, "work": str(self.work), "targets": [t.as_dict() for t in self.targets],
                "fixes": [f.as_dict() for f in self.fixes], "written": self.written, "next_steps": self.next_steps,
                "outcomes": OUTCOMES}


@dataclass
class Session:
    """One rebase, from its start to its end (over ``--continue`` runs): what the state file holds."""

    pack_root: Path
    old_name: str
    new_name: str
    to_version: str
    pairs: dict[str, TargetPair]
    work: Path
    report_dir: Path
    state: dict[str, Any]

    @property
    def state_path(self) -> Path:
        return self.work / "state.json"

    def save(self) -> None:
        atomic_write(self.state_path, dumps(self.state))


# --- entry points -------------------------------------------------------------------------------

def start(req: RebaseRequest) -> RebaseResult:
    """Rebase ``req.profile`` onto the new release copies. Raises BadInputError on a dirty pack or
    bad input, MismatchError when an old release copy is not the old profile's pin."""
    pack = load_pack(req.pack_root)
    old = load_profile(pack, req.profile)
    early = req.name or (f"v{req.to_version}" if req.to_version else "")
    if early:  # before fetching anything
        _refuse_in_progress((req.work or pack.root / WORK_DIR / early).resolve(), early)
    if not req.allow_dirty:
        try:
            check_clean(pack.root)
        except BadInputError:
            busy = sorted((pack.root / WORK_DIR).glob("*/state.json"))
            if busy:  # the pack is dirty because a rebase stopped half way: say that first
                _refuse_in_progress(busy[0].parent, busy[0].parent.name)
            raise
    pairs = _pairs(req, pack, old)
    to_version = req.to_version or _primary_version(pairs)
    new_name = req.name or f"v{to_version}"
    if not ID_RE.match(new_name) or new_name == old.name:
        raise BadInputError(f"bad new profile name {new_name!r}: it must be a new name of lower-case letters, "
                            f"digits, '.', '_', '-' (set it with --name)")
    work = (req.work or pack.root / WORK_DIR / new_name).resolve()
    _refuse_in_progress(work, new_name)
    report_dir = (req.report_dir or pack.root / "reports").resolve()
    state = {"schema": STATE_SCHEMA, "pack": str(pack.root), "from": old.name, "to": new_name,
             "to_version": to_version, "report_dir": str(report_dir), "phase": "merging",
             "targets": {n: {"new": str(p.new.root) if p.new else "", "old": str(p.old.root) if p.old else "",
                             "note": p.note} for n, p in pairs.items()},
             "conflicts": {}, "backups": {}}
    session = Session(pack.root, old.name, new_name, to_version, pairs, work, report_dir, state)
    work.mkdir(parents=True, exist_ok=True)
    session.save()
    try:
        return _run(session)
    except FixpackError:
        if session.state["phase"] == "merging":  # nothing written, no conflict to keep: leave no trace
            _drop_work(work)
        raise


def _refuse_in_progress(work: Path, name: str) -> None:
    if (work / "state.json").is_file():
        raise BadInputError(f"a rebase to {name} is in progress ({work / 'state.json'}): finish it with "
                            f"`fixpack rebase --continue` or drop it with `fixpack rebase --abort`")


def resume(req: RebaseRequest) -> RebaseResult:
    """``--continue``: read the resolved work repositories, carry the rest, write when nothing conflicts."""
    return _run(_load_session(req))


def abort(req: RebaseRequest) -> list[str]:
    """``--abort``: restore every pack file the rebase wrote (or remove it), drop the work folder.
    Returns the paths restored or removed, relative to the pack."""
    session = _load_session(req)
    restored = _restore(session)
    _drop_work(session.work)
    return restored


def check_clean(pack_root: Path) -> None:
    """Refuse a pack whose ``fixes/`` or ``profiles/`` differ from git HEAD (or hold untracked files)."""
    try:
        inside = git(pack_root, "rev-parse", "--is-inside-work-tree").strip() == "true"
    except GitError:
        inside = False
    if not inside:
        raise BadInputError(f"{pack_root} is not a git checkout, so the rebase cannot tell whether the pack is "
                            f"clean; rebase a clone, or pass --allow-dirty")
    out = git(pack_root, "status", "--porcelain", "--untracked-files=all", "--", "fixes", "profiles")
    dirty = [line[3:] for line in out.splitlines() if line.strip()]
    if dirty:
        shown = ", ".join(dirty[:10]) + (f" and {len(dirty) - 10} more" if len(dirty) > 10 else "")
        raise BadInputError(f"the pack at {pack_root} has uncommitted changes in fixes/ or profiles/: {shown}. "
                            f"Commit or stash them first (or pass --allow-dirty)")


def find_work(pack_root: Path, name: str = "", work: Path | None = None) -> Path:
    """The work folder of the rebase in progress (``--continue``/``--abort``)."""
    if work is not None:
        found = [work.resolve()]
    elif name:
        found = [(pack_root / WORK_DIR / name).resolve()]
    else:
        found = sorted(p.parent.resolve() for p in (pack_root / WORK_DIR).glob("*/state.json"))
        if len(found) > 1:
            raise BadInputError(f"several rebases are in progress ({', '.join(p.name for p in found)}): "
                                f"name one with --name")
    if not found or not (found[0] / "state.json").is_file():
        raise BadInputError(f"no rebase in progress under {found[0] if found else pack_root / WORK_DIR}")
    return found[0]


# --- targets ------------------------------------------------------------------------------------

def _pairs(req: RebaseRequest, pack: Pack, old: Profile) -> dict[str, TargetPair]:
    names = [t.name for t in old.targets]
    for what, given in (("--root", req.roots), ("--old-root", req.old_roots), ("--target", req.only_targets)):
        for n in given:
            if n not in names:
                raise BadInputError(f"{what} names unknown target {n!r} (profile {old.name} has {', '.join(names)})")
    with_fixes = {pack.fixes[f].target for f in old.default + old.opt_in}
    wanted = req.only_targets or tuple(n for n in names if n in with_fixes or n in req.roots)
    if not wanted:
        raise BadInputError(f"nothing to rebase: profile {old.name} lists no fixes and no --root was given")
    pairs = {}
    for spec in old.targets:
        if spec.name not in wanted:
            why = "not named by --target" if req.only_targets else "it has no fixes and no --root was given"
            pairs[spec.name] = TargetPair(spec, note=f"not rebased ({why}): pin kept from profile {old.name}")
            continue
        pairs[spec.name] = TargetPair(spec, _old_copy(spec, req), _new_copy(spec, req))
    return pairs


def _new_copy(spec: TargetSpec, req: RebaseRequest) -> FoundTarget:
    if spec.name in req.roots:
        root = resolve_root(spec, req.roots[spec.name])
        ft = FoundTarget(spec, root, *read_facts(spec, root), "--root")
        if req.to_version and spec.source.pypi and ft.version != req.to_version:
            raise BadInputError(f"--root {spec.name}={root} holds version {ft.version or '(unknown)'}, not "
                                f"--to {req.to_version}")
    elif req.to_version and spec.source.pypi:
        ft = fetch(spec, req.cache, version=req.to_version, check=False)
    else:
        raise BadInputError(f"no new release copy of target {spec.name}: give --root {spec.name}=PATH"
                            + (" or --to VERSION" if spec.source.pypi else ""))
    if read_manifest(ft.root, spec.name) is not None:
        raise BadInputError(f"{ft.root} holds a fixpack manifest (fixes are applied there): rebase onto a clean "
                            f"release copy")
    if not ft.version or not ft.commit:
        raise BadInputError(f"{ft.root}: cannot read the version and commit of {spec.name} (evidence: "
                            f"{'; '.join(ft.evidence) or 'none'}); the new profile needs both for its pin")
    return ft


def _old_copy(spec: TargetSpec, req: RebaseRequest) -> FoundTarget:
    if spec.name in req.old_roots:
        root = resolve_root(spec, req.old_roots[spec.name])
        ft = FoundTarget(spec, root, *read_facts(spec, root), "--old-root")
        check_pin(ft)
        return ft
    return fetch(spec, req.cache)


def _primary_version(pairs: dict[str, TargetPair]) -> str:
    for p in pairs.values():
        if p.new is not None:
            return p.new.version
    raise BadInputError("no target is rebased")  # pragma: no cover - _pairs refuses this first


def _load_session(req: RebaseRequest) -> Session:
    work = find_work(req.pack_root.resolve(), req.name, req.work)
    state = json.loads((work / "state.json").read_text("utf-8"))
    pack_root = Path(state["pack"])
    old = load_profile(load_pack(pack_root), state["from"])
    pairs = {}
    for spec in old.targets:
        t = state["targets"].get(spec.name, {})
        if not t.get("new"):
            pairs[spec.name] = TargetPair(spec, note=t.get("note", "not rebased"))
            continue
        new_root, old_root = Path(t["new"]), Path(t["old"])
        pairs[spec.name] = TargetPair(spec, FoundTarget(spec, old_root, *read_facts(spec, old_root), "state"),
                                      FoundTarget(spec, new_root, *read_facts(spec, new_root), "state"))
    return Session(pack_root, state["from"], state["to"], state["to_version"], pairs, work,
                   Path(state["report_dir"]), state)


# --- the run --------------------------------------------------------------------------------------

def _run(session: Session) -> RebaseResult:
    pack = load_pack(session.pack_root)
    old = load_profile(pack, session.old_name)
    old_view = pack.for_profile(old.name)
    ids = old.default + old.opt_in
    outcomes: list[FixOutcome] = []
    for pair in session.pairs.values():
        chain = tuple(f for f in old_view.ordered(ids) if f.target == pair.spec.name)
        if pair.rebased:
            outcomes += _rebase_target(session, pair, chain)
        else:
            outcomes += [_not_rebased(f, pair) for f in chain]
    order = {fid: i for i, fid in enumerate(pack.series)}
    outcomes.sort(key=lambda o: order[o.id])
    for o in outcomes:
        _flag(o, old_view.fixes[o.id], session)
    result = RebaseResult(old.name, session.new_name, "done", list(session.pairs.values()), outcomes, session.work)
    if any(o.outcome in ("conflict", "blocked") for o in outcomes):
        result.status = "conflicts"
        session.state["phase"] = "conflicts"
        session.save()
    else:
        result.written = _write_pack(session, pack, old, outcomes)
    result.next_steps = _next_steps(session, result)
    _write_report(session, result)
    if result.status == "done":
        _drop_work(session.work)
    return result


def _drop_work(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    if work.parent.name == WORK_DIR and work.parent.is_dir() and not any(work.parent.iterdir()):
        work.parent.rmdir()


def _not_rebased(fix: Fix, pair: TargetPair) -> FixOutcome:
    o = FixOutcome(fix.id, fix.target, fix.opt_in, "not-rebased", fix.version, fix.version, "unchanged")
    o.evidence.append(pair.note)
    o.new_patches = {p.path.name: p.path.read_bytes() for p in fix.patches}
    return o


def _flag(o: FixOutcome, fix: Fix, session: Session) -> None:
    pair = session.pairs[fix.target]
    fixed_in = fix.upstream.fixed_in
    if pair.new is not None and fixed_in and version_le(fixed_in, pair.new.version):
        o.flags.append(f"fixed_in = {fixed_in} <= {pair.new.version}: upstream records this release as fixing it; "
                       f"check and drop the fix")
    if o.outcome == "upstreamed":
        o.flags.append("proposed for dropping: kept in the new profile with a comment; remove it by hand")


def version_le(a: str, b: str) -> bool:
    """``a <= b`` for release versions (``packaging`` when installed, else a numeric tuple compare)."""
    try:
        from packaging.version import InvalidVersion, Version
        try:
            return Version(a.lstrip("v")) <= Version(b.lstrip("v"))
        except InvalidVersion:
            pass
    except ImportError:  # pragma: no cover - packaging ships with pip/setuptools almost everywhere
        pass

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v))
    return key(a) <= key(b)


# --- one target: the chain --------------------------------------------------------------------------

@dataclass
class Chain:
    """The running state of one target's series: both trees and what is stuck behind a conflict."""

    pair: TargetPair
    old_tree: Tree
    new_tree: Tree
    stuck_ids: dict[str, str] = field(default_factory=dict)    # fix id -> the conflicting fix it waits for
    stuck_paths: dict[str, str] = field(default_factory=dict)  # path -> the conflicting fix holding it
    _new_only: list[str] | None = None


def _rebase_target(session: Session, pair: TargetPair, chain: tuple[Fix, ...]) -> list[FixOutcome]:
    assert pair.old is not None and pair.new is not None
    ch = Chain(pair, Tree(pair.old.root), Tree(pair.new.root))
    out = []
    for fix in chain:
        old_steps = _old_steps(fix, ch.old_tree, session.old_name)
        blocker = _blocker(fix, ch)
        if blocker:
            o = FixOutcome(fix.id, fix.target, fix.opt_in, "blocked", fix.version, fix.version)
            cause = ch.stuck_ids.get(blocker, blocker)
            how = "requires it" if blocker in fix.requires else "touches the same files"
            o.evidence.append(f"waits for {blocker!r} (not carried: {cause!r} conflicts); it {how}")
            _stick(ch, fix, fix.touched_paths(), cause)
        else:
            o = _carry(session, ch, fix, old_steps, _old_counts(fix, old_steps))
        out.append(o)
    return out


def _old_steps(fix: Fix, tree: Tree, old_name: str) -> list[Snap]:
    """The touched files on the old release (with the earlier fixes): before, and after each patch."""
    paths = fix.touched_paths()
    steps = [_snap(tree, paths)]
    for pf in fix.patches:
        p = run_pass(replace(fix, patches=(pf,)), tree, reverse=False, evidence=TRUSTED)
        if not p.ok:
            raise BadInputError(f"fix {fix.id}: {pf.path} does not apply to the old release copy {tree.root} "
                                f"({'; '.join(p.messages)}); profile {old_name} does not match its own release "
                                f"(check it with `fixpack lock --check --profile {old_name}`)")
        tree.adopt(p.tree)
        steps.append(_snap(tree, paths))
    return steps


def _old_counts(fix: Fix, old_steps: list[Snap]) -> FixEvidence:
    """How often each hunk's pre-image occurs in its file on the old release (with the earlier fixes):
    the evidence that tells a twin that appeared upstream from context that was never unique."""
    counts: list[tuple[int | None, int | None]] = []
    for pf, step in zip(fix.patches, old_steps):
        for fp in pf.files:
            text = step.get(fp.old_path or "", (None, None))[0] if fp.old_path else ""
            counts += [(len(occurrences(split_lines(text or ""), h.old_lines)), None) for h in fp.hunks]
    return FixEvidence(counts=tuple(counts))


def _twins(fix: Fix, bodies: list[str], tree: Tree, old_steps: list[Snap]) -> list[str]:
    """The old patch's hunks that the new release holds in more than one equally good place (and in
    more places than the old release held them): upstream added a twin of the fix's lines, and text
    alone cannot tell which copy the fix belongs to, so a clean 3-way merge there is git's guess.

    A place's score is how many of the hunk's pre-image lines match there, line for line; its changed
    lines must all match. Only a majority match counts (below that git aligned on more than the hunk).
    """
    work = tree.fork()
    out: list[str] = []
    for pf, body, step in zip(fix.patches, bodies, old_steps):
        for fp in pf.files:
            new_lines = split_lines(work.read(fp.old_path) or "") if fp.old_path else []
            old_text = step.get(fp.old_path or "", (None, None))[0] if fp.old_path else ""
            for i, h in enumerate(fp.hunks):
                best = _best_places(new_lines, h)
                before = len(occurrences(split_lines(old_text or ""), h.old_lines))
                if len(best) > 1 and len(best) > before:
                    out.append(f"ambiguous context: {fp.path} hunk #{i + 1}: its lines match equally well at lines "
                               f"{[n + 1 for n in best]} of the new release (they occurred {before} time(s) in the "
                               f"old one); text alone cannot tell which copy the fix belongs to")
        merged = replace(fix, patches=(replace(pf, files=parse_patch(body.encode("utf-8", "surrogateescape"),
                                                                     f"merged {pf.path.name}").files),))
        work.adopt(run_pass(merged, work, reverse=False, evidence=TRUSTED).tree)
    return out


def _best_places(lines: list[str], h: Any) -> list[int]:
    """0-based starts where most of the hunk's pre-image lines match (its changed lines all matching)."""
    pre = h.old_lines
    core = pre[h.leading_context:len(pre) - h.trailing_context]
    if core:
        starts = {q - h.leading_context for q in occurrences(lines, core)}
    else:
        wanted = set(pre)
        starts = {i - k for i, ln in enumerate(lines) if ln in wanted for k, p in enumerate(pre) if p == ln}
    scores = {s: sum(1 for k, p in enumerate(pre) if 0 <= s + k < len(lines) and lines[s + k] == p) for s in starts}
    top = max(scores.values(), default=0)
    if top * 2 <= len(pre):
        return []
    return sorted(s for s, v in scores.items() if v == top)


def _snap(tree: Tree, paths: tuple[str, ...] | list[str]) -> Snap:
    out: Snap = {}
    for p in paths:
        text = tree.read(p)
        out[p] = (text, tree.mode(p) if text is not None else None)
    return out


def _blocker(fix: Fix, ch: Chain) -> str:
    for req in fix.requires:
        if req in ch.stuck_ids:
            return req
    for p in fix.touched_paths():
        if p in ch.stuck_paths:
            return ch.stuck_paths[p]
    return ""


def _stick(ch: Chain, fix: Fix, paths: tuple[str, ...] | list[str], root_cause: str) -> None:
    ch.stuck_ids[fix.id] = root_cause
    for p in paths:
        ch.stuck_paths.setdefault(p, fix.id)


def _carry(session: Session, ch: Chain, fix: Fix, old_steps: list[Snap], counts: FixEvidence) -> FixOutcome:
    o = FixOutcome(fix.id, fix.target, fix.opt_in, "conflict", fix.version, fix.version)
    renames, deleted = _renames(ch, fix, old_steps[0])
    o.evidence += [f"{a}: renamed upstream to {b} (content {pct}% similar); the fix is carried there"
                   for a, (b, pct) in renames.items()]
    o.renames = {a: b for a, (b, _pct) in renames.items()}
    moved = _remap(fix, o.renames)
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
    o.evidence.append(f"the applier cannot place it ({ev.state.value}): " + "; ".join(ev.forward.messages))
    o.evidence += [f"{p}: deleted upstream (no file of >= {int(RENAME_SIMILARITY * 100)}% similar content was "
                   f"added in this release)" for p in deleted]
    return _carry_merge(session, ch, fix, moved, old_steps, o)


# --- renamed and deleted files --------------------------------------------------------------------

def _renames(ch: Chain, fix: Fix, base: Snap) -> tuple[dict[str, tuple[str, int]], list[str]]:
    """Files the fix changes that the new release lacks: where they went (path, similarity %), or gone."""
    renames: dict[str, tuple[str, int]] = {}
    deleted: list[str] = []
    for fp in fix.file_patches():
        if fp.kind not in ("modify", "rename") or fp.old_path in renames or fp.old_path in deleted:
            continue
        assert fp.old_path is not None
        before = base.get(fp.old_path, (None, None))[0]
        if before is None or ch.new_tree.read(fp.old_path) is not None:
            continue
        found = _similar_file(ch, fp.old_path, before)
        if found:
            renames[fp.old_path] = found
        else:
            deleted.append(fp.old_path)
    return renames, deleted


def _new_only(ch: Chain) -> list[str]:
    if ch._new_only is None:
        assert ch.pair.old is not None and ch.pair.new is not None
        old = set(_files(ch.pair.old.root, ch.pair.spec.package))
        ch._new_only = [p for p in _files(ch.pair.new.root, ch.pair.spec.package) if p not in old]
    return ch._new_only


def _files(root: Path, package: str) -> list[str]:
    out = []
    for folder, dirs, files in os.walk(root / package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = Path(folder).relative_to(root).as_posix()
        out += [f"{rel}/{f}" for f in sorted(files)]
    return out


def _similar_file(ch: Chain, path: str, text: str) -> tuple[str, int] | None:
    """The new file most similar to ``text`` (same suffix; a same-named file wins a tie), if >= 50 %."""
    a = text.splitlines()
    best: tuple[float, bool, str] | None = None
    for cand in _new_only(ch):
        if Path(cand).suffix != Path(path).suffix:
            continue
        other = ch.new_tree.read(cand)
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


def _remap(fix: Fix, renames: dict[str, str]) -> Fix:
    """The fix with its file patches moved to the paths upstream renamed the files to."""
    if not renames:
        return fix

    def move(fp: FilePatch) -> FilePatch:
        old = renames.get(fp.old_path or "", fp.old_path)
        new = renames.get(fp.new_path or "", fp.new_path) if fp.new_path == fp.old_path else fp.new_path
        return replace(fp, old_path=old, new_path=new)
    return replace(fix, patches=tuple(replace(p, files=tuple(move(fp) for fp in p.files)) for p in fix.patches))


# --- carried by the applier -------------------------------------------------------------------------

def _carry_exact(session: Session, ch: Chain, fix: Fix, moved: Fix, messages: list[str],
                 o: FixOutcome) -> FixOutcome:
    o.outcome = "exact"
    o.evidence += messages or ["applies at its lines"]
    paths = moved.touched_paths()
    steps = [_snap(ch.new_tree, paths)]
    for pf in moved.patches:
        p = run_pass(replace(moved, patches=(pf,)), ch.new_tree, reverse=False)
        if not p.ok:  # pragma: no cover - decide() placed every hunk of the whole fix on this tree
            raise FixpackError(f"fix {fix.id}: {pf.path.name} no longer applies on its own: {p.messages}")
        ch.new_tree.adopt(p.tree)
        steps.append(_snap(ch.new_tree, paths))
    old = _patch_bytes(fix)
    if not messages and not o.renames:
        new = old  # every hunk sits at its line: the patch is still right, byte for byte
    else:
        bodies = _git_diffs(session.work / ".scratch" / fix.id, steps, [p.path.name for p in fix.patches])
        shutil.rmtree(session.work / ".scratch" / fix.id, ignore_errors=True)
        new = _write_patches(fix, bodies)
    _compare(o, fix, old, new)
    return o


def _carry_binary(ch: Chain, fix: Fix, moved: Fix, o: FixOutcome) -> FixOutcome:
    ev = decide(moved, ch.new_tree, None, False)
    if ev.state is State.ABSENT and not o.renames:
        ch.new_tree.adopt(ev.forward.tree)
        o.outcome = "exact"
        o.evidence.append("applies at its lines (it ships binary files: carried byte for byte)")
        old = _patch_bytes(fix)
        _compare(o, fix, old, old)
        return o
    if ev.state is State.UPSTREAMED:
        o.outcome = "upstreamed"
        o.evidence.append("the new release holds the fix's post-image (it reverse-applies)")
        return o
    o.evidence += ev.messages + ["it ships binary files, which the rebase carries only when every hunk sits at "
                                 "its line: rebase this fix by hand (edit its patches), then run the rebase again"]
    _stick(ch, fix, fix.touched_paths() + moved.touched_paths(), fix.id)
    return o


# --- carried by a 3-way merge through git --------------------------------------------------------------

def _carry_merge(session: Session, ch: Chain, fix: Fix, moved: Fix, old_steps: list[Snap],
                 o: FixOutcome) -> FixOutcome:
    repo = session.work / fix.id
    names = [p.path.name for p in fix.patches]
    upstream = _snap(ch.new_tree, sorted(set(fix.touched_paths()) | set(moved.touched_paths())))
    inputs = _inputs_digest(old_steps, upstream)
    merge = _merge(repo, old_steps, upstream, names, fix.id, ch.pair)
    if merge.conflicts:
        return _conflict(session, ch, fix, moved, o, repo, merge.conflicts, inputs)
    twins = _twins(fix, merge.bodies, ch.new_tree, old_steps)
    if twins:
        return _ambiguous(session, ch, fix, moved, o, repo, twins, inputs)
    shutil.rmtree(repo, ignore_errors=True)
    o.evidence.append(f"3-way merge through git is clean (base: {ch.pair.old.version if ch.pair.old else ''} "
                      f"pre-image; sides: the fix's post-image and {ch.pair.new.version if ch.pair.new else ''})")
    return _adopt_bodies(ch, fix, o, merge.bodies, "merged")


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
        _stick(ch, fix, fix.touched_paths(), fix.id)
        return o
    new = _write_patches(fix, bodies)
    carried = _as_fix(fix, new)
    p = run_pass(carried, ch.new_tree, reverse=False, evidence=TRUSTED)  # made from exactly this tree
    if not p.ok or any(h.offset for h in p.hunks):
        raise FixpackError(f"fix {fix.id}: the regenerated patch does not apply exactly to the tree it was "
                           f"made from ({'; '.join(p.messages) or 'offsets'}); this is a bug")
    ch.new_tree.adopt(p.tree)
    o.outcome = outcome
    _compare(o, fix, _patch_bytes(fix), new)
    return o


@dataclass
class Merge:
    bodies: list[str]
    conflicts: list[str]


def _merge(repo: Path, old_steps: list[Snap], upstream: Snap, names: list[str], fix_id: str,
           pair: TargetPair) -> Merge:
    shutil.rmtree(repo, ignore_errors=True)
    init_repo(repo)
    git(repo, "config", "merge.conflictStyle", "diff3")
    git(repo, "config", "rerere.enabled", "false")
    old_v = pair.old.version if pair.old else "old"
    new_v = pair.new.version if pair.new else "new"
    _put(repo, old_steps[0])
    _commit(repo, f"base: the touched files on {pair.spec.name} {old_v} (with the earlier fixes)")
    git(repo, "branch", "-m", "base")
    git(repo, "checkout", "-q", "-b", "fix")
    for name, step in zip(names, old_steps[1:]):
        _put(repo, step)
        _commit(repo, f"{fix_id}: {name}")
    git(repo, "checkout", "-q", "-b", "upstream", "base")
    _put(repo, {**{p: (None, None) for p in old_steps[0]}, **upstream})
    _commit(repo, f"upstream: the same files on {pair.spec.name} {new_v} (with the earlier fixes carried)")
    git(repo, "checkout", "-q", "-b", "rebased")
    out = git(repo, "cherry-pick", "--keep-redundant-commits", "base..fix", ok_codes=(0, 1))
    unmerged = _unmerged(repo)
    if unmerged:
        kinds = [line.strip() for line in out.splitlines() if line.startswith("CONFLICT")]
        return Merge([], kinds or [f"conflict in {p}" for p in unmerged])
    if (repo / ".git" / "CHERRY_PICK_HEAD").exists() or (repo / ".git" / "sequencer").exists():
        raise GitError(f"`git cherry-pick base..fix` in {repo} stopped without a conflict:\n{out.strip()}")
    return Merge(_commit_bodies(repo, names, fix_id), [])


def _put(repo: Path, snap: Snap) -> None:
    for path, (text, mode) in snap.items():
        dest = repo / path
        if text is None:
            if dest.exists():
                dest.unlink()
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(encode(text))
        os.chmod(dest, mode if mode is not None else 0o644)


def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", message)


def _unmerged(repo: Path) -> list[str]:
    return [p for p in git(repo, "diff", "--name-only", "--diff-filter=U").splitlines() if p]


def _diff(repo: Path, a: str, b: str) -> str:
    return git(repo, "diff", "--no-color", "--no-ext-diff", "--find-renames", "--src-prefix=a/",
               "--dst-prefix=b/", "--unified=3", a, b)


def _commit_bodies(repo: Path, names: list[str], fix_id: str) -> list[str]:
    """One diff per patch file: each cherry-picked commit against its parent (found by its subject)."""
    log = git(repo, "log", "--format=%H %s", "upstream..HEAD")
    by_subject: dict[str, str] = {}
    for line in log.splitlines():
        sha, _sp, subject = line.partition(" ")
        by_subject.setdefault(subject, sha)
    bodies = []
    for name in names:
        commit = by_subject.get(f"{fix_id}: {name}", "")
        bodies.append(_diff(repo, f"{commit}^", commit) if commit else "")
    return bodies


def _git_diffs(repo: Path, steps: list[Snap], names: list[str]) -> list[str]:
    """``git diff`` between consecutive snapshots of the same files (one body per patch file)."""
    shutil.rmtree(repo, ignore_errors=True)
    init_repo(repo)
    _put(repo, steps[0])
    _commit(repo, "pre-image")
    bodies = []
    for name, step in zip(names, steps[1:]):
        _put(repo, step)
        _commit(repo, name)
        bodies.append(_diff(repo, "HEAD~1", "HEAD"))
    return bodies


def _inputs_digest(old_steps: list[Snap], upstream: Snap) -> str:
    h = hashlib.sha256()
    for snap in [*old_steps, upstream]:
        for path in sorted(snap):
            text, mode = snap[path]
            h.update(f"{path}\0{mode}\0".encode())
            h.update(encode(text) if text is not None else b"\0absent\0")
        h.update(b"\0step\0")
    return h.hexdigest()


# --- conflicts: recorded, then resolved by hand -------------------------------------------------------

def _conflict(session: Session, ch: Chain, fix: Fix, moved: Fix, o: FixOutcome, repo: Path,
              conflicts: list[str], inputs: str) -> FixOutcome:
    o.outcome = "conflict"
    o.repo = str(repo)
    o.evidence += [f"git: {c}" for c in conflicts]
    o.evidence.append(f"left as a git conflict in {repo} (branch rebased; base, fix and upstream branches "
                      f"hold the three sides)")
    session.state["conflicts"][fix.id] = {"repo": str(repo), "inputs": inputs,
                                          "patches": [p.path.name for p in fix.patches]}
    session.save()
    _stick(ch, fix, sorted(set(fix.touched_paths()) | set(moved.touched_paths())), fix.id)
    return o


def _ambiguous(session: Session, ch: Chain, fix: Fix, moved: Fix, o: FixOutcome, repo: Path,
               twins: list[str], inputs: str) -> FixOutcome:
    """A clean merge onto ambiguous context is a guess: keep git's result on branch ``git-merge`` and
    leave branch ``rebased`` at upstream, so that the maintainer places the change, never the tool."""
    git(repo, "branch", "-f", "git-merge", "HEAD")
    git(repo, "reset", "-q", "--hard", "upstream")
    o.evidence += twins
    o.evidence.append("git's 3-way merge put the change on one copy (branch git-merge); branch rebased is left at "
                      "upstream: apply the fix there by hand (`git cherry-pick base..fix`, then move the change to "
                      "the copy it belongs to and `git commit --amend`), then `fixpack rebase --continue`")
    return _conflict(session, ch, fix, moved, o, repo, [], inputs)


def _resume_conflict(session: Session, ch: Chain, fix: Fix, moved: Fix, old_steps: list[Snap],
                     o: FixOutcome) -> FixOutcome:
    rec = session.state["conflicts"][fix.id]
    repo = Path(rec["repo"])
    upstream = _snap(ch.new_tree, sorted(set(fix.touched_paths()) | set(moved.touched_paths())))
    if not (repo / ".git").is_dir() or rec["inputs"] != _inputs_digest(old_steps, upstream):
        # the pack or an earlier fix changed since the conflict was recorded: merge again
        del session.state["conflicts"][fix.id]
        o.evidence.append("its inputs changed since the conflict was recorded (or the work repository is "
                          "gone): merged again")
        return _carry_merge(session, ch, fix, moved, old_steps, o)
    problem = _finish_resolution(repo, len(rec["patches"]))
    if problem:
        o.outcome, o.repo = "conflict", str(repo)
        o.evidence.append(f"not resolved yet in {repo}: {problem}")
        _stick(ch, fix, sorted(set(fix.touched_paths()) | set(moved.touched_paths())), fix.id)
        return o
    bodies = _commit_bodies(repo, list(rec["patches"]), fix.id)
    o.evidence.append(f"conflict resolved by hand in {repo}")
    o = _adopt_bodies(ch, fix, o, bodies, "resolved")
    if o.outcome in ("resolved", "dropped"):
        del session.state["conflicts"][fix.id]
        session.save()
    return o


def _finish_resolution(repo: Path, n_patches: int) -> str:
    """Commit the maintainer's resolution and let the cherry-pick go on; '' when it is done."""
    unmerged = _unmerged(repo)
    if unmerged:
        return f"unmerged paths: {', '.join(unmerged)} (edit them, then `git add` them)"
    git(repo, "add", "--all")
    marked = [p for p in git(repo, "diff", "--cached", "--name-only", "upstream").splitlines()
              if p and _has_markers(repo / p)]
    if marked:
        return f"conflict markers left in: {', '.join(marked)}"
    if (repo / ".git" / "CHERRY_PICK_HEAD").exists():
        git(repo, "commit", "--quiet", "--allow-empty", "--no-edit", "--no-verify")
    if (repo / ".git" / "sequencer").exists():
        out = git(repo, "-c", "core.editor=true", "cherry-pick", "--continue", ok_codes=(0, 1))
        if _unmerged(repo):
            kinds = [line.strip() for line in out.splitlines() if line.startswith("CONFLICT")]
            return "the next patch conflicts too: " + ("; ".join(kinds) or ", ".join(_unmerged(repo)))
    if git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() != "rebased":
        return "the work repository is not on branch 'rebased' any more (check it out again)"
    if int(git(repo, "rev-list", "--count", "upstream..HEAD").strip()) < n_patches:
        return ("branch 'rebased' lacks some of the fix's commits (was the cherry-pick aborted?): run "
                "`git cherry-pick base..fix` there again, or `git reset --hard upstream` and re-apply them")
    return ""


def _has_markers(path: Path) -> bool:
    if not path.is_file():
        return False
    for line in decode(path.read_bytes()).splitlines():
        if line.startswith(("<<<<<<< ", ">>>>>>> ", "||||||| ")) or line == "=======":
            return True
    return False


# --- patch text ------------------------------------------------------------------------------------------

def _patch_bytes(fix: Fix) -> dict[str, bytes]:
    return {p.path.name: p.path.read_bytes() for p in fix.patches}


def _write_patches(fix: Fix, bodies: list[str]) -> dict[str, bytes]:
    """Each patch file's deterministic text: its own subject and description, fields from fix.toml."""
    out = {}
    for pf, body in zip(fix.patches, bodies):
        header = parse_patch(pf.path.read_bytes(), str(pf.path)).header
        text = format_patch(header.subject or fix.summary, header.description, header_fields(fix), body)
        out[pf.path.name] = normalize_text(fix, text, str(pf.path)).encode("utf-8", "surrogateescape")
    return out


def _as_fix(fix: Fix, patches: dict[str, bytes]) -> Fix:
    pfs = []
    for pf in fix.patches:
        data = patches[pf.path.name]
        parsed = parse_patch(data, f"regenerated {pf.path.name}")
        pfs.append(PatchFile(pf.path, sha256_bytes(data), parsed.header.subject, parsed.files))
    return replace(fix, patches=tuple(pfs))


def change_lines(data: bytes) -> list[str]:
    """The change itself: every file's removed and added lines, without context, line numbers or paths."""
    out: list[str] = []
    in_hunk = False
    for line in decode(data).splitlines():
        if line.startswith("diff --git "):
            in_hunk = False
            out.append("diff")
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line[:1] in ("+", "-", "\\"):
            out.append(line)
    return out


def interdiff(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """A unified diff of the old and new patch files' diff parts (headers dropped)."""
    parts: list[str] = []
    for name in old:
        a = diff_body(decode(old[name])).splitlines(keepends=True)
        b = diff_body(decode(new.get(name, b""))).splitlines(keepends=True)
        parts += difflib.unified_diff(a, b, f"old/{name}", f"new/{name}", n=2)
    return "".join(line if line.endswith("\n") else line + "\n" for line in parts)


def _compare(o: FixOutcome, fix: Fix, old: dict[str, bytes], new: dict[str, bytes]) -> None:
    o.new_patches = new
    if new == old:
        o.patch = "unchanged"
        return
    same = all(change_lines(old[n]) == change_lines(new[n]) for n in old)
    o.patch = "moved" if same else "changed"
    o.new_version = fix.version if same else fix.version + 1
    o.interdiff = interdiff(old, new)


# --- writing the pack -------------------------------------------------------------------------------------

def _write_pack(session: Session, pack: Pack, old: Profile, outcomes: list[FixOutcome]) -> list[str]:
    """Variants, the new profile, then its lock; the original bytes go to the state file first."""
    from . import engine

    changes = _planned_changes(session, pack, old, outcomes)
    lock = pack.root / "profiles" / f"{session.new_name}.lock"
    _backup(session, [*changes, lock])
    session.state["phase"] = "writing"
    session.save()
    for path, data in changes.items():
        _write(path, data)
    for o in outcomes:
        folder = pack.fixes[o.id].folder / session.new_name
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    rebased = tuple(n for n, p in session.pairs.items() if p.rebased)
    engine.write_lock(engine.Request(pack_root=pack.root, profile=session.new_name,
                                     roots={n: p.new.root for n, p in session.pairs.items() if p.new},
                                     only_targets=rebased))
    written = sorted({_rel(pack.root, p) for p, d in changes.items() if d is not None} | {_rel(pack.root, lock)})
    session.state["phase"] = "written"
    session.save()
    return written


def _write(path: Path, data: bytes | None) -> None:
    """One pack file (a seam for the interruption tests)."""
    if data is None:
        remove_file(path)
    else:
        atomic_write(path, data)


def _planned_changes(session: Session, pack: Pack, old: Profile,
                     outcomes: list[FixOutcome]) -> dict[Path, bytes | None]:
    changes: dict[Path, bytes | None] = {}
    old_view = pack.for_profile(old.name)
    for o in outcomes:
        fix = pack.fixes[o.id]
        folder = fix.folder / session.new_name
        new = o.new_patches or _patch_bytes(old_view.fixes[o.id])
        if not o.keep or new == _patch_bytes(fix):
            changes.update({p: None for p in sorted(folder.iterdir())} if folder.is_dir() else {})
            continue
        for name, data in new.items():
            changes[folder / name] = data
        changes[folder / "variant.toml"] = render_variant(o.new_version, old.name, session.new_name).encode()
        o.variant = _rel(pack.root, folder)
    text = render_profile(old, session.new_name, session.pairs, outcomes)
    changes[pack.root / "profiles" / f"{session.new_name}.toml"] = text.encode()
    return changes


def _backup(session: Session, paths: list[Path]) -> None:
    """Save each path's bytes before the first write (kept across --continue: the originals win)."""
    backups = session.state["backups"]
    for path in paths:
        rel = _rel(session.pack_root, path)
        if rel not in backups:
            backups[rel] = base64.b64encode(path.read_bytes()).decode() if path.is_file() else None


def _restore(session: Session) -> list[str]:
    out = []
    for rel, data in sorted(session.state.get("backups", {}).items()):
        path = session.pack_root / rel
        if data is None:
            if path.exists():
                remove_file(path)
                out.append(rel)
            if path.parent.is_dir() and path.parent.name == session.new_name and not any(path.parent.iterdir()):
                path.parent.rmdir()
        else:
            raw = base64.b64decode(data)
            if not path.is_file() or path.read_bytes() != raw:
                atomic_write(path, raw)
                out.append(rel)
    return out


def _rel(root: Path, path: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def render_variant(version: int, rebased_from: str, profile: str) -> str:
    return (f"# This fix's patches for profile {profile}, written by `fixpack rebase` from profile {rebased_from}.\n"
            f"version = {version}\nrebased_from = {json.dumps(rebased_from)}\n")


def render_profile(old: Profile, new_name: str, pairs: dict[str, TargetPair], outcomes: list[FixOutcome]) -> str:
    """The new profile: the old one's targets and fix lists, with pins read from the new release copies."""
    onto = ", ".join(f"{p.spec.name} {p.new.version}" for p in pairs.values() if p.new)
    desc = (f"Profile {old.name} rebased onto {onto} by `fixpack rebase` (see its report). Default fixes are "
            f"applied by every run; opt-in fixes only when named on the command line.")
    lines = [f"# Profile {new_name}: generated by `fixpack rebase --profile {old.name}` onto {onto}.",
             f"name = {json.dumps(new_name)}", 'description = """', *textwrap.wrap(desc, 100), '"""', ""]
    for spec in old.targets:
        lines += _render_target(spec, pairs[spec.name], old.name, new_name) + [""]
    notes = {o.id: _profile_note(o) for o in outcomes}
    lines.append("[fixes]")
    lines += _render_list("default", old.default, notes) + _render_list("opt_in", old.opt_in, notes)
    return "\n".join(lines) + "\n"


def _render_target(spec: TargetSpec, pair: TargetPair, old_name: str, new_name: str) -> list[str]:
    out = [] if pair.rebased else [f"# {pair.note}; update it"]
    version, commit, branch, ref = spec.pin.version, spec.pin.commit, spec.pin.branch, spec.source.ref
    if pair.new is not None:
        version, commit = pair.new.version, normalize_commit(pair.new.commit)
        old_v = pair.old.version if pair.old else spec.pin.version
        for a, b in ((old_name, new_name), (old_v, pair.new.version)):
            if a:
                branch, ref = branch.replace(a, b), ref.replace(a, b)
    out += [f"[targets.{spec.name}]", f"package = {json.dumps(spec.package)}",
            f"distribution = {json.dumps(spec.distribution)}"]
    out += [f"version = {json.dumps(version)}"] if version else []
    out.append(f"commit = {json.dumps(commit)}")
    out += [f"branch = {json.dumps(branch)}"] if branch else []
    out += [f"version_module = {json.dumps(spec.version_module)}"] if spec.version_module else []
    pairs_ = (("pypi", spec.source.pypi), ("git", spec.source.git), ("ref", ref))
    src = [f"{k} = {json.dumps(v)}" for k, v in pairs_ if v]
    out += [f"source = {{ {', '.join(src)} }}"] if src else []
    return out


def _profile_note(o: FixOutcome) -> str:
    if o.outcome == "upstreamed" and o.keep:
        return "upstreamed in this release: proposed for dropping (see the rebase report)"
    if o.outcome == "upstreamed":
        return "dropped: upstreamed in this release (a 3-way merge leaves no change; see the rebase report)"
    if o.outcome == "dropped":
        return "dropped: its conflict was resolved to no change"
    if any(f.startswith("fixed_in") for f in o.flags):
        return "upstream's fixed_in is at or below this release: check and drop it"
    return ""


def _render_list(key: str, ids: tuple[str, ...], notes: dict[str, str]) -> list[str]:
    if not ids:
        return [f"{key} = []"]
    out = [f"{key} = ["]
    for fid in ids:
        note = notes.get(fid, "")
        if note.startswith("dropped"):
            out.append(f"    # {json.dumps(fid)},  # {note}")
        else:
            out.append(f"    {json.dumps(fid)}," + (f"  # {note}" if note else ""))
    return out + ["]"]


# --- the report -----------------------------------------------------------------------------------------

def _next_steps(session: Session, result: RebaseResult) -> list[str]:
    steps = []
    conflicts = [o for o in result.fixes if o.outcome == "conflict"]
    for o in conflicts:
        if o.repo:
            steps.append(f"resolve {o.id}: `cd {o.repo}`, `git status`, edit the conflicted files (the base "
                         f"version is shown between ||||||| and =======), `git add` them")
        else:
            steps.append(f"fix {o.id} by hand: {o.evidence[-1]}")
    if result.status != "done":
        steps.append("then `fixpack rebase --continue` (blocked fixes are tried then); or `fixpack rebase --abort` "
                     "to drop the rebase (the pack is untouched until every fix is carried)")
        return steps
    new = result.to_profile
    steps.append(f"review `git status fixes profiles` and `git diff`: profiles/{new}.toml, its lock, and the "
                 f"variants in fixes/<id>/{new}/")
    for o in result.fixes:
        if o.outcome == "upstreamed":
            steps.append(f"drop {o.id} from profiles/{new}.toml if upstream's change covers the symptom "
                         f"(it stays listed; its proof test should now pass on the clean release)")
        elif any(f.startswith("fixed_in") for f in o.flags):
            steps.append(f"check {o.id}: its fixed_in says this release fixes it")
    for p in result.targets:
        if not p.rebased:
            steps.append(f"update the pin of target {p.spec.name} in profiles/{new}.toml ({p.note})")
    steps.append(f"prove it: `fixpack prove --profile {new} --python <a venv with the new release>`; then commit")
    return steps


def render_markdown(result: RebaseResult) -> str:
    onto = ", ".join(f"{p.spec.name} {p.new.version}" for p in result.targets if p.new)
    head = {"done": "done: every fix is carried",
            "conflicts": "stopped: conflicts to resolve (nothing written to the pack yet)"}[result.status]
    lines = [f"# Rebase of profile {result.from_profile} onto {onto} (profile {result.to_profile})", "",
             f"**Status: {head}.**", "", "| target | old release | new release | note |", "| --- | --- | --- | --- |"]
    for p in result.targets:
        def side(ft: FoundTarget | None) -> str:
            return f"{ft.version} @ {normalize_commit(ft.commit)[:12]}" if ft else "-"
        note = _cell(p.note or str(p.new.root if p.new else ""))
        lines.append(f"| {p.spec.name} | {side(p.old)} | {side(p.new)} | {note} |")
    lines += ["", "| fix | outcome | version | patch | evidence |", "| --- | --- | --- | --- | --- |"]
    for o in result.fixes:
        ver = str(o.old_version) if o.old_version == o.new_version else f"{o.old_version} → {o.new_version}"
        ev = "; ".join(o.evidence + [f"**{f}**" for f in o.flags])
        lines.append(f"| {o.id}{' (opt-in)' if o.opt_in else ''} | {o.outcome} | {ver} | {o.patch} | {_cell(ev)} |")
    counts: dict[str, int] = {}
    for o in result.fixes:
        counts[o.outcome] = counts.get(o.outcome, 0) + 1
    lines += ["", "Outcomes: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no fixes"), ""]
    moved = [o for o in result.fixes if o.interdiff]
    if moved:
        lines += ["## Interdiffs (old patch → new patch)", ""]
        for o in moved:
            what = "line numbers / context only" if o.patch == "moved" else "the change itself changed"
            lines += [f"### {o.id} ({what})", "", "```diff", o.interdiff.rstrip("\n"), "```", ""]
    if result.written:
        lines += ["## Written", ""] + [f"- {w}" for w in result.written] + [""]
    lines += ["## Next steps", ""] + [f"{i}. {s}" for i, s in enumerate(result.next_steps, 1)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _write_report(session: Session, result: RebaseResult) -> None:
    result.markdown = render_markdown(result)
    stem = f"rebase-{result.from_profile}-to-{result.to_profile}"
    session.report_dir.mkdir(parents=True, exist_ok=True)
    result.report_md = session.report_dir / f"{stem}.md"
    result.report_json = session.report_dir / f"{stem}.json"
    atomic_write(result.report_md, result.markdown.encode())
    atomic_write(result.report_json, dumps(result.as_dict()))


__all__ = ["RebaseRequest", "RebaseResult", "FixOutcome", "start", "resume", "abort", "check_clean", "find_work",
           "render_markdown", "change_lines", "interdiff", "version_le", "OUTCOMES"]
