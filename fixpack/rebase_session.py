"""The rebase session: its request and result types, its state file (``<work>/state.json``), the work
folder, the backups of every pack file it writes (so that ``--abort`` restores them), the writing of
the new profile, variants and lock, and the report files.

Nothing here decides how a fix is carried (that is :mod:`fixpack.rebase`).
"""

from __future__ import annotations

import base64
import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from .documents import MAX_STATE_BYTES
from .errors import BadInputError, EnvironmentProblem, FixpackError, GitError, InternalError, of_code, stopped_by
from .fsio import remove_file, temp_path
from .gitutil import run as git
from .interrupts import Term, signals, terminated
from .loader import load_pack, load_profile
from .model import Pack, Profile
from .nofollow import atomic_write, write_under
from .patchtext import patch_bytes
from .progress import QUIET, Progress
from .rebase_io import NotPutBack, cannot, errno_text
from .rebase_putback import (
    backups_too_large,
    changed_by_hand,
    check_backups_fit,
    lock_written,
    no_link_on_the_way,
    planned,
    refuse_changed,
    refuse_made_meanwhile,
)
from .rebase_result import FixOutcome, RebaseResult, TargetPair
from .rebase_state import (
    WORK_DIR,
    backup_bytes,
    check_state,
    check_work_marker,
    default_work,
    pack_rel,
    read_json,
    state_advice,
    work_root,
    written_sha,
)
from .records import dumps
from .render import Command, render_markdown, render_profile, render_variant
from .safepath import holds_bytes, link_on_the_way
from .structs import dataclass, field
from .targets import FoundTarget, read_facts


@dataclass
class RebaseRequest:
    """What ``fixpack rebase`` is asked to do.

    ``roots``: new release copies (``--root NAME=PATH``); ``to_version``: the new version of the PyPI
    target (fetched when no ``--root`` is given); ``old_roots``: the old release copies (the 3-way base;
    fetched at the old pin when not given); ``name``: the new profile (default ``v<to_version>``);
    ``work``: the work folder (default ``<pack>/.rebase/<name>/``); ``report_dir``: where the report
    goes (default ``<pack>/reports/``); ``python``: the interpreter of a stand-in image of the new
    release, on which each carried fix's proof runs (``proof_site``: the folder its package lies in,
    default its purelib); ``allow_unproven``: let ``--continue`` write a pack whose fixes no proof ran on;
    ``replace``: the new profile may exist already (it, its lock and its variants are then replaced);
    ``allow_older``: the new release may be older than the old profile's pin."""

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
    python: str = ""
    proof_site: Path | None = None
    allow_unproven: bool = False
    replace: bool = False  # the new profile may exist: replace it (its lock and variants too)
    allow_older: bool = False  # the new release may be older than the old profile's pin
    progress: Progress = QUIET
    ended: list[RebaseResult] = field(default_factory=list)  # the result once it has ended (rebase_stop.ended_after)


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
    progress: Progress = QUIET  # hears about each fix as it is carried (not saved)
    given: bool = False  # the work folder was given with --work: the user's (rebase_state.check_work_marker)
    starting: bool = False  # this run is the start, which drops the work folder on an error while 'merging'
    stopped: bool = False  # Ctrl-C or SIGTERM stopped this run while it carried: its work is kept (rebase_stop)
    ended: list[RebaseResult] = field(default_factory=list)  # its result once this run has ended (the request's)

    @property
    def state_path(self) -> Path:
        return self.work / "state.json"

    def save(self) -> None:
        atomic_write(self.state_path, dumps(self.state))

    def keep_repo(self, fix_id: str, record: dict[str, Any]) -> None:
        """A conflict left in the work repository ``<work>/<fix_id>``, recorded (``repos`` too, for good: the
        repositories that dropping the work folder removes, rebase_state.made_repos) and saved."""
        self.state["conflicts"][fix_id] = record
        self.state["repos"] = sorted({*self.state.get("repos", ()), fix_id})
        self.save()


