"""A run over several targets (roots) as its journals record it (:class:`Group`), and what it was: complete (its
first target's journal says ``committed``), not, or not to be told from what is on disk (:func:`first_said`).

The order of a run's writes (:mod:`fixpack.writeall`) decides what a journal of a later target means. The first
target's journal is written before any other's, and goes after all of them: once committed, only when no other
target holds the run's (the run's own end, or :func:`fixpack.rollback.settle`, which refuses while one does); not
committed, by a rollback (the run's own, the last target first, or a later run's over that first target alone). So
a later target's journal whose first target is there but holds no journal of the run is one of a run that was not
complete; one whose first target is not there (moved, removed), or holds a journal that does not read as one,
belongs to a run that may have been either: it is neither rolled back nor removed.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
from pathlib import Path
from typing import Any

from .documents import loads_json, read_state_file
from .errors import DamagedStateError, EnvironmentProblem, FixpackError
from .fsio import state_dir, temp_path
from .records import is_int
from .safepath import JOURNAL
from .structs import dataclass

BACKUPS = "journal"
_GROUP_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Group:
    """A run over several targets (roots), all or nothing: each target's journal names the run (``id``, 32 hex
    digits), the absolute roots in the order written (``roots``) and its own place among them (``index``). Every
    journal is kept until all the targets were written; then the first target's journal is rewritten with
    ``committed`` true (the run's one point of no return), and the journals go, the first one last. A journal of an
    uncommitted run is rolled back, whichever target it is on; one of a committed run is removed (the target holds
    that run's result); one whose run cannot be told either way is refused (:func:`first_said`)."""

    id: str
    roots: tuple[str, ...]
    index: int
    committed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "roots": list(self.roots), "index": self.index, "committed": self.committed}


def parse_group(jpath: Path, value: Any) -> Group:
    """The journal's ``group`` (:class:`Group`), checked: only its first target's journal says ``committed``."""
    ok = isinstance(value, dict) and set(value) == {"id", "roots", "index", "committed"} and \
        isinstance(value["id"], str) and _GROUP_ID.fullmatch(value["id"]) is not None and \
        isinstance(value["roots"], list) and len(value["roots"]) >= 2 and \
        all(isinstance(r, str) and r.startswith("/") and "\0" not in r and os.path.normpath(r) == r
            for r in value["roots"]) and len(set(value["roots"])) == len(value["roots"]) and \
        is_int(value["index"]) and 0 <= value["index"] < len(value["roots"]) and \
        isinstance(value["committed"], bool) and not (value["committed"] and value["index"] != 0)
    if not ok:
        raise DamagedStateError(jpath, "'group' is not a run over several targets (an id of 32 hex digits, two or "
                                       "more absolute roots, this target's index, and 'committed' on the first only)")
    return Group(value["id"], tuple(value["roots"]), value["index"], value["committed"])


def is_root(named: str, root: Path) -> bool:
    """Whether the root a journal's group names as its own (``named``) is ``root``: the same path resolved, or the
    same folder under another path (a bind mount of it)."""
    try:
        return named == os.path.realpath(root) or os.path.samefile(named, root)
    except OSError:  # (not there: another folder)
        return False


def first_said(group: Group) -> bool | str:
    """What the first target's journal of ``group``'s run (at ``group.roots[0]``) says: True (complete), False (not:
    none of that run's there, the module's docstring), or why that cannot be told: that root is not there or not a
    folder, or the journal there does not read as one. Raises EnvironmentProblem (exit 5) for a root or journal
    this user may not read."""
    first = Path(group.roots[0])
    jpath = first / ".fixpack" / JOURNAL
    try:
        if not stat.S_ISDIR(os.stat(first).st_mode):
            return f"{first} is not a folder"
    except (FileNotFoundError, NotADirectoryError):
        return f"{first} is not there (moved or removed since that run)"
    except OSError as exc:
        raise _unreadable(group, first, exc) from exc
    try:
        raw = read_state_file(jpath)
    except NotADirectoryError:
        return f"{jpath.parent} is not a folder"
    except DamagedStateError as exc:
        return f"its journal {jpath} cannot be read ({exc.what})"
    except EnvironmentProblem as exc:
        raise _unreadable(group, jpath, exc.__cause__) from exc
    except OSError as exc:  # (its state folder this user may not search)
        raise _unreadable(group, jpath, exc) from exc
    return False if raw is None else _said_by(group, jpath, raw)


def _said_by(group: Group, jpath: Path, raw: bytes) -> bool | str:
    """:func:`first_said` of the journal ``raw`` found at the first target's root."""
    try:
        data = loads_json(raw)
        if isinstance(data, dict) and isinstance(data.get("entries"), list) and "group" not in data:
            return False  # a later run's over that target alone: this run's went before it (rolled back)
        there = parse_group(jpath, data["group"])
    except (DamagedStateError, ValueError, TypeError, KeyError):
        return f"its journal {jpath} does not read as one"
    if there.id != group.id:
        return False  # a later run's: this one's went before it
    if there.roots != group.roots or there.index != 0:
        return f"its journal {jpath} names that run with other roots, or another place for that target"
    return there.committed


def group_done(group: Group) -> bool | None:
    """Whether the run over several targets that ``group`` names was complete: its first target's journal (this one,
    or the one at ``group.roots[0]``) says ``committed``; None where that cannot be told (:func:`first_said`)."""
    if group.index == 0:
        return group.committed
    said = first_said(group)
    return said if isinstance(said, bool) else None


def _unreadable(group: Group, path: Path, exc: BaseException | None) -> EnvironmentProblem:
    """Exit 5: the first target's root or journal this user may not read, so a later target's journal can be neither
    rolled back nor removed."""
    err = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EIO
    return EnvironmentProblem(
        f"{path}: cannot be read: {os.strerror(err)} ({errno.errorcode.get(err, '?')}). It is the first target of "
        f"the run over several targets ({', '.join(group.roots)}) whose journal is in "
        f"{Path(group.roots[group.index]) / '.fixpack' / JOURNAL}, and only the first target's journal says whether "
        f"that run was complete (its journals removed, the files kept) or not (rolled back). Nothing was written. Run "
        f"as a user who may read {Path(group.roots[0]) / '.fixpack' / JOURNAL} (or fix the permissions of it and of "
        f"the folders on its way), and run again")


def group_at(root: Path) -> Group | None:
    """The :class:`Group` of the journal in ``root`` (another target's: only read, never through a link as its last
    part, at most ``MAX_STATE_BYTES``), None when there is none, or none that reads as one (damaged: that target's
    own run says so). Raises EnvironmentProblem for a journal this user may not read."""
    path = root / ".fixpack" / JOURNAL
    try:
        raw = read_state_file(path)
        data = None if raw is None else loads_json(raw)
        group = parse_group(path, data["group"]) if isinstance(data, dict) and "group" in data else None
        return group if group is None or is_root(group.roots[group.index], root) else None
    except (DamagedStateError, ValueError, TypeError, FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # (a folder on the way this user may not search)
        raise EnvironmentProblem(f"{path}: cannot read ({exc.strerror}); run as a user who may read every target "
                                 f"of the run") from exc


def group_pending(group: Group) -> list[str]:
    """The roots of ``group`` (the first's aside) whose journal is still this run's."""
    return [r for r in group.roots[1:] if (g := group_at(Path(r))) is not None and g.id == group.id]


def said_group(raw: bytes) -> Group | None:
    """The run over several targets a journal that does not read (``raw``: never trusted) says it is one of: only
    to word what to do about it; None where it names none that reads as one."""
    try:
        data = loads_json(raw)
        return parse_group(Path(JOURNAL), data["group"]) if isinstance(data, dict) and "group" in data else None
    except (DamagedStateError, ValueError, TypeError, KeyError):
        return None


def removal(root: Path) -> str:
    """The command that removes the journal in ``root`` (a half-written one too), its backups and then the state
    folder if empty."""
    jpath = state_dir(root) / JOURNAL
    tmp = [temp_path(jpath)] if os.path.lexists(temp_path(jpath)) else []
    gone = " ".join(shlex.quote(str(p)) for p in (jpath, state_dir(root) / BACKUPS, *tmp))
    return f"rm -rf -- {gone} && rmdir --ignore-fail-on-non-empty {shlex.quote(str(state_dir(root)))}"


def group_steps(root: Path, raw: bytes, restore: str, files: str) -> str | None:
    """What to do about the journal ``raw`` in ``root`` that cannot be obeyed as it is, worded by the run over
    several targets it says it is one of: complete (that run's journals are all that is left), not known (the first
    target's journal tells, and it cannot be read), or None: no such run, or one that was not complete (the target
    may be half-written: the caller's words). ``restore``: the step that puts the target's files back to its clean
    release; ``files``: " (it names ...)" or ""."""
    group = said_group(raw)
    if group is None:
        return None
    try:
        said: bool | str = group.committed if group.index == 0 else first_said(group)
    except FixpackError as exc:
        said = str(exc).split(". ", 1)[0]
    if said is False:
        return None
    roots, first = ", ".join(group.roots), Path(group.roots[0]) / ".fixpack" / JOURNAL
    # (a first journal that is there but does not read: removed too where the run is known complete, else the next
    # run over every target meets it as an unfinished run's and advises putting that target back, half of the run)
    there = [removal(first.parent.parent)] if group.index and os.path.lexists(first) else []
    these = "this journal and the first target's" if there else "this journal"
    together = (f"put every tree of that run where the record says it was and run apply or revert over all its "
                f"targets together (a --root for each of {roots})")
    if said is True:
        try:
            others = [removal(Path(r)) for r in (group_pending(group) if group.index == 0 else [])]
        except FixpackError:
            others = [removal(Path(r)) for r in group.roots[1:]]
        return (f"its record says it is one of a run over several targets ({roots}) that was complete (committed: "
                f"{first} says so), so {root} holds that run's result{files} and only that run's journals are left, "
                f"to be removed, the files as they are. Either {together}: it removes them; or, trusting the record, "
                f"remove them by hand{', the other targets first' if others else ''}: "
                f"{' && '.join([*others, removal(root)])}; then run the command again. Not trusting the record (a "
                f"journal put there by hand): first {restore}, then remove the journal{'s' if others else ''} so")
    return (f"its record says it is target {group.index + 1} of a run over several targets ({roots}), and only the "
            f"first target's journal, {first}, says whether that run was complete ({root} then holds its result) or "
            f"not ({root} may then be half-written{files}); that cannot be told: {said}. So nothing was rolled back "
            f"or removed. Either {together}: it reads the first journal, and rolls that run back or removes its "
            f"journals as that says; or, if you know that run was complete (it ended, or was killed once its writes "
            f"were complete), remove {these}, the "
            f"files as they are: {' && '.join([removal(root), *there])}; or, if you know it was "
            f"not, {restore}, then remove the journal as just said; then run the command again")
