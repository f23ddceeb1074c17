"""The shape of a lock's fix entries, as ``fixpack lock`` writes them, checked as the lock is read (its seal is a plain
sha256 over its content: it proves an entry was not edited after it was sealed, not that a lock sealed again is well
formed).

A fix entry has exactly ``id``, ``version``, ``target``, ``patch_sha256``, ``files`` and ``hunks``, and
``patch_bytes_sha256`` (absent in a lock from before it was kept); a file entry exactly ``path``, ``pre`` and
``post``; a hunk entry exactly ``file``, ``hunk``, ``pre`` and ``post``, with ``pre_count`` and ``post_count`` both or
neither. Each value of its type (a key of another type, or one ``lock`` never writes, would be read as something else
or not read at all), a file named once in its fix's entry. ``lock`` counts every hunk of a fix it lays (none of
one the release holds already: its files' pre-image is their post-image), so in a lock that counts hunks on a target,
a hunk without counts of a fix that changes files there was edited too (:func:`counts_missing`; a lock of one target
keeps the other targets' entries, which an older ``lock`` may have written without counts).

The rest of the lock is held to its shape too (:func:`lock_problem`): exactly ``schema``, ``profile``,
``generated_by`` (a string), ``targets``, ``fixes``, ``digest`` and ``components`` (absent in a lock of a profile
without components); ``targets`` an object of target name -> exactly ``version`` and ``commit`` (a version and a
commit id, each or "" where the release names none), for the targets its fix entries name and no other; a component
entry exactly ``id`` (a component id), ``version`` (a version), ``files`` (an object of a path inside the target ->
its sha256) and ``dist_info`` (absent in a lock from before it was kept), one entry per component id.

What is wrong is said with where (:data:`Where` in a fix entry, :data:`KeyPath` elsewhere), for
:func:`fixpack.lock_seal.entry_wrong` and :func:`fixpack.lock_seal.doc_wrong` to find its line.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .documents import short
from .safepath import ID_RE, VERSION_RULE, is_version, path_problem

_SHA = re.compile(r"[0-9a-f]{64}")

# where in a fix entry: ("fix", 0, key), or the ``n``-th entry of its "files" or "hunks" list (0-based) and a key in
# it (None: the entry itself)
Where = tuple[str, int, "str | None"]
# where in a lock outside its fix entries: the keys from its top down to what is wrong, a list's entry by its index
# (("targets", "vllm", "commit"), ("components", 0, "files", PATH)); () the lock itself
KeyPath = tuple["str | int", ...]


def is_sha256(value: Any) -> bool:
    """A sha256 as this tool writes one: 64 lower-case hex digits."""
    return isinstance(value, str) and bool(_SHA.fullmatch(value))


def sha_or_none(value: Any) -> bool:
    return value is None or is_sha256(value)


def is_int(value: Any) -> bool:
    """An int that is not a bool (JSON true is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _sha_or_none(value: Any) -> str | None:
    return None if sha_or_none(value) else "a sha256 (64 lower-case hex digits) or null"


def _sha(value: Any) -> str | None:
    return None if is_sha256(value) else "a sha256 (64 lower-case hex digits)"


def _path(value: Any) -> str | None:
    problem = path_problem(value) if isinstance(value, str) else "not a string"
    return f"a path relative, inside the target ({problem})" if problem else None


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) else "a string"


def _count(value: Any) -> str | None:
    return None if is_int(value) and value >= 0 else "an integer of 0 or more"


_FIX = {"id": lambda v: None if isinstance(v, str) and ID_RE.fullmatch(v) else "a fix id",
        "version": lambda v: None if is_version(v) else VERSION_RULE, "target": _string,
        "patch_sha256": _sha, "files": lambda v: None if isinstance(v, list) else "a list",
        "hunks": lambda v: None if isinstance(v, list) else "a list", "patch_bytes_sha256": _sha}
_FILE = {"path": _path, "pre": _sha_or_none, "post": _sha_or_none}
_HUNK = {"file": _path, "hunk": lambda v: None if is_int(v) and v >= 1 else "an integer of 1 or more",
         "pre": _sha, "post": _sha, "pre_count": _count, "post_count": _count}
_OPTIONAL = {"patch_bytes_sha256", "pre_count", "post_count"}


def _read_before(value: Any) -> str | None:
    """A key whose value is checked before the shape, with its own message: ``schema`` and ``profile`` (as the lock
    is read), ``fixes`` (a list, else no lock at all), ``digest`` (the seal)."""
    return None


def dist_info_problem(value: Any) -> str | None:
    """Why ``value`` is no lock's ``dist_info``: "" (a lock from before it was kept) or one folder name
    ``*.dist-info``."""
    ok = value == "" or isinstance(value, str) and value.endswith(".dist-info") and not path_problem(value) \
        and "/" not in value
    return None if ok else "a folder name ending in .dist-info"


