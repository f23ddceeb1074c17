"""What the image holds, on disk: the manifest, the journal and the transaction that writes a run.

Everything the engine keeps lives in ``<root>/.fixpack/``:

- ``<target>.manifest.json``: the profile, pins, and each applied fix with its hashes
  (:class:`fixpack.records.Manifest`);
- ``journal.json`` and ``journal/``: written before the first file is touched and removed after the
  manifest; a run that dies in between leaves them, and the next run rolls the target back to the
  bytes it had before (then plans again from there). A run over several targets keeps every target's until all
  are written, and the first target's says when that run was complete (:class:`fixpack.groups.Group`).

State on disk is untrusted input (an image layer can carry a ``.fixpack/``): the manifest and the
journal are checked against one schema each, every path they name must be canonical, inside the
target and reached without a symbolic link, and backups are read only from the journal's own folder
by their entry's index; a target's journal is obeyed only for the files a run of the profile could have
written, with no mode or owner a rollback could raise anyone's rights by (:func:`load_journal`). Damaged
state is a :class:`DamagedStateError` (exit 3) before anything is written.

The transaction that writes the journal and the files is :mod:`fixpack.transaction`.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from .documents import load_json, loads_json, read_state_file
from .errors import DamagedJournalError, DamagedStateError
from .fsio import (
    exists,
    forget_state,
    state_dir,
    temp_path,
)
from .groups import (
    BACKUPS,
    Group,
    group_done,
    group_steps,
    is_root,
    parse_group,
    removal,
)
from .journal_checks import check_created, check_mode_owner, check_way_back
from .kept import owned_by_us
from .manifest_shape import kept_problem
from .nofollow import clear_under, write_under
from .records import Kept, Manifest, is_int, kept_map, sha_or_none
from .safepath import JOURNAL, link_on_the_way, link_to, name_problem, path_problem
from .structs import dataclass, field, replace

_MANIFEST_NAME = re.compile(r"^\.fixpack/[A-Za-z0-9][A-Za-z0-9._-]*\.manifest\.json$")


# --- manifest -----------------------------------------------------------------------------------

def manifest_path(root: Path, target: str) -> Path:
    return state_dir(root) / f"{target}.manifest.json"


def read_manifest(root: Path, target: str) -> Manifest | None:
    """The target's manifest, checked against its schema; None when there is none."""
    path = manifest_path(root, target)
    raw = read_state_file(path)
    return None if raw is None else trusted(Manifest.from_json(raw, path), path)


def trusted(manifest: Manifest, path: Path) -> Manifest:
    """``manifest`` without its recorded modes and owners unless the running user owns ``path`` (the file
    it was read from): another user's file is never obeyed to give a file a mode or an owner."""
    if owned_by_us(path) or not (manifest.removed_files or manifest.removed_dirs):
        return manifest
    return replace(manifest, removed_files={}, removed_dirs={})


# --- the journal ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class JournalEntry:
    """One file a run is about to change: what it held before (``original``: None if it did not exist).

    ``restored`` is set when the backup is gone because an interrupted rollback already put it back
    (the file then hashes to the entry's sha256).
    """

    path: str
    existed: bool
    index: int
    mode: int | None
    owner: tuple[int, int] | None
    sha256: str | None
    original: bytes | None
    restored: bool


@dataclass(frozen=True)
class Journal:
    path: Path
    entries: tuple[JournalEntry, ...]
    dirs: tuple[str, ...]  # folders the run created, removed again on rollback when empty
    removed_dirs: Mapping[str, Kept] = field(default_factory=dict)  # folders it may empty: mode and owner before
    by: tuple[str, str] | None = None  # a pack update's command (refresh, import) and fix, as it wrote them
    group: Group | None = None  # the run over several targets it is one of
    done: bool = False  # that run was complete (its first target's journal says so): not rolled back, removed


JOURNAL_KEYS = {"path", "existed", "backup", "mode", "owner", "sha256", "size"}


def journal_path(root: Path) -> Path:
    return state_dir(root) / JOURNAL


def backups_dir(root: Path) -> Path:
    return state_dir(root) / BACKUPS


class Writes(Protocol):
    """What the run that may have left a journal could have written (:class:`fixpack.advice.RunWrites`,
    :data:`fixpack.pack_journal.PACK_WRITES`)."""

    said: str  # what an entry for another file is said to be: "no file ..."
    file_bits: int  # mode bits no file it writes has
    empties_folders: bool  # whether a removal may empty a folder (the journal's removed_dirs)

    def __call__(self, path: str) -> bool: ...  # whether it could have written ``path``

    def creates(self, path: str) -> bool: ...  # whether it could have created ``path`` (absent before the run)


