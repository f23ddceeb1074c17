"""Loading and validating the pack on disk: ``fixes/series``, ``fixes/<id>/fix.toml``, the patches,
``profiles/<name>.toml``. Every problem is collected with its file and line, then raised at once.
"""

from __future__ import annotations

import difflib
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (some Gaudi images): the same parser as a package
    import tomli as tomllib  # type: ignore[no-redef]
from pathlib import Path
from typing import Any

from .diff import FilePatch, parse_patch, sha256_bytes
from .errors import Collector, PackError, PatchParseError, UnknownNameError
from .model import UPSTREAM_STATUSES, Fix, Pack, PatchFile, Pin, Profile, Source, TargetSpec, Upstream, Variant
from .profile_components import load_components
from .safepath import path_problem

FIX_KEYS = {"id", "version", "summary", "why", "target", "requires", "conflicts", "opt_in",
            "patches", "env", "upstream", "binary"}
UPSTREAM_KEYS = {"status", "link", "fixed_in"}
PROFILE_KEYS = {"name", "description", "targets", "fixes", "proof", "components"}
TARGET_KEYS = {"package", "distribution", "version", "commit", "branch", "version_module", "source"}
SOURCE_KEYS = {"pypi", "git", "ref"}
PROFILE_FIX_KEYS = {"default", "opt_in"}
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def key_line(text: str, key: str, table: str = "") -> int | None:
    """The 1-based line where ``key`` is set (or ``[table.key]`` opens) in a TOML text, if found."""
    in_table = table == ""
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("["):
            name = s.strip("[]").strip()
            if name in (f"{table}.{key}" if table else key, key) and name.endswith(key):
                return n
            in_table = table == "" or name == table or name.startswith(table + ".")
            continue
        if in_table and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
            return n
    return None


def read_toml(path: Path, errors: Collector) -> tuple[dict[str, Any], str] | None:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        errors.add(f"cannot read: {exc.strerror}", path)
        return None
    if b"\r\n" in raw:
        errors.add("CRLF line endings", path, raw.count(b"\n", 0, raw.find(b"\r\n")) + 1, "convert to LF")
    text = utf8_text(raw, path, errors)
    if text is None:
        return None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        errors.add(f"malformed TOML: {exc}", path, int(m.group(1)) if m else None, "fix the syntax")
        return None


