"""The maintainer's authoring loop: ``fixpack edit`` / ``new`` make a git work tree of a fix, ``refresh``
turns its commits back into the fix's patch files, ``edit --abort`` removes it (Yocto's ``devtool modify``
/ ``finish``, ``gbp pq``).

The work tree is ``<pack>/.edit/<fix>/`` (ignored by the pack's git): the clean release copy of the fix's
target as its first commit (tag ``fixpack-upstream``), one commit per patch of every fix before it in the
profile's chain (tag ``fixpack-base``), then one commit per patch of the fix, each with the patch's
author, date and message (trailers included). The maintainer edits, commits, amends or adds commits
with plain git; ``refresh`` takes ``fixpack-base..HEAD`` as the fix's patches, one a commit, in order.
What the edit was started with is kept beside it in ``<pack>/.edit/<fix>.json``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Container
from functools import partial
from pathlib import Path

from .diff import AUTHOR
from .editstate import (
    BASE_TAG,
    FIX_TAG,
    UPSTREAM_TAG,
    EditState,
    base_digests,
    before_new,
    chain_of,
    change_digest,
    check_edit_folder,
    check_work_tree,
    checked_id,
    find,
    state_path,
    work_folder,
)
from .errors import BadInputError, ConflictError, EnvironmentProblem, MismatchError, Terminated, failure_of
from .gitwork import commit_all, commit_paths, init_work, tag
from .loader import load_pack, load_profile
from .model import Fix, Pack, Profile
from .pack_journal import WORK_DIR, open_edits
from .packupdate import lay_found, lay_patch, recover_pack, recovered_first
from .patchfiles import patch_again
from .patchtext import patch_mail, rewritten_fields, variant_of
from .progname import command as _command
from .progname import pack_words
from .progress import QUIET, Progress
from .runlock import pack_lock
from .safepath import STATE_DIR
from .structs import replace
from .targets import FoundTarget, check_pin, read_facts
from .tree import Tree, decode, encode

AGAIN = ("since the pack was loaded", "run the edit again; nothing was kept")  # patch_again's words
ROLLED_FIRST = " (the pack update a killed run left was rolled back first)"


def start(pack_root: Path, profile: str, fix_id: str, *, new: bool = False, target: str = "", after: str = "",
          opt_in: bool = False, cache: Path | None = None, roots: dict[str, Path] | None = None,
          progress: Progress = QUIET) -> EditState:
    """Make the work tree of ``fix_id`` (``new``: a fix not in the pack yet, of ``target``, placed after
    ``after`` or, by default, after the profile's last default fix, or last of all when ``opt_in``). The
    target's clean release copy is ``roots[target]`` (its pin checked), else fetched into ``cache`` (or
    taken from it).

    The pack's lock (:func:`fixpack.runlock.pack_lock`) is held from reading the pack to saving the edit's
    state, so that a refresh or import running beside it cannot change the patches it lays (it waits, as
    they wait for each other); a refresh killed while writing is rolled back first.

    Raises BadInputError for an unknown or clashing name, or an edit of it already in progress;
    ConflictError when a fix of the chain does not apply at its stated lines (the pack is stale);
    BusyError (exit 5) when another command holds the pack's lock past its wait.
    """
    pack_root = pack_root.resolve()  # the pack's files are named relative to it (a relative --pack too)
    from .interrupts import Term, signals

    try:  # SIGTERM (a CI timeout) unwinds as Ctrl-C does: the half-made work tree goes (_start); it was left, no .git
        # in it (a commit typed there went into the pack's own repository), and the next edit refused it as no edit's
        with signals([]), pack_lock(pack_root, progress), recovered_first(pack_root, progress):
            # from reading the pack to saving the edit: no refresh writes between; a killed one is rolled back first
            return _start(pack_root, profile, fix_id, new, target, after, opt_in, cache, roots or {}, progress)
    except Term:
        if find(pack_root, fix_id) is not None:  # (after its state was saved: the edit is made)
            raise Terminated(f"terminated (SIGTERM) once the edit of {fix_id} was made: its work tree is "
                             f"{work_folder(pack_root) / fix_id}; refresh it or drop it "
                             f"(`{_command('edit', '--abort', fix_id, *pack_words(pack_root))}`)") from None
        raise Terminated(f"terminated (SIGTERM) while making the work tree of {fix_id}; it was removed, and nothing "
                         f"was written") from None


def _start(pack_root: Path, profile: str, fix_id: str, new: bool, target: str, after: str, opt_in: bool,
           cache: Path | None, roots: dict[str, Path], progress: Progress) -> EditState:
    pack = load_pack(pack_root)
    prof = load_profile(pack, profile)
    view = pack.for_profile(prof.name)
    work = work_folder(pack_root) / fix_id
    if find(pack_root, fix_id) is None and os.path.lexists(work):  # no state beside it: not a work tree edit made
        raise BadInputError(f"{work} is there, but no edit made it (no {work.parent / (fix_id + '.json')} beside it): "
                            f"move it out of {work.parent}, then run edit again; nothing was written")
    if find(pack_root, fix_id) is not None:
        check_work_tree(pack_root, fix_id, work)  # (gone: "refresh it" would fail)
        raise BadInputError(f"an edit of {fix_id} is in progress in {work}: refresh it "
                            f"(`{_command('refresh', fix_id, *pack_words(pack_root))}`) or drop it "
                            f"(`{_command('edit', '--abort', fix_id, *pack_words(pack_root))}`)")
    if new:
        target, after = check_new(view, prof, fix_id, target, after, opt_in)
        before = before_new(view, prof, target, after)
    else:
        fix = _listed(view, prof, fix_id)
        target, chain = fix.target, chain_of(view, prof, fix.target)
        before = chain[:[f.id for f in chain].index(fix_id)]
    found = clean_copy(prof, target, roots.get(target), cache, progress)
    work = pack_root / WORK_DIR / fix_id
    state = EditState(fix_id, prof.name, target, new, after, opt_in, str(found.root), str(work))
    if not new:
        state.version = view.fixes[fix_id].version
        state.change = change_digest([patch_again(pf, *AGAIN) for pf in view.fixes[fix_id].patches])
    state.base = base_digests(pack, state)
    had = os.path.lexists(work.parent)  # (.edit/ made by this run goes with its work tree)
    try:
        with progress.step(f"making the work tree {work}"):
            moved = _build(work, found.root, f"{target} {found.version} ({found.commit}): the clean release copy",
                           before, None if new else view.fixes[fix_id],
                           partial(_before_refused, pack, prof, pack_root, before,
                                   found if roots.get(target) else None), pack.fixes)
        state.save(pack_root)
    except BaseException as exc:  # a patch file changed since the load (patch_again), a refusal, an I/O error, a
        shutil.rmtree(work, ignore_errors=True)  # Ctrl-C: the work tree is not kept
        if not had:
            try:
                work.parent.rmdir()
            except OSError:  # (not empty: another edit's since)
                pass
        if isinstance(exc, OSError):  # (copytree's shutil.Error too: its first failure)
            where, why = failure_of(exc)
            raise EnvironmentProblem(f"cannot make the work tree {work}: {where or work}: {why}; nothing was kept "
                                     f"(free space, or make {work.parent} writable, and run again)") from exc
        raise
    state.laid = moved
    if moved:
        progress.note(f"{fix_id} does not apply at its stated lines on the fixes before it (fixes/series was "
                      f"reordered, or one of them changed): laid where its context is found once, at an offset "
                      f"({', '.join(moved)}); refresh writes its patches at these lines")
    return state


def clean_copy(prof: Profile, target: str, root: Path | None, cache: Path | None = None,
               progress: Progress = QUIET) -> FoundTarget:
    """The clean release copy of ``target``: ``root`` when given (its version and commit checked against
    the pin: MismatchError; made absolute: an edit keeps it for its refresh, which runs from any folder), else
    fetched (:func:`fixpack.release.fetch`, cached)."""
    from . import release

    spec = prof.target(target)
    if root is None:
        return release.fetch(spec, cache, progress=progress)
    root = Path(os.path.abspath(root))
    if (root / STATE_DIR).exists():
        pack = pack_words(prof.path.parent.parent)
        raise MismatchError(f"--root {target}={root} is not a clean release copy: fixpack has applied fixes there "
                            f"({root / STATE_DIR}); give the clean copy "
                            f"(`{_command('fetch', '--profile', prof.name, '--target', target, *pack)}` prints it), "
                            f"or revert "
                            f"that tree first")
    found = FoundTarget(spec, root, *read_facts(spec, root), "--root")
    check_pin(found)
    return found


def _listed(view: Pack, prof: Profile, fix_id: str) -> Fix:
    _refuse_reserved(view, fix_id)
    if fix_id in view.fixes and fix_id not in prof.default + prof.opt_in:
        raise BadInputError(f"fix {fix_id} is in the pack but not in profile {prof.name}: list it in "
                            f"profiles/{prof.name}.toml, or edit it with --profile set to a profile that lists it")
    if fix_id not in prof.default + prof.opt_in:
        known = ", ".join(prof.default + prof.opt_in)
        raise BadInputError(f"{fix_id} is not a fix of profile {prof.name} ({known}); "
                            f"`{_command('new', fix_id, '--profile', prof.name, *pack_words(view.root))} --target T` "
                            f"starts a new one")
    return view.fixes[fix_id]


def check_new(view: Pack, prof: Profile, fix_id: str, target: str, after: str, opt_in: bool) -> tuple[str, str]:
    checked_id(fix_id)
    _refuse_reserved(view, fix_id)
    if fix_id in view.fixes or (view.root / "fixes" / fix_id).exists():
        raise BadInputError(f"fix {fix_id} exists already (fixes/{fix_id}): "
                            f"`{_command('edit', fix_id, '--profile', prof.name, *pack_words(view.root))}` changes it")
    names = [t.name for t in prof.targets]
    if target not in names:
        raise BadInputError(f"--target {target!r} is not a target of profile {prof.name} ({', '.join(names)})")
    listed = prof.default + prof.opt_in
    if after and after not in listed:
        raise BadInputError(f"--after {after}: not a fix of profile {prof.name} ({', '.join(listed)})")
    if not after:
        in_order = [f.id for f in view.ordered(listed if opt_in else prof.default)]
        after = in_order[-1] if in_order else ""
    _check_place(view, prof, fix_id, after, opt_in)
    return target, after


def _refuse_reserved(view: Pack, fix_id: str) -> None:
    """``fixes/series``, ``fixes/apply_all.py``: names of the pack's own files under fixes/, never a fix's."""
    path = view.root / "fixes" / fix_id
    if fix_id not in view.fixes and os.path.lexists(path) and not os.path.lexists(path / "fix.toml"):
        what = "a folder with no fix.toml (remove it if it is a leftover)" if path.is_dir() else "the pack's own file"
        raise BadInputError(f"{fix_id!r} cannot name a fix: fixes/{fix_id} is {what}, not a fix; pick another id")


def _check_place(view: Pack, prof: Profile, fix_id: str, after: str, opt_in: bool) -> None:
    """Opt-in fixes come after every default fix in the series (:meth:`Profile.opt_ins_before_defaults`, which
    ``check`` reads too): the new fix placed after ``after`` must not break that."""
    cut = view.series.index(after) + 1 if after else 0
    series = (*view.series[:cut], fix_id, *view.series[cut:])
    placed = replace(prof, opt_in=prof.opt_in + (fix_id,)) if opt_in else \
        replace(prof, default=prof.default + (fix_id,))
    pairs = placed.opt_ins_before_defaults(series)
    if opt_in:
        later = [d for o, d in pairs if o == fix_id]
        if later:
            last = max(prof.default, key=lambda f: series.index(f) if f in series else -1)
            raise BadInputError(f"--after {after or '(first)'}: an opt-in fix after {after or 'nothing'} would come "
                                f"before default fix {later[0]} in fixes/series, whose patches would then be written "
                                f"on top of it; opt-in fixes follow the default ones: give --after {last} or later "
                                f"(or leave --after out)")
    else:
        earlier = [o for o, d in pairs if d == fix_id]
        if earlier:
            raise BadInputError(f"--after {after}: a default fix after {after} would come after opt-in fix "
                                f"{earlier[0]} in fixes/series and be written on top of it; place it before the "
                                f"opt-in fixes (leave --after out: after the last default fix), or give --opt-in")


def _build(work: Path, release_root: Path, title: str, before: list[Fix], fix: Fix | None,
           refused: Callable[[Fix, Tree, Fix | None], ConflictError], known: Container[str]) -> list[str]:
    """The work tree: the release, the fixes ``before`` at their stated lines (one that is not there: ``refused``
    gives the error), ``fix`` where it is found (its patches' offsets, :func:`fixpack.packupdate.lay_found`,
    returned); ``known``: the pack's fixes (a patch whose Fix-Id trailer names another is refused)."""
    work.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(release_root, work, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".fixpack", ".fixpack-complete"))
    init_work(work)
    commit_all(work, title, UPSTREAM_TAG)
    tree = Tree(release_root)
    for other in before:
        try:
            _commit_fix(work, other, tree, known)
        except ConflictError:
            raise refused(other, tree, fix) from None
    tag(work, BASE_TAG)
    moved = _commit_fix(work, fix, tree, known, found=True) if fix is not None else []
    tag(work, FIX_TAG)
    return moved