def load_journal(root: Path, writes: Writes | None = None) -> Journal | None:
    """The journal an interrupted run left, checked entry by entry; None when there is none. ``writes``: the
    paths a run of this profile could have written (:func:`fixpack.advice.run_writes`): an entry for any other
    path is damaged state; None only for a journal this process wrote itself (a failed write's rollback)."""
    jpath = journal_path(root)
    raw = read_state_file(jpath)
    if raw is None:
        _check_backups_folder(root)
        return None
    try:
        _check_backups_folder(root)
        return _parse_journal(root, jpath, raw, writes)
    except DamagedStateError as exc:  # a killed run left it: removing it alone would leave a half-written target
        raise DamagedJournalError(exc.path, exc.what, restore_first(root, raw), root, raw) from None


def _check_backups_folder(root: Path) -> None:
    _refuse_no_folder(backups_dir(root))


def _refuse_no_folder(backups: Path) -> None:
    """DamagedStateError (exit 3) where something is at ``backups`` (the journal's backups folder) that is no real
    folder: a symbolic link (said with where it leads, to a folder or not: fixpack never follows one there), or
    another kind of file."""
    if backups.is_symlink():
        raise DamagedStateError(backups, f"it is a symbolic link to {link_to(backups)}, not a folder (fixpack keeps "
                                         f"the journal's backups there, and never follows a link in its state)")
    if exists(backups) and not backups.is_dir():
        raise DamagedStateError(backups, "it is not a folder (fixpack keeps the journal's backups there)")


def journal_named(raw: bytes) -> dict[str, bool]:
    """The files a damaged journal names, path -> whether it existed before the run (True unless the entry says
    false). ``raw``: the journal's bytes, read (never trusted) only to name files: only canonical paths of the
    target are kept, never the manifest; {} when none can be read."""
    try:
        listed = [(e["path"], e.get("existed") is not False) for e in loads_json(raw)["entries"]]
        return {p: existed for p, existed in listed
                if isinstance(p, str) and not _MANIFEST_NAME.fullmatch(p) and not path_problem(p)}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return {}


def restore_first(root: Path, raw: bytes, what: str = "", restore: str | None = None) -> str:
    """What to do about a damaged journal, in order, each step a command: the run that left it was killed while
    writing, so the files it names may hold part of that run; they are put back before the journal goes. A
    journal that says it is one of a run over several targets that was complete, or one whose run cannot be told
    complete or not, is worded so (:func:`fixpack.groups.group_steps`). ``raw``: the journal's bytes
    (:func:`journal_named`); ``what`` and ``restore``: the words of the first step and the command that puts the
    target's files back to its clean release (None: the run cannot tell, the step says how to find it)."""
    import shlex  # only on this error's path

    named = list(journal_named(raw))
    files = f" (it names {', '.join(named[:5])}{' ...' if len(named) > 5 else ''})" if named else ""
    pack = (root / "fixes" / "series").is_file()  # a pack update's journal (refresh, import, rebase)
    if pack and not exists(root / ".git"):
        step1 = (f"put fixes/ and profiles/ back from the copy of the pack you keep ({root} is no git checkout, "
                 f"so this run cannot name a command for it; {backups_dir(root)} holds the files the killed run "
                 f"replaced, as they were, numbered as the journal's entries: copy them out first if you need them)")
    elif pack:
        at = f"git -C {shlex.quote(str(root))}"
        step1 = (f"put the pack's files back from git: {at} checkout HEAD -- fixes profiles && {at} clean -fd "
                 f"fixes profiles (this drops uncommitted changes there too, staged ones and new files included)")
    elif restore:
        step1 = f"{what}: {restore}"
    else:
        step1 = (f"put the target back to its clean release: copy a clean release copy over {root} (fixpack fetch "
                 f"prints where it is), or reinstall the build the image was made with, at the same version")
    keep = "" if pack else " (a manifest stays: the next run sees it is stale and replaces it)"
    by_group = None if pack else group_steps(root, raw, step1, files)
    if by_group is not None:
        return by_group + keep
    return (f"an unfinished run's journal is there (a run killed while writing, or a file put there by hand), so "
            f"{root} may be half-written{files}, and removing the journal alone leaves it so. In this order: "
            f"1. {step1}; 2. remove the journal and its backups: {removal(root)}{keep}; 3. run the command again")