_TOP = {"schema": _read_before, "profile": _read_before, "generated_by": _string, "fixes": _read_before,
        "targets": lambda v: None if isinstance(v, dict) else "an object of target name -> its version and commit",
        "components": lambda v: None if isinstance(v, list) else "a list", "digest": _read_before}
_RELEASE = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]*")  # a release's or a component's version, as found
_COMMIT = re.compile(r"g?[0-9a-fA-F]{7,40}")  # as targets.read_facts finds it (setuptools-scm's "g" before the digits)


def release_version_problem(value: Any) -> str | None:
    """Why ``value`` is no version of a release or a component as found (PEP 440's characters, no space, no control
    character: a lock's or a manifest's is printed in messages); None when it is one."""
    return None if isinstance(value, str) and _RELEASE.fullmatch(value) else \
        "a version (letters, digits, '.', '+', '!', '_', '-')"


def _commit(value: Any) -> str | None:
    return None if isinstance(value, str) and (value == "" or _COMMIT.fullmatch(value)) else \
        'a commit id (7 to 40 hex digits, after a "g" as setuptools-scm writes it) or "" (none found)'


# a target's version or commit "": none found (a git tree names no version)
_TARGET = {"version": lambda v: None if v == "" else release_version_problem(v), "commit": _commit}
_COMPONENT = {"id": lambda v: None if isinstance(v, str) and ID_RE.fullmatch(v) else
              "a component id (lower-case letters, digits, '.', '_', '-')", "version": release_version_problem,
              "files": lambda v: None if isinstance(v, dict) else "an object of path -> sha256",
              "dist_info": dist_info_problem}


def lock_problem(data: dict[str, Any]) -> tuple[str, str, KeyPath] | None:
    """What of a lock (``data``: an object with a list of ``fixes``) outside its fix entries is not as ``lock`` writes
    it: whose (how a message names the entry; "" the lock itself), what and where (:data:`KeyPath`); None when it
    is."""
    wrong = _keys(data, _TOP, "", {"components"})
    if wrong:
        return "", wrong[0], (wrong[1],) if wrong[1] else ()
    for name, entry in data["targets"].items():
        whose = f'its "targets" entry {short(json.dumps(name))}'
        wrong = _keys(entry, _TARGET, "", set()) if isinstance(entry, dict) else \
            (f"it is {short(json.dumps(entry))}, not an object of version and commit", None)
        if wrong:
            return whose, wrong[0], ("targets", name, *((wrong[1],) if wrong[1] else ()))
        if not any(isinstance(f, dict) and f.get("target") == name for f in data["fixes"]):
            return whose, ("it names a target no fix entry of the lock has: `fixpack lock` records the release of "
                           "the targets whose fixes it locks, and no other"), ("targets", name)
    return _components(data.get("components", []))


def _components(comps: list[Any]) -> tuple[str, str, KeyPath] | None:
    """The first component entry not as ``lock`` writes one (:func:`lock_problem`), or one of a component id an
    entry before it has (``lock`` records each component once)."""
    first: dict[str, int] = {}
    for n, comp in enumerate(comps):
        cid = comp.get("id") if isinstance(comp, dict) else None
        whose = f'entry {n + 1} of its "components"{f" (id {short(json.dumps(cid))})" if isinstance(cid, str) else ""}'
        wrong = _keys(comp, _COMPONENT, "", {"dist_info"}) if isinstance(comp, dict) else \
            ("it is not a JSON object", None)
        if wrong:
            return whose, wrong[0], ("components", n, *((wrong[1],) if wrong[1] else ()))
        for path, sha in comp["files"].items():
            file, bad_path, bad_sha = short(json.dumps(path)), _path(path), _sha(sha)
            if bad_path or bad_sha:
                return whose, (f"its file {file} is not {bad_path}" if bad_path else
                               f"its file {file} records {short(json.dumps(sha))}, not {bad_sha}"), \
                    ("components", n, "files", path)
        if comp["id"] in first:
            return whose, (f"it is a second entry of component {comp['id']} (entry {first[comp['id']] + 1} is the "
                           f"first): `fixpack lock` records each component once"), ("components", n, "id")
        first[comp["id"]] = n
    return None


def fixes_problem(fixes: list[Any]) -> tuple[int, str, Where] | None:
    """The first entry of a lock's ``fixes`` that is not as ``lock`` writes one (its index), what and where
    (:func:`entry_problem`, then :func:`counts_missing`); None when every one is."""
    for n, entry in enumerate(fixes):
        wrong = entry_problem(entry)
        if wrong is not None:
            return n, *wrong
    return counts_missing(fixes)


