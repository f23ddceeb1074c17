"""The release copies a rebase works on, for each target of the old profile: the new one (``--root``, else fetched
at ``--to``) and the old one, the 3-way base (``--old-root``, else fetched at the old profile's pin); and
:func:`version_le`, which compares a fix's ``fixed_in`` with the new release's version."""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from .errors import BadInputError
from .model import Pack, Profile, TargetSpec
from .rebase_result import TargetPair
from .rebase_session import RebaseRequest
from .release import fetch, refuse_changed_copy
from .state import read_manifest
from .targets import FoundTarget, check_pin, read_facts, resolve_root


def target_pairs(req: RebaseRequest, pack: Pack, old: Profile) -> dict[str, TargetPair]:
    names = [t.name for t in old.targets]
    for what, given in (("--root", req.roots), ("--old-root", req.old_roots), ("--target", req.only_targets)):
        for n in given:
            if n not in names:
                raise BadInputError(f"{what} names unknown target {n!r} (profile {old.name} has {', '.join(names)})")
    wanted = wanted_targets(req, pack, old)
    if not wanted:
        raise BadInputError(f"nothing to rebase: profile {old.name} lists no fixes and no --root was given")
    pairs = {}
    for spec in old.targets:
        if spec.name not in wanted:
            why = "not named by --target" if req.only_targets else "it has no fixes and no --root was given"
            pairs[spec.name] = TargetPair(spec, note=f"not rebased ({why}): pin kept from profile {old.name}")
            continue
        pair = pairs[spec.name] = TargetPair(spec, _old_copy(spec, req), _new_copy(spec, req))
        for ft, what in ((pair.old, "--old-root"), (pair.new, "--root")):  # (a copy changed by hand, still marked)
            if ft is not None and ft.how == what:
                refuse_changed_copy(ft, old.name, req.pack_root, f"rebase {old.name} with {what} of target",
                                    "its 3-way merges, proofs and lock are made", ft.version,
                                    f"give {what} a clean copy", req.cache)
    return pairs


def refuse_changed_since_start(pairs: dict[str, TargetPair], old: str, new: str, pack_root: Path, abort: str,
                               cache: Path | None = None) -> None:
    """``--continue``: a release copy of ``pairs`` changed since the rebase started (an edit by hand; its lock would
    record it as the release) is MismatchError before anything runs, with the fetch of a clean copy (profile ``old``'s
    target at the copy's version) and ``abort``, the command that drops the rebase. Found at the end, it was refused
    only once the conflicts were resolved, naming a fetch of the new profile, which is not written yet."""
    for ft in (ft for p in pairs.values() for ft in (p.old, p.new) if ft is not None):
        refuse_changed_copy(ft, old, pack_root, f"continue the rebase to {new} on target", "its proofs and lock are "
                            "made", ft.version, f"put {ft.root} back as fetch unpacked it (the fetch below unpacks "
                            f"the cache's copy again where it changed; copy that over a copy of your own), then "
                            f"continue; or drop the rebase with `{abort}`. A clean copy", cache)


def wanted_targets(req: RebaseRequest, pack: Pack, old: Profile) -> tuple[str, ...]:
    """The targets of profile ``old`` that the rebase carries: ``--target``'s, else those with fixes or a ``--root``."""
    with_fixes = {pack.fixes[f].target for f in old.default + old.opt_in}
    return req.only_targets or tuple(t.name for t in old.targets if t.name in with_fixes or t.name in req.roots)


def _new_copy(spec: TargetSpec, req: RebaseRequest) -> FoundTarget:
    if spec.name in req.roots:
        root = resolve_root(spec, req.roots[spec.name])
        ft = FoundTarget(spec, root, *read_facts(spec, root), "--root")
        if req.to_version and spec.source.pypi and ft.version != req.to_version:
            raise BadInputError(f"--root {spec.name}={root} holds version {ft.version or '(unknown)'}, not "
                                f"--to {req.to_version}")
    elif req.to_version and spec.source.pypi:
        ft = fetch(spec, req.cache, version=req.to_version, check=False)
    else:
        raise BadInputError(f"no new release copy of target {spec.name}: give --root {spec.name}=PATH"
                            + (" or --to VERSION" if spec.source.pypi else ""))
    if read_manifest(ft.root, spec.name) is not None:
        raise BadInputError(f"{ft.root} holds a fixpack manifest (fixes are applied there): rebase onto a clean "
                            f"release copy")
    if not ft.version or not ft.commit:
        raise BadInputError(f"{ft.root}: cannot read the version and commit of {spec.name} (evidence: "
                            f"{'; '.join(ft.evidence) or 'none'}); the new profile needs both for its pin")
    return ft


def _old_copy(spec: TargetSpec, req: RebaseRequest) -> FoundTarget:
    if spec.name in req.old_roots:
        root = resolve_root(spec, req.old_roots[spec.name])
        ft = FoundTarget(spec, root, *read_facts(spec, root), "--old-root")
        check_pin(ft)
        return ft
    return fetch(spec, req.cache)


def primary_version(pairs: dict[str, TargetPair]) -> str:
    for p in pairs.values():
        if p.new is not None:
            return p.new.version
    raise BadInputError("no target is rebased")  # pragma: no cover - _pairs refuses this first


def version_le(a: str, b: str) -> bool:
    """``a <= b`` for release versions (PEP 440, through ``packaging``); a version that does not parse
    is bad input in fix.toml's ``fixed_in``."""
    try:
        return Version(a.lstrip("v")) <= Version(b.lstrip("v"))
    except InvalidVersion as exc:
        raise BadInputError(f"version {a!r} or {b!r} is not a release version (PEP 440): {exc}; fix "
                            f"fixed_in in fix.toml") from exc