def continue_flags(state: dict[str, Any]) -> tuple[str, ...]:
    """What ``rebase --continue`` needs, besides the pack and name, to run as printed: ``--python P`` when the
    rebase was started with that stand-in image (``--continue`` never runs the state's interpreter unless it is
    given again: fixpack.rebase_start.refuse_unsaid_python), else ``--allow-unproven``, as its proofs would
    otherwise be asked for; ``--report DIR`` when the start was given one."""
    proof, report, pack = state.get("proof") or {}, state.get("report_dir"), state.get("pack")
    given = isinstance(report, str) and isinstance(pack, str) and Path(report) != (Path(pack) / "reports").resolve()
    python = proof.get("python") if isinstance(proof, dict) else None
    proven = ("--python", python) if isinstance(python, str) and python else ("--allow-unproven",)
    return proven + (("--report", str(report)) if given else ())


def resume_command(action: str, pack_root: Path, name: str, work: Path | None = None, *flags: str) -> str:
    """``rebase --continue`` (``action`` ``continue``) or ``--abort`` for the rebase to ``name``, runnable as
    written: the program as :func:`fixpack.progname.program` names it, the pack, and ``--work`` when the rebase
    was given one (else ``--name``)."""
    from .progname import command  # only when a message names it

    where = ["--work", str(work.resolve())] if work is not None else ["--name", name]
    return command("rebase", f"--{action}", "--pack", str(pack_root), *where, *flags)


def way_on(session: Session, action: str) -> str:
    """``rebase --continue`` (with :func:`continue_flags`) or ``--abort`` (``action``) of ``session``'s rebase, as
    :func:`resume_command` writes it (``--work`` where the rebase was given one)."""
    flags = continue_flags(session.state) if action == "continue" else ()
    return resume_command(action, session.pack_root, session.new_name, session.work if session.given else None,
                          *flags)


def terminal_command(pack_root: Path, name: str, work: Path | None = None) -> Command:
    """How the terminal renders the next steps' commands (render.next_steps' ``command``): the program as
    :func:`fixpack.progname.program` names it, with the pack; ``rebase --continue`` / ``--abort`` as
    :func:`resume_command` (the committed report keeps plain ``fixpack``)."""
    from .progname import command  # only when there are steps to show

    def render(*words: str) -> str:
        if words[:1] == ("rebase",) and words[1:2] in (("--continue",), ("--abort",)):
            return resume_command(words[1][2:], pack_root, name, work, *words[2:])
        return command(*words, "--pack", str(pack_root))
    return render


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
    """The work folder of the rebase in progress (``--continue``/``--abort``): ``--work``, else
    ``<pack>/.rebase/<name>`` or the one there, never through a symbolic link (rebase_state)."""
    if work is not None:
        work_root(pack_root)  # a linked <pack>/.rebase is refused whatever --work is (--undo's files live there)
        found = [work.resolve()]
    elif name:
        found = [default_work(pack_root, name)]
    else:
        base = work_root(pack_root)
        found = sorted(default_work(pack_root, p.parent.name) for p in base.glob("*/state.json")) \
            if base.is_dir() else []
        if len(found) > 1:
            raise BadInputError(f"several rebases are in progress ({', '.join(p.name for p in found)}): "
                                f"name one with --name")
    if not found or not os.path.lexists(found[0] / "state.json"):
        raise BadInputError(f"no rebase in progress under {found[0] if found else pack_root / WORK_DIR}")
    return found[0]


