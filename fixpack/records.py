"""The lock and the manifest as typed, frozen records: their JSON form, their validation (a manifest's shape in
:mod:`fixpack.manifest_shape`) and the lock's digest.

- A **lock** (``profiles/<name>.lock``, written by ``fixpack lock``) holds, per fix of the profile, the
  patch hash and each touched file's pre-image and post-image sha256 along the chain, and per hunk
  the sha256 of its two sides and how often each occurs in its file (the placement rule's evidence).
  It is sealed by a digest: a hand edit is bad input (exit 2), as is a lock that is not well formed.
- A **manifest** (``<root>/.fixpack/<target>.manifest.json``, written by apply) records what the image
  holds: each fix's id, version, patch hash, state (applied or upstreamed) and its files' sha256 after
  it (and the sha256 of the patch bytes it was applied from, absent in older manifests; and, per file where it is
  not 0, the offset its first hunk was laid at, which a revert starts from), plus the union
  of the applied fixes' files. It is untrusted input (an image layer can plant one): every path
  canonical, every hash a sha256, ``files`` exactly the applied fixes' files; a damaged one is exit 3
  before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from . import __version__
from .documents import load_json, loads_json, schema_said, short
from .errors import DamagedStateError, StaleLockError
from .lock_shape import fixes_problem, lock_problem
from .lock_shape import is_int as is_int  # (re-exported: the records' value checks)
from .lock_shape import is_sha256 as is_sha256
from .lock_shape import sha_or_none as sha_or_none
from .manifest_shape import manifest_problem
from .manifest_where import EntryProblem, entry_line
from .states import Word
from .structs import dataclass, field

LOCK_SCHEMA = 1
MANIFEST_SCHEMA = 1
# what a damaged manifest's message says to do: a run without it finds the fixes applied by the lock's fingerprints
REMOVE_MANIFEST = ("remove the file (apply then records again the fixes it finds applied, by the lock's fingerprints) "
                   "or restore the image")

Hashes = Mapping[str, "str | None"]  # path -> sha256 (None: the file does not exist)


def dumps(data: Any) -> bytes:
    """The deterministic JSON form of manifests, journals and locks."""
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


# --- the lock ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LockFile:
    """One file a fix touches: its sha256 before and after the fix along the chain."""

    path: str
    pre: str | None
    post: str | None


@dataclass(frozen=True)
class LockHunk:
    """One hunk (in the order of :meth:`Fix.file_patches`): its sides' sha256 and their counts."""

    file: str
    hunk: int
    pre: str
    post: str
    pre_count: int | None = None
    post_count: int | None = None


@dataclass(frozen=True)
class LockFix:
    id: str
    version: int
    target: str
    patch_sha256: str
    files: tuple[LockFile, ...] = ()
    hunks: tuple[LockHunk, ...] = ()
    # a shortcut, not a fingerprint: the fix's patch bytes (Fix.bytes_sha256) when the lock was made. A
    # pack whose bytes are these has this patch_sha256 without parsing; other bytes (a reworded header)
    # are parsed. Not compared: a lock differing only here is fresh.
    patch_bytes_sha256: str = field(default="", compare=False)

    def pre(self) -> dict[str, str | None]:
        return {f.path: f.pre for f in self.files}

    def post(self) -> dict[str, str | None]:
        return {f.path: f.post for f in self.files}

    def upstreamed(self) -> bool:  # the release held its post-image: no file's sha256 changed by it
        return all(f.pre == f.post for f in self.files)


@dataclass(frozen=True)
class LockComponent:
    """A component of the profile: its version, the sha256 of each package file it installs (the
    ``.dist-info`` files are left out: the build backend's version shows in them) and the name of its
    ``.dist-info`` folder (what a damaged journal's steps remove; "" in a lock from before it was kept)."""

    id: str
    version: str
    files: tuple[tuple[str, str], ...] = ()
    dist_info: str = ""


