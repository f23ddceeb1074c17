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

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from shlex import quote

from .diff import AUTHOR, diff_body
from .documents import MAX_STATE_BYTES, TooLargeError, load_json, read_capped, short
from .errors import BadInputError, DamagedStateError, EnvironmentProblem, MismatchError, failure_of
from .fsio import atomic_write
from .gitwork import commit_all, commit_paths, init_work, tag
from .loader import load_pack, load_profile
from .model import Fix, Pack, Profile
from .pack_journal import WORK_DIR, open_edits
from .packupdate import lay_found, lay_patch, recover_pack
from .patchfiles import patch_again
from .patchtext import change_lines, header_fields, patch_mail
from .progname import command as _command
from .progname import pack_words
from .progress import QUIET, Progress
from .records import is_sha256
from .runlock import pack_lock
from .safepath import STATE_DIR, is_version, name_problem
from .structs import dataclass, field, fields
from .targets import FoundTarget, check_pin, read_facts
from .tree import Tree, decode, encode

UPSTREAM_TAG = "fixpack-upstream"
BASE_TAG = "fixpack-base"
FIX_TAG = "fixpack-fix"  # the fix as the edit began: the last of its commits (the base, for a new fix)


@dataclass
class EditState:
    """An edit in progress: the fix, the profile whose chain it sits in, its target, and for a new fix
    the fix it follows in the series (``""``: first) and whether it is opt-in; the fix's version when the
    edit started and the sha256 of its change then (:func:`change_digest`), so that a refresh bumps the
    version once when the change itself changed; ``base``: the fixes before it then, each with the sha256
    of its patches (:func:`base_digests`), so that a refresh can say when they changed under the edit;
    ``wrote_version`` and ``wrote_change``: what this edit's last refresh wrote (0 and "" before one), so that a
    refresh can tell its own earlier write from a change that came into the pack under the edit."""

    fix: str
    profile: str
    target: str
    new: bool
    after: str
    opt_in: bool
    release: str
    work: str
    version: int = 0
    change: str = ""
    base: dict[str, str] = field(default_factory=dict)
    wrote_version: int = 0
    wrote_change: str = ""

    def save(self, pack_root: Path) -> None:
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        atomic_write(state_path(pack_root, self.fix), json.dumps(state, indent=2).encode() + b"\n")


AGAIN = ("since the pack was loaded", "run the edit again; nothing was kept")  # patch_again's words


def change_digest(patches: list[bytes]) -> str:
    """sha256 of the change as the lock fingerprints it (:attr:`fixpack.model.Fix.patch_sha256`): every patch's diff
    lines, hunk ranges, file names and modes, not its mail header, index lines or hunks' section headings. A refresh
    that changes it bumps the fix's version, as ``lock`` and a manifest require (a patch regenerated at other lines is
    another patch to an image: :func:`fixpack.lock_bump.refuse_unbumped`)."""
    lines = [re.sub(r"^(@@ [^@]* @@).*", r"\1", line) for data in patches
             for line in ["patch", *diff_body(decode(data)).split("\n")]]
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def legacy_digest(patches: list[bytes]) -> str:
    """:func:`change_digest` as fixpack wrote it until December 2026 (removed and added lines only): what an edit begun
    then holds in its state, read as the pack's change it began from (:func:`migrated`)."""
    lines = [line for data in patches for line in ["patch", *change_lines(data)]]
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def migrated(state: EditState, fix: Fix | None) -> None:
    """``state``'s digests of ``fix`` (the pack's) in :func:`change_digest`'s form, where they are its
    :func:`legacy_digest` (an edit begun by an older fixpack): else a refresh took the pack's fix for a change that
    came in under the edit."""
    if fix is None or not (state.change or state.wrote_change):
        return
    data = [patch_again(pf, *AGAIN) for pf in fix.patches]
    old, new = legacy_digest(data), change_digest(data)
    if old != new:
        state.change = new if state.change == old else state.change
        state.wrote_change = new if state.wrote_change == old else state.wrote_change


