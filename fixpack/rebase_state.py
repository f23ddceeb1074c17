"""The rebase's own files under ``<pack>/.rebase/`` are untrusted input, as the edit state and the image journal
are: ``.rebase`` and each ``.rebase/<name>`` must be real folders (never a symbolic link, which ``--abort`` would
remove through), ``state.json`` and ``<name>.undo.json`` must read as what this tool writes, and every pack file
they name must be one a rebase to that profile writes: ``profiles/<name>.toml`` and ``.lock``, or
``fixes/<fix>/<name>/<file>``. Anything else is refused (exit 3) before a file is written, naming the file, the
key, and what to do. A symbolic link on the way to one of those files (or in its place) is the pack's, not the
state's: refused too, before anything is read or written through it, as bad input (exit 2) naming the link.

A ``--work`` folder is the user's place, not this tool's, wherever it lies (``<pack>/.rebase`` too: what counts
is whether ``--work`` was given, never where the path resolves): the start refuses one that already holds files
(a ``state.json`` it did not write among them), whose parent is missing, or that lies in the pack's checkout
outside ``.rebase`` (resolved: a link into the pack counts), and writes its marker (``.fixpack-rebase``) there;
``--continue`` and ``--abort`` refuse a ``--work`` folder without it (a planted or copied ``state.json`` never
makes a folder the rebase's), and dropping it removes only what a rebase makes there (:func:`drop_work`: the
repositories the state records).
``--abort`` removes a file the state records as made by the rebase only when git HEAD does not have it, and
restores saved bytes over a file unchanged at HEAD only when they are HEAD's (:func:`check_created`).
``state.json``'s ``proof.python`` is never run on the state's word: ``--continue`` runs the proofs with the
``--python`` given to it, and refuses, nothing run, a rebase whose start was given one until it is given again.

``<name>.undo.json`` has no trusted anchor (no signature, and the pack's git history cannot say what was in the
working tree when the rebase ran, as ``--allow-dirty`` lets it start on uncommitted files): what ``--undo``
checks is the record's own consistency and the pack as it is now (:func:`check_undo`,
:func:`check_undo_takes_back`): every path one a rebase to that name writes, no link on the way; every file in
``written`` backed up, and every backup of a file not in ``written`` only one of a variant file the rebase removed
or never wrote, nothing there now; each written file still as the rebase wrote it (its sha256); and no bytes from
before that are the rebase's own unless git HEAD holds them. What it cannot check: that the bytes from before
are the ones the pack held (a record naming the same files with other bytes, or a file made by the rebase as
overwritten, reads as one), nor that a tracked file's backup is HEAD's blob (the record says nothing of whether
the pack was dirty, and HEAD may since hold the rebase's output): ``.rebase/`` is the user's to keep as the pack.

``report_dir`` is ``<pack>/reports`` unless ``--report`` is given again (:func:`report_folder`): the state
cannot prove a folder elsewhere was the one the start was given.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from shlex import quote
from typing import Any

from .documents import MAX_STATE_BYTES, TooLargeError, loads_json, read_capped
from .errors import BadInputError, DamagedStateError
from .records import is_sha256
from .safepath import (
    ID_RE,
    holds_bytes,
    link_on_the_way,
    link_to,
    name_problem,
    not_a_file_here,
    path_problem,
    read_regular,
    sha256_regular,
)

WORK_DIR = ".rebase"
MARKER = ".fixpack-rebase"  # in a --work folder: the start made it ("made") or was given it empty ("given")
PHASES = ("merging", "conflicts", "writing", "written")
MAX_PLANNED = 16  # sha256 a pack file's entry of 'planned' keeps (rebase_putback): contents the runs wrote there
STATE_SCHEMA = 1  # state.json's "schema": another is refused (a later fixpack's, or edited)


def checked_name(name: str, what: str = "rebase name (--name)") -> str:
    """A profile name given to ``--name``: it names a folder under ``.rebase/`` and files of the pack."""
    problem = name_problem(name)
    if problem:
        raise BadInputError(f"bad {what} {name!r}: {problem}")
    return name


def work_root(pack_root: Path) -> Path:
    """``<pack>/.rebase``, refused when it is a symbolic link or no folder (it may be missing)."""
    folder = pack_root / WORK_DIR
    _refuse_link(folder, "the rebase work folder", f"rm {quote(str(folder))}")
    return folder


def default_work(pack_root: Path, name: str) -> Path:
    """``<pack>/.rebase/<name>`` (it may be missing), never through a symbolic link."""
    folder = work_root(pack_root) / checked_name(name)
    _refuse_link(folder, f"the work folder of the rebase to {name}", f"rm {quote(str(folder))}")
    return folder


def check_new_work(work: Path, given: bool, pack_root: Path, said: Path | None = None) -> None:
    """Before a rebase starts in ``--work`` ``work`` (resolved; ``given``; the default ``<pack>/.rebase/<name>``
    is the tool's own; ``said``: the path as given, for the message): it must lie outside the pack at
    ``pack_root`` (under its ``.rebase/`` aside), and be an empty folder or a missing one whose parent exists
    (BadInputError), as ``--abort`` and a finished rebase remove what the rebase made there (parents it would
    make, never)."""
    from .outputs import check_folder  # only for a --work folder

    if not given:
        return
    _refuse_inside_pack(work, pack_root, said or work)
    if work.is_dir() and not work.is_symlink():
        try:
            held = sorted(os.listdir(work))
        except OSError as exc:
            raise BadInputError(f"--work {work}: the folder cannot be read ({exc.strerror}); give a new folder; "
                                f"nothing was written") from exc
        if held:
            shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
            raise BadInputError(f"--work {work}: the folder already holds files ({shown}); a rebase's work folder "
                                f"must be new or empty, as --abort and a finished rebase remove what it made there: "
                                f"give a new folder (or leave --work out: <pack>/{WORK_DIR}/<name>); nothing was "
                                f"written")
    check_folder(work, "--work")


def _refuse_inside_pack(work: Path, pack_root: Path, said: Path) -> None:
    """A ``--work`` folder inside the pack's checkout (``.git/``, ``fixes/``, the pack's root itself ...; a
    symbolic link into it counts, the paths compared resolved) is refused: the rebase rewrites ``fixes/`` and
    ``profiles/`` and checks them clean against git, and its work repositories would be files of the pack. Only
    the tool's own ``<pack>/.rebase/`` (a folder below it) is left to the user."""
    pack, where = pack_root.resolve(), work.resolve()
    own = pack / WORK_DIR
    if not where.is_relative_to(pack) or (where != own and where.is_relative_to(own)):
        return
    shown = f"{said} (that is {where})" if Path(os.path.abspath(said)) != where else f"{said}"
    raise BadInputError(f"--work {shown}: the folder is inside the pack {pack}; a rebase's work folder must lie "
                        f"outside the pack, whose fixes/ and profiles/ it rewrites (its work repositories would be "
                        f"files of the pack): pick a folder outside the pack (or leave --work out: "
                        f"<pack>/{WORK_DIR}/<name>); nothing was written")