def package_files(hashes: Mapping[str, str]) -> dict[str, str]:
    """A component's installed files without its ``.dist-info`` folder (what its lock entry covers)."""
    return {p: h for p, h in hashes.items() if not p.split("/", 1)[0].endswith(".dist-info")}


@dataclass(frozen=True)
class Lock:
    """A profile's fingerprints. ``targets`` maps each fingerprinted target to its version and commit."""

    profile: str
    targets: Mapping[str, Mapping[str, str]]
    fixes: tuple[LockFix, ...]
    generated_by: str = f"fixpack {__version__}"
    components: tuple[LockComponent, ...] = ()

    def fix(self, fix_id: str) -> LockFix | None:
        return self._by_id.get(fix_id)

    @cached_property
    def _by_id(self) -> dict[str, LockFix]:
        """The first entry of each fix id (looked up once per fix and pass: a scan made 500 fixes quadratic)."""
        out: dict[str, LockFix] = {}
        for f in self.fixes:
            out.setdefault(f.id, f)
        return out

    def component(self, cid: str) -> LockComponent | None:
        return next((c for c in self.components if c.id == cid), None)

    def release_files(self, target: str | None = None) -> dict[str, str | None]:
        """Each file the fixes (of ``target``; None: every target) touch -> its sha256 on the clean release:
        the first pre-image along the chain (None: the release lacks it, a fix creates it)."""
        out: dict[str, str | None] = {}
        for fix in self.fixes:
            if target is None or fix.target == target:
                for f in fix.files:
                    out.setdefault(f.path, f.pre)
        return out

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema": LOCK_SCHEMA, "profile": self.profile, "generated_by": self.generated_by,
                                "targets": {k: dict(v) for k, v in self.targets.items()},
                                "fixes": [_lock_fix_json(f) for f in self.fixes]}
        if self.components:
            data["components"] = [{"id": c.id, "version": c.version, "files": dict(c.files)}
                                  | ({"dist_info": c.dist_info} if c.dist_info else {}) for c in self.components]
        data["digest"] = lock_digest(data)
        return data

    @classmethod
    def from_json(cls, raw: bytes, path: Path, profile: str, redo: Callable[[], str] | None = None) -> Lock:
        """Parse and check a lock file's bytes: every key as ``lock`` writes it (:mod:`fixpack.lock_shape`), sealed.
        Raises StaleLockError (exit 2) naming ``path``, the line of what is wrong (where the lock is laid out as
        ``lock`` writes it) and what to do (``redo`` renders how to regenerate it, from
        :func:`fixpack.lockfile.read_lock`; called only then)."""
        def how() -> str:
            if redo is not None:
                return redo()
            from .progname import command  # only for a lock read without its command (a hand-made call)

            return f"regenerate it from a clean release copy: {command('lock', '--profile', profile)} --root NAME=PATH"

        def bad(what: str, line: int | None = None, said_at: bool = False) -> StaleLockError:
            """``said_at``: the message names the line after the path (``path:line: ...``)."""
            hint = how()
            return StaleLockError(f"{path}{f':{line}' if said_at else ''}: {what}; {hint}", line, what, hint)

        try:
            data = loads_json(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:  # at its line, as a pack's other text files
            column = exc.start - raw.rfind(b"\n", 0, exc.start)
            raise bad(f"bytes that are not UTF-8 at byte offset {exc.start} (byte {column} of the line)",
                      raw.count(b"\n", 0, exc.start) + 1, said_at=True) from exc
        except json.JSONDecodeError as exc:
            raise bad(f"the lock is not valid JSON ({exc.msg})", exc.lineno, said_at=True) from exc
        fixes = data.get("fixes") if isinstance(data, dict) else None
        if not isinstance(fixes, list):
            raise bad("not a fixpack lock (a JSON object with a list of fixes)")
        for key, ok in (("schema", type(data.get("schema")) is int and data["schema"] == LOCK_SCHEMA),
                        ("profile", isinstance(data.get("profile"), str))):
            if not ok:  # outside the seal (its fingerprints): checked here, at the key's line
                from .lock_seal import line_of_keys  # only for a lock edited by hand

                line = line_of_keys(raw.decode("utf-8").splitlines(), (key,))
                said = "missing" if key not in data else short(json.dumps(data[key]))
                what = schema_said(said, "lock ", LOCK_SCHEMA) if key == "schema" else \
                    f'its "profile" is {said}, not the name of a profile'
                raise bad(what, line, said_at=line is not None)
        shape = lock_problem(data)  # (the rest of it as lock writes it: at its key's line)
        if shape is not None:
            from .lock_seal import doc_wrong  # only for a lock edited by hand

            raise bad(*doc_wrong(raw.decode("utf-8"), *shape))
        wrong = fixes_problem(fixes)
        if wrong is not None or data.get("digest") != lock_digest(data):
            from .lock_seal import entry_wrong, unsealed  # only for a lock edited by hand

            raise bad(*(unsealed(raw.decode("utf-8"), fixes, path) if wrong is None else
                        entry_wrong(raw.decode("utf-8"), fixes, path, *wrong)))
        twice = sorted(i for i, n in Counter(f["id"] for f in fixes).items() if n > 1)
        if twice:  # one entry per fix: a second would be read by one check and not by another
            ids = [n for n, ln in enumerate(raw.decode("utf-8").splitlines(), 1)
                   if ln.strip().rstrip(",") == f'"id": {json.dumps(twice[0])}']
            line = ids[1] if len(ids) > 1 else None
            raise bad(f"fix {', '.join(map(repr, twice))} has more than one entry", line, said_at=line is not None)
        comps = data.get("components", [])
        return cls(data["profile"], data["targets"], tuple(_lock_fix(f) for f in fixes), data["generated_by"],
                   tuple(LockComponent(c["id"], c["version"], tuple(sorted(c["files"].items())), c.get("dist_info", ""))
                         for c in comps))


def lock_digest(data: Mapping[str, Any]) -> str:
    """sha256 over the lock's fingerprints: a hand edit (rather than ``fixpack lock``) shows as a mismatch."""
    sealed = {"targets": data.get("targets"), "fixes": data.get("fixes")}
    if data.get("components"):  # a lock without components keeps the digest it always had
        sealed["components"] = data["components"]
    return hashlib.sha256(json.dumps(sealed, sort_keys=True).encode()).hexdigest()  # ASCII: as its UTF-8


def _lock_fix_json(f: LockFix) -> dict[str, Any]:
    hunks = []
    for h in f.hunks:
        entry: dict[str, Any] = {"file": h.file, "hunk": h.hunk, "pre": h.pre, "post": h.post}
        if h.pre_count is not None:
            entry.update(pre_count=h.pre_count, post_count=h.post_count)
        hunks.append(entry)
    out = {"id": f.id, "version": f.version, "target": f.target, "patch_sha256": f.patch_sha256,
           "files": [{"path": x.path, "pre": x.pre, "post": x.post} for x in f.files], "hunks": hunks}
    if f.patch_bytes_sha256:
        out["patch_bytes_sha256"] = f.patch_bytes_sha256
    return out


def _lock_fix(f: dict[str, Any]) -> LockFix:
    """A fix entry :func:`~fixpack.lock_shape.entry_problem` found as ``lock`` writes one, as a record."""
    files = tuple(LockFile(x["path"], x["pre"], x["post"]) for x in f["files"])
    hunks = tuple(LockHunk(h["file"], h["hunk"], h["pre"], h["post"], h.get("pre_count"), h.get("post_count"))
                  for h in f["hunks"])
    return LockFix(f["id"], f["version"], f["target"], f["patch_sha256"], files, hunks, f.get("patch_bytes_sha256", ""))


# --- the manifest -------------------------------------------------------------------------------------

class Recorded(Word):
    """What a manifest records of a fix."""

    APPLIED = "applied"          # this tool applied it: revert removes it
    UPSTREAMED = "upstreamed"    # the target held it already: not ours to revert


@dataclass(frozen=True)
class ManifestFix:
    """``patch_bytes_sha256``: :attr:`fixpack.model.Fix.bytes_sha256` of the patches the entry's change was worked
    out from ("": a manifest from before it was kept); status parses a fix whose bytes are not those. Not compared:
    a reworded patch (same change) is no new state for apply to write. ``offsets``: per file of the fix, the offset
    in lines from its stated line at which the fix's first hunk there was laid (the running offset of the fixes before
    it, or a drift above it), where it is not 0 (absent in a manifest from before it was kept: 0 everywhere); the
    reversal of the fix starts there (:func:`fixpack.replay.unwind`), as a hunk anchored to a file's start or end is
    placed only at its stated line plus the running offset. ``hunk_offsets``: per file whose hunks were laid at
    offsets not all the same (a drift between two of them), each hunk's, in the patch's order (absent elsewhere, and
    in a manifest from before it was kept): the reversal takes each hunk off from its own."""

    id: str
    version: int
    patch_sha256: str
    state: Recorded
    files: Hashes = field(default_factory=dict)
    patch_bytes_sha256: str = field(default="", compare=False)
    offsets: Mapping[str, int] = field(default_factory=dict)
    hunk_offsets: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def laid(self) -> dict[str, tuple[int, ...]]:
        """Per file of the fix, where its hunks were laid (per file patch: :func:`fixpack.replay.hunks_laid`): each
        hunk's offset where :attr:`hunk_offsets` has them, else the first hunk's (:attr:`offsets`, 0 where it names
        none)."""
        return {p: self.hunk_offsets.get(p) or (self.offsets.get(p, 0),) for p in self.files}

    def at_release(self, record: LockFix | None, release: Hashes) -> bool:
        """Recorded applied with each of its files (each one ``record``, the fix's lock entry, lists) at the release's
        own sha256 (``release``), where the lock records the fix leaving it otherwise: no run of that fix leaves them
        so but one on a drift that doubled a line it takes out (a fix undoing an earlier one leaves the release's)."""
        post = record.post() if record is not None else {}
        return self.state is Recorded.APPLIED and bool(self.files) and all(
            p in post and p in release and release[p] == h and post[p] != h for p, h in self.files.items())

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "patch_sha256": self.patch_sha256, "state": self.state.value,
                "files": dict(self.files)} | ({"patch_bytes_sha256": self.patch_bytes_sha256}
                                              if self.patch_bytes_sha256 else {}) | \
            ({"offsets": dict(self.offsets)} if self.offsets else {}) | \
            ({"hunk_offsets": {p: list(v) for p, v in self.hunk_offsets.items()}} if self.hunk_offsets else {})


