"""Finding a target's root and reading its version and commit, without importing it.

A target's *root* is the folder that holds its package folder (``<root>/vllm/__init__.py``): a
source tree or unpacked sdist, a git checkout, or a ``site-packages`` folder. Patch paths are
relative to it. Facts are read, in order, from git HEAD (when the root is the top of a work tree),
from the package's version module (vLLM's ``vllm/_version.py`` holds ``__commit_id__``), and from
the distribution metadata (``PKG-INFO``, ``*.dist-info/METADATA``; a VCS install records its commit
in ``direct_url.json``). Each fact keeps where it came from, for the report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .documents import TooLargeError, loads_json, read_capped
from .errors import BadInputError, MismatchError
from .gitutil import head_commit
from .model import Pin, TargetSpec
from .structs import dataclass

_ONLY_AST = 1024  # ast.PyCF_ONLY_AST


@dataclass(frozen=True)
class FoundTarget:
    """A located target: its root, and its version and commit with the evidence for each."""

    spec: TargetSpec
    root: Path
    version: str
    commit: str
    evidence: tuple[str, ...]
    how: str  # "--root", "installed", "GAUDI_FIXES_ROOT"


def normalize_commit(commit: str) -> str:
    """``gced6857af`` (setuptools-scm's form) and ``ced6857af`` both become ``ced6857af``."""
    c = commit.strip().lower()
    if re.fullmatch(r"g[0-9a-f]{7,40}", c):
        c = c[1:]
    return c


def commit_matches(found: str, pinned: str) -> bool:
    """True when both are 7 to 40 hex digits and ``found`` begins with all of ``pinned``: a commit found shorter
    than the pin (``gced6857`` for ``ced6857a``) does not say it is the pinned one, and one with more than hex digits
    (``ced6857a-dirty``) is no commit id."""
    a, b = normalize_commit(found), normalize_commit(pinned)
    return all(re.fullmatch(r"[0-9a-f]{7,40}", c) for c in (a, b)) and a.startswith(b)


def commits_agree(found: str, locked: str) -> bool:
    """True when both are commit ids (as :func:`commit_matches` reads them) and agree as far as the shorter goes:
    the lock's commit is compared in full with the image's (``gced6857ae`` is not the ``gced6857af`` the lock was
    made on, though both begin with pin ``ced6857a``), while a release that names fewer digits than the lock (a
    setuptools-scm ``_version.py`` against a lock made on a git checkout's 40) says no more than it can."""
    a, b = normalize_commit(found), normalize_commit(locked)
    return commit_matches(a, b) or commit_matches(b, a)


def resolve_root(spec: TargetSpec, path: Path) -> Path:
    """The root for ``--root NAME=PATH``: PATH itself, or its parent when PATH is the package folder."""
    given = path.expanduser()
    path = given.resolve()
    if not path.is_dir():
        what = "not a folder" if path.exists() else "no such folder"
        if given.is_symlink():  # the message names what the user gave, and where the link leads
            what = f"a symbolic link to {path}, {what if path.exists() else 'which does not exist'}"
        raise BadInputError(f"--root {spec.name}={given if given.is_symlink() else path}: {what} (give a source "
                            f"tree, a git checkout or a site-packages folder that holds {spec.package}/)")
    if (path / spec.package).is_dir():
        return path
    if path.name == spec.package and (path / "__init__.py").is_file():
        return path.parent
    raise BadInputError(f"--root {spec.name}={path}: it holds no {spec.package}/ package folder "
                        f"(give the folder that contains {spec.package}/)")


def installed_root(spec: TargetSpec) -> Path | None:
    """Where the running Python has the distribution installed (site-packages, or an editable source)."""
    import importlib.metadata  # only when no --root names the target (it brings the email package)

    try:
        dist = importlib.metadata.distribution(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    base = Path(str(dist.locate_file(""))).resolve()
    if (base / spec.package / "__init__.py").is_file():
        return base
    info = getattr(dist, "_path", None)  # the .dist-info folder (a PathDistribution's; no other kind has one)
    url = _direct_url(info / "direct_url.json") if isinstance(info, Path) else {}
    if _member(url, "dir_info").get("editable") and str(url.get("url", "")).startswith("file://"):
        src = Path(str(url["url"])[len("file://"):])
        if (src / spec.package).is_dir():
            return src
    return None


def _direct_url(path: Path) -> dict[str, Any]:
    """The object in a dist-info's ``direct_url.json`` (pip writes a few hundred bytes); {} when there is none or
    it is no JSON object. Read capped (``MAX_PACK_TEXT_BYTES``, the cap of the small JSON documents the tool reads):
    a larger one is no file pip wrote, refused unread, exit 3 naming it (a planted image file, as a tampered one)."""
    if not path.is_file():
        return {}
    try:
        data = loads_json(read_capped(path).decode("utf-8"))
    except TooLargeError as exc:
        raise MismatchError(f"{path}: {exc.said('a direct_url.json')} (pip writes a few hundred bytes): not the "
                            f"record of an install; reinstall {_dist_named(path.parent.name)} or remove that "
                            f"file") from exc
    except (OSError, ValueError):  # unreadable, not UTF-8 or not JSON: nothing said (as before)
        return {}
    return data if isinstance(data, dict) else {}


def _member(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """``doc[key]`` when it is a JSON object, else {} (a direct_url.json whose ``vcs_info`` or ``dir_info`` is a
    string or a list is no record pip wrote: it says nothing, as an unreadable one)."""
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _dist_parts(folder: str) -> tuple[str, str]:
    """(distribution, version) of a ``NAME-VERSION.dist-info`` folder: the name ends at the first dash (a wheel's
    name and version have theirs escaped as ``_``), the version at the suffix."""
    name, _, version = folder.removesuffix(".dist-info").partition("-")
    return name, version


def _dist_named(folder: str) -> str:
    """:func:`_dist_parts` in words ("vllm 0.30.0")."""
    return " ".join(_dist_parts(folder)).strip() or "it"


def read_facts(spec: TargetSpec, root: Path) -> tuple[str, str, tuple[str, ...]]:
    """(version, commit, evidence) of the target at ``root``; empty strings where nothing says."""
    version, commit, evidence = "", "", []
    head = head_commit(root)
    if head:
        commit = head
        evidence.append(f"git HEAD of {root}: {head}")
    mod = root / spec.version_path
    v, c, problem = _version_module(mod)  # (said by repr: escaped as it is, not quoted twice as _shown's)
    if v:
        version = _shown(v)
        evidence.append(f"{mod}: __version__ = {v!r}")
    if c and not commit:
        commit = _shown(c)
        evidence.append(f"{mod}: __commit_id__ = {c!r}")
    elif c and not commit_matches(commit, _shown(c)):  # a folder that is a git repository of its own: both said
        evidence.append(f"{mod}: __commit_id__ = {c!r}, not git HEAD's (the root is a git repository of its own: "
                        f"its HEAD is taken, as a checkout's version module may be stale)")
    meta_v, meta_c, where = _dist_metadata(spec, root)
    meta_v, meta_c = _shown(meta_v), _shown(meta_c)
    if meta_v and not version:
        version = meta_v
        evidence.append(f"{where}: Version: {meta_v}")
    if meta_c and not commit:
        commit = meta_c
        evidence.append(f"{where}: commit {meta_c}")
    elif meta_c and not commits_agree(commit, meta_c):  # (pip's record of another commit: said, the first taken)
        evidence.append(f"{where}: direct_url.json commit {meta_c}, not {commit} (the version module's or git HEAD's "
                        f"is taken: the installed files are what it describes)")
    if problem and (not (version and commit) or not problem.startswith(("no such file", "assigns no"))):
        evidence.append(f"{mod}: {problem}")  # why the version module said nothing, where that counts
    return version, commit, tuple(evidence)


def _shown(value: str) -> str:
    """A version or commit as read from the target's files, safe to print and to compare: printable ASCII with no
    whitespace as it is, else its ``repr`` (no version or commit an installer writes; a control character from a
    planted version module reached the terminal raw, and " gced6857af " matched the pin once stripped)."""
    ok = value.isascii() and value.isprintable() and not any(ch.isspace() for ch in value)
    return value if ok or not value else repr(value)


def _version_module(path: Path) -> tuple[str, str, str]:
    """``__version__`` and ``__commit_id__`` of a version module (setuptools-scm writes vLLM's), read from
    its syntax tree, never by running it, and why it says nothing where it does not ("" else): no such file,
    it cannot be read, not UTF-8, not Python, or neither name in it. ``compile`` with ``ast.PyCF_ONLY_AST``
    (1024) gives the tree without importing :mod:`ast` (8 ms of a 60 ms status run); nodes are told apart by
    class name."""
    try:  # a regular file, read without blocking and no further than 1 MiB: a FIFO there hung the run, a device
        text = read_capped(path, 1 << 20).decode("utf-8")  # (/dev/zero) was read until memory ran out
        tree = compile(text, str(path), "exec", _ONLY_AST, dont_inherit=True)
    except TooLargeError as e:
        return "", "", f"{e.size} bytes, more than a version module's 1 MiB: it is not read; reinstall the package"
    except FileNotFoundError:
        return "", "", ("no such file (the pinned version and commit are read from it: if the release has it, "
                        "reinstall the package)")
    except UnicodeDecodeError as e:
        return "", "", f"not UTF-8 (byte {e.start}): it cannot say the version or commit; reinstall the package"
    except SyntaxError as e:
        return "", "", f"not Python (line {e.lineno}: {e.msg}): it cannot say the version or commit; reinstall " \
                       f"the package"
    except (ValueError, OSError) as e:  # unreadable, or no regular file (a FIFO, a device, a folder: EINVAL)
        return "", "", f"cannot be read ({getattr(e, 'strerror', None) or e}); reinstall the package"
    values: dict[str, str] = {}
    for node in tree.body:
        if type(node).__name__ != "Assign" or type(node.value).__name__ != "Constant":
            continue
        if isinstance(node.value.value, str):
            for t in node.targets:
                if type(t).__name__ == "Name":
                    values[t.id] = node.value.value
    # vLLM writes "__version__ = version = '0.30.0'": a chained assignment is one Assign with two targets
    version = values.get("__version__", values.get("version", ""))
    commit = values.get("__commit_id__", values.get("commit_id", ""))
    missing = [n for n, v in (("__version__", version), ("__commit_id__", commit)) if not v]
    return version, commit, f"assigns no {' or '.join(missing)} (a string)" if missing else ""


def _dist_metadata(spec: TargetSpec, root: Path) -> tuple[str, str, str]:
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        m = re.search(r"^Version: (\S+)$", pkg_info.read_text("utf-8", "replace"), re.M)
        if m:
            return m.group(1), "", str(pkg_info)
    norm = re.sub(r"[-_.]+", "_", spec.distribution).lower()
    for info in sorted(root.glob("*.dist-info")):
        name, ver = _dist_parts(info.name)
        if re.sub(r"[-_.]+", "_", name).lower() != norm:
            continue
        commit = str(_member(_direct_url(info / "direct_url.json"), "vcs_info").get("commit_id", ""))
        return ver, commit, str(info)
    return "", "", ""


def locate(spec: TargetSpec, root_arg: Path | None, env_root: Path | None) -> FoundTarget | None:
    """Find the target: ``--root`` first, then ``<--copies or $GAUDI_FIXES_ROOT>/<name>``, then the installed package;
    None when not found. A run given a folder of copies takes each target from there or not at all: a typo in it
    fell back to the running Python's install, which apply then patched."""
    if root_arg is not None:
        root, how = resolve_root(spec, root_arg), "--root"
    elif env_root is not None:
        if not (env_root / spec.name).is_dir():
            return None
        root, how = resolve_root(spec, env_root / spec.name), "GAUDI_FIXES_ROOT"
    else:
        found = installed_root(spec)
        if found is None:
            return None
        root, how = found, "installed"
    version, commit, evidence = read_facts(spec, root)
    return FoundTarget(spec, root, version, commit, evidence, how)


def check_pin(found: FoundTarget) -> None:
    """Raise MismatchError, with both values, when the found version or commit differs from the pin."""
    pin: Pin = found.spec.pin
    problems = []
    if pin.version and found.version != pin.version:
        problems.append(f"version {found.version or '(unknown)'} != pinned {pin.version}")
    short = normalize_commit(found.commit)
    way = "Use the image the profile pins, or a profile for this release."
    if pin.commit and not commit_matches(found.commit, pin.commit):
        problems.append(f"commit {found.commit or '(unknown)'} != pinned {pin.commit}")
        if commit_matches(pin.commit, short):  # the pin goes on past the digits the tree names: never checkable
            problems[-1] += f" (its first {len(short)} digits are the pin's: the tree names no more of its commit)"
            way = (f"A pin longer than the digits the release names cannot be checked: pin those {len(short)} "
                   f"(commit = \"{short}\" in the profile's [targets.{found.spec.name}]).")
    if problems:
        raise MismatchError(
            f"target {found.spec.name} at {found.root} does not match the profile's pin: {'; '.join(problems)} "
            f"(evidence: {'; '.join(found.evidence) or 'none found'}). {way}")


def refuse_one_folder_twice(found: list[FoundTarget]) -> None:
    """BadInputError (exit 2) for two targets whose roots are one folder under two paths (a bind mount of the other,
    or a link on the way that ``resolve`` does not see): their run locks, journals and manifests would be one and the
    same while the run took them for two (it waited on its own lock). Roots that resolve to one path are one root
    (the run writes them together)."""
    seen: dict[tuple[int, int], FoundTarget] = {}
    for ft in found:
        try:
            st = ft.root.stat()
        except OSError:  # (gone since it was found: its own run says so)
            continue
        first = seen.setdefault((st.st_dev, st.st_ino), ft)
        if first is not ft and first.root.resolve() != ft.root.resolve():
            raise BadInputError(f"targets {first.spec.name} ({first.root}) and {ft.spec.name} ({ft.root}) are one "
                                f"folder under two paths (a bind mount of the other?): give both the same path (e.g. "
                                f"--root {first.spec.name}={first.root} --root {ft.spec.name}={first.root})")