def is_marked(work: Path) -> bool:
    """Whether ``work`` holds the start's marker as :func:`mark_work` writes it (a regular file, no link)."""
    marker = work / MARKER
    try:
        return not marker.is_symlink() and marker.is_file() and \
            read_capped(marker, len("given\n")) in (b"made\n", b"given\n")
    except (OSError, ValueError):
        return False


def mark_work(work: Path, given: bool, made: bool) -> None:
    """The start's marker in a ``--work`` folder (``made``: the start made the folder, so dropping removes it)."""
    if given:
        (work / MARKER).write_text("made\n" if made else "given\n", "utf-8")


def check_work_marker(pack_root: Path, work: Path, given: bool) -> None:
    """A ``--work`` folder (``given``) that ``--continue`` or ``--abort`` may act on holds the start's marker
    (exit 3): any folder given with ``--work`` is the user's, wherever it lies, ``<pack>/.rebase`` too."""
    if not given:
        return
    marker = work / MARKER
    if not is_marked(work):
        raise DamagedStateError(marker, f"missing or not as a rebase's start writes it: {work} is no work folder a "
                                        f"rebase made, so nothing in it is removed or used",
                                f"give the --work folder the rebase was started with (one started without --work: "
                                f"leave --work out, give --name NAME); if none is in progress, remove its "
                                f"state.json by hand (rm {quote(str(work / 'state.json'))}) and "
                                f"{git_put_back(pack_root)}")


