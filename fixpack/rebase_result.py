"""What a rebase says: the report's rows (:class:`FixOutcome`), its targets (:class:`TargetPair`) and the
whole result (:class:`RebaseResult`), with the words of each outcome and proof column. Data only: the session
(:mod:`fixpack.rebase_session`) fills them, :mod:`fixpack.render` and the CLI show them, ``rebase --json`` and
``reports/rebase-*.json`` are their ``as_dict()`` (schema: ``schemas/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import __version__
from .errors import EXIT_CONFLICT
from .model import TargetSpec
from .structs import dataclass, field
from .targets import FoundTarget, normalize_commit

REPORT_SCHEMA = 1


# outcomes in the report, and what each means
OUTCOMES = {
    "exact": "applies with the engine's applier (at its lines or at an offset); patch regenerated if it moved",
    "merged": "applies only after a 3-way merge through git; patch regenerated from the merge",
    "resolved": "conflicted; resolved by hand in the work repository; patch regenerated from it",
    "conflict": "3-way merge conflicts; left as a git conflict in the work repository",
    "blocked": "not tried: it touches the files of, or requires, a fix that conflicts",
    "upstreamed": "the new release already holds the change: proposed for dropping",
    "dropped": "resolved by hand to no change: left out of the new profile (commented)",
    "not-rebased": "its target was not rebased in this run: carried unchanged",
    "broken": "its text carried, but its proof fails on the new release with the fix: left for the maintainer",
}
# the proof column: what the fix's tests said on a stand-in image of the new release (--python)
PROOFS = {
    "proven": "fails on the clean release, passes with the chain carried up to it",
    "not proven": "no stand-in image was given (--python): nothing shows the carried change still works",
    "passes without the fix": "the proof passes on the clean release: upstream removed the symptom",
    "fails with the fix": "the proof fails on the release with the fix: the carried change is broken",
    "does not run": "the proof does not run on the clean release (an error, not a failure): adapt it",
    "-": "not carried (conflict, blocked, not rebased, dropped)",
}


@dataclass
class TargetPair:
    """One target of the profile: its old and new release copies, or why it is not rebased."""

    spec: TargetSpec
    old: FoundTarget | None = None
    new: FoundTarget | None = None
    note: str = ""

    @property
    def rebased(self) -> bool:
        return self.new is not None

    def as_dict(self) -> dict[str, Any]:
        def side(ft: FoundTarget | None) -> dict[str, str] | None:
            return None if ft is None else {"root": str(ft.root), "version": ft.version,
                                            "commit": normalize_commit(ft.commit)}
        return {"name": self.spec.name, "rebased": self.rebased, "old": side(self.old), "new": side(self.new),
                "note": self.note}


# the start of the evidence of a fix whose change a clean 3-way merge put on one of several matching copies:
# branch rebased is left at upstream for the maintainer to place it (fixpack.rebase._ambiguous)
ONE_COPY = "git's 3-way merge put the change on one copy"


@dataclass
class FixOutcome:
    """One row of the report."""

    id: str
    target: str
    opt_in: bool
    outcome: str
    old_version: int
    new_version: int
    patch: str = "-"  # unchanged | moved (line numbers / context only) | changed (the change itself) | -
    evidence: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    repo: str = ""
    interdiff: str = ""
    variant: str = ""
    keep: bool = True  # listed in the new profile (False: commented out, with the reason)
    proof: str = "-"  # a key of PROOFS
    new_patches: dict[str, bytes] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "target": self.target, "opt_in": self.opt_in, "outcome": self.outcome,
                "old_version": self.old_version, "new_version": self.new_version, "patch": self.patch,
                "evidence": self.evidence, "flags": self.flags, "renames": self.renames, "repo": self.repo,
                "variant": self.variant, "in_new_profile": self.keep, "interdiff": self.interdiff,
                "proof": self.proof}


@dataclass
class RebaseResult:
    from_profile: str
    to_profile: str
    status: str  # done | conflicts
    targets: list[TargetPair]
    fixes: list[FixOutcome]
    work: Path
    written: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    # the old profile's components, carried into the new one as they are (id, version, target, path)
    components: list[dict[str, str]] = field(default_factory=list)
    report_md: Path | None = None
    report_json: Path | None = None
    markdown: str = ""
    # what ``rebase --continue`` needs besides the pack and name (rebase_session.continue_flags)
    continue_flags: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "done" else EXIT_CONFLICT

    def as_dict(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "tool_version": __version__, "command": "rebase",
                "from_profile": self.from_profile, "to_profile": self.to_profile, "status": self.status,
                "exit_code": self.exit_code, "work": str(self.work), "targets": [t.as_dict() for t in self.targets],
                "fixes": [f.as_dict() for f in self.fixes], "components": self.components,
                "written": self.written, "next_steps": self.next_steps,
                "outcomes": OUTCOMES, "proofs": PROOFS}
