"""A pack's journal (``<pack>/.fixpack/``, what a killed refresh or import leaves): untrusted input, read with the
files a pack update writes (:data:`PACK_WRITES`) and, when it cannot be read at all, its steps by hand
(:func:`load_pack_journal`)."""

from __future__ import annotations

import shlex
from pathlib import Path

from .errors import DamagedJournalError, DamagedStateError
from .fsio import exists
from .state import Journal, journal_path, load_journal, restore_first


class _PackWrites:
    """What a pack update (refresh, import) writes: ``fixes/series``, a fix's patches (``.patch``, ``.diff``),
    ``fix.toml`` and ``variant.toml`` under ``fixes/``, and ``profiles/NAME.toml`` / ``.lock``, with no execute, set-id
    or sticky bit. A pack journal naming any other file (``.git/``, a proof or the tool's own code, which a run or
    git would execute), such a mode, or a folder to make again with a mode and owner (a pack update empties none)
    is damaged state: a planted one's rollback wrote ``.git/hooks/pre-commit``, then ``fixes/apply_all.py``, then
    gave ``profiles/`` to another user."""

    said = ("no file a refresh or import writes in the pack (fixes/series, a fix's patches, fix.toml or variant.toml, "
            "a profile or its lock): not a journal a pack update left")
    file_bits = 0o7111  # not in a pack file's mode
    empties_folders = False  # a pack update empties no folder: a journal's removed_dirs is damaged

    def __call__(self, path: str) -> bool:
        top, _, rest = path.partition("/")
        name = rest.rpartition("/")[2]
        if top == "profiles":
            return "/" not in rest and name.endswith((".toml", ".lock"))
        return top == "fixes" and (rest == "series" or "/" in rest and (name.endswith((".patch", ".diff")) or
                                                                         name in ("fix.toml", "variant.toml")))

    def creates(self, path: str) -> bool:  # a new fix's files, a renumbered patch, a lock not made before
        return self(path) and path != "fixes/series" and not (path.startswith("profiles/") and path.endswith(".toml"))


PACK_WRITES = _PackWrites()


WORK_DIR = ".edit"  # <pack>/.edit: the work trees of edits in progress, each one's state <fix>.json beside it


def open_edits(folder: Path) -> list[str]:
    """The fixes with an edit in progress in ``folder`` (``<pack>/.edit``: each one's state ``<fix>.json``), sorted:
    what a killed pack update's way back may name."""
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def killed_mid_write(pack_root: Path) -> bool:
    """Whether a refresh or import was killed while writing the pack (its journal is there): the pack may be half
    written. Leftovers alone (a run killed before its journal was written, or once it was done) leave it whole."""
    return exists(journal_path(pack_root))


def load_pack_journal(pack_root: Path) -> Journal | None:
    """The journal a killed pack update left (:func:`load_journal` with :data:`PACK_WRITES`; None: none, or only the
    leftovers of a run killed before its journal was written or after it was done, with the pack whole). One that
    cannot be read at all (not a regular file, too large, its backups not a folder) raises DamagedJournalError too,
    with the steps that put the pack back by hand (it said "remove it or restore the image")."""
    try:
        journal = load_journal(pack_root, PACK_WRITES)
    except DamagedJournalError:
        raise
    except DamagedStateError as exc:
        if not exists(journal_path(pack_root)):  # leftovers alone: the pack is whole, the leftover goes
            raise DamagedStateError(exc.path, exc.what, f"there is no journal, so the pack is whole: remove it (rm "
                                                        f"-rf -- {shlex.quote(str(exc.path))})") from None
        raise DamagedJournalError(exc.path, exc.what, restore_first(pack_root, b""), pack_root, b"") from None
    if journal is not None and journal.by:  # what wrote: its own files are there (an import's new fix.toml)
        word, fix = journal.by
        own = {e.path: e.existed for e in journal.entries if e.path.startswith(f"fixes/{fix}/")}
        if not own or word == "import" and own.get(f"fixes/{fix}/fix.toml") is not False:
            held = f"no file of {fix}" if not own else f"no new fixes/{fix}/fix.toml"
            what = f"it says the {word} of {fix} wrote it, but it holds {held}"
            raise DamagedJournalError(journal.path, what, restore_first(pack_root, b""), pack_root, b"")
    return journal
