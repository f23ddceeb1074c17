"""The shape of a manifest (``<root>/.fixpack/<target>.manifest.json``, written by apply), checked before it is read as
records (:class:`fixpack.records.Manifest`): it is untrusted input (an image layer can plant one), so every key is
of its type, every path canonical, every hash a sha256, ``files`` exactly the applied fixes' files, each fix's
``offsets`` and ``hunk_offsets`` only on its own files, each component's files its own; a problem is told with the
key it lies at (:class:`fixpack.manifest_where.EntryProblem`), for the caller's exit 3 at that line."""

from __future__ import annotations

import json
from typing import Any

from .documents import short
from .lock_shape import is_int, is_sha256, release_version_problem, sha_or_none
from .manifest_where import EntryProblem
from .safepath import ID_RE, VERSION_RULE, is_version, name_problem, path_problem

FILE_BITS = 0o777  # a file's recorded mode: permission bits only (a revert never makes a set-id file)
DIR_BITS = 0o3777  # a folder's: with setgid and sticky (group inheritance, deletion rights); never setuid


def kept_problem(value: Any, folder: bool) -> str | None:
    """Why ``value`` is not a recorded mode and owner (:class:`Kept`) of a file or folder."""
    if not isinstance(value, dict) or set(value) != {"mode", "owner"}:
        return "not an object with mode and owner"
    mode, owner = value["mode"], value["owner"]
    if not is_int(mode) or mode < 0 or mode & ~(DIR_BITS if folder else FILE_BITS):
        return (f"mode {mode!r} is not a {'folder' if folder else 'file'}'s permission bits (fixpack records no "
                f"{'setuid' if folder else 'setuid, setgid or sticky'} bit)")
    if owner is not None and not (isinstance(owner, list) and len(owner) == 2 and
                                  all(is_int(x) and 0 <= x < 0xFFFFFFFF for x in owner)):
        return f"owner {owner!r} is not [uid, gid]"
    return None

def _files_problem(files: Any, what: str) -> str | None:
    if not isinstance(files, dict):
        return f"{what} is not an object of path -> sha256"
    for p, h in files.items():
        problem = path_problem(p)
        said = f"{what} names {p!r}: {problem}" if problem else \
            None if sha_or_none(h) else f"{what}: the hash of {p} is not a sha256"
        if said:  # (with the path, for its line: in the manifest's own 'files', or in an entry's)
            return EntryProblem(said, (0, p))
    return None


def _manifest_fix_problem(f: Any) -> tuple[str | tuple[str, str], str] | None:
    """What is wrong with one entry of a manifest's ``fixes``, with the key it lies at (or the key and the key in the
    object it holds: a path in its ``offsets`` or ``hunk_offsets``)."""
    if not isinstance(f, dict) or not isinstance(f.get("id"), str):
        return "id", "not an object with a fix id"
    if name_problem(f["id"]):  # (a fix id is a file name: at most 100 characters)
        return "id", f"fix id {short(f['id'])!r} is no fix id: {name_problem(f['id'])}"
    if f.get("state") not in ("applied", "upstreamed"):
        return "state", f"{f['id']}: its state {short(json.dumps(f['state'])) if 'state' in f else 'is missing'}" + (
            " is neither 'applied' nor 'upstreamed'" if "state" in f else "")
    if not is_version(f.get("version")):
        return "version", f"{f['id']}: its version {short(json.dumps(f.get('version')))} is not {VERSION_RULE}"
    if not is_sha256(f.get("patch_sha256")):  # (the whole value: a "$" would let a newline end it)
        return "patch_sha256", f"{f['id']}: " + (f"its patch_sha256 {short(json.dumps(f['patch_sha256']))} is not a "
                                                 "sha256" if "patch_sha256" in f else "needs the patch's sha256")
    if "patch_bytes_sha256" in f and not is_sha256(f["patch_bytes_sha256"]):  # (absent in older manifests)
        return "patch_bytes_sha256", f"{f['id']}: its patch_bytes_sha256 is not a sha256"
    problem = _files_problem(f.get("files"), f"{f['id']}'s files")
    if problem:
        return ("files", problem.at[1]) if isinstance(problem, EntryProblem) else "files", problem
    off = _offsets_problem(f.get("offsets", {}), f["files"])  # (absent in older manifests: 0 everywhere)
    if off:
        return ("offsets", off[0]), f"{f['id']}: {off[1]}"
    off = _hunk_offsets_problem(f.get("hunk_offsets", {}), f["files"], f.get("offsets", {}))
    return (("hunk_offsets", off[0]), f"{f['id']}: {off[1]}") if off else None


