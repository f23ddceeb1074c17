"""The words of a run's outcome, as enums: a fix's state, what a run did to it, a target's status.

Their values are the JSON and README words; messages are rendered from them and never parsed.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """An enum whose members print as their word (``f"{State.APPLIED}"`` is ``applied``), whatever the
    Python (3.10's and 3.12's enums format a str mixin differently)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class State(Word):
    """A fix on a tree."""

    APPLIED = "applied"          # the manifest says so and the post-images are there
    ABSENT = "absent"            # not in; applies exactly at its lines on the pinned pre-image
    UPSTREAMED = "upstreamed"    # the post-images are there without our manifest
    DRIFTED = "drifted"          # not in; applies only with an offset, or the file differs from the lock
    CONFLICT = "conflict"        # not in, and does not apply
    PARTIAL = "partial"          # some hunks in, others not
    TAMPERED = "tampered"        # the manifest says applied, but the files differ from it
    AMBIGUOUS = "ambiguous"      # its lines occur more than once, or both its sides are there: not placed
    SKIPPED = "skipped"          # status only: an opt-in the run does not select (apply would not look at it)


MISMATCH_STATES = frozenset({State.TAMPERED})
CONFLICT_STATES = frozenset({State.CONFLICT, State.PARTIAL, State.AMBIGUOUS})


class Action(Word):
    """What a run did (or, when nothing was written, would have done) to a fix."""

    APPLIED = "applied"
    WOULD_APPLY = "would-apply"
    REVERTED = "reverted"
    WOULD_REVERT = "would-revert"
    NONE = "none"

    def not_written(self) -> Action:
        return {Action.APPLIED: Action.WOULD_APPLY, Action.REVERTED: Action.WOULD_REVERT}.get(self, self)


class TargetStatus(Word):
    FOUND = "found"
    MISSING = "missing"        # not found where the run looked: an image mismatch
    SKIPPED = "skipped"        # left out on purpose (--target)
    MISMATCH = "mismatch"      # found, but not at the profile's pin