def _parse_journal(root: Path, jpath: Path, raw: bytes, writes: Writes | None) -> Journal:
    data = load_json(raw, jpath)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list) or \
            set(data) - {"entries", "dirs", "removed_dirs", "by", "group"}:
        raise DamagedStateError(jpath, "not a fixpack journal (a JSON object with a list of entries)")
    entries = tuple(_journal_entry(root, jpath, i, e, writes) for i, e in enumerate(data["entries"]))
    paths = [e.path for e in entries]
    if len(set(paths)) != len(paths):
        raise DamagedStateError(jpath, "a file is listed twice")
    dirs = data.get("dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) and _journal_path_problem(root, d) is None
                                             for d in dirs):
        raise DamagedStateError(jpath, "'dirs' is not a list of canonical folders inside the target")
    made = [d for d in dirs if not any(e.path.startswith(d + "/") for e in entries if not e.existed)]
    if made:  # a run lists only folders it creates for a new file: a rollback removes nothing else
        raise DamagedStateError(jpath, f"'dirs' names {made[0]}, which holds no file the journal says is new")
    removed = _removed_dirs(root, jpath, data.get("removed_dirs", {}), entries,
                            writes is None or writes.empties_folders)
    by = data.get("by")
    if by is not None and not (isinstance(by, dict) and set(by) == {"command", "fix"} and
                               by["command"] in ("refresh", "import") and isinstance(by["fix"], str) and
                               not name_problem(by["fix"])):
        raise DamagedStateError(jpath, "'by' is not a pack update's command (refresh or import) and fix")
    group = parse_group(jpath, data["group"]) if "group" in data and by is None else None
    if "group" in data and group is None:
        raise DamagedStateError(jpath, "a pack update's journal names a run over several targets ('group')")
    if group is not None and not is_root(group.roots[group.index], root):
        raise DamagedStateError(jpath, f"'group' names {group.roots[group.index]} as this target, not "
                                       f"{os.path.realpath(root)} (a journal put there by hand, or a tree copied or "
                                       f"moved while a run's journal was in it: moved, put it back there and give "
                                       f"that path as its --root, and run again; the journal is then read as written)")
    done = group is not None and group_done(group)  # (a later target's: its first target's journal says)
    if done is None:
        raise DamagedStateError(jpath, "whether the run over several targets that left it was complete cannot be "
                                       "told")  # (its steps say why): neither rolled back nor removed
    return Journal(jpath, entries, tuple(dirs), removed if owned_by_us(jpath) else {},
                   (by["command"], by["fix"]) if by else None, group, done)


def _removed_dirs(root: Path, jpath: Path, value: Any, entries: tuple[JournalEntry, ...],
                  empties: bool = True) -> dict[str, Kept]:
    """The folders a run may have emptied, with their mode and owner before it: each a canonical folder of the
    target above a file the journal has a backup of, reached without a link (a rollback makes it again)."""
    if not isinstance(value, dict):
        raise DamagedStateError(jpath, "'removed_dirs' is not an object of folder -> mode and owner")
    for d, k in value.items():
        problem = _journal_path_problem(root, d) or (f"{d}: {kept_problem(k, True)}" if kept_problem(k, True) else None)
        if not problem and not any(e.path.startswith(d + "/") for e in entries if e.existed):
            problem = f"{d} holds no file the journal has a backup of"
        if not problem and not empties:  # a pack update never empties a folder: nothing to make again
            problem = f"{d}: a refresh or import empties no folder of the pack"
        if problem:
            raise DamagedStateError(jpath, f"'removed_dirs': {problem}")
    return kept_map(value)