def git_put_back(pack_root: Path) -> str:
    """The words that put the pack's fixes/ and profiles/ back to git HEAD, staged edits and new files included."""
    return (f"put fixes/ and profiles/ back with git (cd {quote(str(pack_root))} && git checkout HEAD -- fixes "
            f"profiles && git clean -fd fixes profiles)")


def made_repos(state: dict[str, Any]) -> set[str]:
    """The work repositories (``<work>/<fix>``) the rebase recorded in its state (:func:`check_state` checked them):
    ``repos``, and every conflict's ``repo``."""
    return set(state.get("repos") or ()) | {Path(rec["repo"]).name for rec in state.get("conflicts", {}).values()}


def drop_work(work: Path, given: bool, repos: Iterable[str]) -> None:
    """Remove the rebase's work folder: ``<pack>/.rebase/<name>`` whole (and ``.rebase`` once empty); of a
    ``--work`` folder (``given``) only what a rebase makes there: ``state.json``, the marker, its scratch folders
    ``.scratch`` and ``.proof`` (whole: each run wipes them too, so nothing of the user's belongs there) and the
    work repositories ``repos`` (:func:`made_repos`: those the state records, never an entry that is merely named
    like a fix), and the folder itself when the start made it and nothing else is left. ``state.json`` goes first
    either way: a run stopped half way through leaves no rebase in progress whose work repositories are gone (a
    --continue then would merge them anew over their resolutions)."""
    if not given:
        with contextlib.suppress(OSError):  # first: a run stopped while it removes the rest holds no rebase there
            (work / "state.json").unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
        if work.parent.is_dir() and not any(work.parent.iterdir()):
            work.parent.rmdir()
        return
    try:
        made = is_marked(work) and read_capped(work / MARKER, len("given\n")) == b"made\n"
    except (OSError, ValueError):
        made = False
    for name in ("state.json", ".scratch", ".proof", *sorted(set(repos)), MARKER):
        entry = work / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        elif os.path.lexists(entry):
            entry.unlink()
    if made and not any(work.iterdir()):
        work.rmdir()


def check_created(path: Path, backups: dict[str, Any], pack_root: Path) -> None:
    """Before ``--abort`` puts back what ``backups`` records: a rebase starts on a clean checkout, so a file it
    made (value None, which ``--abort`` removes) is no file git tracks at HEAD, and the bytes it saved of a file
    it overwrote are that file's at HEAD. A record of a tracked file as made, or of bytes for a tracked file that
    is unchanged at HEAD and holds other bytes, is forged: DamagedStateError naming the key, nothing written (the
    files are held against HEAD's blobs, ``git cat-file``: no lock, no index refresh). A pack that is no git
    checkout (``--allow-dirty``) cannot be asked."""
    for rel in sorted(rel for rel in backups if (pack_root / rel).is_file()):
        head = _at_head(pack_root, rel)
        if head is None:  # not in git's HEAD (or no git checkout): nothing to hold it against
            continue
        data = backups[rel]
        if data is None:
            why = f"is null (a file the rebase made, which --abort removes), but git tracks {rel}"
        elif not holds_bytes(pack_root / rel, head) or base64.b64decode(data) == head:
            continue
        else:
            why = (f"holds bytes {rel} never had at git HEAD, and {rel} is committed and unchanged: --abort would "
                   f"overwrite it")
        raise DamagedStateError(path, f"backups[{rel!r}] {why}: the rebase did not write that record",
                                f"keep {rel}: if no rebase is in progress, remove the state by hand "
                                f"(rm {quote(str(path))}), else give the --work folder it was started with; if the "
                                f"rebase was started with --allow-dirty over uncommitted changes to {rel}, move "
                                f"{rel} away and --abort puts those changes back")