def _before_refused(pack: Pack, prof: Profile, pack_root: Path, before: list[Fix], given: FoundTarget | None,
                    other: Fix, tree: Tree, fix: Fix | None) -> ConflictError:
    """The refusal of an edit because ``other``, one of the fixes ``before`` the edited ``fix`` (None: a new one) in
    ``prof``'s chain, does not apply at its stated lines on ``tree``: where its hunks are now (found by search), why
    (fixes/series reordered since the lock on disk: :func:`fixpack.lock_hints.reordered_around`), and the way on:
    edit ``other`` first (it is laid where it is found, and refresh writes it there; on the ``--root`` copy
    ``given``, when one was). Not "the @@ line names the wrong line": the file is not what the patch was written on."""
    from .errors import FixpackError
    from .lock_hints import found_at, reordered_around
    from .lockfile import read_lock

    was: list[str] = []
    try:
        was = [f.id for f in read_lock(prof).fixes]
    except FixpackError:  # (no usable lock on disk: no order to compare with)
        pass
    where = found_at(other, tree)
    why = reordered_around(pack, tuple(before) + ((fix,) if fix else ()), was, other) if was else ""
    root = ("--root", f"{given.spec.name}={given.root}") if given is not None else ()
    edit = _command("edit", other.id, "--profile", prof.name, *root, *pack_words(pack_root))
    return ConflictError(f"fix {other.id}, before {fix.id if fix else 'the new fix'} in the profile's chain, does not "
                         f"apply at its stated lines on the clean release copy with the fixes before it: {where}"
                         f"{why}. Edit it first (`{edit}` lays it where it is found, and its refresh writes it there), "
                         f"then this one; nothing was kept")


