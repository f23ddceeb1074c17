"""A profile's components: the ``[components.<id>]`` tables of ``profiles/<name>.toml`` and which of
them a run selects.

```toml
[components.muse-spark-open]
path = "ports/muse-spark-open"     # a folder with a pyproject.toml, or a .whl (relative to the pack)
version = "0.1.0"                  # what it must build as
target = "vllm"                    # the target whose site-packages folder it is installed into
requires = ["prompt-order"]        # fixes (or components) that must be in the image with it
opt_in = true                      # true: installed only when named on the command line
summary = "one line"
```
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .documents import check_reachable
from .errors import Collector, UnknownNameError
from .model import Component, Pack, Profile
from .safepath import ID_RE

COMPONENT_KEYS = {"path", "version", "target", "requires", "opt_in", "summary"}


class _At:
    """The profile's path and the line of a component's key there (``line_of``: key, table -> line; the
    table's own line for none)."""

    def __init__(self, path: Path, line_of: Callable[[str, str], int | None]) -> None:
        self.path, self._line_of = path, line_of

    def line(self, cid: str, key: str = "") -> int | None:
        return (self._line_of(key, f"components.{cid}") if key else None) or self._line_of(cid, "components")


def load_components(pack: Pack, value: Any, targets: set[str], listed_fixes: set[str], path: Path,
                    errors: Collector, line_of: Callable[[str, str], int | None] = lambda key, table: None
                    ) -> tuple[Component, ...]:
    """The components a profile names, each checked (errors collected with the profile's path and the line
    of the key at fault: ``line_of(key, table)``)."""
    at = _At(path, line_of)
    if not isinstance(value, dict):
        errors.add("[components] must be a table of [components.<id>] tables", path, None)
        return ()
    out = []
    for cid, table in value.items():
        where = f"[components.{cid}]"
        if not ID_RE.fullmatch(cid) or cid in pack.fixes:
            errors.add(f"{where}: the id must be lower-case letters, digits, '.', '_', '-' and not a fix's id",
                       path, at.line(cid))
            continue
        if not isinstance(table, dict):
            errors.add(f"{where} must be a table", path, at.line(cid))
            continue
        unknown = sorted(set(table) - COMPONENT_KEYS)
        if unknown:
            errors.add(f"{where}: unknown key(s) {', '.join(unknown)}", path, at.line(cid, unknown[0]),
                       f"allowed: {', '.join(sorted(COMPONENT_KEYS))}")
        comp = _component(pack, cid, table, targets, at, errors)
        if comp is not None:
            out.append(comp)
    _check_requires(out, listed_fixes, set(value), at, errors)
    return tuple(out)


def _check_requires(comps: list[Component], listed_fixes: set[str], named: set[str], at: _At,
                    errors: Collector) -> None:
    """Each requirement is a fix or a component the profile lists (``named``: every table it has, a broken
    one too: its own problem is reported), and no component needs itself through others (a cycle)."""
    needs = {c.id: c.requires for c in comps}
    for comp in comps:
        for req in comp.requires:
            if req not in listed_fixes and req not in named:
                errors.add(f"[components.{comp.id}] requires {req!r}, which the profile lists neither as a fix nor "
                           f"as a component", at.path, at.line(comp.id, "requires"), f"add {req!r} to the profile "
                                                                                    f"or drop it")
            elif (cycle := _cycle(comp.id, req, needs)) is not None:
                errors.add(f"[components.{comp.id}] requires {req!r}, and {' -> '.join(cycle)}: a cycle", at.path,
                           at.line(comp.id, "requires"), "a component cannot need one that needs it; drop one of "
                                                         "these requirements")


def _cycle(cid: str, req: str, needs: dict[str, tuple[str, ...]]) -> list[str] | None:
    """The chain req -> ... -> cid through components' ``requires`` when there is one."""
    paths, seen = [[req]], {req}
    while paths:
        chain = paths.pop()
        if chain[-1] == cid:
            return chain
        for nxt in needs.get(chain[-1], ()):
            if nxt not in seen:
                seen.add(nxt)
                paths.append(chain + [nxt])
    return None


def _component(pack: Pack, cid: str, table: dict[str, Any], targets: set[str], at: _At,
               errors: Collector) -> Component | None:
    where, path = f"[components.{cid}]", at.path
    src, version = table.get("path"), table.get("version")
    if not isinstance(src, str) or not src or not isinstance(version, str) or not version:
        errors.add(f"{where} needs a 'path' (a folder with pyproject.toml, or a .whl) and a 'version'", path,
                   at.line(cid, "path" if not isinstance(src, str) or not src else "version"))
        return None
    folder = (pack.root / src).resolve()
    check_reachable(folder / "pyproject.toml")  # (a folder this user may not search is exit 5, not "no pyproject")
    if pack.root.resolve() not in folder.parents or not (
            (folder / "pyproject.toml").is_file() or (folder.suffix == ".whl" and folder.is_file())):
        errors.add(f"{where}: path {src!r} is not a folder with a pyproject.toml or a .whl inside the pack", path,
                   at.line(cid, "path"), "name it relative to the pack's folder")
        return None
    target = table.get("target", "vllm")
    if target not in targets:
        errors.add(f"{where}: target {target!r} is not a target of the profile", path, at.line(cid, "target"),
                   f"its targets: {', '.join(sorted(targets))}")
        return None
    requires = table.get("requires", [])
    opt_in = table.get("opt_in", False)
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires) or \
            not isinstance(opt_in, bool):
        errors.add(f"{where}: 'requires' must be a list of ids and 'opt_in' true or false", path,
                   at.line(cid, "opt_in" if not isinstance(opt_in, bool) else "requires"))
        return None
    return Component(cid, folder, version, str(target), tuple(requires), opt_in, str(table.get("summary", "")))


def split_names(profile: Profile, names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Command-line names as (fix names, component ids)."""
    ids = {c.id for c in profile.components}
    return tuple(n for n in names if n not in ids), tuple(n for n in names if n in ids)


def select_components(profile: Profile, named: tuple[str, ...], fixes: tuple[str, ...]) -> tuple[str, ...]:
    """The components a run installs: the profile's default ones plus those named, in profile order.
    Raises PackError when one requires a fix (or component) that the run does not select."""
    chosen = [c.id for c in profile.components if not c.opt_in or c.id in named]
    for name in named:
        if profile.component(name) is None:
            raise UnknownNameError(f"unknown component {name!r}")
    errors = Collector()
    for cid in chosen:
        comp = profile.component(cid)
        assert comp is not None
        for req in comp.requires:
            if req not in fixes and req not in chosen:
                errors.add(f"component {cid!r} requires {req!r}", profile.path, None,
                           f"name {req!r} on the command line too")
    errors.raise_if_any("cannot select the components")
    return tuple(chosen)


__all__ = ["COMPONENT_KEYS", "load_components", "select_components", "split_names"]


def pip_normal(name: str) -> str:
    """A distribution name or version as pip compares them: runs of ``-``, ``_`` and ``.`` alike, any case."""
    return re.sub(r"[-_.]+", "_", name).lower()


def built_version_problem(comp: Component, built: str, profile_path: Path | None = None) -> str | None:
    """Why a component's wheel (built as version ``built``) is not the version its profile (at
    ``profile_path``, when the message should name it) names, or None."""
    if pip_normal(built) == pip_normal(comp.version):
        return None
    named = f"the profile {profile_path}" if profile_path is not None else "the profile"
    return (f"component {comp.id} at {comp.path} builds as version {built}, {named} names {comp.version}: "
            f"bump one of them")