def _offsets_problem(offsets: Any, files: dict[str, Any]) -> tuple[str, str] | None:
    """A fix entry's ``offsets``: an object of one of its files -> a whole number of lines (where its first hunk was
    laid, from its stated line). What is wrong, with the path it lies at ("": the key itself)."""
    if not isinstance(offsets, dict):
        return "", "its offsets are not an object of path -> lines"
    for p, n in offsets.items():
        if p not in files:
            return p, f"its offsets name {short(json.dumps(p))}, which is not one of its files"
        if not is_int(n) or abs(n) > MAX_OFFSET:
            return p, (f"its offset in {p} is {short(json.dumps(n))}, not a whole number of lines (at most "
                       f"{MAX_OFFSET} either way)")
    return None


def _hunk_offsets_problem(value: Any, files: dict[str, Any], offsets: dict[str, Any]) -> tuple[str, str] | None:
    """A fix entry's ``hunk_offsets``: an object of one of its files -> a list of two or more whole numbers of lines
    (each hunk's offset there), the first of them the file's ``offsets`` (0 where that names none), not all the same
    (a run writes the list only then). What is wrong, with the path it lies at ("": the key itself)."""
    if not isinstance(value, dict):
        return "", "its hunk_offsets are not an object of path -> a list of lines"
    for p, n in value.items():
        if p not in files:
            return p, f"its hunk_offsets name {short(json.dumps(p))}, which is not one of its files"
        if not isinstance(n, list) or len(n) < 2 or len(n) > MAX_HUNKS or not all(
                is_int(x) and abs(x) <= MAX_OFFSET for x in n):
            return p, (f"its hunk offsets in {p} are {short(json.dumps(n))}, not a list of 2 to {MAX_HUNKS} whole "
                       f"numbers of lines (each at most {MAX_OFFSET} either way)")
        if n[0] != offsets.get(p, 0) or len(set(n)) == 1:
            return p, (f"its hunk offsets in {p} are {short(json.dumps(n))}: " + (
                "all the same (written only where they differ)" if len(set(n)) == 1 else
                f"the first is not its offset there ({offsets.get(p, 0)})"))
    return None


MAX_OFFSET = 2 ** 31  # (lines: a file of more is no source file)
MAX_HUNKS = 2 ** 20  # (hunks of one file: a patch of more is no fix)


def manifest_problem(data: Any, target: str | None) -> str | None:
    """Why ``data`` is no manifest of ``target`` (its file's name says whose it is; None: a path that names no
    target, a hand-made call); None when it is one."""
    if not isinstance(data, dict) or not isinstance(data.get("fixes"), list):
        return "not a JSON object with a list of fixes"
    missing = next((k for k in ("schema", "profile", "target") if k not in data), None)
    if missing:  # (every manifest fixpack ever wrote has them, since its first commit: none is older)
        return f"key {missing!r} is missing (every manifest fixpack writes has it)"
    files = data.get("files", {})
    problem = _files_problem(files, "'files'")
    if problem:
        return problem
    seen: dict[str, int] = {}  # fix id -> its entry's number
    applied_files: dict[str, int] = {}  # path -> the number of the last applied entry that records it
    for n, f in enumerate(data["fixes"], 1):
        found = _manifest_fix_problem(f)
        if found:
            at = found[0] if isinstance(found[0], tuple) else (found[0], "")
            return EntryProblem(f"fix entry {n}: {found[1]}", (n, *at))
        if f["id"] in seen:
            twice = f"fix entry {n}: fix {f['id']} is recorded twice (entry {seen[f['id']]} too)"
            return EntryProblem(twice, (n, "id"))
        seen[f["id"]] = n
        if f["state"] == "applied":
            applied_files.update(dict.fromkeys(f["files"], n))
    problem = _components_problem(data.get("components", []), set(applied_files)) or _removed_problem(data, files)
    if not problem and set(files) != set(applied_files):  # each run writes 'files' as the union of its applied fixes'
        problem = _files_not_applied(files, applied_files)
    problem = problem or next((f"key {k!r} is {short(json.dumps(data[k]))}, not a string" for k in
                               ("profile", "target", "tool", "tool_version")
                               if k in data and not isinstance(data[k], str)), None) or next((
        f"key {k!r} is {short(json.dumps(data[k]))}, not an object of strings" for k in ("pin", "found") if k in data
        and not (isinstance(data[k], dict) and all(isinstance(v, str) for v in data[k].values()))), None)
    if problem or data["target"] != (target or data["target"]):  # (the file's name says whose manifest it is)
        return problem or f"key 'target' is {short(json.dumps(data['target']))}, not {target!r} (the file's name)"
    name = data["profile"]  # (said in messages and in the commands they suggest: a name, never text of any kind)
    bad = name_problem(name)
    return f"key 'profile' is {short(json.dumps(name))}, no profile name ({bad})" if bad else None