def _journal_path_problem(root: Path, path: str) -> str | None:
    """Why a journal may not name ``path``: it must be a canonical path of the target reached without a
    link, or the manifest in the state folder."""
    problem = None if isinstance(path, str) and _MANIFEST_NAME.fullmatch(path) else path_problem(path)
    if problem:
        return f"{path!r} is {problem}"
    link = link_on_the_way(root, path)
    if link:
        return (f"{path} is a symbolic link (a rollback writes the file, never through a link)" if link == path else
                f"{path} goes through the symbolic link {link}")
    try:
        st = os.lstat(root / path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return None if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else f"{path} is not a regular file"


def _journal_entry(root: Path, jpath: Path, i: int, e: Any, writes: Writes | None) -> JournalEntry:
    def bad(what: str) -> DamagedStateError:
        return DamagedStateError(jpath, f"entry {i}: {what}")  # from 0, as its backup {BACKUPS}/{i}

    if not isinstance(e, dict) or set(e) - JOURNAL_KEYS or not {"path", "existed", "backup"} <= set(e):
        raise bad(f"not an object with path, existed and backup (allowed keys: {', '.join(sorted(JOURNAL_KEYS))})")
    problem = _journal_path_problem(root, e["path"])
    if problem:
        raise bad(problem)
    if (root / e["path"]).is_dir() and not (root / e["path"]).is_symlink():
        raise bad(f"{e['path']} is a folder")
    if writes is not None and not writes(e["path"]):
        raise bad(f"{e['path']} is {writes.said}")
    if writes is not None and e.get("existed") is False and not writes.creates(e["path"]):
        raise bad(f"it says {e['path']} did not exist before the run, but no run of this profile creates it (the "
                  f"release has it and no fix adds or removes it): a rollback would delete it")
    mode, owner, sha = e.get("mode"), e.get("owner"), e.get("sha256")
    never = writes.file_bits if writes is not None else 0  # a pack file: never executable, nor set-id
    if isinstance(mode, int) and mode & never:
        raise bad(f"mode {mode:o} of {e['path']} has bits ({never:o}) a pack file never has")
    if not isinstance(e["existed"], bool) or not is_int(e["backup"]) or e["backup"] != i:
        raise bad("'existed' must be true or false and 'backup' the entry's own index")
    if not (mode is None or is_int(mode) and 0 <= mode <= 0o7777) or (e["existed"] and mode is None):
        raise bad("'mode' is not a file mode")
    if owner is not None and not (isinstance(owner, list) and len(owner) == 2 and all(is_int(x) and x >= 0
                                                                                        for x in owner)):
        raise bad("'owner' is not [uid, gid]")
    if not sha_or_none(sha) or (e["existed"] and sha is None):
        raise bad("'sha256' is not a sha256 (a run records one for every file that existed)")
    if not (e.get("size") is None or is_int(e["size"]) and e["size"] >= 0):
        raise bad("'size' is not a number of bytes")
    if not e["existed"]:
        check_created(root, e["path"], sha, e.get("size"), bad)
    original, restored = _original(root, e["path"], i, e["existed"], sha, bad)
    if e["existed"] and not restored:
        check_way_back(root, e["path"], bad)
    check_mode_owner(root, e["path"], backups_dir(root) / str(i), mode, tuple(owner) if owner else None, bad)
    return JournalEntry(e["path"], e["existed"], i, mode, tuple(owner) if owner else None, sha, original, restored)


def _original(root: Path, path: str, i: int, existed: bool, sha: str | None,
              bad: Any) -> tuple[bytes | None, bool]:
    """The bytes an entry restores, read from ``.fixpack/journal/<index>`` only (never a path the journal
    names), checked against the entry's sha256."""
    if not existed:
        return None, False
    folder = backups_dir(root)
    if not exists(folder) or folder.is_symlink() or not folder.is_dir():
        raise bad(f"its backups folder {folder} is missing or not a folder")
    raw = read_state_file(folder / str(i))
    if raw is None:
        # an interrupted rollback moved the backup back already: the file must hold exactly those bytes
        now = read_state_file(root / path) if sha else None
        if sha and now is not None and hashlib.sha256(now).hexdigest() == sha:
            return now, True
        raise bad(f"the backup of {path} ({folder / str(i)}) is missing")
    if sha and hashlib.sha256(raw).hexdigest() != sha:
        raise bad(f"the backup of {path} does not match its sha256")
    return raw, False


def journal_originals(root: Path, writes: Writes | None) -> dict[str, bytes | None]:
    """What an interrupted run's journal will restore: path -> original bytes (None: did not exist); nothing for the
    journal of a complete run over several targets (:attr:`Journal.done`: removed, not rolled back).

    Read only; lets status and dry runs show the state the next apply starts from. ``writes``: as for
    :func:`load_journal`.
    """
    journal = load_journal(root, writes)
    return {} if journal is None or journal.done else {e.path: e.original for e in journal.entries}


def leftover_journal(root: Path) -> bool:
    """A journal, or backups a run killed after removing its journal left behind."""
    return journal_there(root) or exists(state_dir(root) / BACKUPS)


def journal_there(root: Path) -> bool:
    """A journal (or its half-written temp file): an interrupted run to roll back; backups alone are a complete
    run's leftovers."""
    path = state_dir(root) / JOURNAL
    return exists(path) or exists(temp_path(path))


def discard_leftovers(root: Path) -> None:
    """Remove backups and a half-written journal that no journal refers to, then an empty state folder."""
    folder = state_dir(root)
    backups = folder / BACKUPS
    if exists(backups):
        _refuse_no_folder(backups)
        clear_under(root, backups.relative_to(root).as_posix())  # never through a link, on the way or in it
    tmp = temp_path(folder / JOURNAL)
    if exists(tmp):
        if tmp.is_dir() and not tmp.is_symlink():
            raise DamagedStateError(tmp, "it is a folder")
        write_under(root, tmp.relative_to(root).as_posix(), None)
    forget_state(root)