def utf8_text(raw: bytes, path: Path, errors: Collector) -> str | None:
    """``raw`` as UTF-8 text, or None with a problem that names the line and byte offset of the first
    byte that is not UTF-8 (TOML and the series are UTF-8 by definition)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.add(f"bytes that are not UTF-8 at byte offset {exc.start}", path, raw.count(b"\n", 0, exc.start) + 1,
                   "save the file as UTF-8")
        return None


def _unknown_keys(data: dict[str, Any], allowed: set[str], path: Path, text: str,
                  errors: Collector, table: str = "") -> None:
    for key in sorted(set(data) - allowed):
        close = difflib.get_close_matches(key, sorted(allowed), 1)
        hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(sorted(allowed))}"
        where = f"[{table}] " if table else ""
        errors.add(f"unknown key {where}{key!r}", path, key_line(text, key, table), hint)


def load_series(root: Path, errors: Collector) -> tuple[str, ...]:
    path = root / "fixes" / "series"
    if not path.is_file():
        errors.add("no series file", path, None, "list the pack's fix ids in order, one a line")
        return ()
    seen: dict[str, int] = {}
    order: list[str] = []
    text = utf8_text(path.read_bytes(), path, errors)
    for n, raw in enumerate((text or "").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not ID_RE.match(line):
            errors.add(f"bad fix id {line!r}", path, n, "ids are lower-case letters, digits, '.', '_', '-'")
            continue
        if line in seen:
            errors.add(f"fix {line!r} listed twice (first at line {seen[line]})", path, n, "keep one line")
            continue
        seen[line] = n
        order.append(line)
    for fix_id in order:
        if not (root / "fixes" / fix_id / "fix.toml").is_file():
            errors.add(f"fix {fix_id!r} has no fixes/{fix_id}/fix.toml", path, seen[fix_id],
                       "create the fix or remove the line")
    for folder in sorted((root / "fixes").iterdir()):
        if (folder / "fix.toml").is_file() and folder.name not in seen:
            errors.add(f"fix {folder.name!r} is missing from the series", path, None,
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


def load_fix(folder: Path, errors: Collector, profile: str | None = None) -> Fix | None:
    """``fixes/<id>/`` with its patches and variants. With ``profile``, only that profile's variant is
    read and the patches are parsed on first use (:func:`parse_fixes`), not here."""
    path = folder / "fix.toml"
    loaded = read_toml(path, errors)
    if loaded is None:
        return None
    data, text = loaded
    before = len(errors.problems)
    _unknown_keys(data, FIX_KEYS, path, text, errors)
    for key in ("id", "version", "summary", "why", "target", "patches"):
        if key not in data:
            errors.add(f"missing required key {key!r}", path, None, "see the fix.toml schema in the README")
    if data.get("id", folder.name) != folder.name:
        errors.add(f"id {data.get('id')!r} differs from its folder {folder.name!r}", path, key_line(text, "id"))
    version = data.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        errors.add("'version' must be an integer >= 1", path, key_line(text, "version"))
    if not isinstance(data.get("opt_in", False), bool):
        errors.add("'opt_in' must be true or false", path, key_line(text, "opt_in"))
    for key in ("summary", "why", "target"):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            errors.add(f"{key!r} must be a non-empty string", path, key_line(text, key))
    upstream = _load_upstream(data.get("upstream", {}), path, text, errors)
    env = _str_table(data.get("env", {}), "env", path, text, errors)
    binary = _str_table(data.get("binary", {}), "binary", path, text, errors)
    _check_binary(folder, binary, path, text, errors)
    names = _str_list(data.get("patches", []), "patches", path, text, errors)
    lazy = folder.parent.parent if profile is not None else None  # the pack's root: patches parsed when used
    patches = tuple(p for p in (_load_patch(folder, n, dict(binary), path, text, errors, lazy) for n in names) if p)
    variants = tuple(v for v in (_load_variant(folder, sub, names, dict(binary), version, errors, lazy)
                                 for sub in sorted(folder.iterdir())
                                 if (sub / "variant.toml").is_file() and sub.name == (profile or sub.name)) if v)
    if len(errors.problems) > before:
        return None
    return Fix(
        id=folder.name, version=version, summary=str(data["summary"]).strip(), why=str(data["why"]).strip(),
        target=str(data["target"]),
        requires=_str_list(data.get("requires", []), "requires", path, text, errors),
        conflicts=_str_list(data.get("conflicts", []), "conflicts", path, text, errors),
        opt_in=bool(data.get("opt_in", False)), upstream=upstream, patches=patches, folder=folder,
        env=env, binary=binary, variants=variants,
    )


def _load_variant(folder: Path, sub: Path, names: tuple[str, ...], binary: dict[str, str], base_version: Any,
                  errors: Collector, lazy: Path | None = None) -> Variant | None:
    """``fixes/<id>/<profile>/``: the fix rebased for profile <profile> (patches + variant.toml)."""
    path = sub / "variant.toml"
    loaded = read_toml(path, errors)
    if loaded is None:
        return None
    data, text = loaded
    _unknown_keys(data, {"version", "rebased_from"}, path, text, errors)
    version = data.get("version", base_version)
    if not isinstance(version, int) or version < 1:
        errors.add("'version' must be an integer >= 1", path, key_line(text, "version"))
        return None
    patches = tuple(p for p in (_load_patch(sub, n, binary, path, text, errors, lazy) for n in names) if p)
    return Variant(sub.name, version, patches) if len(patches) == len(names) else None


def _check_binary(folder: Path, binary: tuple[tuple[str, str], ...], path: Path, text: str,
                  errors: Collector) -> None:
    """``[binary]`` maps a canonical target path to a file of the fix's own folder: a source outside it
    (an absolute path, ``..``, a link) would copy any file of the machine into the target."""
    for target_path, src in binary:
        problem = path_problem(target_path)
        if problem:
            errors.add(f"[binary] target path {target_path!r}: {problem}", path, key_line(text, "binary"))
        problem = path_problem(src)
        real = (folder / src).resolve()
        if problem or folder.resolve() not in real.parents or (folder / src).is_symlink():
            errors.add(f"[binary] source {src!r} is not a file inside the fix's folder {folder}"
                       + (f" ({problem})" if problem else ""), path, key_line(text, "binary"),
                       "put the file in the fix's folder and name it relative to it")


def _load_upstream(value: Any, path: Path, text: str, errors: Collector) -> Upstream:
    if not isinstance(value, dict):
        errors.add("[upstream] must be a table", path, key_line(text, "upstream"))
        return Upstream()
    _unknown_keys(value, UPSTREAM_KEYS, path, text, errors, "upstream")
    for key in sorted(UPSTREAM_KEYS & set(value)):
        if not isinstance(value[key], str):
            errors.add(f"[upstream] {key!r} must be a string", path, key_line(text, key, "upstream"))
    status = value.get("status", "pending")
    if status not in UPSTREAM_STATUSES:
        errors.add(f"upstream status {status!r} is not one of {', '.join(UPSTREAM_STATUSES)}",
                   path, key_line(text, "status", "upstream"))
    return Upstream(str(status), str(value.get("link", "")), str(value.get("fixed_in", "")))


def _load_patch(folder: Path, name: str, binary: dict[str, str], toml_path: Path, text: str,
                errors: Collector, lazy: Path | None = None) -> PatchFile | None:
    """A patch file of a fix, parsed now, or (``lazy``: the pack's root) on first use of its files."""
    path = folder / name
    if Path(name).name != name:
        errors.add(f"patch {name!r} is not a plain file name: patches live in the fix's own folder {folder}",
                   toml_path, key_line(text, "patches"), "name the file only, and keep it in that folder")
        return None
    if not path.is_file():
        errors.add(f"patch {name!r} does not exist in {folder}", toml_path, key_line(text, "patches"))
        return None
    data = path.read_bytes()

    def reader() -> tuple[FilePatch, ...]:
        found = Collector()
        files = _patch_files(path, data, binary, toml_path, text, found)
        found.raise_if_any(f"the pack at {lazy} is invalid")
        return files or ()
    if lazy is not None:  # the bytes are read (and hashed) now, parsed when a run needs them
        return PatchFile(path, sha256_bytes(data), reader=reader)
    files = _patch_files(path, data, binary, toml_path, text, errors)
    return PatchFile(path, sha256_bytes(data), files) if files is not None else None


def _patch_files(path: Path, data: bytes, binary: dict[str, str], toml_path: Path, text: str,
                 errors: Collector) -> tuple[FilePatch, ...] | None:
    """The file patches of a patch file's bytes, each problem added to ``errors`` (None: unreadable)."""
    folder = path.parent
    try:
        parsed = parse_patch(data, str(path))
    except PatchParseError as exc:
        for p in exc.problems or []:
            errors.add(p.message, path, p.line, p.hint)
        if not exc.problems:
            errors.add(str(exc), path)
        return None
    if not parsed.files:
        errors.add("the patch changes no file", path, None, "regenerate it with git format-patch")
        return None
    for fp in parsed.files:
        if fp.binary and fp.path not in binary:
            errors.add(f"binary change to {fp.path!r} is not declared", path, fp.diff_line,
                       f"declare it in fix.toml: [binary] \"{fp.path}\" = \"<file in the fix folder>\"")
        elif fp.binary and fp.kind != "add":
            errors.add(f"binary change to existing file {fp.path!r}: only new binary files are supported",
                       path, fp.diff_line, "ship the new content as a new file")
        elif fp.binary and not (folder / binary[fp.path]).is_file():
            errors.add(f"declared binary content {binary[fp.path]!r} is missing", toml_path, key_line(text, "binary"))
        if fp.old_mode == "120000" or fp.new_mode == "120000":
            errors.add(f"symlink change to {fp.path!r} is not supported", path, fp.diff_line,
                       "ship the link target as a regular file")
    return parsed.files


def load_pack(root: Path, profile: str | None = None) -> Pack:
    """Load and validate every fix of the pack at ``root`` (a folder with ``fixes/`` and ``profiles/``).

    With ``profile`` (a run's), only that profile's variants are read and every patch is parsed when it is
    first used: call :func:`parse_fixes` with the fixes the run works on. Raises PackError listing every
    problem with its file and line.
    """
    root = root.resolve()
    errors = Collector()
    if not (root / "fixes").is_dir():
        errors.add("no fixes/ folder", root, None, "point --pack at the fix pack's root")
        errors.raise_if_any(f"cannot load the pack at {root}")
    series = load_series(root, errors)
    fixes: dict[str, Fix] = {}
    for fix_id in series:
        if (root / "fixes" / fix_id / "fix.toml").is_file():
            fix = load_fix(root / "fixes" / fix_id, errors, profile)
            if fix:
                fixes[fix_id] = fix
    _check_relations(series, fixes, root / "fixes", errors)
    errors.raise_if_any(f"the pack at {root} is invalid")
    profiles = {p.stem: p for p in sorted((root / "profiles").glob("*.toml"))} if (root / "profiles").is_dir() else {}
    return Pack(root, series, fixes, profiles)


def _check_relations(series: tuple[str, ...], fixes: dict[str, Fix], fixes_dir: Path, errors: Collector) -> None:
    position = {fid: i for i, fid in enumerate(series)}
    for fix in fixes.values():
        path = fix.folder / "fix.toml"
        text = path.read_text("utf-8", "replace")
        for req in fix.requires:
            if req not in position:
                errors.add(f"requires unknown fix {req!r}", path, key_line(text, "requires"), _close(req, series))
            elif req == fix.id:
                errors.add(f"requires itself ({req!r})", path, key_line(text, "requires"), "drop it from requires")
            elif (cycle := _requires_cycle(fix.id, req, fixes)) is not None:
                errors.add(f"requires {req!r}, and {' -> '.join(cycle)}: a cycle", path, key_line(text, "requires"),
                           "a fix cannot need a fix that needs it; drop one of these requirements")
            elif position[req] > position[fix.id]:
                errors.add(f"requires {req!r}, which comes later in the series", path, key_line(text, "requires"),
                           f"move {req!r} above {fix.id!r} in {fixes_dir / 'series'}")
        for other in fix.conflicts:
            if other not in position:
                errors.add(f"conflicts with unknown fix {other!r}", path, key_line(text, "conflicts"),
                           _close(other, series))


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


def _close(name: str, names: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(name, list(names), 3, 0.5)
    return f"close matches: {', '.join(close)}" if close else "no close match"


def parse_fixes(pack: Pack, profile: Profile, ids: tuple[str, ...] | list[str] | set[str]) -> None:
    """Parse the patches of the fixes ``ids`` (a run's chain, from a pack loaded for ``profile``) and check
    that each changes files of its target's package only. Raises PackError listing every problem."""
    errors = Collector()
    packages = {t.name: t.package for t in profile.targets}
    for fid in sorted(ids):
        fix = pack.fixes[fid]
        before = len(errors.problems)
        for patch in fix.patches:
            try:
                patch.files  # noqa: B018 (parsed here, once: cached on the patch)
            except PackError as exc:
                errors.problems += exc.problems
        if len(errors.problems) == before and fix.target in packages:
            _check_package_paths(fix, packages[fix.target], errors)
    errors.raise_if_any(f"the pack at {pack.root} is invalid")


def load_profile(pack: Pack, name: str, check_paths: bool = True) -> Profile:
    """Load ``profiles/<name>.toml`` and check it against the pack. Raises UnknownNameError or PackError.

    ``check_paths`` False leaves the check that each listed fix changes its target's package only to
    :func:`parse_fixes` (a run parses only the patches it needs)."""
    if name not in pack.profiles:
        raise UnknownNameError(f"unknown profile {name!r} ({_close(name, sorted(pack.profiles))}; "
                               f"profiles live in {pack.root / 'profiles'})")
    path = pack.profiles[name]
    errors = Collector()
    loaded = read_toml(path, errors)
    errors.raise_if_any(f"profile {name!r} is invalid")
    assert loaded is not None
    data, text = loaded
    _unknown_keys(data, PROFILE_KEYS, path, text, errors)
    targets = _load_targets(data.get("targets", {}), path, text, errors)
    fixes = data.get("fixes", {})
    if not isinstance(fixes, dict):
        errors.add("[fixes] must be a table", path, key_line(text, "fixes"))
        fixes = {}
    _unknown_keys(fixes, PROFILE_FIX_KEYS, path, text, errors, "fixes")
    default = _str_list(fixes.get("default", []), "default", path, text, errors)
    opt_in = _str_list(fixes.get("opt_in", []), "opt_in", path, text, errors)
    if str(data.get("name", name)) != name:
        errors.add(f"name {data.get('name')!r} differs from the file name {name!r}", path, key_line(text, "name"),
                   f"set name = \"{name}\" or rename the file")
    proof = data.get("proof", {})
    if not isinstance(proof, dict):
        errors.add("[proof] must be a table", path, key_line(text, "proof"))
        proof = {}
    _unknown_keys(proof, {"env"}, path, text, errors, "proof")
    proof_env = _str_table(proof.get("env", {}), "env", path, text, errors)
    components = load_components(pack, data.get("components", {}), {t.name for t in targets},
                                 set(default) | set(opt_in), path, errors)
    profile = Profile(name, path, str(data.get("description", "")).strip(),
                      targets, default, opt_in, proof_env, components)
    _check_profile(pack, profile, text, errors, check_paths)
    errors.raise_if_any(f"profile {name!r} is invalid")
    return profile


def _load_targets(value: Any, path: Path, text: str, errors: Collector) -> tuple[TargetSpec, ...]:
    if not isinstance(value, dict) or not value:
        errors.add("[targets] must name at least one target", path, key_line(text, "targets"))
        return ()
    out = []
    for tname, t in value.items():
        table = f"targets.{tname}"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", tname):
            # the name becomes the manifest's file name in .fixpack/
            errors.add(f"target name {tname!r}: letters, digits, '.', '_', '-' only", path, key_line(text, tname))
            continue
        if not isinstance(t, dict):
            errors.add(f"[{table}] must be a table", path, key_line(text, tname))
            continue
        _unknown_keys(t, TARGET_KEYS, path, text, errors, table)
        src = t.get("source", {})
        _unknown_keys(src if isinstance(src, dict) else {}, SOURCE_KEYS, path, text, errors, table + ".source")
        for key in ("package", "commit"):
            if not isinstance(t.get(key), str) or not t.get(key):
                errors.add(f"[{table}] needs a {key!r}", path, key_line(text, tname))
        commit = str(t.get("commit", ""))
        if commit and not re.fullmatch(r"[0-9a-f]{7,40}", commit):
            errors.add(f"[{table}] commit {commit!r} is not 7-40 lower-case hex digits", path,
                       key_line(text, "commit", table))
        package = str(t.get("package", ""))
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
                errors.add(f"[fixes] {key} names unknown fix {fid!r}", path, line, _close(fid, pack.series))
                continue
            if fid in listed:
                where = f"twice in {key}" if listed[fid] == key else f"in both {listed[fid]} and {key}"
                errors.add(f"fix {fid!r} is listed {where}", path, line, "keep one entry")
            listed[fid] = key
            fix = pack.fixes[fid]
            if fix.target not in names:
                errors.add(f"fix {fid!r} targets {fix.target!r}, which the profile does not define", path, line,
                           f"add [targets.{fix.target}] or drop the fix")
            elif check_paths:
                _check_package_paths(fix.for_profile(profile.name), profile.target(fix.target).package, errors)
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
    _check_conflicts(pack, [f for f, k in listed.items() if k == "default"], errors, path)


def _check_package_paths(fix: Fix, package: str, errors: Collector) -> None:
    """Every file a fix changes lies inside its target's package folder (``<package>/...``): the root may
    be a site-packages folder, where another path would change another distribution, or the tool's own
    state (``.fixpack/``)."""
    for patch in fix.patches:
        for fp in patch.files:
            for p in fp.paths():
                if not p.startswith(package + "/"):
                    errors.add(f"{patch.path.name} changes {p!r}, outside the target's package folder {package}/",
                               patch.path, fp.diff_line, f"patch files under {package}/ only")
    for target_path, _src in fix.binary:
        if not target_path.startswith(package + "/"):
            errors.add(f"binary file {target_path!r} lies outside the target's package folder {package}/",
                       fix.folder / "fix.toml", None, f"place it under {package}/")


def _check_conflicts(pack: Pack, selected: list[str], errors: Collector, path: Path | None) -> None:
    chosen = set(selected)
    pairs = {tuple(sorted((fid, other))) for fid in selected for other in pack.fixes[fid].conflicts if other in chosen}
    for a, b in sorted(pairs):
        errors.add(f"fixes {a!r} and {b!r} are both selected but declare a conflict", path, None,
                   "select only one of them")


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
            raise UnknownNameError(f"unknown fix {name!r} ({_close(name, pack.series)})")
        if name not in profile.default and name not in profile.opt_in:
            errors.add(f"fix {name!r} is not allowed by profile {profile.name!r}", profile.path, None,
                       f"its opt-in fixes: {', '.join(profile.opt_in) or 'none'}")
        elif name not in chosen:
            chosen.append(name)
    for fid in chosen:
        for req in pack.fixes[fid].requires:
            if req not in chosen:
                errors.add(f"fix {fid!r} requires {req!r}", profile.path, None, f"name {req!r} on the command line too")
    _check_conflicts(pack, chosen, errors, profile.path)
    errors.raise_if_any("cannot select the fixes")
    return tuple(f.id for f in pack.ordered(tuple(chosen)))