def base_digests(pack: Pack, state: EditState) -> dict[str, str]:
    """The fixes before the edited one in its profile's chain (the work tree's ``fixpack-base``), each with
    one sha256 over its patch files' (each hashed when the pack was loaded: no file read again)."""
    prof = load_profile(pack, state.profile)
    view = pack.for_profile(prof.name)
    if state.fix in view.fixes and state.fix in prof.default + prof.opt_in:
        chain = _chain(view, prof, state.target)
        before = chain[:[f.id for f in chain].index(state.fix)]
    elif not state.after or state.after in view.series:
        before = _before_new(view, prof, state.target, state.after)
    else:
        before = []
    return {f.id: hashlib.sha256("".join(pf.sha256 for pf in f.patches).encode()).hexdigest() for f in before}


def state_path(pack_root: Path, fix_id: str) -> Path:
    return work_folder(pack_root) / f"{_checked_id(fix_id)}.json"


ROLLED_FIRST = " (the pack update a killed run left was rolled back first)"


def work_folder(pack_root: Path) -> Path:
    """``<pack>/.edit``, refused when it is a symbolic link: work trees are made and removed under it."""
    folder = pack_root / WORK_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise BadInputError(f"{folder} is not a folder of this pack (a symbolic link, or a file): work trees are "
                            f"made and removed under it; remove it (rm {quote(str(folder))}: a link alone goes, "
                            f"never what it points at), then run again")
    return folder


def _checked_id(fix_id: str) -> str:
    """A fix id names a folder under .edit/: never a path (``../fixes``, ``/``), which abort would remove."""
    if name_problem(fix_id):
        raise BadInputError(f"bad fix id {fix_id!r}: {name_problem(fix_id)}")
    return fix_id


def find(pack_root: Path, fix_id: str) -> EditState | None:
    """The edit of ``fix_id`` in progress, if any."""
    path = state_path(pack_root, fix_id)
    if not path.is_file():
        return None
    advice = _advice(pack_root, fix_id)
    state = _read_state(path, advice)
    if state.fix != fix_id or Path(state.work).resolve() != (work_folder(pack_root) / fix_id).resolve():
        raise DamagedStateError(path, f"not an edit state this tool wrote (it names fix {state.fix!r} in "
                                      f"{state.work}, not {fix_id} in {work_folder(pack_root) / fix_id})", advice)
    return state


def _advice(pack_root: Path, fix_id: str) -> str:
    return (f"drop the edit with `{_command('edit', '--abort', fix_id, *pack_words(pack_root))}` (it removes "
            f"the file and the work tree) and start it again")


def check_state(pack_root: Path, pack: Pack, state: EditState) -> None:
    """``state`` fits the pack: its target is one of its profile's (for a fix in the pack, the fix's), a new
    fix's ``after`` is in the series, version 0 only for a fix the edit made. Else DamagedStateError (exit 3)
    naming the key, before a refresh touches the work tree or the pack (a forged target was a KeyError)."""
    prof = load_profile(pack, state.profile)
    fix = pack.for_profile(prof.name).fixes.get(state.fix)
    names = [t.name for t in prof.targets]
    problem = ""
    if state.target not in names:
        problem = f"key 'target' is {_said(state.target)}, not a target of profile {prof.name} ({', '.join(names)})"
    elif fix is not None and not state.new and state.target != fix.target:
        problem = f"key 'target' is {_said(state.target)}, but fix {fix.id} changes {fix.target}"
    elif state.new and state.after and state.after not in pack.series:
        problem = f"key 'after' is {_said(state.after)}, not a fix in fixes/series"
    elif fix is not None and not state.new and state.version == 0 and state.change:
        problem = (f"key 'version' is 0 (a new fix's), but the edit started from fix {fix.id} of the pack "
                   f"(version {fix.version}; key 'change' holds its digest)")
    if problem:
        raise DamagedStateError(state_path(pack_root, state.fix), problem, _advice(pack_root, state.fix))


def _said(value: object) -> str:
    return short(json.dumps(value))