def backup_bytes(path: Path) -> bytes:
    """A pack file's bytes to back up (read capped, without blocking, never through a link: one that is no longer
    the regular file check_backups_fit sized is refused, exit 2, naming it, before anything is written)."""
    try:
        return read_regular(path, MAX_STATE_BYTES, follow=False)
    except (OSError, TooLargeError) as exc:
        what = f"{exc.size} bytes" if isinstance(exc, TooLargeError) else not_a_file_here(path) or exc.strerror
        raise BadInputError(f"{path}: a pack file the rebase would replace is now {what}, not the file it sized: "
                            f"put the pack file itself there (or move it away), then run the rebase again; nothing "
                            f"was written to the pack") from exc


def pack_rel(pack_root: Path, path: Path) -> str:
    """``path`` relative to the pack, as the state's keys are: told from the names alone (a path made from the pack
    root, resolved or as given) and never by following a link, which may lie where a pack file goes (the rebase
    refuses it: :func:`check_pack_paths`). ValueError: not in the pack."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(os.path.abspath(pack_root)).as_posix()
    except ValueError:
        return absolute.relative_to(pack_root.resolve()).as_posix()


def written_sha(path: Path) -> str | None:
    """The sha256 of a pack file the rebase wrote, read in blocks, never through a link nor from a FIFO (None: no
    regular file there)."""
    try:
        return sha256_regular(path)
    except OSError:
        return None


def _at_head(pack_root: Path, rel: str) -> bytes | None:
    import subprocess

    # (bytes, not gitutil.run's text: a profile or patch is held byte for byte; cat-file touches no index)
    done = subprocess.run(["git", "cat-file", "blob", f"HEAD:./{rel}"], cwd=pack_root, capture_output=True)
    return done.stdout if done.returncode == 0 else None


def report_folder(path: Path, state: dict[str, Any], pack_root: Path, given: Path | None) -> Path:
    """Where ``--continue`` writes the report: ``--report`` given again (checked as at the start), else the
    state's ``report_dir``, which must be ``<pack>/reports`` (a folder given to the start's ``--report`` is in the
    printed ``--continue`` command: the state, a file anyone may edit, cannot prove it was given)."""
    from .outputs import check_folder  # only on --continue

    if given is not None:
        check_folder(given, "--report")
        return given.resolve()
    default = (pack_root / "reports").resolve()
    if Path(state["report_dir"]) != default:
        raise DamagedStateError(path, f"key 'report_dir' is {state['report_dir']!r}, not {default}: a report folder "
                                      f"of the start's --report is used only when given again",
                                "if the rebase was started with --report DIR, give --report DIR again with --continue "
                                "(the command the rebase printed has it); else the file was edited: drop the rebase "
                                "with --abort")
    return default


def _refuse_link(path: Path, what: str, remove: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise DamagedStateError(path, f"{what} cannot be read ({exc.strerror})", "check its permissions") from exc
    if stat.S_ISDIR(mode):
        return
    kind = f"a symbolic link to {link_to(path)}" if stat.S_ISLNK(mode) else "no folder"
    raise DamagedStateError(path, f"{what} is {kind}, not a folder this tool made",
                            f"remove it by hand ({remove}: never what a link points at) and run again")


def read_json(path: Path, advice: str) -> dict[str, Any]:
    """The JSON object in ``path``, a regular file (no symbolic link) of at most ``MAX_STATE_BYTES``: else
    DamagedStateError."""
    if path.is_symlink() or not path.is_file():
        what = not_a_file_here(path) or "missing"
        raise DamagedStateError(path, f"{what}, not a regular file", advice)
    try:
        data = loads_json(read_capped(path, MAX_STATE_BYTES).decode("utf-8"))
    except TooLargeError as exc:  # told by its size, never read
        raise DamagedStateError(path, f"{exc.size} bytes, more than any state this tool writes", advice) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedStateError(path, f"not JSON ({exc})", advice) from exc
    except OSError as exc:
        raise DamagedStateError(path, f"cannot be read ({exc.strerror})", advice) from exc
    if not isinstance(data, dict):
        raise DamagedStateError(path, f"a JSON {type(data).__name__}, not an object", advice)
    return data


def _want(path: Path, data: dict[str, Any], key: str, kind: type | tuple[type, ...], advice: str,
          required: bool = True) -> Any:
    if key not in data:
        if required:
            raise DamagedStateError(path, f"key {key!r} is missing", advice)
        return None
    if not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool)):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise DamagedStateError(path, f"key {key!r} is {type(data[key]).__name__}, not {names}", advice)
    return data[key]


def state_advice(work: Path, pack_root: Path) -> str:
    return (f"if no rebase is in progress, remove its work folder by hand (rm -r {quote(str(work))}) and "
            f"{git_put_back(pack_root)}")


def check_state(path: Path, state: dict[str, Any], pack_root: Path, work: Path, default: bool) -> None:
    """``state.json`` of the rebase in ``work`` (``default``: ``<pack>/.rebase/<name>``) as this tool writes it,
    of the pack at ``pack_root``."""
    advice = state_advice(work, pack_root)
    for key in ("pack", "from", "to", "to_version", "report_dir", "phase"):
        _want(path, state, key, str, advice)
    if _want(path, state, "schema", int, advice) != STATE_SCHEMA:
        raise DamagedStateError(path, f"key 'schema' is {state['schema']}, not {STATE_SCHEMA}: no state this "
                                      f"fixpack writes (another version's, or edited)", advice)
    for key in ("targets", "conflicts", "backups"):
        _want(path, state, key, dict, advice)
    try:
        same = Path(state["pack"]).resolve() == pack_root.resolve()
    except (OSError, ValueError):
        same = False
    if not same:
        raise BadInputError(f"{path}: this rebase is of the pack at {state['pack']}, not {pack_root}: give "
                            f"--pack {state['pack']}")
    for key in ("from", "to"):
        if name_problem(state[key]):
            raise DamagedStateError(path, f"key {key!r} is {state[key]!r}: {name_problem(state[key])}", advice)
    if default and state["to"] != work.name:
        raise DamagedStateError(path, f"key 'to' is {state['to']!r}, not {work.name!r} (its folder)", advice)
    if state["phase"] not in PHASES:
        raise DamagedStateError(path, f"key 'phase' is {state['phase']!r}, not one of {', '.join(PHASES)}", advice)
    for name, t in state["targets"].items():
        if not isinstance(t, dict) or not all(isinstance(t.get(k, ""), str) for k in ("new", "old", "note")) or \
                (t.get("new") and not t.get("old")):
            raise DamagedStateError(path, f"targets.{name} is not an object of strings new, old (both or neither) "
                                          f"and note", advice)
    for fix_id, rec in state["conflicts"].items():
        if not _conflict_record(rec, work):
            raise DamagedStateError(path, f"conflicts.{fix_id} does not name a work repository in {work}, its inputs' "
                                          f"digest and its patches", advice)
    _want(path, state, "replace", bool, advice, required=False)  # the start's --replace (none: not given)
    repos = _want(path, state, "repos", list, advice, required=False) or []
    if not all(isinstance(r, str) and ID_RE.fullmatch(r) for r in repos):
        raise DamagedStateError(path, "key 'repos' is not a list of fix ids (the work repositories it made)", advice)
    proof = _want(path, state, "proof", dict, advice, required=False) or {}
    for key, kind in (("python", str), ("site", str), ("clean", dict), ("allow_unproven", bool)):
        _want(path, proof, key, kind, advice, required=False)
    for fix_id, run in (proof.get("clean") or {}).items():
        if not isinstance(run, dict) or not all(isinstance(run.get(k), str) for k in ("digest", "summary", "output")) \
                or not isinstance(run.get("rc"), int):
            raise DamagedStateError(path, f"proof.clean.{fix_id} is not a proof run this tool records (digest, rc, "
                                          f"summary, output)", advice)
    check_pack_paths(path, "backups", state["backups"], pack_root, state["to"], advice)
    planned = _want(path, state, "planned", dict, advice, required=False)  # rebase_putback
    if planned == {}:  # never written empty: a write plans its profile at least
        raise DamagedStateError(path, "key 'planned' is empty (a write records the profile at least)", advice)
    planned = planned or {}
    check_pack_paths(path, "planned", dict.fromkeys(planned), pack_root, state["to"], advice)
    for key, shas in planned.items():
        if not isinstance(shas, list) or not 0 < len(shas) <= MAX_PLANNED or \
                not all(sha is None or is_sha256(sha) for sha in shas):
            raise DamagedStateError(path, f"planned[{key!r}] is not a list of 1 to {MAX_PLANNED} sha256 or null "
                                          f"({str(shas)[:80]})", advice)


def _conflict_record(rec: Any, work: Path) -> bool:
    if not isinstance(rec, dict) or not isinstance(rec.get("repo"), str) or not isinstance(rec.get("inputs"), str):
        return False
    patches = rec.get("patches")
    if not isinstance(patches, list) or not all(isinstance(p, str) for p in patches):
        return False
    try:
        return Path(rec["repo"]).resolve().parent == work.resolve()
    except (OSError, ValueError):
        return False


def check_undo(path: Path, data: dict[str, Any], pack_root: Path) -> None:
    """``<name>.undo.json`` as a finished rebase to ``<name>`` writes it."""
    advice = f"remove it by hand (rm {quote(str(path))}) and {git_put_back(pack_root)}"
    name = path.name.removesuffix(".undo.json")
    to = _want(path, data, "to", str, advice)
    if name_problem(to):
        raise DamagedStateError(path, f"key 'to' is {to!r}: {name_problem(to)}", advice)
    if to != name:
        raise DamagedStateError(path, f"key 'to' is {to!r}, not {name!r} (its file name)", advice)
    check_pack_paths(path, "backups", _want(path, data, "backups", dict, advice), pack_root, to, advice)
    written = _want(path, data, "written", dict, advice)
    check_pack_paths(path, "written", dict.fromkeys(written), pack_root, to, advice)
    for key, sha in written.items():
        if not is_sha256(sha):
            raise DamagedStateError(path, f"written[{key!r}] is {sha!r}, not a sha256", advice)
    _check_unwritten(path, data["backups"], written, pack_root, advice)


def _check_unwritten(path: Path, backups: dict[str, Any], written: dict[str, Any], pack_root: Path,
                     advice: str) -> None:
    """A backup of a file the record does not say the rebase wrote (``written``, whose files ``--undo`` holds
    against what the rebase wrote before it puts anything back) is only that of a variant file the rebase removed
    (its bytes from before; nothing there now) or of one it never wrote (null; nothing there): the profile and its
    lock it always writes, and one there now would be overwritten or removed by ``--undo`` unchecked. Else
    DamagedStateError naming the key (a written file without a backup: :func:`check_undo_takes_back`)."""
    for rel in sorted(set(backups) - set(written)):
        if rel.startswith("profiles/"):
            why = "the rebase writes the profile and its lock every time, so 'written' names them"
        elif os.path.lexists(pack_root / rel):
            why = (f"{rel} is there now, and --undo would {'remove' if backups[rel] is None else 'overwrite'} it "
                   f"without checking it is as the rebase left it (only the files in 'written' are checked)")
        else:
            continue
        raise DamagedStateError(path, f"backups[{rel!r}] names a file that 'written' does not: {why}", advice)


def check_undo_takes_back(path: Path, data: dict[str, Any], pack_root: Path) -> None:
    """Before ``--undo`` puts anything back (``data``: ``<name>.undo.json``, checked): every file the record says
    the rebase wrote must be one it takes back. A file it has no bytes from before for, or whose bytes from before
    are the very bytes the rebase wrote and no committed file's (git HEAD holds other bytes there, or none), would
    be left as the rebase wrote it while ``--undo`` says it is undone: the record no longer describes the pack (a
    second rebase to the name wrote it over, or it was edited). DamagedStateError naming those files, nothing
    written."""
    backups, left = data["backups"], []
    for rel, sha in sorted(data["written"].items()):
        if rel not in backups:
            left.append(rel)
        elif backups[rel] is not None:
            before = base64.b64decode(backups[rel])
            if hashlib.sha256(before).hexdigest() == sha and _at_head(pack_root, rel) != before:
                left.append(rel)
    if left:
        to = data["to"]
        raise DamagedStateError(path, f"it does not match the pack: --undo would leave {', '.join(left)} as the "
                                      f"rebase to {to} wrote them (the record holds no bytes from before the "
                                      f"rebase for them, or the rebase's own, which git HEAD does not hold: it was "
                                      f"written over, as by a second rebase to {to})",
                                f"{git_put_back(pack_root)}, then remove the record (rm "
                                f"{quote(str(path))}); if those files were in the pack as they are before the "
                                f"rebase, only remove the record")


def check_pack_paths(path: Path, key: str, entries: dict[str, Any], pack_root: Path, to: str, advice: str) -> None:
    """Every key of ``entries`` a pack file a rebase to ``to`` writes, reached through no symbolic link (one there
    is the pack's, put there since: BadInputError naming it, exit 2); every value None (no file before) or its
    bytes in base64. Else DamagedStateError naming the key."""
    for rel, data in entries.items():
        problem = path_problem(rel) or _not_written_by_rebase(rel, to)
        if problem is None:
            try:
                link = link_on_the_way(pack_root, rel)
            except OSError as exc:  # a name too long, say: no pack file of this rebase
                link, problem = None, f"cannot be looked at: {exc.strerror}"
            if link:
                at = pack_root / link
                raise BadInputError(f"{at} is a symbolic link (to {link_to(at)}) where the rebase to {to} puts "
                                    f"{rel} (named in {path}): the rebase never reads or writes a pack file through "
                                    f"a link; remove the link (rm {quote(str(at))}: never what it points at), put "
                                    f"back there what it stands for if you need it, and run it again; nothing was "
                                    f"written")
        if problem is None and data is not None:
            try:
                base64.b64decode(data, validate=True) if isinstance(data, str) else None
            except (binascii.Error, ValueError):
                problem = "its bytes are not base64"
            problem = problem or (None if isinstance(data, str) else f"its bytes are {type(data).__name__}")
        if problem:
            raise DamagedStateError(path, f"{key}[{rel!r}]: {problem}", advice)


def _not_written_by_rebase(rel: str, to: str) -> str | None:
    parts = rel.split("/")
    if parts in (["profiles", f"{to}.toml"], ["profiles", f"{to}.lock"]):
        return None
    if len(parts) == 4 and parts[0] == "fixes" and ID_RE.fullmatch(parts[1]) and parts[2] == to:
        return None
    return f"not a file a rebase to {to} writes (profiles/{to}.toml or .lock, fixes/<fix>/{to}/<file>)"
