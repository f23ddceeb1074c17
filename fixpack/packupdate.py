"""Writing a changed fix into the pack, all or nothing: its patch files, ``fix.toml``, the series and the
profile (for a new fix), and every lock the change touches.

The new pack is first built in a staging folder (a copy of the pack without its caches and work folders),
where every later fix of the series is checked on top of the changed one (one that only moved is
regenerated at its new lines; one that no longer applies stops it all) and the locks are generated
by the existing lock generation (:func:`fixpack.engine.write_lock`). Only when all of that holds are
the files written into the pack, through the journalled transaction of :func:`fixpack.transaction.write_transaction`
(a failed write is rolled back in the same run; a killed one by the next refresh or import).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Container, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from .errors import (
    NOTHING_SAID,
    BadInputError,
    ConflictError,
    EnvironmentProblem,
    FixpackError,
    Terminated,
    errno_of,
    temp_work_failed,
)
from .evaluate import TRUSTED, Pass, decide, run_pass
from .fsio import FileChange, forget_state
from .loader import load_pack, load_profile
from .lock_hints import remove_hint, twin_warnings
from .model import Fix, Pack
from .pack_journal import load_pack_journal
from .progress import QUIET, Progress
from .records import Lock
from .rollback import roll_back
from .safepath import holds_bytes, not_a_file
from .state import leftover_journal
from .structs import dataclass, field, replace
from .transaction import check_temp_paths, write_transaction
from .tree import Tree

REFRESH_AGAIN = "run the refresh again; nothing was written"  # a patch file or toml changed since the load
STAGE_SKIPPED = {".git", ".edit", ".rebase", ".fixpack", "reports", "build", "dist", "tests", "tools"}
STAGE_IGNORED = ("__pycache__", "*.egg-info", ".*_cache", ".hypothesis", ".venv*")


@dataclass(frozen=True)
class LaterFix:
    """A fix after the changed one in the profile's chain: ``exact`` (applies at its stated lines on top
    of the change), ``moved`` (applies only at an offset), or another state with its messages."""

    id: str
    state: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "state": self.state, "detail": self.detail}


@dataclass
class Outcome:
    """What a pack update did: the pack files it wrote (relative paths), the locks among them, the
    later fixes with their states, and whether anything changed at all."""

    written: list[str] = field(default_factory=list)
    locks: list[str] = field(default_factory=list)
    later: list[LaterFix] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the new locks' hunks that occur twice (lock_hints)

    @property
    def changed(self) -> bool:
        return bool(self.written)


def recover_pack(pack_root: Path, progress: Progress = QUIET) -> bool:
    """Roll back a pack update that was killed half way (its journal is in ``<pack>/.fixpack/``), saying so on
    ``progress`` (the command, the fix and how many files its journal names: those it was to write, some maybe not
    yet touched). Returns whether there was one to roll back (leftovers alone: discarded, False)."""
    if not leftover_journal(pack_root):
        return False
    # the files a pack update writes only (a planted journal writes nothing else); a damaged one: its steps
    journal = load_pack_journal(pack_root)
    roll_back(pack_root, journal)
    forget_state(pack_root)
    if journal is None:
        return False
    what = f"the {journal.by[0]} of {journal.by[1]}" if journal.by else "a pack update"
    n = len(journal.entries)
    progress.note(f"rolled back {what} a killed run left half written (the {n} file(s) its journal names are as "
                  f"they were before it) before reading the pack")
    return True


ROLLED_BACK_FIRST = "a killed pack update was rolled back first (said above)"


@contextmanager
def recovered_first(pack_root: Path, progress: Progress = QUIET) -> Iterator[bool]:
    """:func:`recover_pack`, then the body (the rest of a pack update), yielding whether a killed update was rolled
    back. A refusal after that rollback says it: its "nothing was written" becomes "a killed pack update was rolled
    back first (said above), and nothing else was written"; one that claims nothing gets the rollback added. The error
    keeps its class (its exit code)."""
    rolled = recover_pack(pack_root, progress)
    try:
        yield rolled
    except FixpackError as exc:
        if rolled and exc.args and isinstance(exc.args[0], str) and ROLLED_BACK_FIRST not in exc.args[0]:
            said, n = NOTHING_SAID.subn(f"{ROLLED_BACK_FIRST}, and nothing else was written", exc.args[0], count=1)
            exc.args = (said if n else f"{said} ({ROLLED_BACK_FIRST})", *exc.args[1:])
        raise


def update(pack_root: Path, changes: dict[str, bytes | None], fix_id: str, profiles: dict[str, dict[str, Path]],
           progress: Progress = QUIET, by: str = "refresh") -> Outcome:
    """Write ``changes`` (pack-relative path -> bytes, None to remove) into the pack at ``pack_root``, with
    the lock of each of ``profiles`` regenerated on its release copies (profile -> target name -> clean copy);
    ``by``: the command writing (refresh, import), recorded in the journal with ``fix_id``.

    A later fix that still applies on top of ``fix_id``, only at an offset (``moved``), gets its patch files
    regenerated at its new lines (its change and its message unchanged; reported). Raises ConflictError
    (exit 4) naming every later fix that no longer applies, and a moved one whose patch files another
    profile reads too; nothing is written then, nor on any other error.
    """
    recover_pack(pack_root, progress)
    changes = {k: v for k, v in changes.items() if _differs(pack_root / k, v)}
    maybe = [*changes, *(f"profiles/{name}.lock" for name in profiles)]  # (a lock is known once staged)
    check_temp_paths(pack_root, [FileChange(k, b"") for k in maybe])  # the pack's own, not the staging copy's
    out = Outcome()
    from .interrupts import Term, signals

    try:
        with signals([]):  # SIGTERM unwinds the staging as Ctrl-C does: its copy of the pack goes
            _staged(pack_root, changes, fix_id, profiles, progress, out)
    except OSError as exc:  # the staging copy's I/O (a full $TMPDIR), or a file read for it: the pack is not written
        raise temp_work_failed(exc, f"staging the {by}", "the pack") from exc
    except Term:  # (a CI timeout): nothing of the pack was written yet
        raise Terminated(f"terminated (SIGTERM) while staging the {by} of {fix_id}; its staging copy was removed and "
                         f"nothing in the pack was written") from None
    if changes:
        write_transaction(pack_root, [FileChange(k, v) for k, v in sorted(changes.items())],
                          by={"command": by, "fix": fix_id})  # the way back after a kill names them
        forget_state(pack_root)
    out.written = sorted(changes)
    return out


def _staged(pack_root: Path, changes: dict[str, bytes | None], fix_id: str, profiles: dict[str, dict[str, Path]],
            progress: Progress, out: Outcome) -> None:
    """:func:`update`'s work on a staging copy: ``changes`` gets the later fixes' moved patches and the new locks,
    ``out`` the later fixes and the locks."""
    with tempfile.TemporaryDirectory(prefix="fixpack-stage-") as tmp, _in_pack(Path(tmp) / "pack", pack_root):
        stage = _stage(pack_root, Path(tmp) / "pack", changes)
        for name, roots in profiles.items():
            pack = load_pack(stage).for_profile(name)
            later, regenerated = check_later(pack, name, fix_id, roots)
            _refuse(name, fix_id, later)
            moved = {p.relative_to(stage).as_posix(): data for p, data in regenerated.items()}
            _refuse_shared(load_pack(stage), set(profiles), moved)
            _write_stage(stage, moved)
            changes.update({k: v for k, v in moved.items() if _differs(pack_root / k, v)})
            out.later += later
            lock, made = _lock(stage, name, roots, progress)
            said = [f"profile {name}: {w}" for w in twin_warnings(made, partial(dict, pack.fixes), stage)]
            out.warnings += [w for w in said if w not in out.warnings]
            rel = f"profiles/{name}.lock"
            if _differs(pack_root / rel, lock):
                changes[rel] = lock
                out.locks.append(rel)


@contextmanager
def _in_pack(stage: Path, pack_root: Path) -> Iterator[None]:
    """An error found on the staged copy names the pack's own files, not the temporary folder's."""
    try:
        yield
    except FixpackError as exc:
        def real(text: str) -> str:
            return text.replace(str(stage), str(pack_root))

        exc.args = tuple(real(a) if isinstance(a, str) else a for a in exc.args)
        exc.problems = [replace(p, message=real(p.message), hint=real(p.hint),
                                path=Path(real(str(p.path))) if p.path is not None else None) for p in exc.problems]
        raise


def _refuse(profile: str, fix_id: str, later: list[LaterFix]) -> None:
    bad = [f for f in later if f.state not in ("exact", "moved")]
    if bad:
        raise ConflictError(f"the change to {fix_id} leaves later fixes of profile {profile} that no longer apply; "
                            f"nothing was written: "
                            + "; ".join(f"{f.id}: {f.state}{' (' + f.detail + ')' if f.detail else ''}" for f in bad)
                            + ". Make the change so that they still apply, or change them in the same work tree")


def _refuse_shared(pack: Pack, profiles: set[str], moved: dict[str, bytes]) -> None:
    """A moved fix's regenerated patch read by a profile whose lock is not regenerated here would leave
    that lock stale: refuse."""
    for name in sorted(set(pack.profiles) - profiles):
        view = pack.for_profile(name)
        prof = load_profile(pack, name)
        read = {pf.path.relative_to(pack.root).as_posix() for f in view.ordered(prof.default + prof.opt_in)
                for pf in f.patches}
        shared = sorted(read & set(moved))
        if shared:
            raise ConflictError(f"later fixes moved, and profile {name} reads their patches too ({', '.join(shared)}): "
                                f"its lock would go stale; nothing was written. Make the change without moving them")


def _write_stage(stage: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (stage / rel).write_bytes(data)


def _differs(path: Path, data: bytes | None) -> bool:
    if data is None:
        return path.exists()
    return not holds_bytes(path, data)  # (read no further than data: a FIFO, a link or a larger file differs)


def _stage_ignore(src: str, names: list[str]) -> set[str]:
    """copytree's ignore for the stage: STAGE_IGNORED's names, and a refusal of anything that is neither a
    folder, a regular file nor a symbolic link (copied as the link it is): a FIFO would hang the copy or end
    it in shutil.Error, a device be read without end."""
    skipped = set(shutil.ignore_patterns(*STAGE_IGNORED)(src, names))
    for name in names:
        if name in skipped:
            continue
        path = os.path.join(src, name)
        mode = os.lstat(path).st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            raise BadInputError(f"{path}: {not_a_file(Path(path))} in the pack's checkout; the pack is copied to "
                                f"check the new lock, and only its folders, files and links are: "
                                f"{remove_hint(Path(path), 'it')}, then run it again; nothing was written")
    return skipped


_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}  # a copy's side, not the file copied


def _stage(pack_root: Path, stage: Path, changes: dict[str, bytes | None]) -> Path:
    """A copy of the pack (its fixes, profiles and the components' folders: a few hundred KB; no caches,
    virtual environments or work folders; links copied as links) with ``changes`` made. Raises BadInputError
    for a FIFO, socket or device in it (``_stage_ignore``) and EnvironmentProblem for a file that cannot be
    read or copied (named, with the system's reason); the stage is a temporary folder, the pack untouched."""
    stage.mkdir(parents=True)
    try:
        for entry in sorted(pack_root.iterdir()):
            if entry.name in STAGE_SKIPPED or entry.name.startswith(".venv") or entry.is_symlink():
                continue
            if entry.is_dir():
                shutil.copytree(entry, stage / entry.name, symlinks=True, ignore=_stage_ignore)
            elif entry.is_file():
                shutil.copy2(entry, stage / entry.name)
            else:
                _stage_ignore(str(pack_root), [entry.name])
    except OSError as exc:  # shutil.Error too: each file copytree could not copy, as (source, destination, why)
        if errno_of(exc) in _NO_ROOM:  # the stage's file system, not the pack's file: $TMPDIR's room is what to mend
            raise temp_work_failed(exc, "copying the pack to check the new lock", "the pack") from None
        src, why = (exc.args[0][0][0], exc.args[0][0][2]) if isinstance(exc, shutil.Error) else \
            (exc.filename or pack_root, exc.strerror or exc)
        raise EnvironmentProblem(f"{src}: cannot be copied to check the new lock ({why}); nothing was written: "
                                 f"make it readable or remove it, then run it again") from None
    for rel, data in changes.items():
        dest = stage / rel
        if data is None:
            dest.unlink(missing_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
    return stage


def _lock(stage: Path, profile: str, roots: dict[str, Path], progress: Progress) -> tuple[bytes, Lock]:
    """The lock of ``profile`` made on the stage (written there), as its bytes and as the record they hold."""
    from . import engine, lockfile

    with progress.step(f"fingerprinting the chain of profile {profile}"):
        lock, prof = engine.fingerprint_chain(engine.Request(pack_root=stage, profile=profile, roots=dict(roots),
                                                             only_targets=tuple(roots)))
        path = lockfile.write(prof, lock)
    return path.read_bytes(), lock


def check_later(pack: Pack, profile: str, fix_id: str,
                roots: dict[str, Path]) -> tuple[list[LaterFix], dict[Path, bytes]]:
    """Lay the profile's chain (defaults and every opt-in, in series order) on the clean release copy of
    ``fix_id``'s target, each fix at its stated lines, and name the state of every fix after ``fix_id``;
    with the patch files (path -> bytes) of the ``moved`` ones regenerated where they now apply.

    Raises ConflictError when a fix up to ``fix_id`` itself does not apply exactly (its pack is stale).
    """
    prof = load_profile(pack, profile)
    fix = pack.fixes[fix_id]
    tree = Tree(roots[fix.target])
    out: list[LaterFix] = []
    moved: dict[Path, bytes] = {}
    seen = False
    for other in pack.ordered(prof.default + prof.opt_in):
        if other.target != fix.target:
            continue
        if seen:
            out.append(_later_state(other, tree, moved, pack.fixes))
            continue
        tree.adopt(lay(other, tree).tree)
        seen = other.id == fix_id
    return out, moved


def lay(fix: Fix, tree: Tree) -> Pass:
    """``fix`` applied at its stated lines (the tree holds exactly what its patches were written against).
    Raises ConflictError, with the refused hunks, when it does not apply so."""
    done = run_pass(fix, tree, reverse=False, evidence=TRUSTED)
    if not done.ok:
        raise _not_laid(fix, done, "Rebase or refresh it first")
    return done


def _not_laid(fix: Fix, done: Pass, then: str) -> ConflictError:
    return ConflictError(f"fix {fix.id} does not apply at its stated lines on the clean release copy with the fixes "
                         f"before it: {'; '.join(done.explain())}. {then}")


def lay_patch(fix: Fix, index: int, tree: Tree) -> Pass:
    """Patch ``index`` of ``fix`` alone, at its stated lines (see :func:`lay`)."""
    return lay(replace(fix, patches=(fix.patches[index],)), tree)


def lay_found(fix: Fix, index: int, tree: Tree) -> tuple[Pass, list[str]]:
    """Patch ``index`` of ``fix`` alone: at its stated lines, else where the placement rule finds every hunk (its
    pre-image once in the file, exact context, no fuzz; as ``quilt push`` with an offset), with the offsets it was laid
    at, each "PATH hunk #N +K" ([] at its stated lines). Raises ConflictError, with the stated lines' refusal and the
    search's, when neither places it: its change is then made again by hand, on the fixes before it."""
    one = replace(fix, patches=(fix.patches[index],))
    done = run_pass(one, tree, reverse=False, evidence=TRUSTED)
    if done.ok:
        return done, []
    ev = decide(one, tree, None, False)
    if ev.forward.ok and ev.state.value in ("absent", "drifted"):
        return ev.forward, [f"{h.path} hunk #{h.hunk} {h.offset:+d}" for h in ev.offsets]
    from .evaluate import NO_EVIDENCE  # (the search's words alone: the file is not what the patch was written on)

    found = "; ".join(run_pass(one, tree, reverse=False, evidence=NO_EVIDENCE).explain())[:600] or ev.state.value
    raise ConflictError(f"fix {fix.id} does not apply at its stated lines on the clean release copy with the fixes "
                        f"before it, nor is it found elsewhere by search ({found}; {ev.state.value}): make its change "
                        f"again by hand on the fixes before it, or put fixes/series back as the patch was written")


def _later_state(fix: Fix, tree: Tree, moved: dict[Path, bytes], known: Container[str]) -> LaterFix:
    exact = run_pass(fix, tree, reverse=False, evidence=TRUSTED)
    if exact.ok:
        tree.adopt(exact.tree)
        return LaterFix(fix.id, "exact")
    regenerated = _regenerate(fix, tree, known)
    if regenerated is None:
        ev = decide(fix, tree, None, False)
        return LaterFix(fix.id, ev.state.value if ev.state.value != "absent" else "conflict",
                        "; ".join(ev.messages)[:400])
    files, after, offsets = regenerated
    tree.adopt(after)
    moved.update({pf.path: files[pf.path.name] for pf in fix.patches})
    toml, data, version = bumped(fix)
    moved[toml] = data
    return LaterFix(fix.id, "moved", f"applies only at an offset ({offsets}): its patches were regenerated at their "
                                     f"new lines, its changed lines as they were, and its version bumped to {version} "
                                     f"(a manifest records a fix by version and change: an image holding the patch "
                                     f"at its old lines is told from one with the new)")


def bumped(fix: Fix) -> tuple[Path, bytes, int]:
    """The toml that gives ``fix``'s version in the profile whose chain it is laid on (its variant's, where its patches
    are a variant's: ``variant.toml`` gets the key when it had none), with the version one up."""
    import tomlkit

    from .documents import pack_text

    folder = fix.patches[0].path.parent
    toml = folder / ("fix.toml" if folder == fix.folder else "variant.toml")
    doc = tomlkit.parse(pack_text(toml, REFRESH_AGAIN))
    doc["version"] = fix.version + 1
    return toml, tomlkit.dumps(doc).encode(), fix.version + 1


def _regenerate(fix: Fix, tree: Tree, known: Container[str]) -> tuple[dict[str, bytes], Tree, str] | None:
    """``fix``'s patch files rewritten where each patch applies on ``tree`` (placed by search: a unique
    pre-image, as the placement rule says), its messages kept (a Fix-Id naming another fix of the pack, ``known``,
    is refused: :func:`fixpack.patchtext.rewritten_fields`); None when one does not apply so."""
    from .gitwork import git_diffs, snap
    from .patchtext import write_patches

    paths = list(fix.touched_paths())
    work = tree.fork()
    steps = [snap(work, paths)]
    offsets: list[str] = []
    for pf in fix.patches:
        ev = decide(replace(fix, patches=(pf,)), work, None, False)
        if not ev.forward.ok or ev.state.value not in ("absent", "drifted"):
            return None
        offsets += [f"{h.path} hunk #{h.hunk} {h.offset:+d}" for h in ev.offsets]
        work.adopt(ev.forward.tree)
        steps.append(snap(work, paths))
    with tempfile.TemporaryDirectory(prefix="fixpack-moved-") as tmp:
        bodies = git_diffs(Path(tmp) / "repo", steps, [pf.path.name for pf in fix.patches])
    return write_patches(fix, bodies, known), work, "; ".join(offsets)