def load_session(req: RebaseRequest, *, targets: bool = True) -> Session:
    """The rebase in progress, its state checked (rebase_state.check_state) before anything is done with it.
    ``targets`` False (``--abort``): the pack is not loaded, nor the targets' facts read (the session's ``pairs``
    empty): a pack that a put-back cut half way left invalid (a variant.toml whose patch is gone) is still put back."""
    work = find_work(req.pack_root.resolve(), req.name, req.work)
    path = work / "state.json"
    state = read_json(path, state_advice(work, req.pack_root))
    check_state(path, state, req.pack_root, work, default=req.work is None)
    check_work_marker(req.pack_root, work, req.work is not None)  # a --work folder: marked by the start, first
    if req.work is not None and req.name and req.name != state["to"]:  # never finished under the other name
        raise BadInputError(f"--name {req.name} does not name the rebase in --work {req.work}, which is to "
                            f"{state['to']}: give --name {state['to']}, or leave --name out; nothing was done")
    pack_root = req.pack_root.resolve()
    if targets:  # --continue: a pack file changed by hand is said as that, before the pack is read
        refuse_changed(state, pack_root, state["to"], "continue", resume_command(
            "continue", pack_root, state["to"], work if req.work is not None else None, *continue_flags(state)))
    pairs: dict[str, TargetPair] = {}
    for spec in load_profile(load_pack(pack_root), state["from"]).targets if targets else ():
        t = state["targets"].get(spec.name, {})
        if not t.get("new"):
            pairs[spec.name] = TargetPair(spec, note=t.get("note", "not rebased"))
            continue
        new_root, old_root = Path(t["new"]), Path(t["old"])
        pairs[spec.name] = TargetPair(spec, FoundTarget(spec, old_root, *read_facts(spec, old_root), "state"),
                                      FoundTarget(spec, new_root, *read_facts(spec, new_root), "state"))
    return Session(pack_root, state["from"], state["to"], state["to_version"], pairs, work,
                   Path(state["report_dir"]), state, progress=req.progress, given=req.work is not None,
                   ended=req.ended)


def write_pack(session: Session, pack: Pack, old: Profile, outcomes: list[FixOutcome]) -> list[str]:
    """Variants, the new profile, then its lock; the original bytes go to the state file first. Cut by Ctrl-C or
    SIGTERM, by a file it cannot write (an OSError: a read-only or full pack folder), or by another error of this
    tool (the lock's), every file written so far is put back (:func:`_rolled_back`); one changed by hand is refused at
    its write (and by load_session for --continue)."""
    from . import engine

    lock = pack.root / "profiles" / f"{session.new_name}.lock"
    phase: str = session.state["phase"]
    changes: dict[Path, bytes | None] = {}
    at: Path | None = None  # the pack file being written (named when it cannot be)
    try:  # from the plan on (a state this run saved as 'writing' is put back to ``phase``)
        changes = _planned_changes(session, pack, old, outcomes)
        _backup(session, [*changes, lock])
        at = session.state_path
        session.state |= {"phase": "writing", "planned": planned(session.state, pack.root, changes)}
        session.save()
        for path, data in changes.items():
            at = path
            new = not os.path.lexists(path)
            refuse_made_meanwhile(session.state, pack.root, path)  # a link, a file by hand: put there meanwhile
            _write(path, data, pack.root, new)
        for o in outcomes:
            folder = at = pack.fixes[o.id].folder / session.new_name
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        rebased = tuple(n for n, p in session.pairs.items() if p.rebased)
        at = lock
        engine.write_lock(engine.Request(
            pack_root=pack.root, profile=session.new_name,
            roots={n: p.new.root for n, p in session.pairs.items() if p.new}, only_targets=rebased,
            upstreamed=tuple(o.id for o in outcomes if o.outcome == "upstreamed" and o.keep)),
            lock_written(session.state, session.pack_root, session.save, lock))
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as :class:`fixpack.interrupts.Term`
        raise _rolled_back(session, phase, exc) from None
    except OSError as exc:  # a pack file (or the state) it cannot write: put back as for Ctrl-C, said with its errno
        if at is None:  # before the state was saved as 'writing': a pack file it could not read to back up
            raise EnvironmentProblem(f"{cannot(exc, what='read')}; nothing was written to the pack: make it readable "
                                     f"and run the rebase again") from exc
        raise _rolled_back(session, phase, exc, at) from exc
    except FixpackError as exc:  # the lock refused (a release copy, a fix): put back too, said with its own code
        if at is None:  # before anything was written (the backups too large): said as it is
            raise
        raise _rolled_back(session, phase, exc, at) from exc
    except Exception as exc:  # a bug of this tool (exit 1, said as one): the pack files put back all the same, first
        if at is None:
            raise
        held: list[int] = []
        done = _put_back(session, phase, held)
        if not done[1] and not held:  # every file put back, no signal meanwhile: the bug as it is
            raise
        raise _rolled_back(session, phase, exc, at, (*done, held)) from exc
    written = sorted({pack_rel(pack.root, p) for p in [*(p for p, d in changes.items() if d is not None), lock]})
    session.state["phase"] = "written"
    session.save()
    return written