def _value_problem(profile: str, after: str, base: dict[str, str]) -> str:
    """A key whose value no edit writes: a profile or fix id that is not a name (``../x``), a digest that is
    not a sha256."""
    if name_problem(profile):
        return f"key 'profile' is {_said(profile)}, not a profile name ({name_problem(profile)})"
    if after and name_problem(after):
        return f"key 'after' is {_said(after)}, not a fix id ({name_problem(after)})"
    for fid, digest in base.items():
        if name_problem(fid) or not is_sha256(digest):
            return f"key 'base' has {_said({fid: digest})}, not a fix id and the sha256 of its patches"
    return ""


_STATE_KEYS: dict[str, type] = {"fix": str, "profile": str, "target": str, "new": bool, "after": str, "opt_in": bool,
                                "release": str, "work": str, "version": int, "change": str, "base": dict,
                                "wrote_version": int, "wrote_change": str}
_KIND_WORDS = {str: "a string", bool: "true or false", int: "a fix version (0 for a new fix)",
               dict: "an object of fix -> sha256"}
_STATE_LATER = {"version", "change", "base", "wrote_version", "wrote_change"}  # (keys an earlier fixpack did not write)


def _read_state(path: Path, advice: str) -> EditState:
    """The edit state in ``path``, each key as :meth:`EditState.save` writes it: else DamagedStateError (exit 3)
    naming the file and the key, with ``advice``."""
    try:
        data = load_json(read_capped(path, MAX_STATE_BYTES), path)
    except TooLargeError as exc:  # told by its size, never read
        raise DamagedStateError(path, f"{exc.size} bytes, more than any state this tool writes", advice) from None
    except DamagedStateError as exc:
        raise DamagedStateError(path, exc.what, advice) from None
    except OSError as exc:
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror}); run as a user who may read the pack") from exc
    if not isinstance(data, dict):
        raise DamagedStateError(path, f"a JSON {type(data).__name__}, not an object", advice)
    for key, kind in _STATE_KEYS.items():
        if key not in data and key not in _STATE_LATER:
            raise DamagedStateError(path, f"key {key!r} is missing", advice)
        value = data.get(key, kind())
        if type(value) is not kind or (kind is int and value != 0 and not is_version(value)) or (
                isinstance(value, dict) and not all(isinstance(v, str) for v in value.values())):
            raise DamagedStateError(path, f"key {key!r} is {_said(value)}, not {_KIND_WORDS[kind]}", advice)
    unknown = sorted(set(data) - set(_STATE_KEYS))
    if unknown:
        raise DamagedStateError(path, f"key {unknown[0]!r} is not one an edit state has", advice)
    problem = _value_problem(data["profile"], data["after"], data.get("base", {}))
    for key in ("change", "wrote_change"):  # a refresh counts its version from them
        if data.get(key) and not is_sha256(data[key]) and not problem:
            problem = f"key {key!r} is {_said(data[key])}, not the sha256 of a change"
    if problem:
        raise DamagedStateError(path, problem, advice)
    return EditState(**data)


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
    with pack_lock(pack_root, progress):  # from reading the pack to saving the edit: no refresh writes between
        recover_pack(pack_root, progress)  # a refresh killed while writing is rolled back before the pack is read
        return _start(pack_root, profile, fix_id, new, target, after, opt_in, cache, roots or {}, progress)


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
        before = _before_new(view, prof, target, after)
    else:
        fix = _listed(view, prof, fix_id)
        target, chain = fix.target, _chain(view, prof, fix.target)
        before = chain[:[f.id for f in chain].index(fix_id)]
    found = clean_copy(prof, target, roots.get(target), cache, progress)
    work = pack_root / WORK_DIR / fix_id
    state = EditState(fix_id, prof.name, target, new, after, opt_in, str(found.root), str(work))
    if not new:
        state.version = view.fixes[fix_id].version
        state.change = change_digest([patch_again(pf, *AGAIN) for pf in view.fixes[fix_id].patches])
    state.base = base_digests(pack, state)
    try:
        with progress.step(f"making the work tree {work}"):
            moved = _build(work, found.root, f"{target} {found.version} ({found.commit}): the clean release copy",
                           before, None if new else view.fixes[fix_id])
        state.save(pack_root)
    except BadInputError:  # a patch file changed since the load (patch_again): the work tree is not kept
        shutil.rmtree(work, ignore_errors=True)
        raise
    except OSError as exc:  # (copytree's shutil.Error too: its first failure)
        shutil.rmtree(work, ignore_errors=True)
        where, why = failure_of(exc)
        raise EnvironmentProblem(f"cannot make the work tree {work}: {where or work}: {why}; nothing was kept (free "
                                 f"space, or make {work.parent} writable, and run again)") from exc
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    if moved:
        progress.note(f"{fix_id} does not apply at its stated lines on the fixes before it (fixes/series was "
                      f"reordered, or one of them changed): laid where its context is found once, at an offset "
                      f"({', '.join(moved)}); refresh writes its patches at these lines")
    return state


