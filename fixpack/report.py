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

from typing import Any

from . import __version__
from .errors import EXIT_CONFLICT, EXIT_MISMATCH, EXIT_OK
from .states import CONFLICT_STATES, MISMATCH_STATES, Action, State, TargetStatus
from .structs import dataclass, field

SCHEMA = 1
ROLLED_BACK = "rolled back an interrupted run"  # the start of a target's note after a rollback
LEFTOVERS_REMOVED = "removed the backups a complete run left"  # ... in its state folder (no journal names them)


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

    def nothing_written(self) -> str:
        """What a refused run says it wrote: nothing, or nothing else once it has rolled an interrupted run's
        journal back (that rollback is written before the run plans); nothing in the target where it wrote
        ``elsewhere``."""
        if any(n.startswith(ROLLED_BACK) for t in self.targets for n in t.notes):
            said = "nothing else was written (an interrupted run's journal was rolled back first)"
        elif any(n.startswith(LEFTOVERS_REMOVED) for t in self.targets for n in t.notes):
            said = "nothing else was written (a complete run's backups were removed first)"
        else:
            said = "nothing was written"
        return f"{said} in the target ({self.elsewhere})" if self.elsewhere else said

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
