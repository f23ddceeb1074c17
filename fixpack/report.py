"""Results as data. The CLI renders a :class:`Report` as a rich table, plain lines, or JSON.

The JSON document (``--json``) has these stable keys (schema 1):

- ``schema`` (int), ``tool_version``, ``command`` (apply | status | revert | lock), ``profile``,
  ``dry_run`` (bool), ``ok`` (bool), ``exit_code`` (int), ``error`` (str, "" when ok);
- ``targets``: list of {``name``, ``status`` (found | missing | skipped | mismatch), ``root``, ``how``,
  ``version``, ``commit``, ``pin`` {``version``, ``commit``}, ``evidence`` [str], ``message``};
- ``fixes``: list, in series order (then the profile's components, ``kind`` "component", with their
  version as a string), of {``kind`` (fix | component), ``id``, ``version``, ``target``, ``opt_in``, ``selected``,
  ``state`` (applied | absent | upstreamed | drifted | conflict | partial | tampered | ambiguous |
  skipped), ``action`` (applied | would-apply | reverted | would-revert | none), ``offsets``
  [{``file``, ``hunk``, ``placement``, ``line``, ``offset``}], ``messages`` [str], ``refused``
  [{``file``, ``hunk``, ``placement`` (missing | ambiguous), ``line``, ``offset``, ``candidates`` [int],
  ``expected`` (int), ``searched`` [first, last], ``reason``, ``closest`` (null | {``line``,
  ``matching``, ``lines``, ``differs`` [{``line``, ``expected``, ``found``}]}), ``patch`` (the hunk's
  text)}]}.

The exit code is the report's own (:attr:`Report.exit_code`), worked out from its targets and fixes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import __version__
from .errors import EXIT_CONFLICT, EXIT_MISMATCH, EXIT_OK, NOTHING_SAID, FixpackError
from .states import CONFLICT_STATES, MISMATCH_STATES, Action, State, TargetStatus
from .structs import dataclass, field

SCHEMA = 1
ROLLED_BACK = "rolled back an interrupted run"  # the start of a target's note after a rollback
LEFTOVERS_REMOVED = "removed the backups a run left"  # ... in its state folder (no journal names them)
FINISHED = "removed the journal of a run over several targets"  # ... that was complete (no file changed)


def rejects_held(folder: object | None) -> str:
    """A refused fix's next step: where its hunks are, ``folder`` the ``apply --reject`` folder (a .rej file that could
    not be written: :func:`fixpack.rejects.write_rejects` says so instead); without one, how to have them."""
    if folder is None:
        return "apply --reject DIR writes .rej files of the refused hunks to compare"
    return f"the .rej files under {folder} hold the refused hunks to compare"


def restored(n: int) -> str:
    """The words for ``n`` files a rollback changed, as a rollback's note says them."""
    return f"{n} file{'' if n == 1 else 's'} restored" if n else "no file needed restoring"


@dataclass
class TargetReport:
    name: str
    status: TargetStatus
    root: str = ""
    how: str = ""
    version: str = ""
    commit: str = ""
    pin: dict[str, str] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def note(self, message: str, first: bool = False) -> None:
        """Add ``message`` once (apply evaluates a target twice: before and under its lock); "" adds nothing."""
        if message and message not in self.notes:
            self.notes.insert(0, message) if first else self.notes.append(message)

    @property
    def message(self) -> str:
        return "; ".join(self.notes)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "root": self.root, "how": self.how,
                "version": self.version, "commit": self.commit, "pin": dict(self.pin),
                "evidence": list(self.evidence), "message": self.message}


@dataclass
class FixReport:
    """A fix's (or, with ``kind`` "component", an installed component's) outcome."""

    id: str
    version: int | str
    target: str
    opt_in: bool
    selected: bool
    state: State
    action: Action = Action.NONE
    offsets: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "fix"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "version": self.version, "target": self.target, "opt_in": self.opt_in,
                "selected": self.selected, "state": self.state.value, "action": self.action.value,
                "offsets": list(self.offsets), "messages": list(self.messages), "refused": list(self.refused)}