@dataclass(frozen=True)
class ManifestComponent:
    """A component this tool installed: its version, its ``.dist-info`` folder and every file it wrote,
    with its sha256 (all of them exist; revert removes exactly these)."""

    id: str
    version: str
    dist_info: str
    files: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "version": self.version, "dist_info": self.dist_info, "files": dict(self.files)}


@dataclass(frozen=True)
class Kept:
    """The mode and owner (uid, gid) a file or folder had before a run removed it (a fix deletes or renames the
    file; a deletion left the folder empty), so that a revert or rollback that makes it again gives them back."""

    mode: int
    owner: tuple[int, int] | None

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "owner": list(self.owner) if self.owner else None}



def kept_map(value: Any) -> dict[str, Kept]:
    """A checked ``{path: {mode, owner}}`` as records."""
    return {p: Kept(k["mode"], tuple(k["owner"]) if k["owner"] is not None else None) for p, k in value.items()}


@dataclass(frozen=True)
class Manifest:
    """What a target holds. ``files``: the union of the applied fixes' files with their sha256 now.
    ``removed_files`` / ``removed_dirs``: the mode and owner before the run of each file its applied fixes
    removed (deleted, or renamed away) and each folder those removals left empty (absent in manifests before
    them: a revert then gives the patch's mode and a new folder's)."""

    profile: str
    target: str
    pin: Mapping[str, str]
    found: Mapping[str, str]
    fixes: tuple[ManifestFix, ...]
    files: Hashes
    tool_version: str = __version__
    components: tuple[ManifestComponent, ...] = ()
    removed_files: Mapping[str, Kept] = field(default_factory=dict, compare=False, hash=False)
    removed_dirs: Mapping[str, Kept] = field(default_factory=dict, compare=False, hash=False)

    def entry(self, fix_id: str) -> ManifestFix | None:
        return next((f for f in self.fixes if f.id == fix_id), None)

    def applied_ids(self) -> set[str]:
        return {f.id for f in self.fixes if f.state is Recorded.APPLIED}

    def to_json(self) -> dict[str, Any]:
        return {"schema": MANIFEST_SCHEMA, "tool": "fixpack", "tool_version": self.tool_version,
                "profile": self.profile, "target": self.target, "pin": dict(self.pin), "found": dict(self.found),
                "fixes": [f.to_json() for f in self.fixes],
                "files": dict(self.files)} | ({"components": [c.to_json() for c in self.components]}
                                             if self.components else {}) | \
            {k: {p: v.to_json() for p, v in kept.items()} for k, kept in
             (("removed_files", self.removed_files), ("removed_dirs", self.removed_dirs)) if kept}

    def component(self, cid: str) -> ManifestComponent | None:
        return next((c for c in self.components if c.id == cid), None)

    def same_state(self, other: Manifest | None) -> bool:
        """The same fixes, files and profile (what a run would otherwise rewrite)."""
        return other is not None and (self.fixes, dict(self.files), self.profile, self.components) == \
            (other.fixes, dict(other.files), other.profile, other.components)

    @classmethod
    def from_json(cls, raw: bytes, path: Path) -> Manifest:
        """Parse and check a manifest's bytes. Raises DamagedStateError (exit 3) naming ``path`` (and the line of a fix
        entry's key, where it can be told), saying what removing the file leads to."""
        try:
            data = load_json(raw, path)
        except DamagedStateError as exc:
            raise DamagedStateError(path, exc.what, REMOVE_MANIFEST) from None
        schema = data.get("schema", MANIFEST_SCHEMA) if isinstance(data, dict) else MANIFEST_SCHEMA
        if type(schema) is not int or schema != MANIFEST_SCHEMA:  # (a manifest of another version of fixpack)
            raise DamagedStateError(path, schema_said(short(json.dumps(schema)), "", MANIFEST_SCHEMA),
                                    "revert with the fixpack that wrote it, or remove it and restore the image")
        named = path.name.removesuffix(".manifest.json") if path.name.endswith(".manifest.json") else None
        problem = manifest_problem(data, named)
        if problem:
            line = entry_line(raw, *problem.at) if isinstance(problem, EntryProblem) else None
            raise DamagedStateError(path, f"not a valid fixpack manifest: {f'line {line}: ' if line else ''}{problem}",
                                    REMOVE_MANIFEST)
        fixes = tuple(ManifestFix(f["id"], f["version"], f["patch_sha256"], Recorded(f["state"]), dict(f["files"]),
                                  f.get("patch_bytes_sha256", ""), {p: n for p, n in f.get("offsets", {}).items() if n},
                                  {p: tuple(v) for p, v in f.get("hunk_offsets", {}).items()})
                      for f in data["fixes"])
        comps = tuple(ManifestComponent(c["id"], c["version"], c["dist_info"], dict(c["files"]))
                      for c in data.get("components", []))
        return cls(str(data.get("profile", "")), str(data.get("target", "")), _str_map(data.get("pin")),
                   _str_map(data.get("found")), fixes, dict(data.get("files", {})),
                   str(data.get("tool_version", "")), comps, kept_map(data.get("removed_files", {})),
                   kept_map(data.get("removed_dirs", {})))


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


