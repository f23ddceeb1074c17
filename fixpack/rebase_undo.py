"""``fixpack rebase --abort`` (:func:`abort`: drop a rebase in progress, its pack files put back) and ``--undo``:
put back the pack files a finished rebase wrote, as they were before it (its record,
``<pack>/.rebase/<name>.undo.json``, kept by :func:`fixpack.rebase_session.keep_undo`).

It can be run again to its end: a file that already holds its bytes from before the rebase (or is gone, where the
rebase made it) counts as put back, so an ``--undo`` cut short (SIGKILL, a power loss, a file it could not write)
is finished by another. Its put-back, and ``--abort``'s (with the dropping of the work folder), runs with Ctrl-C and
SIGTERM held (:mod:`fixpack.interrupts`, deferred): it goes to its end, then says it was interrupted (SIGTERM: exit
143). A file it cannot put back is named with its error once every other file is put back, and the record is kept
for the ``--undo`` that finishes it."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from shlex import quote

from .errors import BadInputError, EnvironmentProblem, FixpackError, stopped_by
from .interrupts import signals
from .rebase_io import NotPutBack, cannot
from .rebase_putback import holds_before, refuse_changed
from .rebase_registry import refuse_elsewhere, unregister
from .rebase_session import RebaseRequest, Session, load_session, report_paths, restore, way_on
from .rebase_state import (
    WORK_DIR,
    check_created,
    check_undo,
    check_undo_takes_back,
    checked_name,
    drop_work,
    made_repos,
    read_json,
    work_root,
    written_sha,
)


def undo(pack_root: Path, name: str = "") -> list[str]:
    """``--undo``: put back the pack files a finished rebase wrote, as they were before it. Refuses (bad
    input, nothing written) when one of them changed since (other than to its bytes from before: an earlier
    ``--undo``'s): commit or restore it first. Its file is checked first (rebase_state.check_undo): a damaged or
    planted one is refused, nothing written."""
    pattern, base = f"{checked_name(name) if name else '*'}.undo.json", work_root(pack_root)
    found = sorted(base.glob(pattern)) if base.is_dir() else []
    if len(found) != 1:
        what = "several finished rebases can be undone: name one with --name" if found else \
            f"no finished rebase to undo under {pack_root / WORK_DIR}"
        raise BadInputError(what + (f" ({', '.join(p.name for p in found)})" if found else ""))
    record = found[0]
    data = read_json(record, f"remove it by hand (rm {quote(str(record))})")
    check_undo(record, data, pack_root)
    backups = data["backups"]
    changed = [w for w, sha in data["written"].items() if os.path.lexists(pack_root / w) and  # gone: nothing lost
               written_sha(pack_root / w) != sha and not (w in backups and holds_before(pack_root / w, backups[w]))]
    if changed:
        raise BadInputError(f"these files changed since the rebase to {data['to']} wrote them: {', '.join(changed)}; "
                            f"move each away to keep your changes (cd {quote(str(pack_root))} && mv FILE "
                            f"ELSEWHERE), then run --undo again: it puts back each file's bytes from before the "
                            f"rebase; nothing was written")
    check_undo_takes_back(record, data, pack_root)  # never 'undone' while leaving what the rebase wrote
    session = Session(pack_root, "", data["to"], "", {}, record.parent / data["to"], pack_root, {"backups": backups})
    held: list[int] = []
    from .progname import command  # only when a message names it

    again = f"run `{command('rebase', '--undo', '--pack', str(pack_root), '--name', data['to'])}` again"
    with signals(held, deferred=True):  # to its end: a Ctrl-C or SIGTERM now waits, and is said after
        try:
            restored = restore(session)
        except NotPutBack as exc:
            raise _problem(held, "undo", f"rebase --undo could not put back {len(exc.failed)} pack file(s): "
                                         f"{exc.named()}; the others are put back ({len(exc.restored)} now: "
                                         f"{', '.join(exc.restored) or 'none'}), and {record} is kept: free space or "
                                         f"make them writable, then {again}, which finishes it") from None
        try:
            record.unlink()
        except OSError as exc:
            raise _problem(held, "undo", f"rebase --undo put back every pack file the rebase to {data['to']} wrote, "
                                         f"but {cannot(exc, record, 'remove')}: remove it by hand (rm "
                                         f"{quote(str(record))})") from None
    _said_if_held(held, "undo", data["to"], restored)
    return restored


def _said_if_held(held: list[int], step: str, name: str, restored: list[str], kept: str = "") -> None:
    """After ``--undo`` / ``--abort`` (``step``) put back the pack files with signals held: a Ctrl-C or SIGTERM that
    came meanwhile (``held``) is said now, with what was put back (SIGTERM: exit 143)."""
    if held:
        done = f"{step}{'ne' if step == 'undo' else 'ed'}"
        raise _held(held, step, f": the rebase to {name} is {done} ({len(restored)} pack file(s) restored or removed"
                                f"{': ' + ', '.join(restored) if restored else ''}){kept}")


def _problem(held: list[int], step: str, text: str) -> FixpackError:
    """The error of ``--undo`` / ``--abort`` (``step``) that could not finish its put-back (``text``, exit 5); with a
    Ctrl-C or SIGTERM held meanwhile (``held``), said first, and a SIGTERM's exit 143 kept (it was dropped)."""
    return _held(held, step, f", but {text}") if held else EnvironmentProblem(text)


def _held(held: list[int], step: str, rest: str) -> FixpackError:
    """The Ctrl-C or SIGTERM ``held`` through ``--undo``'s / ``--abort``'s put-back, said before ``rest`` (SIGTERM's
    :class:`~fixpack.errors.Terminated`, exit 143; Ctrl-C exit 5)."""
    how, kind = stopped_by(signal.SIGTERM in held)
    return kind(f"{how} while rebase --{step} put the pack files back; it waited until that was done{rest}")


def abort(req: RebaseRequest) -> tuple[list[str], list[Path]]:
    """``--abort``: restore every pack file the rebase wrote (or remove it), drop the work folder. Returns the
    paths restored or removed, relative to the pack, and its report files, kept (the record of why it stopped). A
    pack file it cannot put back is named with its error once every other one is put back, and the rebase is kept
    (exit 5): ``--abort`` again finishes it."""
    if req.work is None:
        refuse_elsewhere(req.pack_root.resolve(), req.name, "abort")
    session = load_session(req, targets=False)  # never the pack: a cut put-back may have left it invalid
    check_created(session.state_path, session.state["backups"], session.pack_root)
    again = way_on(session, "abort")
    refuse_changed(session.state, session.pack_root, session.new_name, "abort", again)
    held: list[int] = []
    with signals(held, deferred=True):  # to its end, as --undo's: a Ctrl-C or SIGTERM now waits, and is said after
        try:
            restored = restore(session)
        except NotPutBack as exc:
            raise _problem(held, "abort", f"rebase --abort could not put back {len(exc.failed)} pack file(s): "
                                          f"{exc.named()}; the others are put back, and the rebase in {session.work} "
                                          f"is kept: free space or make them writable, then run `{again}` again, "
                                          f"which finishes it") from None
        try:
            drop_work(session.work, session.given, made_repos(session.state))
            unregister(session.pack_root, session.new_name, session.work)
        except OSError as exc:
            raise _problem(held, "abort", f"rebase --abort put back every pack file the rebase wrote, but "
                                          f"{cannot(exc, what='remove')}, of its work folder {session.work} or the "
                                          f"pack's record of it: make it writable, then run `{again}` again") from None
    kept = [p for p in report_paths(session) if p.is_file()]
    _said_if_held(held, "abort", session.new_name, restored,
                  f"; its report is kept: {', '.join(map(str, kept))}" if kept else "")
    return restored, kept