def _rolled_back(session: Session, phase: str, exc: BaseException, at: Path | None = None,
                 done: tuple[dict[str, OSError], list[str], set[str], list[int]] | None = None) -> FixpackError:
    """Ctrl-C or SIGTERM (``exc``), or a file it could not write (``exc`` an OSError, ``at`` the file it was at), or
    another error (``exc`` a FixpackError) while :func:`write_pack` wrote: every pack file put back as it was before
    the rebase (its backups), each tried, the state as before the write (the work repositories, resolutions and all,
    untouched), and what to say (SIGTERM: :class:`Terminated`, exit 143; else the error's own code, or 5). The
    put-back runs to its end: a second Ctrl-C or SIGTERM meanwhile is held until it is done (said; SIGTERM makes it
    exit 143). A start that had no conflict (``phase`` merging) then leaves no trace (:func:`fixpack.rebase.start`).
    A write cut short harder (SIGKILL) is finished by ``--continue``, or put back by ``--abort``. A bug (``exc`` any
    other exception; ``done``: :func:`_put_back`'s result and the signals held) is an InternalError (exit 1, or
    143)."""
    if done is None:
        held: list[int] = []
        failed, left, kept = _put_back(session, phase, held)
    else:
        failed, left, kept, held = done
    term = terminated(exc, held)
    kind, problems = stopped_by(term)[1], exc.problems if isinstance(exc, FixpackError) else []
    where = pack_rel(session.pack_root, at) if at is not None and at.is_relative_to(session.pack_root) else at
    if isinstance(exc, OSError):
        how, fix_it = cannot(exc, where), "remove the link, then " if exc.errno == errno.ELOOP else \
            "free space or make it writable, then "
    elif isinstance(exc, FixpackError):
        how, fix_it, kind = f"{exc.args[0] if exc.args else exc}; at {where}", "fix that, then ", \
            kind if term else of_code(exc.exit_code)
    elif isinstance(exc, KeyboardInterrupt):
        how, fix_it = stopped_by(isinstance(exc, Term))[0], ""
    else:  # a bug: said as one (exit 1), or as SIGTERM's 143 where one came meanwhile
        how, fix_it, kind = (f"internal error {exc!r} (please report it)", "", kind) if term else \
            (repr(exc), "", InternalError)
    waited = "" if not held else " (a further Ctrl-C or SIGTERM waited until it was done)" \
        if isinstance(exc, KeyboardInterrupt) else " (a Ctrl-C or SIGTERM meanwhile waited until it was done)"
    again = way_on(session, "continue")
    if left:
        edited = kept & set(left)
        named = ", ".join(f"{k}: {errno_text(failed[k])}" if k in failed else k for k in left if k not in edited)
        why = f": {errno_text(failed[''])}" if "" in failed else ""
        said = [f"{len(left) - len(edited)} pack file(s) it wrote could not be put back ({named}){why}"] \
            if len(left) > len(edited) else []
        if any(e.errno == errno.ELOOP for e in failed.values()) and not fix_it.startswith("remove the link"):
            fix_it = f"remove the link, {fix_it or 'then '}"
        if edited:
            said.append(f"{len(edited)} changed by hand meanwhile " + ("is kept as it is" if len(edited) == 1 else
                                                                        "are kept as they are")
                        + f" ({', '.join(sorted(edited))})")
            fix_it = f"move each file changed by hand away to keep your changes, {fix_it or 'then '}"
        return kind(f"{how} while writing the pack; {'; '.join(said)}{waited}: "
                    f"{fix_it or 'make them writable, then '}finish the rebase "
                    f"with `{again}`, or put them back with "
                    f"`{way_on(session, 'abort')}`", problems)
    if phase == "merging" and session.starting:
        return kind(f"{how} while writing the pack: every pack file it had written is put back (nothing written to "
                    f"the pack){waited}, and the rebase left no trace; {fix_it}run it again", problems)
    return kind(f"{how} while writing the pack: every pack file it had written is put back (nothing written to the "
                f"pack){waited}; the rebase in {session.work} is kept as it was, resolved conflicts too: {fix_it}run "
                f"it again (`{again}`)", problems)