def clean_copy(prof: Profile, target: str, root: Path | None, cache: Path | None = None,
               progress: Progress = QUIET) -> FoundTarget:
    """The clean release copy of ``target``: ``root`` when given (its version and commit checked against
    the pin: MismatchError), else fetched (:func:`fixpack.release.fetch`, cached)."""
    from . import release

    spec = prof.target(target)
    if root is None:
        return release.fetch(spec, cache, progress=progress)
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
    _checked_id(fix_id)
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
    _check_place(view, prof, after, opt_in)
    return target, after


def _refuse_reserved(view: Pack, fix_id: str) -> None:
    """``fixes/series``, ``fixes/apply_all.py``: names of the pack's own files under fixes/, never a fix's."""
    path = view.root / "fixes" / fix_id
    if fix_id not in view.fixes and os.path.lexists(path) and not os.path.lexists(path / "fix.toml"):
        what = "a folder with no fix.toml (remove it if it is a leftover)" if path.is_dir() else "the pack's own file"
        raise BadInputError(f"{fix_id!r} cannot name a fix: fixes/{fix_id} is {what}, not a fix; pick another id")


def _check_place(view: Pack, prof: Profile, after: str, opt_in: bool) -> None:
    """Opt-in fixes come after every default fix in the series: a default fix written on top of an opt-in
    would drift (or not apply) on every image without that opt-in."""
    cut = view.series.index(after) if after else -1
    at = {fid: view.series.index(fid) for fid in prof.default + prof.opt_in if fid in view.series}
    if opt_in:
        later = [fid for fid in prof.default if at.get(fid, -1) > cut]
        if later:
            last = max(prof.default, key=lambda f: at.get(f, -1))
            raise BadInputError(f"--after {after or '(first)'}: an opt-in fix after {after or 'nothing'} would come "
                                f"before default fix {later[0]} in fixes/series, whose patches would then be written "
                                f"on top of it; opt-in fixes follow the default ones: give --after {last} or later "
                                f"(or leave --after out)")
    else:
        earlier = [fid for fid in prof.opt_in if at.get(fid, len(view.series)) <= cut]
        if earlier:
            raise BadInputError(f"--after {after}: a default fix after {after} would come after opt-in fix "
                                f"{earlier[0]} in fixes/series and be written on top of it; place it before the "
                                f"opt-in fixes (leave --after out: after the last default fix), or give --opt-in")


def _chain(view: Pack, prof: Profile, target: str) -> list[Fix]:
    return [f for f in view.ordered(prof.default + prof.opt_in) if f.target == target]


def _before_new(view: Pack, prof: Profile, target: str, after: str) -> list[Fix]:
    if not after:
        return []
    cut = view.series.index(after)
    return [f for f in _chain(view, prof, target) if view.series.index(f.id) <= cut]


def _build(work: Path, release_root: Path, title: str, before: list[Fix], fix: Fix | None) -> list[str]:
    """The work tree: the release, the fixes ``before`` at their stated lines, ``fix`` where it is found (its
    patches' offsets, :func:`fixpack.packupdate.lay_found`, returned)."""
    work.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(release_root, work, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".fixpack", ".fixpack-complete"))
    init_work(work)
    commit_all(work, title, UPSTREAM_TAG)
    tree = Tree(release_root)
    for other in before:
        _commit_fix(work, other, tree)
    tag(work, BASE_TAG)
    moved = _commit_fix(work, fix, tree, found=True) if fix is not None else []
    tag(work, FIX_TAG)
    return moved