def _files_not_applied(files: dict[str, Any], applied: dict[str, int]) -> EntryProblem:
    """The manifest's own ``files`` are not the union of its applied fixes' files: the first path one side lacks, at
    its line on the other side (a path of ``files`` no applied entry records; else one an entry records that
    ``files`` lacks)."""
    said = "its 'files' are not the files of its applied fixes (an entry removed or edited by hand?)"
    extra = sorted(set(files) - set(applied))
    if extra:
        return EntryProblem(f"{said}: 'files' records {extra[0]}, which no applied fix's entry records", (0, extra[0]))
    lacking = sorted(set(applied) - set(files))[0]
    return EntryProblem(f"{said}: fix entry {applied[lacking]} records {lacking}, which 'files' lacks",
                        (applied[lacking], "files", lacking))


def _components_problem(comps: Any, fix_files: set[str]) -> str | None:
    """The ``components`` of a manifest (absent in manifests before components: an empty list)."""
    if not isinstance(comps, list):
        return "'components' is not a list"
    owned: dict[str, str] = {}
    for n, c in enumerate(comps, 1):
        if not isinstance(c, dict) or set(c) != {"id", "version", "dist_info", "files"} or \
                not isinstance(c["id"], str) or not ID_RE.fullmatch(c["id"]) or release_version_problem(c["version"]):
            return f"component entry {n}: not an object with id, version, dist_info and files"
        where = f"component {c['id']}"
        if path_problem(c["dist_info"]) or not str(c["dist_info"]).endswith(".dist-info") or "/" in c["dist_info"]:
            return f"{where}: dist_info {c['dist_info']!r} is not a .dist-info folder at the root"
        problem = _files_problem(c["files"], f"{where}'s files")
        if problem:
            return str(problem)  # (no line: a component's files are not a fix entry's)
        for p, h in c["files"].items():
            if h is None:
                return f"{where}: {p} has no sha256 (every file a component installs exists)"
            if p in owned or p in fix_files:
                return f"{where}: {p} is recorded twice (by {owned.get(p, 'a fix')} too)"
            if p.split("/", 1)[0].endswith(".dist-info") and p.split("/", 1)[0] != c["dist_info"]:
                return f"{where}: {p} lies in another distribution's .dist-info folder than its {c['dist_info']}"
            owned[p] = where
    ids = [c["id"] for c in comps]
    return "a component is recorded twice" if len(ids) != len(set(ids)) else None


def _removed_problem(data: dict[str, Any], files: Any) -> str | None:
    """``removed_files`` name only files the applied fixes leave absent (``files`` without a sha256), and
    ``removed_dirs`` only folders above one of them; each with a mode and owner :func:`kept_problem` allows."""
    gone = {p for p, h in files.items() if h is None}
    for key, folder in (("removed_files", False), ("removed_dirs", True)):
        value = data.get(key, {})
        if not isinstance(value, dict):
            return f"{key!r} is not an object of path -> mode and owner"
        for p, k in value.items():
            if path_problem(p):
                return f"{key!r} names {p!r}: {path_problem(p)}"
            if not (any(g.startswith(p + "/") for g in gone) if folder else p in gone):
                return (f"{key!r} names {p}, which is no {'folder above a ' if folder else ''}file its applied fixes "
                        f"remove")
            problem = kept_problem(k, folder)
            if problem:
                return f"{key!r}: {p}: {problem}"
    return None