def _put_back(session: Session, phase: str, held: list[int]) -> tuple[dict[str, OSError], list[str], set[str]]:
    """:func:`write_pack` cut short: every pack file put back from its backup (each tried) but those changed by hand
    meanwhile, with Ctrl-C and SIGTERM held meanwhile (into ``held``), and, once none is left written, the state as
    before the write (``phase`` merging, else conflicts). Returns the put-back's errors (relative path, or "" for
    one of the whole), the pack files left written, and those of them kept as changed by hand."""
    failed: dict[str, OSError] = {}
    kept = {r for r, _made in changed_by_hand(session.state, session.pack_root)}
    with signals(held, deferred=True):
        try:
            restore(session, keep=kept)
        except NotPutBack as nb:  # told by the caller: the files left written (the state keeps the backups)
            failed = nb.failed
        except OSError as e:
            failed = {"": e}
        left = written_so_far(session)
        if not left:
            try:
                session.state["phase"] = "merging" if phase == "merging" else "conflicts"
                session.state.pop("planned", None)  # nothing left written: nothing to hold the files against
                session.save()
            except OSError:  # the state stays 'writing' with every file put back: --continue or --abort goes on
                pass
    return failed, left, kept


def written_so_far(session: Session) -> list[str]:
    """The pack files (relative to the pack) that do not hold what they held before the rebase (its backups): what
    a write of this rebase cut short left there; empty while nothing is written."""
    out = []
    for key, data in sorted(session.state.get("backups", {}).items()):
        path = session.pack_root / key
        if link_on_the_way(session.pack_root, key):  # one put there meanwhile: named, never looked through
            out.append(key)
            continue
        held = not path.is_file() if data is None else holds_bytes(path, base64.b64decode(data))
        if not held:
            out.append(key)
    return out


def _write(path: Path, data: bytes | None, root: Path, new: bool = False) -> None:
    """One pack file (a seam for the interruption tests), never through a link (nofollow), nor over one made since."""
    try:
        write_under(root, pack_rel(root, path), data, new=new)
    except FileExistsError:
        raise BadInputError(f"{path} was made by hand while the rebase wrote the pack") from None


def _planned_changes(session: Session, pack: Pack, old: Profile,
                     outcomes: list[FixOutcome]) -> dict[Path, bytes | None]:
    changes: dict[Path, bytes | None] = {}
    old_view = pack.for_profile(old.name)
    for o in outcomes:
        fix = pack.fixes[o.id]
        folder = fix.folder / session.new_name
        new = o.new_patches or patch_bytes(old_view.fixes[o.id])
        if not o.keep or new == patch_bytes(fix):
            changes.update(dict.fromkeys(sorted(folder.iterdir())) if folder.is_dir() else {})
            continue
        for name, data in new.items():
            changes[folder / name] = data
        changes[folder / "variant.toml"] = render_variant(o.new_version, old.name, session.new_name).encode()
        o.variant = pack_rel(pack.root, folder)
    text = render_profile(old, session.new_name, session.pairs, outcomes)
    changes[pack.root / "profiles" / f"{session.new_name}.toml"] = text.encode()
    return changes


