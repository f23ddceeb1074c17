"""Holding a rebase's pack files against edits by hand before ``--abort`` puts them back
(:func:`fixpack.rebase_session.restore`) or a ``--continue`` writes them again: the state's ``planned`` key records,
before each write, the sha256 of what the rebase is about to put in each pack file (:func:`planned`; the lock's as
it is about to be written, :func:`lock_written`), kept across ``--continue`` runs (a file may hold what an earlier,
cut run wrote), and both refuse where a file holds neither its bytes from before the rebase nor any of those
(:func:`changed_by_hand`, :func:`refuse_changed`): changed by hand since, which the put-back or the write would
lose; the way past is to move it away (a file that is gone loses nothing). The put-back after a Ctrl-C keeps such
a file (:func:`fixpack.rebase_session.restore`'s ``keep``)."""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import stat
from pathlib import Path
from shlex import quote
from typing import TYPE_CHECKING, Any

from .documents import MAX_STATE_BYTES
from .errors import BadInputError
from .rebase_state import MAX_PLANNED, pack_rel, written_sha
from .records import dumps
from .safepath import holds_bytes, link_on_the_way, link_to

if TYPE_CHECKING:
    from collections.abc import Callable


def holds_before(path: Path, backup: str | None) -> bool:
    """Whether ``path`` is as it was before the rebase (``backup``: its bytes then, base64, ``""`` for an empty
    file; or None: not there)."""
    if backup is None:
        return not os.path.lexists(path)
    return holds_bytes(path, base64.b64decode(backup))


def planned(state: dict[str, Any], pack_root: Path, changes: dict[Path, bytes | None]) -> dict[str, list[str | None]]:
    """The state's ``planned`` with what a write is about to put in each pack file of ``changes`` added: by its path
    relative to the pack, the sha256 of each content a run of this rebase wrote or is about to write there (None:
    it removes the file), at most MAX_PLANNED (the oldest go first)."""
    out: dict[str, list[str | None]] = {k: list(v) for k, v in state.get("planned", {}).items()}
    for p, data in changes.items():
        _add(out, pack_rel(pack_root, p), hashlib.sha256(data).hexdigest() if data is not None else None)
    return out


def lock_written(state: dict[str, Any], pack_root: Path, save: Callable[[], None],
                 lock: Path) -> Callable[[bytes], None]:
    """The hook :func:`fixpack.engine.write_lock` calls with the lock's bytes just before it writes them: their
    sha256 added to the rebase's ``state``'s ``planned`` and the state saved (``save``), so that the lock too is held
    against edits by hand. A lock made or changed by hand since the rebase began writing (BadInputError), or a
    symbolic link on its way (OSError, ELOOP), stops the write there: the caller puts the pack back, keeping that
    file."""
    def record(data: bytes) -> None:
        refuse_made_meanwhile(state, pack_root, lock)
        done = {k: list(v) for k, v in state.get("planned", {}).items()}
        _add(done, pack_rel(pack_root, lock), hashlib.sha256(data).hexdigest())
        state["planned"] = done
        save()
    return record


def _add(out: dict[str, list[str | None]], rel: str, sha: str | None) -> None:
    shas = [s for s in out.get(rel, []) if s != sha] + [sha]
    out[rel] = shas[-MAX_PLANNED:]


def refuse_made_meanwhile(state: dict[str, Any], pack_root: Path, path: Path) -> None:
    """Just before the rebase writes the pack file ``path``: an OSError (ELOOP) where a symbolic link lies on its way
    (one put there meanwhile is never written through), a BadInputError where a file there holds neither its bytes
    from before the rebase nor any the rebase wrote (made or changed by hand while the rebase wrote the pack): the
    write stops there and the caller puts the pack back, keeping that file."""
    key = pack_rel(pack_root, path)
    no_link_on_the_way(pack_root, key)
    if not _unchanged(state, path, key):
        raise BadInputError(f"{path} was made or changed by hand while the rebase wrote the pack (it holds neither "
                            f"its bytes from before the rebase nor any the rebase wrote)")


def no_link_on_the_way(pack_root: Path, rel: str) -> None:
    """OSError (ELOOP) where a symbolic link lies on the way to the pack file ``rel`` (or in its place): one put
    there while the rebase writes or puts back is never written through."""
    link = link_on_the_way(pack_root, rel)
    if link:
        raise OSError(errno.ELOOP, f"{link} is a symbolic link (never written through: remove it)",
                      str(pack_root / rel))


def _unchanged(state: dict[str, Any], path: Path, key: str) -> bool:
    """Whether the pack file ``path`` (``key`` in the state) is gone, holds its bytes from before the rebase, or holds
    a content a run of the rebase wrote there (``planned``): nothing of the user's there to lose."""
    return not os.path.lexists(path) or holds_before(path, state["backups"].get(key)) or \
        written_sha(path) in {s for s in state.get("planned", {}).get(key, []) if s}


