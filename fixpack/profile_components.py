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
from pathlib import Path
from typing import Any

from .errors import Collector, UnknownNameError
from .model import Component, Pack, Profile

COMPONENT_KEYS = {"path", "version", "target", "requires", "opt_in", "summary"}
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def load_components(pack: Pack, value: Any, targets: set[str], listed_fixes: set[str], path: Path,
                    errors: Collector) -> tuple[Component, ...]:
    """The components a profile names, each checked (errors collected with the profile's path)."""
    if not isinstance(value, dict):
        errors.add("[components] must be a table of [components.<id>] tables", path, None)
        return ()
    out = []
    for cid, table in value.items():
        where = f"[components.{cid}]"
        if not _ID_RE.match(cid) or cid in pack.fixes:
            errors.add(f"{where}: the id must be lower-case letters, digits, '.', '_', '-' and not a fix's id",
                       path, None)
            continue
        if not isinstance(table, dict):
            errors.add(f"{where} must be a table", path, None)
            continue
        unknown = sorted(set(table) - COMPONENT_KEYS)
        if unknown:
            errors.add(f"{where}: unknown key(s) {', '.join(unknown)}", path, None,
                       f"allowed: {', '.join(sorted(COMPONENT_KEYS))}")
        comp = _component(pack, cid, table, targets, path, errors)
        if comp is not None:
            out.append(comp)
    ids = {c.id for c in out}
    for comp in out:
        for req in comp.requires:
            if req not in listed_fixes and req not in ids:
                errors.add(f"[components.{comp.id}] requires {req!r}, which the profile lists neither as a fix nor "
                           f"as a component", path, None, f"add {req!r} to the profile or drop it")
    return tuple(out)


def _component(pack: Pack, cid: str, table: dict[str, Any], targets: set[str], path: Path,
               errors: Collector) -> Component | None:
    where = f"[components.{cid}]"
    src, version = table.get("path"), table.get("version")
    if not isinstance(src, str) or not src or not isinstance(version, str) or not version:
        errors.add(f"{where} needs a 'path' (a folder with pyproject.toml, or a .whl) and a 'version'", path, None)
        return None
    folder = (pack.root / src).resolve()
    if pack.root.resolve() not in folder.parents or not (
            (folder / "pyproject.toml").is_file() or (folder.suffix == ".whl" and folder.is_file())):
        errors.add(f"{where}: path {src!r} is not a folder with a pyproject.toml or a .whl inside the pack", path, None)
        return None
    target = table.get("target", "vllm")
    if target not in targets:
        errors.add(f"{where}: target {target!r} is not a target of the profile", path, None,
                   f"its targets: {', '.join(sorted(targets))}")
        return None
    requires = table.get("requires", [])
    opt_in = table.get("opt_in", False)
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires) or \
            not isinstance(opt_in, bool):
        errors.add(f"{where}: 'requires' must be a list of ids and 'opt_in' true or false", path, None)
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