def _backup(session: Session, paths: list[Path]) -> None:
    """Save each path's bytes before the first write (kept across --continue: the originals win). Refused first,
    nothing read or written, when they would make a ``state.json`` larger than its reader takes
    (:func:`check_backups_fit`); and again, before it is saved, should a file have grown since its size was told."""
    check_backups_fit(session.state, session.pack_root, paths, session.state_path)
    backups = session.state["backups"]
    for path in paths:
        key = pack_rel(session.pack_root, path)
        if key not in backups:
            backups[key] = base64.b64encode(backup_bytes(path)).decode() if path.is_file() else None
    size = len(dumps(session.state))
    if size > MAX_STATE_BYTES:
        sizes = {k: len(v) * 3 // 4 for k, v in backups.items() if isinstance(v, str)}
        raise backups_too_large(session.state_path, size, sizes)


def backup_candidates(pack: Pack, old: Profile, new_name: str) -> list[Path]:
    """Every pack file a rebase of ``old`` to ``new_name`` may replace or remove, so back up (the new profile, its
    lock, each file of a ``fixes/<id>/<new_name>/`` variant folder of the profile's fixes): a superset of the
    files :func:`write_pack` backs up, known before anything is carried."""
    paths = [pack.root / "profiles" / f"{new_name}.toml", pack.root / "profiles" / f"{new_name}.lock"]
    for fid in (*old.default, *old.opt_in):
        folder = pack.fixes[fid].folder / new_name if fid in pack.fixes else None
        if folder is not None and folder.is_dir() and not folder.is_symlink():
            paths += sorted(p for p in folder.iterdir() if p.is_file())
    return paths


def restore(session: Session, keep: Iterable[str] = ()) -> list[str]:
    """Every pack file the backups record put back as it was before the rebase (or removed: it was not there), each
    tried, but those in ``keep`` (changed by hand meanwhile), never through a link on the way (ELOOP, naming it); the
    temp file a killed write left beside one (:func:`~fixpack.fsio.temp_path`) goes too, and a variant folder then
    empty. Returns the files it put back or removed, relative to the pack (a temp file among them); raises
    :class:`NotPutBack` (an OSError) naming each file it could not, with its error, once every other one is put back."""
    out: list[str] = []
    failed: dict[str, OSError] = {}
    for rel, data in sorted(session.state.get("backups", {}).items()):
        if rel in keep:
            continue
        path = session.pack_root / rel
        try:
            no_link_on_the_way(session.pack_root, rel)
            tmp = temp_path(path)
            if os.path.lexists(tmp) and stat.S_ISREG(os.lstat(tmp).st_mode):  # (never a link or a folder)
                remove_file(tmp)
                out.append(PurePosixPath(rel).with_name(tmp.name).as_posix())
            if data is None:
                if path.exists():
                    remove_file(path)
                    out.append(rel)
                if path.parent.is_dir() and path.parent.name == session.new_name and not any(path.parent.iterdir()):
                    path.parent.rmdir()
            else:
                raw = base64.b64decode(data)
                if not holds_bytes(path, raw):
                    atomic_write(path, raw)
                    out.append(rel)
        except OSError as exc:  # told once every other file is tried
            failed[rel] = exc
    if failed:
        raise NotPutBack(out, failed)
    return out


def keep_undo(session: Session, written: list[str]) -> Path:
    """Before a finished rebase drops its work folder: what ``--undo`` needs, in ``<pack>/.rebase/`` where --undo
    looks, whatever ``--work`` was (``.rebase/`` is not part of the pack): the bytes each pack file had before,
    and the sha256 of what the rebase wrote (``planned``'s last: a file edited since is held against it)."""
    last = {k: v[-1] for k, v in session.state.get("planned", {}).items()}
    now = {w: sha for w in written if (sha := last.get(w) or written_sha(session.pack_root / w)) is not None}
    path = work_root(session.pack_root) / f"{session.new_name}.undo.json"
    path.parent.mkdir(exist_ok=True)
    atomic_write(path, dumps({"to": session.new_name, "backups": session.state.get("backups", {}), "written": now}))
    return path


def report_paths(session: Session) -> tuple[Path, Path]:
    """The rebase's report files, Markdown and JSON (``--abort`` keeps them: the record of why it stopped)."""
    stem = session.report_dir / f"rebase-{session.old_name}-to-{session.new_name}"
    return Path(f"{stem}.md"), Path(f"{stem}.json")


def write_report(session: Session, result: RebaseResult) -> None:
    result.markdown = render_markdown(result)
    result.report_md, result.report_json = report_paths(session)
    try:
        session.report_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(result.report_md, result.markdown.encode())
        atomic_write(result.report_json, dumps(result.as_dict()))
    except OSError as exc:  # the rebase is still in progress (its state 'written', or 'conflicts'): say so
        from .outputs import write_failed
        again = way_on(session, "continue")
        fix_it = "free space or make that folder writable (or give another with --report DIR)"
        if session.state.get("phase") == "written":
            done = (f"the rebase's pack files are written, but the rebase to {session.new_name} is not finished (it "
                    f"is kept in {session.work}): {fix_it}, then finish it with `{again}`, or put the pack back with "
                    f"`{way_on(session, 'abort')}`")
        else:
            done = (f"the rebase stopped on conflicts and is kept in {session.work} (--json prints the report's "
                    f"facts): {fix_it}, then resolve them and run `{again}`")
        raise write_failed(exc, session.report_dir, "--report", done) from exc