def entry_problem(entry: Any) -> tuple[str, Where] | None:
    """What of a lock's fix entry is not as ``lock`` writes one, and where; None when it is."""
    if not isinstance(entry, dict):
        return "it is not a JSON object", ("fix", 0, None)
    wrong = _keys(entry, _FIX, "")
    if wrong:
        return wrong[0], ("fix", 0, wrong[1])
    for kind, rules in (("files", _FILE), ("hunks", _HUNK)):
        for n, item in enumerate(entry[kind]):
            said = _item(kind, n, item)
            wrong = _keys(item, rules, said) if isinstance(item, dict) else (f"{said} is not a JSON object", None)
            if wrong:
                return wrong[0], (kind, n, wrong[1])
    return _hunk_counts(entry) or _twice(entry)


def _item(kind: str, n: int, item: Any) -> str:
    """How a message names the ``n``-th entry of a fix's ``kind`` list."""
    if kind == "files":
        path = item.get("path") if isinstance(item, dict) else None
        return f"its file entry {n + 1}{f' ({short(path)})' if isinstance(path, str) else ''}"
    file, number = (item.get("file"), item.get("hunk")) if isinstance(item, dict) else (None, None)
    return (f"its hunk #{number} of {short(file)}" if isinstance(file, str) and is_int(number) else
            f"its hunk entry {n + 1}")


def _keys(item: dict[str, Any], rules: dict[str, Any], said: str, optional: set[str] = _OPTIONAL) -> \
        tuple[str, str | None] | None:
    """The first key of ``item`` that ``lock`` does not write, is missing (unless ``optional``), or holds a value of
    another kind than ``rules`` allows, said of ``said`` (what names the entry; "" the entry itself), with that key
    (None: the entry)."""
    it, its = (said, f"{said}: its") if said else ("it", "its")
    extra = next((k for k in item if k not in rules), None)
    if extra is not None:
        return f"{it} has a key {short(json.dumps(extra))}, which `fixpack lock` never writes", extra
    missing = next((k for k in rules if k not in item and k not in optional), None)
    if missing is not None:
        return f"{it} has no {json.dumps(missing)}", None
    for key, rule in rules.items():
        why = rule(item[key]) if key in item else None
        if why:
            return f"{its} {json.dumps(key)} is {short(json.dumps(item[key]))}, not {why}", key
    return None


def _hunk_counts(entry: dict[str, Any]) -> tuple[str, Where] | None:
    """A hunk with one count and not the other, or without counts where its fix's other hunks have them."""
    counted = ["pre_count" in h or "post_count" in h for h in entry["hunks"]]
    for n, h in enumerate(entry["hunks"]):
        if ("pre_count" in h) != ("post_count" in h):
            one, other = ("pre_count", "post_count") if "pre_count" in h else ("post_count", "pre_count")
            return (f"{_item('hunks', n, h)} records {one} but no {other}: `fixpack lock` writes both or neither",
                    ("hunks", n, None))
        if any(counted) and not counted[n]:
            return (f"{_item('hunks', n, h)} records no pre_count and post_count where its fix's other hunks record "
                    f"them: `fixpack lock` counts every hunk of a fix it lays, or none", ("hunks", n, None))
    return None


def _twice(entry: dict[str, Any]) -> tuple[str, Where] | None:
    """A file named a second time in its fix's entry (``lock`` names each file a fix touches once; a hunk's file and
    number may come twice: two patches of a fix may change one file, their hunks numbered in each)."""
    seen: dict[str, int] = {}
    for n, item in enumerate(entry["files"]):
        if item["path"] in seen:
            return (f"{_item('files', n, item)} is a second entry of {short(item['path'])} (its file entry "
                    f"{seen[item['path']] + 1} is the first): `fixpack lock` records each file of a fix once",
                    ("files", n, None))
        seen[item["path"]] = n
    return None


def counts_missing(fixes: list[dict[str, Any]]) -> tuple[int, str, Where] | None:
    """The first entry (its index, what, where) of a well-formed lock's ``fixes`` whose hunks record no counts though
    it changes files of a target where other entries' hunks record them (``lock`` counts each hunk of a fix it lays;
    a fix the release holds, its files' pre-image their post-image, it does not count); None when there is none."""
    counting = {f["target"] for f in fixes if any("pre_count" in h for h in f["hunks"])}
    for n, f in enumerate(fixes):
        lays = any(x["pre"] != x["post"] for x in f["files"])
        if f["target"] in counting and lays and f["hunks"] and "pre_count" not in f["hunks"][0]:
            return (n, f"{_item('hunks', 0, f['hunks'][0])} records no pre_count and post_count, where the lock "
                       f"records them for the hunks of target {f['target']}'s other fixes: `fixpack lock` counts every "
                       f"hunk of a fix it lays there", ("hunks", 0, None))
    return None