def _commit_fix(work: Path, fix: Fix, tree: Tree, known: Container[str], found: bool = False) -> list[str]:
    """One commit per patch of ``fix``, each laid at its stated lines on ``tree`` (which follows), or with ``found``
    where it is found (the offsets returned, each "PATCH: PATH hunk #N +K"); its message the patch's, fix.toml's
    fields in it (a Fix-Id trailer that names another fix of the pack, ``known``, is refused:
    :func:`fixpack.patchtext.rewritten_fields`)."""
    moved: list[str] = []
    for i, pf in enumerate(fix.patches):
        if found:
            done, offsets = lay_found(fix, i, tree)
            tree.adopt(done.tree)
            moved += [f"{pf.path.name}: {o}" for o in offsets]
        else:
            tree.adopt(lay_patch(fix, i, tree).tree)
        paths = list(dict.fromkeys(p for fp in pf.files for p in fp.paths()))
        for path in paths:
            text, dest = tree.read(path), work / path
            if text is None:
                dest.unlink(missing_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(encode(text))
            dest.chmod(tree.mode(path) or 0o644)
        text = decode(patch_again(pf, *AGAIN))
        mail = patch_mail(fix, text, str(pf.path))
        fields = rewritten_fields(fix, mail, text, str(pf.path), known, variant=variant_of(fix, pf))
        commit_paths(work, paths, mail.author or AUTHOR, mail.date, mail.message(fields))
    return moved


def abort(pack_root: Path, fix_id: str = "", progress: Progress = QUIET) -> Path | None:
    """Remove an edit's work tree and its state (``fix_id`` may be left out when one edit is in progress).
    A refresh killed while writing the pack is rolled back first (its journal), as the next refresh would;
    with no fix named and no edit in progress, or ``fix_id``'s gone, that is all (None; else "no edit in progress",
    exit 2).
    A folder ``.edit/<fix>`` that is not the work tree ``edit`` made (its state beside it, a git repository)
    is refused (DamagedStateError, exit 3), never removed. Returns what was removed: the work tree, or its state
    file where the work tree was gone already."""
    return abort_edit(pack_root, fix_id, progress)[0]


def abort_edit(pack_root: Path, fix_id: str = "", progress: Progress = QUIET) -> tuple[Path | None, bool]:
    """:func:`abort`, and whether a killed pack update was rolled back first (backups alone, with no journal, are
    discarded: the pack was whole, nothing is rolled back)."""
    pack_root = pack_root.resolve()  # the pack's files are named relative to it (a relative --pack too)
    with pack_lock(pack_root):
        rolled = recover_pack(pack_root, progress)
    return _drop_edit(pack_root, fix_id, rolled), rolled


def _drop_edit(pack_root: Path, fix_id: str, rolled: bool) -> Path | None:
    undone = ROLLED_FIRST if rolled else ""
    folder = work_folder(pack_root)
    if not fix_id:
        found = open_edits(folder)
        if not found and rolled:
            return None
        if len(found) != 1:
            raise BadInputError(("no edit in progress" if not found else
                                 f"several edits in progress ({', '.join(found)}): name the fix to drop") + undone)
        fix_id = found[0]
    work = folder / checked_id(fix_id)
    if not state_path(pack_root, fix_id).is_file() and not work.exists():
        if rolled:  # a killed import or refresh of it, its edit gone: rolling back was all
            return None
        raise BadInputError(f"no edit of {fix_id} in progress (nothing under {folder})")
    there = os.path.lexists(work)
    if work.is_symlink():
        work.unlink()  # the link, never what it points at
    elif work.is_dir():
        check_edit_folder(pack_root, fix_id, work)
    shutil.rmtree(work, ignore_errors=True)
    state_path(pack_root, fix_id).unlink(missing_ok=True)
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return work if there else state_path(pack_root, fix_id)  # (the work tree gone already: its state alone)
