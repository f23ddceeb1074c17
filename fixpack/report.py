"""Results as data. The CLI renders a :class:`Report` as a rich table, plain lines, or JSON.

The JSON document (``--json``) has these stable keys (schema 1):

- ``schema`` (int), ``tool_version``, ``command`` (apply | status | revert | lock), ``profile``,
  ``dry_run`` (bool), ``ok`` (bool), ``exit_code`` (int), ``error`` (str, "" when ok);
- ``targets``: list of {``name``, ``status`` (found | missing | skipped | mismatch), ``root``, ``how``,
  ``version``, ``commit``, ``pin`` {``version``, ``commit``}, ``evidence`` [str], ``message``};
- ``fixes``: list, in series order, of {``id``, ``version``, ``target``, ``opt_in``, ``selected``,
  ``state`` (applied | absent | upstreamed | drifted | conflict | partial | tampered | ambiguous |
  skipped), ``action`` (applied | would-apply | reverted | would-revert | none), ``offsets``
  [{``file``, ``hunk``, ``placement``, ``line``, ``offset``}], ``messages`` [str], ``refused``
  [{``file``, ``hunk``, ``placement`` (missing | ambiguous), ``line``, ``offset``, ``candidates`` [int],
  ``expected`` (int), ``searched`` [first, last], ``reason``, ``closest`` (null | {``line``,
  ``matching``, ``lines``, ``differs`` [{``line``, ``expected``, ``found``}]}), ``patch`` (the hunk's
  text)}]}.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from . import __version__

SCHEMA = 1


@dataclass
class TargetReport:
    name: str
    status: str
    root: str = ""
    how: str = ""
    version: str = ""
    commit: str = ""
    pin: dict[str, str] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class FixReport:
    id: str
    version: int
    target: str
    opt_in: bool
    selected: bool
    state: str
    action: str = "none"
    offsets: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Report:
    command: str
    profile: str
    dry_run: bool = False
    targets: list[TargetReport] = field(default_factory=list)
    fixes: list[FixReport] = field(default_factory=list)
    exit_code: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def fix(self, fix_id: str) -> FixReport:
        return next(f for f in self.fixes if f.id == fix_id)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "tool_version": __version__, "command": self.command, "profile": self.profile,
            "dry_run": self.dry_run, "ok": self.ok, "exit_code": self.exit_code, "error": self.error,
            "targets": [asdict(t) for t in self.targets], "fixes": [asdict(f) for f in self.fixes],
        }
