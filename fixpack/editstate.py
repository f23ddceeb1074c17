"""An edit's state and its checks: ``<pack>/.edit/<fix>.json`` (what ``fixpack edit`` / ``new`` started the work tree
with: the fix, its profile and target, its version and change digest then, the fixes before it), read back as
untrusted input (every key checked: damaged state, exit 3), and the work tree beside it (``<pack>/.edit/<fix>/``),
checked to be the one ``edit`` made before git runs there. :mod:`fixpack.editwork` makes and drops work trees,
:mod:`fixpack.editrefresh` turns them into patches.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from shlex import quote

from .diff import diff_body
from .documents import MAX_STATE_BYTES, TooLargeError, load_json, read_capped, short
from .errors import BadInputError, DamagedStateError, EnvironmentProblem
from .loader import load_profile
from .model import Fix, Pack, Profile
from .nofollow import atomic_write
from .pack_journal import WORK_DIR
from .patchtext import change_lines
from .progname import command as _command
from .progname import pack_words
from .records import is_sha256
from .safepath import is_version, name_problem
from .structs import dataclass, field, fields
from .tree import decode

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
    laid: list[str] = field(default_factory=list)  # (not saved) where edit laid the fix off its stated lines

    def save(self, pack_root: Path) -> None:
        state = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "laid"}
        atomic_write(state_path(pack_root, self.fix), json.dumps(state, indent=2).encode() + b"\n")


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


def migrated(state: EditState, patches: Callable[[], list[bytes]] | None) -> None:
    """``state``'s digests of the pack's fix (``patches`` gives its patch files' bytes; None: not in the pack) in
    :func:`change_digest`'s form, where they are its :func:`legacy_digest` (an edit begun by an older fixpack): else
    a refresh took the pack's fix for a change that came in under the edit."""
    if patches is None or not (state.change or state.wrote_change):
        return
    data = patches()
    old, new = legacy_digest(data), change_digest(data)
    if old != new:
        state.change = new if state.change == old else state.change
        state.wrote_change = new if state.wrote_change == old else state.wrote_change


def chain_of(view: Pack, prof: Profile, target: str) -> list[Fix]:
    """The fixes of ``prof``'s chain (defaults and opt-ins) on ``target``, in series order."""
    return [f for f in view.ordered(prof.default + prof.opt_in) if f.target == target]


def before_new(view: Pack, prof: Profile, target: str, after: str) -> list[Fix]:
    """The fixes of the chain up to ``after`` (a new fix goes after it; "" first): those before the new fix."""
    if not after:
        return []
    cut = view.series.index(after)
    return [f for f in chain_of(view, prof, target) if view.series.index(f.id) <= cut]


def base_digests(pack: Pack, state: EditState) -> dict[str, str]:
    """The fixes before the edited one in its profile's chain (the work tree's ``fixpack-base``), each with
    one sha256 over its patch files' (each hashed when the pack was loaded: no file read again)."""
    prof = load_profile(pack, state.profile)
    view = pack.for_profile(prof.name)
    if state.fix in view.fixes and state.fix in prof.default + prof.opt_in:
        chain = chain_of(view, prof, state.target)
        before = chain[:[f.id for f in chain].index(state.fix)]
    elif not state.after or state.after in view.series:
        before = before_new(view, prof, state.target, state.after)
    else:
        before = []
    return {f.id: hashlib.sha256("".join(pf.sha256 for pf in f.patches).encode()).hexdigest() for f in before}


def state_path(pack_root: Path, fix_id: str) -> Path:
    return work_folder(pack_root) / f"{checked_id(fix_id)}.json"


def work_folder(pack_root: Path) -> Path:
    """``<pack>/.edit``, refused when it is a symbolic link: work trees are made and removed under it."""
    folder = pack_root / WORK_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise BadInputError(f"{folder} is not a folder of this pack (a symbolic link, or a file): work trees are "
                            f"made and removed under it; remove it (rm {quote(str(folder))}: a link alone goes, "
                            f"never what it points at), then run again")
    return folder


def checked_id(fix_id: str) -> str:
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


def check_edit_folder(pack_root: Path, fix_id: str, work: Path) -> None:
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
    """"" when git, run in ``work``, takes ``work/.git`` for its repository and finds ``edit``'s tags there; else why
    not (a ``.git`` folder that is no repository: git then looks in the folders above, and finds the pack's; a
    repository made by hand, ``git init``, has no tags)."""
    from .gitutil import run

    said = run(work, "rev-parse", "--absolute-git-dir", ok_codes=(0, 128)).strip()
    if not (said and os.path.isdir(said) and os.path.samefile(said, work / ".git")):
        return f"its .git is no repository: git there reads {said}" if said else "its .git is no repository"
    tags = run(work, "tag", "--list", UPSTREAM_TAG, BASE_TAG).split()
    missing = [t for t in (UPSTREAM_TAG, BASE_TAG) if t not in tags]
    return f"its repository has no tag {' nor '.join(missing)}, which edit makes" if missing else ""


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
