"""One target's series while a rebase carries it (:mod:`fixpack.rebase`): the old and the new release trees
with the fixes carried so far, what is stuck behind a conflict (a later fix that requires a conflicting one,
or touches a file one holds, is blocked, not carried on a guess), and each fix's steps on the old release.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from .errors import BadInputError
from .evaluate import TRUSTED, run_pass
from .gitwork import Snap, snap
from .model import Fix
from .progname import command
from .rebase_result import TargetPair
from .renames import new_files
from .structs import dataclass, field, replace
from .tree import Tree


@dataclass
class Chain:
    """The running state of one target's series: both trees and what is stuck behind a conflict."""

    pair: TargetPair
    old_tree: Tree
    new_tree: Tree
    known: Container[str]  # the pack's fixes: a patch whose Fix-Id trailer names another is never written again
    stuck_ids: dict[str, str] = field(default_factory=dict)    # fix id -> the conflicting fix it waits for
    stuck_paths: dict[str, str] = field(default_factory=dict)  # path -> the conflicting fix holding it
    listed_new: list[str] | None = None  # the files new in this release, listed on first need

    def blocker(self, fix: Fix) -> str:
        """The stuck fix that ``fix`` waits for: one it requires, else one holding a file it touches; "" when
        none (the fix is carried)."""
        for req in fix.requires:
            if req in self.stuck_ids:
                return req
        for p in fix.touched_paths():
            if p in self.stuck_paths:
                return self.stuck_paths[p]
        return ""

    def stick(self, fix: Fix, paths: Sequence[str], root_cause: str) -> None:
        """``fix`` is not carried: it and ``paths`` (relative to the target's root) wait for ``root_cause``."""
        self.stuck_ids[fix.id] = root_cause
        for p in paths:
            self.stuck_paths.setdefault(p, fix.id)

    def new_only(self) -> list[str]:
        """The files new in this release (rename candidates), listed once per target."""
        if self.listed_new is None:
            assert self.pair.old is not None and self.pair.new is not None
            self.listed_new = new_files(self.pair.old.root, self.pair.new.root, self.pair.spec.package)
        return self.listed_new


def old_steps(fix: Fix, tree: Tree, old_name: str) -> list[Snap]:
    """The touched files on the old release (``tree``, with the earlier fixes; ``fix`` is laid on it): before,
    and after each patch. Raises BadInputError when a patch does not apply there (profile ``old_name`` does
    not match its own release)."""
    paths = fix.touched_paths()
    steps = [snap(tree, paths)]
    for pf in fix.patches:
        p = run_pass(replace(fix, patches=(pf,)), tree, reverse=False, evidence=TRUSTED)
        if not p.ok:
            raise BadInputError(f"fix {fix.id}: {pf.path} does not apply to the old release copy {tree.root} "
                                f"({'; '.join(p.explain())}); profile {old_name} does not match its own release "
                                f"(check it with `{command('lock', '--check', '--profile', old_name)}`)")
        tree.adopt(p.tree)
        steps.append(snap(tree, paths))
    return steps


__all__ = ["Chain", "old_steps"]