def _linked(pack_root: Path, rel: str) -> bool:
    try:
        return link_on_the_way(pack_root, rel) is not None
    except OSError:
        return True


def changed_by_hand(state: dict[str, Any], pack_root: Path) -> list[tuple[str, bool]]:
    """The pack files the state backs up (relative to the pack; True where the rebase made it: none there before)
    that hold neither their bytes from before the rebase nor any content the rebase wrote there (``planned``), and
    would be lost if written over: changed by hand since (a link in place of one too). One that is gone loses
    nothing; one with a symbolic link on its way is not looked at through it (the link is named where it is
    refused). None while the state has no ``planned`` (nothing written yet, a write put back whole, or a state from
    before this key)."""
    if "planned" not in state:
        return []
    return [(rel, backup is None) for rel, backup in sorted(state["backups"].items())
            if not _linked(pack_root, rel) and not _unchanged(state, pack_root / rel, rel)]


def refuse_changed(state: dict[str, Any], pack_root: Path, name: str, step: str, again: str) -> None:
    """Before ``--abort`` puts the pack files back or ``--continue`` writes them again (``step``; ``again``: its
    command): BadInputError (exit 2, nothing written) naming each of :func:`changed_by_hand`'s files, with what to
    do: move it away (``--abort`` then puts back its bytes from before, or leaves it gone where the rebase made it;
    ``--continue`` writes it)."""
    changed = changed_by_hand(state, pack_root)
    if changed:
        def way(rel: str, made: bool) -> str:
            parts = rel.split("/")
            folder = "/".join(parts[:3]) if step == "continue" and parts[0] == "fixes" else ""
            return f"{rel} ({'not there before the rebase' if made else 'there before the rebase'}" + \
                (f"; move its variant folder {folder} away: its variant.toml names its patches)" if folder else ")")
        raise BadInputError(f"{len(changed)} pack file(s) changed by hand since the rebase to {name} began writing "
                            f"(they hold neither their bytes from before the rebase nor any the rebase wrote there), "
                            f"which --{step} would overwrite: {'; '.join(way(*c) for c in changed)}; move each away "
                            f"to keep your changes (cd {quote(str(pack_root))} && mv FILE ELSEWHERE: --abort puts "
                            f"back a file's bytes from before the rebase, --continue writes the rebase's), then run "
                            f"`{again}` again; nothing was written")


def check_backups_fit(state: dict[str, Any], pack_root: Path, paths: list[Path], state_path: Path) -> None:
    """Refuse, before anything is read or written, a rebase whose ``state.json`` would pass ``MAX_STATE_BYTES`` once
    it holds the bytes (base64: 4/3 of them) of each of ``paths`` there now, which ``--abort`` and ``--undo`` put
    back: a state larger than that is one its own reader refuses (damaged state, exit 3), so the rebase could be
    neither continued nor aborted. Told by the files' sizes, none read. Why refuse and not raise the cap for that
    file: the cap is what keeps a planted state from being read whole, and backups of any size would need none;
    the backed-up files are pack files (a variant's patches, a profile, a lock), which are KBs, so the limit is
    met only by a pack file far larger than any other, as a pack text file past its 4 MiB cap is: bad input
    (exit 2, the README's row for a pack file too large), named with its size, to move away or to rebase to
    another ``--name``."""
    backups = state.get("backups", {})
    sizes: dict[str, int] = {}
    for path in paths:
        key = pack_rel(pack_root, path)
        if key in backups or key in sizes:
            continue
        try:
            st = os.lstat(path)
        except OSError:  # not there: backed up as None
            continue
        if stat.S_ISLNK(st.st_mode):
            raise BadInputError(f"{path} is a symbolic link (to {link_to(path)}): the rebase writes {key} there "
                                f"and never through a link; remove the link (rm {quote(str(path))}: never what it "
                                f"points at), then run it again; nothing was written")
        if stat.S_ISREG(st.st_mode):
            sizes[key] = st.st_size
    # each entry: "key": "<base64>", on a line of its own (records.dumps: indent 2, nested once)
    total = len(dumps(state)) + sum(4 * -(-n // 3) + len(json.dumps(k)) + 12 for k, n in sizes.items())
    if total > MAX_STATE_BYTES:
        raise backups_too_large(state_path, total, sizes)


def backups_too_large(state_path: Path, total: int, sizes: dict[str, int]) -> BadInputError:
    big = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    named = ", ".join(f"{k} ({n} bytes)" for k, n in big[:5]) + (f", and {len(big) - 5} more" if len(big) > 5 else "")
    return BadInputError(f"{state_path}: the rebase keeps there the bytes of each pack file it replaces (for --abort "
                         f"and --undo): {named}; that is about {total} bytes, more than the {MAX_STATE_BYTES >> 20} "
                         f"MiB a rebase's state may have (its reader refuses a larger one); move those files out of "
                         f"the pack, or rebase to another --name; nothing was written for it")
