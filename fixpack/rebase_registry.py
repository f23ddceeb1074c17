"""The rebases in progress, as the pack knows of them: one entry per new profile name,
``<pack>/.rebase/.<name>.started`` (a dot first: never a default work folder ``.rebase/<name>`` nor an undo record
``.rebase/<name>.undo.json``, which start with a letter or digit), naming the rebase's work folder. A rebase's start
writes it, with the default work folder and with ``--work`` alike (:func:`register`); ``--continue``'s finish and
``--abort`` remove it (:func:`unregister`), as does a start that fails before it keeps anything.

Before a rebase to ``<name>`` starts, :func:`refuse_started` refuses it (exit 2) while another rebase to that name
is in progress anywhere the pack knows of: in the default work folder ``<pack>/.rebase/<name>``, or in the
``--work`` folder its entry names. Two rebases to one name would both write ``profiles/<name>.toml``, its lock, the
``fixes/<fix>/<name>/`` variants, the report and ``.rebase/<name>.undo.json``: the second over the first.

An entry is untrusted input, as every file under ``.rebase`` is (rebase_state): it names a rebase in progress
only while the folder it names still holds that rebase's state, a ``state.json`` as a start writes it, of this
pack, to ``<name>`` (and, in a ``--work`` folder, the start's marker). Anything else (garbage, a symbolic link,
a folder gone or reused, another pack's or another name's state) is stale: ignored, and the next start to the
name writes over it. Nothing is read through an entry but that state and marker; nothing is written or removed
through it, ever. An entry that is a folder (which no start writes, and none can write over) is refused
(exit 3), naming it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from shlex import quote
from typing import Any

from .documents import MAX_STATE_BYTES, loads_json, read_capped
from .errors import BadInputError, DamagedStateError
from .nofollow import atomic_write
from .rebase_session import continue_flags, resume_command
from .rebase_state import STATE_SCHEMA, checked_name, default_work, is_marked, work_root
from .records import dumps
from .safepath import name_problem

SUFFIX = ".started"
MAX_ENTRY_BYTES = 64 << 10  # an entry is a path and a name: far less


def entry_path(pack_root: Path, name: str) -> Path:
    """``<pack>/.rebase/.<name>.started`` (``.rebase`` never a symbolic link: rebase_state.work_root)."""
    return work_root(pack_root) / f".{checked_name(name)}{SUFFIX}"


def refuse_started(pack_root: Path, name: str) -> None:
    """Refuse (BadInputError, nothing written) a new rebase to ``name`` while one is in progress in the pack's
    default work folder for it or in the ``--work`` folder its entry names, naming that rebase's ``--continue``
    and ``--abort`` as :func:`refuse_in_progress` prints them."""
    refuse_in_progress(default_work(pack_root, name).resolve(), name, pack_root)
    path = entry_path(pack_root, name)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = 0
    if stat.S_ISDIR(mode):
        raise DamagedStateError(path, "a folder, where a rebase's start writes a file naming its work folder",
                                f"remove it by hand (rm -r {quote(str(path))}) and start again")
    found = live_entry(pack_root, name)
    if found is not None:
        work, given = found
        refuse_in_progress(work, name, pack_root, work if given else None)


def live_entry(pack_root: Path, name: str) -> tuple[Path, bool] | None:
    """The work folder the entry of ``name`` names, and whether it was given with ``--work``, when a rebase to
    ``name`` of this pack is in progress there; None for no entry or a stale one (module docstring)."""
    data = _read_entry(entry_path(pack_root, name))
    if data is None or data.get("to") != name or not isinstance(data.get("work"), str) or \
            not isinstance(data.get("given"), bool):
        return None
    work, given = Path(data["work"]), data["given"]
    if not work.is_absolute():
        return None
    if not given:  # the default folder: refuse_started looks there whatever the entry says
        work = default_work(pack_root, name)
    state_file = work / "state.json"
    if state_file.is_symlink() or (given and not is_marked(work)):
        return None
    state = started_state(state_file)
    if state is None or state["to"] != name:
        return None
    try:
        same = Path(state["pack"]).resolve() == pack_root.resolve()
    except (OSError, ValueError):
        return None
    return (work.resolve(), given) if same else None


def live_entries(pack_root: Path) -> list[tuple[str, Path, bool]]:
    """Every rebase in progress an entry names (its name, work folder, and whether ``--work`` gave it)."""
    root = work_root(pack_root)
    names = sorted(p.name[1:-len(SUFFIX)] for p in root.glob(f".*{SUFFIX}")) if root.is_dir() else []
    out = []
    for name in (n for n in names if not name_problem(n)):
        found = live_entry(pack_root, name)
        if found is not None:
            out.append((name, *found))
    return out


def refuse_elsewhere(pack_root: Path, name: str, action: str) -> None:
    """Before ``--continue`` or ``--abort`` (``action``) without ``--work`` looks in the default work folder
    (``--name``'s, else any under ``<pack>/.rebase``): when it holds no rebase and the pack's entries name one
    started with ``--work`` (``name``'s, else the only one), refuse (BadInputError, nothing written) saying so,
    with the command that finds it there, runnable as printed; several are named for ``--work`` to pick one."""
    root = work_root(pack_root)
    if os.path.lexists(default_work(pack_root, name) / "state.json") if name else \
            root.is_dir() and any(root.glob("*/state.json")):
        return  # the default folder's: find_work takes it
    found = [(n, w) for n, w, given in live_entries(pack_root) if given and (not name or n == name)]
    if len(found) > 1:
        raise BadInputError(f"no rebase in progress under {root}; rebases started with --work are: "
                            f"{', '.join(f'{n} (--work {w})' for n, w in found)}: give one's --work")
    if found:
        (to, work), state = found[0], started_state(found[0][1] / "state.json") or {}
        flags = continue_flags(state) if action == "continue" else ()
        raise BadInputError(f"rebase {to} was started with --work {work}; run: "
                            f"`{resume_command(action, pack_root, to, work, *flags)}`")


def _read_entry(path: Path) -> dict[str, Any] | None:
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = loads_json(read_capped(path, MAX_ENTRY_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def register(pack_root: Path, name: str, work: Path, given: bool) -> bool:
    """The entry of a starting rebase to ``name`` in ``work`` (resolved), written over a stale one (the start
    refused a live one, :func:`refuse_started`). Returns whether ``<pack>/.rebase`` was made for it."""
    root = work_root(pack_root)
    made = not root.is_dir()
    atomic_write(entry_path(pack_root, name), dumps({"to": name, "work": str(work), "given": given}))
    return made


def unregister(pack_root: Path, name: str, work: Path | None = None, tidy: bool = True) -> None:
    """Remove the entry of ``name`` (a file or a symbolic link, never followed; a folder is left for
    :func:`refuse_started` to name), unless it names another rebase in progress than the one in ``work``; and
    ``<pack>/.rebase`` when ``tidy`` and nothing else is left there."""
    path = entry_path(pack_root, name)
    found = live_entry(pack_root, name) if work is not None else None
    if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()) and \
            (found is None or work is None or found[0] == work.resolve()):
        path.unlink()
    root = path.parent
    if tidy and root.is_dir() and not root.is_symlink() and not any(root.iterdir()):
        root.rmdir()


def refuse_in_progress(work: Path, name: str, pack_root: Path, given: Path | None = None) -> None:
    """Refuse a new rebase to ``name`` while one is in progress in ``work`` (``given``: the ``--work`` the run
    was given), naming the commands that finish or drop it, as this program runs them. In a ``--work`` folder
    only a rebase's own state counts: the start's marker there and a ``state.json`` as the start writes it
    (schema, pack, to); any other ``state.json`` is a file like any, which check_new_work refuses (the folder
    must be new or empty)."""
    path = work / "state.json"
    if not path.is_file():
        return
    state = started_state(path)
    if given is not None and (state is None or not is_marked(work)):
        return  # not a rebase's: check_new_work names the folder as one that holds files
    name = state["to"] if state is not None else name
    finish, drop = way_on(pack_root, name, given, state)
    raise BadInputError(f"a rebase to {name} is in progress ({path}): finish it with `{finish}` or drop it with "
                        f"`{drop}`")


def way_on(pack_root: Path, name: str, work: Path | None, state: dict[str, Any] | None) -> tuple[str, str]:
    """The ``--continue`` (with the flags its ``state`` asks for; None: unreadable, none) and the ``--abort`` of the
    rebase to ``name`` in ``work`` (None: the default work folder), runnable as printed."""
    flags: tuple[str, ...] = ()
    try:
        flags = continue_flags(state) if state is not None else ()
    except (AttributeError, TypeError, ValueError, OSError):  # a state whose other keys are off: --continue says
        pass
    return (resume_command("continue", pack_root, name, work, *flags),
            resume_command("abort", pack_root, name, work))


def started_state(path: Path) -> dict[str, Any] | None:
    """The ``state.json`` at ``path`` when it reads as one a rebase's start writes (an object of this schema,
    with the pack and the new profile's name), else None (unreadable, or another document)."""
    try:
        state = loads_json(read_capped(path, MAX_STATE_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(state, dict) and type(state.get("schema")) is int and state["schema"] == STATE_SCHEMA and \
            isinstance(state.get("pack"), str) and isinstance(state.get("to"), str) and not name_problem(state["to"]):
        return state
    return None
