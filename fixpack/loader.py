"""Loading and validating the pack on disk: ``fixes/series``, ``fixes/<id>/fix.toml``, the patches,
``profiles/<name>.toml``. Every problem is collected with its file and line, then raised at once.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .binpatch import PackBudget
from .closenames import EMPTY, NO_CLOSE, close_names
from .documents import check_reachable, key_line, link_refused, read_pack_file, read_toml, unknown_keys, utf8_text
from .documents import text_for_lines as _text  # a file read again for a problem's line
from .errors import Collector, UnknownNameError, raise_unreadable
from .model import UPSTREAM_STATUSES, Fix, Pack, Pin, Profile, Source, TargetSpec, Upstream, Variant
from .patchfiles import Binary, Where, check_binary, check_package_paths, load_patch
from .profile_components import load_components
from .safepath import VERSION_RULE, is_version, name_problem
from .target_fields import target_problems
from .targets import commit_matches
from .upstream_fields import upstream_problems

FIX_KEYS = {"id", "version", "summary", "why", "target", "requires", "conflicts", "opt_in",
            "patches", "env", "upstream", "binary", "retired"}
UPSTREAM_KEYS = {"status", "link", "fixed_in", "reason", "origin", "bug", "last_update"}
PROFILE_KEYS = {"name", "description", "targets", "fixes", "proof", "components"}
TARGET_KEYS = {"package", "distribution", "version", "commit", "branch", "version_module", "source"}
SOURCE_KEYS = {"pypi", "git", "ref"}
PROFILE_FIX_KEYS = {"default", "opt_in"}


def load_series(root: Path, errors: Collector) -> tuple[str, ...]:
    path = root / "fixes" / "series"
    data = read_pack_file(path, errors, "series file",
                          ("no series file", f"list the pack's fix ids in order, one a line; or, if {root} is no fix "
                                             f"pack (a project's own fixes/ and profiles/ folders), give --pack DIR or "
                                             f"set $FIXPACK_PACK"), root)
    text = utf8_text(data, path, errors) if data is not None else None
    if text is None:  # said once: no "missing from the series" for every fix of an unreadable series
        return ()
    seen: dict[str, int] = {}
    order: list[str] = []
    bad: set[str] = set()  # lines said as bad ids: their folders are not "missing from the series" too
    if "\r" in text:  # (commands that write the series write LF: a CRLF one would end up mixed)
        crlf = text.count("\r") == text.count("\r\n")
        errors.add(f"a CR{' (CRLF line ends)' if crlf else ''}: the series' lines end with LF alone, and hold no CR",
                   path, text[:text.index("\r")].count("\n") + 1,
                   f"convert it: sed -i 's/\\r$//' {path}" if crlf else "remove each CR (a line of its own where it "
                                                                        "ends one)")
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if name_problem(line):
            errors.add(f"bad fix id {line!r}", path, n, name_problem(line) or "")
            bad.add(line)
            continue
        if line in seen:
            errors.add(f"fix {line!r} listed twice (first at line {seen[line]})", path, n, "keep one line")
            continue
        seen[line] = n
        order.append(line)
    # one stat each; a fix.toml that is no regular file is one too (its load says what it is)
    folders = {f.name for f in _listing(root / "fixes") if _there(f / "fix.toml")}
    for fix_id in order:
        if fix_id not in folders:
            errors.add(f"fix {fix_id!r} has no fixes/{fix_id}/fix.toml", path, seen[fix_id],
                       "create the fix or remove the line")
    for name in sorted(folders - set(seen) - bad):
        errors.add(f"fix {name!r} is missing from the series", path, None,
                   "add its id to fixes/series at its place in the order")
    return tuple(order)


def _str_list(value: Any, key: str, path: Path, text: str, errors: Collector) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.add(f"{key!r} must be a list of strings", path, key_line(text, key))
        return ()
    return tuple(value)


def _str_table(value: Any, key: str, path: Path, text: str, errors: Collector) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        errors.add(f"[{key}] must map names to strings", path, key_line(text, key))
        return ()
    return tuple(sorted(value.items()))


def load_fix(folder: Path, errors: Collector, profile: str | None = None,
             budget: PackBudget | None = None) -> Fix | None:
    """``fixes/<id>/`` with its patches and variants. With ``profile``, only that profile's variant is
    read and the patches are parsed on first use (:func:`parse_fixes`), not here. ``budget``: the pack's binary
    bytes (:data:`~fixpack.binpatch.MAX_PACK_BINARY_BYTES`), which its patches count against."""
    path = folder / "fix.toml"
    loaded = read_toml(path, errors, folder.parent.parent)  # (the pack's root: no folder on the way a link)
    if loaded is None:
        return None
    data, text = loaded
    before = len(errors.problems)
    unknown_keys(data, FIX_KEYS, path, text, errors)
    for key in ("id", "version", "summary", "why", "target", "patches"):
        if key not in data:
            errors.add(f"missing required key {key!r}", path, None, "see the fix.toml schema in the README")
    if data.get("id", folder.name) != folder.name:
        errors.add(f"id {data.get('id')!r} differs from its folder {folder.name!r}", path, key_line(text, "id"),
                   f'write id = "{folder.name}", or rename the folder, and its fixes/series line and profiles too')
    version = data.get("version", 1)
    if not is_version(version):
        errors.add(f"'version' must be {VERSION_RULE}", path, key_line(text, "version"))
    if not isinstance(data.get("opt_in", False), bool):
        errors.add("'opt_in' must be true or false", path, key_line(text, "opt_in"))
    for key in ("summary", "why", "target", "retired"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            errors.add(f"{key!r} must be a non-empty string", path, key_line(text, key))
    upstream = _load_upstream(data.get("upstream", {}), path, text, errors)
    env = _str_table(data.get("env", {}), "env", path, text, errors)
    binary = _str_table(data.get("binary", {}), "binary", path, text, errors)
    where = Where(path, lambda key, table: key_line(text, key, table))
    declared = Binary(folder, dict(binary), where, budget)  # the fix's and every variant's
    check_binary(declared, errors)
    names = _str_list(data.get("patches", []), "patches", path, text, errors)
    if data.get("patches") == []:  # a fix that changes nothing (apply called the release "ambiguous")
        errors.add("'patches' lists no patch: a fix changes the target through its patches", path,
                   key_line(text, "patches"), "list its patch files, or drop the fix")
    for twice in sorted({n for n in names if names.count(n) > 1}):  # it would be applied twice, the 2nd a conflict
        errors.add(f"patch {twice!r} is listed twice in 'patches'", path, key_line(text, "patches"),
                   "list each patch once")
    lazy = folder.parent.parent if profile is not None else None  # the pack's root: patches parsed when used
    patches = tuple(p for p in (load_patch(folder, n, declared, where, errors, lazy) for n in names) if p)
    variants = tuple(v for v in (_load_variant(sub, names, declared, where, version, errors, lazy)
                                 for sub in _listing(folder)
                                 if sub.name == (profile or sub.name) and _variant_there(sub, errors))
                     if v)
    if len(errors.problems) > before:
        return None
    return Fix(
        id=folder.name, version=version, summary=str(data["summary"]).strip(), why=str(data["why"]).strip(),
        target=str(data["target"]),
        requires=_str_list(data.get("requires", []), "requires", path, text, errors),
        conflicts=_str_list(data.get("conflicts", []), "conflicts", path, text, errors),
        opt_in=bool(data.get("opt_in", False)), upstream=upstream, patches=patches, folder=folder,
        env=env, binary=binary, variants=variants, retired=str(data.get("retired", "")).strip(),
    )


def _variant_there(sub: Path, errors: Collector) -> bool:
    """Whether ``sub`` (an entry of a fix's folder) is a variant: it holds a ``variant.toml``. A folder named as one
    of the pack's profiles that holds files but no ``variant.toml`` is a problem (half removed, or its variant.toml
    deleted: that profile read the fix's own patches, and check then advised a version bump over a stale lock); an
    empty one is none."""
    if _there(sub / "variant.toml"):
        return True
    if os.path.isdir(sub) and not sub.is_symlink() and _listing(sub) and \
            os.path.isfile(sub.parent.parent.parent / "profiles" / f"{sub.name}.toml"):  # (an empty one is none)
        errors.add(f"folder {sub.name}/ is named as profile {sub.name}'s variant of {sub.parent.name} but holds no "
                   f"variant.toml: that profile would read the fix's own patches", sub, None,
                   "put the variant back (its variant.toml and patches), or remove the folder")
    return False


def _load_variant(sub: Path, names: tuple[str, ...], binary: Binary, listed: Where, base_version: Any,
                  errors: Collector, lazy: Path | None = None) -> Variant | None:
    """``fixes/<id>/<profile>/``: the fix rebased for profile <profile> (patches + variant.toml); its
    ``[binary]`` sources are the fix's (``binary``: fix.toml's table, resolved in ``fixes/<id>/``), and so are the
    names of its patches: a problem with one is named at fix.toml's ``patches`` line (``listed``), a name that is
    not a plain file name once, by the fix."""
    path = sub / "variant.toml"
    loaded = read_toml(path, errors, sub.parent.parent.parent)
    if loaded is None:
        return None
    data, text = loaded
    unknown_keys(data, {"version", "rebased_from"}, path, text, errors)
    version = data.get("version", base_version)
    if not is_version(version):
        errors.add(f"'version' must be {VERSION_RULE}", path, key_line(text, "version"))
        return None
    was = data.get("rebased_from", "")
    if "rebased_from" in data and (name_problem(was) or was == sub.name):  # (a retired profile's name is one too)
        errors.add(f"'rebased_from' must be the name of the profile it was rebased from: "
                   f"{name_problem(was) or 'not its own'}", path, key_line(text, "rebased_from"))
    patches = tuple(p for p in (load_patch(sub, n, binary, listed, errors, lazy) for n in names
                                if Path(n).name == n) if p)
    return Variant(sub.name, version, patches) if len(patches) == len(names) else None


def _load_upstream(value: Any, path: Path, text: str, errors: Collector) -> Upstream:
    if not isinstance(value, dict):
        errors.add("[upstream] must be a table", path, key_line(text, "upstream"))
        return Upstream()
    unknown_keys(value, UPSTREAM_KEYS, path, text, errors, "upstream")
    for key in sorted(UPSTREAM_KEYS & set(value)):
        if not isinstance(value[key], str):
            errors.add(f"[upstream] {key!r} must be a string", path, key_line(text, key, "upstream"))
    status = value.get("status", "pending")
    if status not in UPSTREAM_STATUSES:
        errors.add(f"upstream status {status!r} is not one of {', '.join(UPSTREAM_STATUSES)}",
                   path, key_line(text, "status", "upstream"))
    for key, problem in upstream_problems(value):
        errors.add(f"[upstream] {key} = {value[key]!r}: {problem}", path, key_line(text, key, "upstream"))
    return Upstream(str(status), *(str(value.get(k, "")) for k in ("link", "fixed_in", "reason", "origin", "bug",
                                                                      "last_update")))


def load_pack(root: Path, profile: str | None = None) -> Pack:
    """Load and validate every fix of the pack at ``root`` (a folder with ``fixes/`` and ``profiles/``).

    With ``profile`` (a run's), only that profile's variants are read and every patch is parsed when it is
    first used: call :func:`parse_fixes` with the fixes the run works on. Raises PackError listing every
    problem with its file and line.
    """
    root = root.resolve()
    errors, fixes_dir = Collector(), root / "fixes"
    check_reachable(fixes_dir)
    if not fixes_dir.is_dir():
        gone = "" if root.is_dir() else " (the folder itself is not there)"
        errors.add(f"no fixes/ folder{gone}", root, None, "point --pack at the fix pack's root")
        errors.raise_if_any(f"cannot load the pack at {root}")
    series = load_series(root, errors)
    fixes: dict[str, Fix] = {}
    budget = PackBudget()
    for fix_id in series:
        if _there(fixes_dir / fix_id / "fix.toml") and (fix := load_fix(fixes_dir / fix_id, errors, profile, budget)):
            fixes[fix_id] = fix
    _check_relations(series, fixes, fixes_dir, errors)
    if (root / "profiles").is_symlink():  # (each profile's load refuses it too)
        link_refused(root, root / "profiles" / "*.toml", errors)
    errors.raise_if_any(f"the pack at {root} is invalid")
    return Pack(root, series, fixes, _profiles(root / "profiles"))


def _there(path: Path) -> bool:
    """Whether something is at ``path`` (a link too); a folder on its way this user may not search is exit 5 naming
    it (:func:`~fixpack.documents.check_reachable`), not nothing there (the advice was to create the fix)."""
    if os.path.lexists(path):
        return True
    check_reachable(path)
    return False


def _profiles(folder: Path) -> dict[str, Path]:
    """The pack's profiles by name (``profiles/<name>.toml``); none when there is no such folder. One this user
    may not read is exit 5 naming it: a glob there finds nothing, and every profile was said unknown."""
    return {p.stem: p for p in _listing(folder) if p.suffix == ".toml"} if folder.is_dir() else {}


def _listing(folder: Path) -> list[Path]:
    """The entries of the pack's ``folder``, sorted; one this user may not list (mode 000, or 111) is exit 5 naming
    it (:func:`fixpack.errors.unreadable`), never a listing of nothing (a fix's variants were taken for none)."""
    try:
        return sorted(folder / n for n in os.listdir(folder))
    except OSError as exc:
        raise_unreadable(folder, exc)
        raise


def _check_relations(series: tuple[str, ...], fixes: dict[str, Fix], fixes_dir: Path, errors: Collector) -> None:
    position = {fid: i for i, fid in enumerate(series)}
    for fix in fixes.values():
        path = fix.folder / "fix.toml"

        def line(key: str, path: Path = path) -> int | None:  # fix.toml read again (capped) for a problem's line
            return key_line(_text(path), key)
        for req in fix.requires:
            if req not in position:
                errors.add(f"requires unknown fix {req!r}", path, line("requires"), close_names(req, series))
            elif req == fix.id:
                errors.add(f"requires itself ({req!r})", path, line("requires"), "drop it from requires")
            elif (cycle := _requires_cycle(fix.id, req, fixes)) is not None:
                errors.add(f"requires {req!r}, and {' -> '.join(cycle)}: a cycle", path, line("requires"),
                           "a fix cannot need a fix that needs it; drop one of these requirements")
            elif position[req] > position[fix.id] and req in fixes and fixes[req].opt_in and not fix.opt_in:
                errors.add(f"requires opt-in fix {req!r}: a default fix cannot need an opt-in one (the opt-in fixes "
                           f"follow the defaults in the series)", path, line("requires"),
                           f"make {fix.id!r} opt-in too (opt_in = true), or drop {req!r} from requires")
            elif position[req] > position[fix.id]:
                errors.add(f"requires {req!r}, which comes later in the series", path, line("requires"),
                           f"move {req!r} above {fix.id!r} in {fixes_dir / 'series'}")
        for other in fix.conflicts:
            if other not in position:
                errors.add(f"conflicts with unknown fix {other!r}", path, line("conflicts"),
                           close_names(other, series))
            elif other == fix.id:
                errors.add(f"conflicts with itself ({other!r})", path, line("conflicts"),
                           "drop it from conflicts")


def _requires_cycle(fid: str, req: str, fixes: dict[str, Fix]) -> list[str] | None:
    """The chain req -> ... -> fid through ``requires`` when there is one (then fid -> req closes a cycle)."""
    paths, seen = [[req]], {req}
    while paths:
        chain = paths.pop()
        for nxt in fixes[chain[-1]].requires if chain[-1] in fixes else ():
            if nxt == fid:
                return chain + [fid]
            if nxt not in seen:
                seen.add(nxt)
                paths.append(chain + [nxt])
    return None


SHOWN_NAMES = 6  # the names an unknown-name message lists before "and N more"


def _profile_fixes(profile: Profile) -> str:
    """What a name on the command line may be: the profile's fixes, opt-in first (those are named; a default fix
    is applied whether named or not), then its components (named the same way: an opt-in one is installed only
    when named), a handful of them, then how many more."""
    comps = profile.components
    names = [f"{f} (opt-in)" for f in profile.opt_in]
    names += [f"{c.id} (opt-in component)" for c in comps if c.opt_in]
    names += [f for f in profile.default if f not in profile.opt_in]
    names += [f"{c.id} (component)" for c in comps if not c.opt_in]
    if not names:
        return f"; profile {profile.name} ({profile.path}) lists no fix"
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    what, which = ("fixes and components", "any of its opt-in fixes and components") if comps else \
        ("fixes", "one of its opt-in fixes")
    return (f"; the {what} of profile {profile.name} ({profile.path}): {', '.join(names[:SHOWN_NAMES])}{more}: "
            f"name {which}, or none")


def load_profile(pack: Pack, name: str, check_paths: bool = True) -> Profile:
    """Load ``profiles/<name>.toml`` and check it against the pack. Raises UnknownNameError or PackError.

    ``check_paths`` False leaves the check that each listed fix changes its target's package only to
    :func:`parse_fixes` (a run parses only the patches it needs)."""
    if name not in pack.profiles:
        raise UnknownNameError(f"unknown profile {name!r} ({close_names(name, sorted(pack.profiles))}; "
                               f"profiles live in {pack.root / 'profiles'})")
    path = pack.profiles[name]
    errors = Collector()
    loaded = read_toml(path, errors, pack.root)
    errors.raise_if_any(f"profile {name!r} is invalid")
    assert loaded is not None
    data, text = loaded
    unknown_keys(data, PROFILE_KEYS, path, text, errors)
    targets = _load_targets(data.get("targets", {}), path, text, errors)
    fixes = data.get("fixes", {})
    if not isinstance(fixes, dict):
        errors.add("[fixes] must be a table", path, key_line(text, "fixes"))
        fixes = {}
    unknown_keys(fixes, PROFILE_FIX_KEYS, path, text, errors, "fixes")
    default = _str_list(fixes.get("default", []), "default", path, text, errors)
    opt_in = _str_list(fixes.get("opt_in", []), "opt_in", path, text, errors)
    if str(data.get("name", name)) != name:
        errors.add(f"name {data.get('name')!r} differs from the file name {name!r}", path, key_line(text, "name"),
                   f"set name = \"{name}\" or rename the file")
    proof = data.get("proof", {})
    if not isinstance(proof, dict):
        errors.add("[proof] must be a table", path, key_line(text, "proof"))
        proof = {}
    unknown_keys(proof, {"env"}, path, text, errors, "proof")
    proof_env = _str_table(proof.get("env", {}), "env", path, text, errors)
    components = load_components(pack, data.get("components", {}), {t.name for t in targets},
                                 set(default) | set(opt_in), path, errors,
                                 lambda key, table: key_line(text, key, table))
    profile = Profile(name, path, str(data.get("description", "")).strip(),
                      targets, default, opt_in, proof_env, components)
    _check_profile(pack, profile, text, errors, check_paths)
    errors.raise_if_any(f"profile {name!r} is invalid")
    return profile


def profiles_pinning(folder: Path, target: str, version: str, commit: str) -> list[str]:
    """The names (sorted) of the profiles in ``folder`` (a pack's ``profiles/``) whose target ``target`` pins
    ``version`` and ``commit`` as found on disk: a pin mismatch's next step names them. A profile that does not
    read is left out (a run with it says what is wrong with it)."""
    return [path.stem for path in (sorted(folder.glob("*.toml")) if folder.is_dir() else [])
            if (pin := pin_of(path, target)) is not None and pin.version == version and pin.commit
            and commit_matches(commit, pin.commit)]


def pin_of(path: Path, target: str) -> Pin | None:
    """The pin the profile at ``path`` gives ``target``; None: no such target, no regular file, or it does not read."""
    if not path.is_file() or path.is_symlink():
        return None
    loaded = read_toml(path, Collector())
    targets = _load_targets(loaded[0].get("targets", {}), path, loaded[1], Collector()) if loaded else []
    return next((t.pin for t in targets if t.name == target), None)


def pinned_versions(folder: Path, target: str) -> dict[str, str]:
    """Each profile in ``folder`` (a pack's ``profiles/``) that pins a version of ``target``: name -> that
    version. A profile that does not read is left out."""
    out = {}
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        loaded = read_toml(path, Collector()) if path.is_file() and not path.is_symlink() else None
        for t in _load_targets(loaded[0].get("targets", {}), path, loaded[1], Collector()) if loaded else ():
            if t.name == target and t.pin.version:
                out[path.stem] = t.pin.version
    return out


def _load_targets(value: Any, path: Path, text: str, errors: Collector) -> tuple[TargetSpec, ...]:
    if not isinstance(value, dict) or not value:
        errors.add("[targets] must name at least one target", path, key_line(text, "targets"))
        return ()
    out: list[TargetSpec] = []
    for tname, t in value.items():
        table = f"targets.{tname}"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", tname):
            # the name becomes the manifest's file name in .fixpack/
            errors.add(f"target name {tname!r}: letters, digits, '.', '_', '-' only", path, key_line(text, tname))
            continue
        if not isinstance(t, dict):
            errors.add(f"[{table}] must be a table", path, key_line(text, tname))
            continue
        unknown_keys(t, TARGET_KEYS, path, text, errors, table)
        src = t.get("source", {})
        unknown_keys(src if isinstance(src, dict) else {}, SOURCE_KEYS, path, text, errors, table + ".source")
        for key in ("package", "commit"):
            if not isinstance(t.get(key), str) or not t.get(key):
                errors.add(f"[{table}] needs a {key!r}", path, key_line(text, tname))
        commit = str(t.get("commit", ""))
        package = str(t.get("package", ""))
        for key, problem in target_problems(t):
            errors.add(f"[{table}] {key} = {t[key]!r}: {problem}", path, key_line(text, key, table))
        same = next((o.name for o in out if package and o.package == package), None)
        if same:  # two chains over one package's files: each would overwrite the other's changes
            errors.add(f"[{table}] package = {package!r}: target {same} names it too; one target per package (their "
                       f"fixes would be applied as two chains over the same files, each undoing the other's)", path,
                       key_line(text, "package", table), "name one target, and give its fixes that target")
        out.append(TargetSpec(
            name=tname, package=package, distribution=str(t.get("distribution", package)),
            pin=Pin(str(t.get("version", "")), commit, str(t.get("branch", ""))),
            source=Source(**{k: str(v) for k, v in (src.items() if isinstance(src, dict) else []) if k in SOURCE_KEYS}),
            version_module=str(t.get("version_module", "")),
        ))
    return tuple(out)


def _check_profile(pack: Pack, profile: Profile, text: str, errors: Collector, check_paths: bool = True) -> None:
    path = profile.path
    names = {t.name for t in profile.targets}
    listed: dict[str, str] = {}
    for key, ids in (("default", profile.default), ("opt_in", profile.opt_in)):
        for fid in ids:
            line = key_line(text, key, "fixes")
            if fid not in pack.fixes:
                errors.add(f"[fixes] {key} names unknown fix {fid!r}", path, line, close_names(fid, pack.series))
                continue
            if fid in listed:
                where = f"twice in {key}" if listed[fid] == key else f"in both {listed[fid]} and {key}"
                errors.add(f"fix {fid!r} is listed {where}", path, line, "keep one entry")
            listed[fid] = key
            fix = pack.fixes[fid]
            if fix.target not in names:  # named at fix.toml's line: a typo there is the likely cause
                toml = fix.folder / "fix.toml"
                errors.add(f"target {fix.target!r} is not a target of the profile that lists {fid!r}: its targets "
                           f"are {', '.join(sorted(names)) or 'none'}", toml, key_line(_text(toml), "target"),
                           f"name one of those targets, or add [targets.{fix.target}] to the profile, or drop the "
                           f"fix from it")
            elif check_paths:  # (the other targets' packages: a fix whose files all lie in one names the wrong target)
                own, others = profile.target(fix.target), {t.name: t.package for t in profile.targets}
                check_package_paths(fix.for_profile(profile.name), own.package, errors, own.version_path, others)
            if key == "default" and fix.opt_in:
                errors.add(f"fix {fid!r} is opt-in (fix.toml) but listed as a default", path, line,
                           "move it to opt_in")
    for fid, key in listed.items():
        for req in pack.fixes[fid].requires:
            if req not in listed:
                errors.add(f"fix {fid!r} requires {req!r}, which the profile does not list", path,
                           key_line(text, key, "fixes"), f"add {req!r} to the profile")
            elif key == "default" and listed[req] == "opt_in":
                errors.add(f"default fix {fid!r} requires opt-in fix {req!r}", path, key_line(text, key, "fixes"))
    defaults = {f for f, k in listed.items() if k == "default"}
    for fid in sorted(defaults):  # each named once, at the conflicts line of the fix.toml that declares it
        toml = pack.fixes[fid].folder / "fix.toml"
        for other in pack.fixes[fid].conflicts:
            if other != fid and other in defaults and not (other < fid and fid in pack.fixes[other].conflicts):
                errors.add(f"conflicts with {other!r}, yet the profile lists both as defaults", toml,
                           key_line(_text(toml), "conflicts"), "drop one of them from the profile's [fixes] default, "
                                                               "or drop the conflict")



def _check_conflicts(pack: Pack, profile: Profile, selected: list[str], errors: Collector, all_opt_in: bool) -> None:
    """Two selected fixes one of which declares a conflict with the other: named at that fix.toml's conflicts line,
    with the selection that leaves the opt-in one out (two defaults in conflict are the profile's error)."""
    chosen = set(selected)
    pairs = {tuple(sorted((fid, other))) for fid in selected for other in pack.fixes[fid].conflicts
             if other in chosen and other != fid}
    for a, b in sorted(pairs):
        declares, other = (a, b) if b in pack.fixes[a].conflicts else (b, a)
        toml = pack.fixes[declares].folder / "fix.toml"
        opt = [f for f in (a, b) if f not in profile.default]
        out, named = " or ".join(opt), "both" if len(opt) == 2 else opt[0]
        errors.add(f"fixes {a!r} and {b!r} are both selected, but {declares!r} declares a conflict with {other!r}",
                   toml, key_line(_text(toml), "conflicts"), f"leave {out} out of the run" if not all_opt_in else
                   f"--all-opt-in selects {named}: name the opt-in fixes to apply instead, leaving {out} out")


def select(pack: Pack, profile: Profile, opt_ins: tuple[str, ...] | list[str],
           all_opt_in: bool = False) -> tuple[str, ...]:
    """The fix ids a run applies: the profile's defaults plus the named opt-ins, in series order.

    Raises UnknownNameError (with close matches) for a name the pack lacks, PackError for a fix the
    profile does not allow, a missing ``requires`` or two selected fixes that conflict.
    """
    errors = Collector()
    chosen = list(profile.default) + (list(profile.opt_in) if all_opt_in else [])
    for name in opt_ins:
        if name not in pack.fixes:
            close = close_names(name, [*pack.series, *(c.id for c in profile.components)])
            listed = _profile_fixes(profile) if close in (NO_CLOSE, EMPTY) else ""
            raise UnknownNameError(f"unknown fix {name!r} ({close}{listed})")
        if name not in profile.default and name not in profile.opt_in:
            errors.add(f"fix {name!r} is not allowed by profile {profile.name!r}", profile.path, None,
                       f"its opt-in fixes: {', '.join(profile.opt_in) or 'none'}")
        elif name not in chosen:
            chosen.append(name)
    for fid in chosen:
        for req in pack.fixes[fid].requires:
            if req not in chosen:
                errors.add(f"fix {fid!r} requires {req!r}", profile.path, None, f"name {req!r} on the command line too")
    _check_conflicts(pack, profile, chosen, errors, all_opt_in)
    errors.raise_if_any("cannot select the fixes")
    return tuple(f.id for f in pack.ordered(tuple(chosen)))