def _commit_fix(work: Path, fix: Fix, tree: Tree, found: bool = False) -> list[str]:
    """One commit per patch of ``fix``, each laid at its stated lines on ``tree`` (which follows), or with ``found``
    where it is found (the offsets returned, each "PATCH: PATH hunk #N +K")."""
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
        mail = patch_mail(fix, decode(patch_again(pf, *AGAIN)), str(pf.path))
        commit_paths(work, paths, mail.author or AUTHOR, mail.date, mail.message(header_fields(fix)))
    return moved


def abort(pack_root: Path, fix_id: str = "", progress: Progress = QUIET) -> Path | None:
    """Remove an edit's work tree and its state (``fix_id`` may be left out when one edit is in progress).
    A refresh killed while writing the pack is rolled back first (its journal), as the next refresh would;
    with no fix named and no edit in progress, or ``fix_id``'s gone, that is all (None; else "no edit in progress",
    exit 2).
    A folder ``.edit/<fix>`` that is not the work tree ``edit`` made (its state beside it, a git repository)
    is refused (DamagedStateError, exit 3), never removed."""
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
    work = folder / _checked_id(fix_id)
    if not state_path(pack_root, fix_id).is_file() and not work.exists():
        if rolled:  # a killed import or refresh of it, its edit gone: rolling back was all
            return None
        raise BadInputError(f"no edit of {fix_id} in progress (nothing under {folder})")
    if work.is_symlink():
        work.unlink()  # the link, never what it points at
    elif work.is_dir():
        _check_work_tree(pack_root, fix_id, work)
    shutil.rmtree(work, ignore_errors=True)
    state_path(pack_root, fix_id).unlink(missing_ok=True)
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    return work


def _check_work_tree(pack_root: Path, fix_id: str, work: Path) -> None:
    """``work`` is the work tree ``edit`` made: ``.edit/<fix>.json`` beside it, a git repository (``.git``)."""
    path = state_path(pack_root, fix_id)
    missing = (f"no edit state {path} beside it" if path.is_symlink() or not path.is_file() else
               "no git repository in it (.git)" if (work / ".git").is_symlink() or not (work / ".git").is_dir()
               else "")
    if missing:
        raise DamagedStateError(work, f"not a work tree `edit` made ({missing}), so it is not removed",
                                f"move it out of {work.parent} (or remove it by hand: rm -r {quote(str(work))}) and "
                                f"run again")


def _not_its_repository(work: Path) -> str:
    """"" when git, run in ``work``, takes ``work/.git`` for its repository; else why not (a ``.git`` folder that is
    no repository: git then looks in the folders above, and finds the pack's)."""
    from .gitutil import run

    said = run(work, "rev-parse", "--absolute-git-dir", ok_codes=(0, 128)).strip()
    if said and os.path.isdir(said) and os.path.samefile(said, work / ".git"):
        return ""
    return f"its .git is no repository: git there reads {said}" if said else "its .git is no repository"


def check_work_tree(pack_root: Path, fix_id: str, work: Path) -> None:
    """The work tree of an edit in progress (its state is there) is the one ``edit`` made: a folder, not a link, with
    a git repository in it. Else DamagedStateError (exit 3) before git runs there: git in a folder without one would
    read the repository above it, the pack's own. The way out is ``edit --abort FIX`` (a folder that is not the work
    tree moved out first: abort never removes it)."""
    drop = _command("edit", "--abort", fix_id, *pack_words(pack_root))
    if not os.path.lexists(work):
        raise DamagedStateError(work, f"the work tree of the edit of {fix_id} is gone (its state "
                                      f"{state_path(pack_root, fix_id)} is there)",
                                f"drop the edit with `{drop}` and start it again")
    what = ("a symbolic link" if work.is_symlink() else "not a folder" if not work.is_dir() else
            "no git repository in it (.git)" if (work / ".git").is_symlink() or not (work / ".git").is_dir() else
            _not_its_repository(work))
    if what:
        raise DamagedStateError(work, f"not the work tree `edit` made for {fix_id} ({what}), so git is not run there",
                                f"move it out of {work.parent} (it is kept: nothing of it is removed), then drop the "
                                f"edit with `{drop}` and start it again")
