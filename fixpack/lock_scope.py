"""A lock of some of a profile's targets (``lock --target X`` on a profile of several): the named targets'
entries are made on their release copies, the other targets' are kept from the lock on disk as they are,
when it is readable and matches the pack for them (else nothing is written, and the command that locks
those targets too is named); ``lock --check --target X`` compares the named targets' entries alone.

A target's entries: its pin (``targets``), the fixes on it and the components installed into it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .errors import BadInputError, FixpackError
from .lock_hints import Redo, lock_targets, regenerate_hint, relock_command
from .lock_where import stale_at
from .lockfile import read_lock, stale_entries
from .model import Pack, Profile
from .records import Lock


def others(profile: Profile, pack: Pack | None, only: tuple[str, ...]) -> tuple[str, ...]:
    """The targets the profile's lock covers that ``only`` (a run's ``--target`` names) leaves out; none
    without ``--target``."""
    return tuple(t for t in lock_targets(profile, pack) if t not in only) if only else ()


def entry_target(pack: Pack, profile: Profile, lock: Lock, key: tuple[str, str]) -> str:
    """The target of a stale entry (``key`` as :func:`fixpack.lockfile.stale_entries` gives it): a fix's (the
    pack's, else the lock's entry's), a component's (the profile's), a pin's; "" when none can be told."""
    kind, name = key
    if kind in ("fix", "order"):
        held = lock.fix(name)
        return pack.fixes[name].target if name in pack.fixes else held.target if held is not None else ""
    if kind == "component":
        return next((c.target for c in profile.components if c.id == name), "")
    return name.rsplit(".", 1)[0]


def named(pack: Pack, profile: Profile, lock: Lock, only: tuple[str, ...]) -> Callable[[tuple[str, str]], bool]:
    """Whether a stale entry of ``lock`` is of the targets ``only`` (all are, without ``--target``)."""
    return lambda key: not only or entry_target(pack, profile, lock, key) in only


def scoped(profile: Profile, only: tuple[str, ...], lock: Lock, fresh: Lock | None = None) -> Lock:
    """``lock``'s entries of the targets ``only`` (the whole lock without ``--target``): what ``lock --check
    --target`` compares with ``fresh``, a lock made now on those targets' copies. A fix's entry is theirs when it
    names one of them, or when ``fresh`` has the fix (its fix.toml names one): an entry whose target was edited by
    hand is compared, and said so (:func:`fixpack.lock_bump.stale_said`), not missing from the lock."""
    if not only:
        return lock
    comp_target = {c.id: c.target for c in profile.components}
    ours = {f.id for f in fresh.fixes} if fresh is not None else set()
    return Lock(lock.profile, {k: v for k, v in lock.targets.items() if k in only},
                tuple(f for f in lock.fixes if f.target in only or f.id in ours), lock.generated_by,
                tuple(c for c in lock.components if comp_target.get(c.id) in only))


def _kept(pack: Pack, profile: Profile, rest: tuple[str, ...]) -> tuple[Lock | None, str]:
    """The lock on disk, when it can keep the entries of the targets ``rest`` (it is readable and matches the
    pack for them), else None and why not."""
    try:
        have = read_lock(profile)
    except FixpackError as exc:  # its own words, less its regenerate hint (the caller names the command)
        said = str(exc)
        cut = said.find("regenerate it from")
        return None, (said[:cut].rstrip("; ").removesuffix(", then").rstrip("; ") if cut > 0 else said)
    stale = []
    for key, what in stale_entries(pack, profile, have):
        if entry_target(pack, profile, have, key) in rest:
            path, line = stale_at(profile, have, key)
            stale.append(f"{what} (at {path}:{line})" if line else f"{what} (at {path})")
    if stale:
        return None, f"{profile.lock_path} is stale for them: {'; '.join(sorted(stale))}"
    return have, ""


def relock(profile: Profile, only: tuple[str, ...], roots: dict[str, Path] | None = None,
           copies: Path | None = None, pack: Pack | None = None) -> str:
    """The ``fixpack lock`` command for a run of the targets ``only``: those alone when the lock on disk can keep
    the others' entries (it is readable and matches the pack for them), else every target the lock covers
    (:func:`fixpack.lock_hints.relock_command`). Rendered only when a lock error is raised."""
    if only:
        if pack is None:
            from .loader import load_pack  # only when a lock command is rendered

            try:
                pack = load_pack(profile.path.parent.parent, profile=profile.name).for_profile(profile.name)
            except FixpackError:
                pack = None
        rest = others(profile, pack, only)
        if pack is not None and (not rest or _kept(pack, profile, rest)[0] is not None):
            return relock_command(profile, only, roots, copies, pack, expand=False)
    return relock_command(profile, only, roots, copies, pack)


def keep_others(pack: Pack, profile: Profile, new: Lock, only: tuple[str, ...], redo: Redo) -> Lock:
    """``new`` (a lock made on the copies of the targets ``only``) with the other targets' entries of the lock on
    disk, as they are. Raises BadInputError (exit 2, nothing written) when that lock cannot be read or does not
    match the pack for them, naming those targets and ``redo`` (the command that locks every target)."""
    rest = others(profile, pack, only)
    if not rest:
        return new
    have, why = _kept(pack, profile, rest)
    if have is None:
        these = f"target{'s' if len(rest) > 1 else ''} {', '.join(rest)}"
        raise BadInputError(f"nothing was written: a lock of target{'s' if len(only) > 1 else ''} {', '.join(only)} "
                            f"keeps the entries of the profile's other {these} from its lock as they are, and cannot: "
                            f"{why}; lock {these} too: {regenerate_hint(profile, redo)}")
    comp_target = {c.id: c.target for c in profile.components}
    fixes = []
    for fix in pack.ordered(profile.default + profile.opt_in):
        entry = new.fix(fix.id) if fix.target in only else have.fix(fix.id)
        if entry is not None:
            fixes.append(entry)
    comps = []
    for comp in profile.components:
        held = new.component(comp.id) if comp_target[comp.id] in only else have.component(comp.id)
        if held is not None:
            comps.append(held)
    targets = {k: v for k, v in have.targets.items() if k in rest} | dict(new.targets)
    return Lock(new.profile, dict(sorted(targets.items())), tuple(fixes), new.generated_by, tuple(comps))