@dataclass
class Report:
    """One command's results. ``strict``: a drifted fix counts as an image mismatch. ``failure``: the
    exit code of an error raised before the report was complete (the CLI's error documents)."""

    command: str
    profile: str
    dry_run: bool = False
    strict: bool = False
    targets: list[TargetReport] = field(default_factory=list)
    fixes: list[FixReport] = field(default_factory=list)
    error: str = ""
    failure: int | None = None
    elsewhere: str = ""  # what a refused run wrote outside the targets (apply --reject's .rej files), said with it
    rejects: list[str] | None = None  # apply --reject: the .rej files written (None: no --reject given)
    rolled_back: dict[str, int] = field(default_factory=dict)  # target root -> the files its rollback put back
    written: dict[str, str] = field(default_factory=dict)  # target name -> root, each target this run wrote, in order

    @property
    def exit_code(self) -> int:
        """3 for an image mismatch (a target missing or off its pin, a tampered fix, a drifted one under
        ``strict``), else 4 for a conflict (a fix that does not apply, partly or ambiguously), else 0."""
        if self.failure is not None:
            return self.failure
        if self.mismatches():
            return EXIT_MISMATCH
        if any(f.state in CONFLICT_STATES for f in self.fixes):
            return EXIT_CONFLICT
        return EXIT_OK

    def mismatches(self) -> list[str]:
        bad_t = [f"{t.name}: {t.status.value}" for t in self.targets
                 if t.status in (TargetStatus.MISSING, TargetStatus.MISMATCH)]
        bad_f = [f"{f.id}: {f.state.value}" for f in self.fixes
                 if f.state in MISMATCH_STATES or (self.strict and f.state is State.DRIFTED)]
        return bad_t + bad_f

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def fix(self, fix_id: str) -> FixReport:
        return next(f for f in self.fixes if f.id == fix_id)

    def target(self, name: str) -> TargetReport:
        return next(t for t in self.targets if t.name == name)

    def recovered(self, name: str, root: str, n: int | None) -> None:
        """Note on target ``name`` (at ``root``) that this run rolled an interrupted run's journal back, ``n`` files
        changed (put back or removed: :func:`fixpack.rollback.recover`), or, ``n`` None, that it removed the backups
        a run left that no journal names (that run was complete, or killed before it wrote its journal)."""
        if n is None:
            self.target(name).note(f"{LEFTOVERS_REMOVED} in {root}/.fixpack/journal (no journal names them: that run "
                                   f"was complete, or killed before it wrote its journal)")
            return
        self.rolled_back[root] = n
        self.target(name).note(f"{ROLLED_BACK} ({restored(n)})")

    def finished(self, name: str, root: str) -> None:
        """Note on target ``name`` (at ``root``) that this run removed the journal of a run over several targets that
        was complete (killed after its commit, :func:`fixpack.rollback.settle`): no file changed."""
        self.target(name).note(f"{FINISHED} whose writes were complete (it was killed, or could not remove it), in "
                               f"{root}/.fixpack (no file changed: the target holds that run's result)")

    def wrote(self, name: str, root: str) -> None:
        """Target ``name`` (at ``root``) was written by this run, its transaction complete."""
        self.written[name] = root

    def written_first(self) -> str:
        """What this run wrote before a refusal or a failed write, "" when nothing: the rollback of an interrupted run
        (the files it put back, as its note counts them), or backups no journal names removed; and the targets whose
        writes were complete (:meth:`wrote`)."""
        said = []
        if self.rolled_back:
            where = " and ".join(f"in {root} ({restored(n)})" for root, n in self.rolled_back.items())
            said.append(f"an interrupted run was rolled back first {where}")
        elif any(n.startswith(LEFTOVERS_REMOVED) for t in self.targets for n in t.notes):
            said.append("backups a run left (no journal names them) were removed first")
        if any(n.startswith(FINISHED) for t in self.targets for n in t.notes):
            said.append("the journals of a complete run over several targets were removed first (no file changed)")
        if self.written:
            one = len(self.written) == 1
            said.append(f"target{'' if one else 's'} {', '.join(f'{n} ({r})' for n, r in self.written.items())} "
                        f"{'was' if one else 'were'} written and recorded")
        return "; ".join(said)

    def nothing_written(self) -> str:
        """What a refused run says it wrote: nothing, or nothing else once it has rolled an interrupted run's
        journal back (that rollback is written before the run plans; :meth:`written_first`); nothing in the target
        where it wrote ``elsewhere``."""
        first = self.written_first()
        said = f"{first}, and nothing else was written" if first else "nothing was written"
        return f"{said} in the target ({self.elsewhere})" if self.elsewhere else said

    @contextmanager
    def said_truly(self) -> Iterator[None]:
        """Around a writing run, from its rollback of an interrupted run on: an error raised after that rollback
        (the checks before the write: a file at a temp path, a read-only target, no space; a journal that cannot be
        prepared; damaged state or an unreadable file on a later target) says what the rollback wrote. Its claim
        that nothing was written (or changed) becomes :meth:`nothing_written`'s words; one that claims nothing gets
        them added. The error keeps its class (its exit code) and its fields."""
        try:
            yield
        except FixpackError as exc:
            first = self.written_first()
            if first and exc.args and isinstance(exc.args[0], str) and first not in exc.args[0]:
                said, n = NOTHING_SAID.subn(f"{first}, and nothing else was written", exc.args[0], count=1)
                exc.args = (said if n else f"{said} ({first})", *exc.args[1:])
            raise

    def close(self) -> Report:
        """Say what kept the run from its state, and turn what it did into what it would have done
        (a failed run writes nothing)."""
        if self.exit_code != EXIT_OK and self.failure is None:
            conflicts = [f"{f.id}: {f.state.value}" for f in self.fixes if f.state in CONFLICT_STATES]
            self.error = f"{self.nothing_written()}; " + "; ".join(self.mismatches() + conflicts)
            for f in self.fixes:
                f.action = f.action.not_written()
        return self

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "tool_version": __version__, "command": self.command, "profile": self.profile,
            "dry_run": self.dry_run, "ok": self.ok, "exit_code": self.exit_code, "error": self.error,
            "targets": [t.as_dict() for t in self.targets], "fixes": [f.as_dict() for f in self.fixes],
        } | ({} if self.rejects is None else {"rejects": list(self.rejects)})
