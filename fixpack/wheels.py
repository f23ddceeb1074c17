"""A component's files as ``pip install --no-deps`` lays them out in site-packages, computed in memory.

The component is built into a wheel by pip (``pip wheel --no-deps --no-build-isolation --no-index``
on a copy of its folder, so that the pack gets no ``build/`` or ``egg-info``), or read from a ``.whl``;
the `installer` library unpacks it (``.data`` folders, the ``.dist-info`` with its entry points,
``INSTALLER`` and ``RECORD``) into a destination that keeps the bytes instead of writing them. The
engine then writes them through its journalled transaction, as it writes a fix.

Console scripts are not installed: they belong in the interpreter's ``bin/``, outside the target
root the engine writes to (``python -m`` the module instead). Files for the ``headers`` or ``data``
schemes are refused for the same reason.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.exceptions import InstallerError
from installer.records import Hash, RecordEntry
from installer.sources import WheelFile
from installer.utils import Scheme

from .structs import dataclass, field

if TYPE_CHECKING:
    from installer.scripts import ScriptSection

from .errors import BadInputError, EnvironmentProblem, Terminated, says_disk_full, temp_work_failed
from .model import Component

INSTALLER_NAME = b"fixpack\n"


def installed_by(dist: Path) -> bytes | None:
    """What the ``.dist-info`` folder ``dist`` says installed it: its ``INSTALLER``'s bytes (fixpack's are
    :data:`INSTALLER_NAME`); None when it has none or is a link, b"" when that file cannot be read."""
    if dist.is_symlink() or not (dist / "INSTALLER").is_file():
        return None
    try:
        return (dist / "INSTALLER").read_bytes()
    except OSError:
        return b""
_SITE = ("purelib", "platlib")
_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "*.pyc")


@dataclass(frozen=True)
class Layout:
    """What installing a wheel writes under site-packages: path -> (bytes, mode)."""

    name: str
    version: str
    dist_info: str
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    skipped: tuple[str, ...] = ()

    def hashes(self) -> dict[str, str]:
        return {p: hashlib.sha256(data).hexdigest() for p, (data, _mode) in sorted(self.files.items())}


_BUILT: dict[tuple[str, str], tuple[str, bytes]] = {}  # this process's builds: (source, digest) -> wheel


def component_layout(comp: Component, root: Path) -> Layout:
    """Build (or read) the component's wheel and lay it out for the site-packages folder ``root``.

    A source folder is built once per process for the same bytes: a later call whose :func:`source_digest`
    is the same lays out the wheel that build made (``check`` and ``lock`` look at several profiles that
    carry the same component); any change to the files the build copies builds again."""
    if comp.path.suffix == ".whl":
        return wheel_layout(comp.path, root)
    from .interrupts import Term, signals

    key = (str(comp.path.resolve()), source_digest(comp.path))
    try:
        # SIGTERM unwinds the build as Ctrl-C does: no folder is left in $TMPDIR
        with signals([]), tempfile.TemporaryDirectory(prefix="fixpack-wheel-") as tmp:
            if key in _BUILT:  # built before in this process, from the same bytes
                name, data = _BUILT[key]
                wheel = Path(tmp) / name
                wheel.write_bytes(data)
            else:
                wheel = build_wheel(comp.path, Path(tmp))
                _BUILT[key] = (wheel.name, wheel.read_bytes())
            return wheel_layout(wheel, root)
    except OSError as exc:  # the build's copy or wheel in $TMPDIR (full), or a source file that cannot be read
        raise temp_work_failed(exc, f"building the wheel of {comp.path}", "the pack or a target") from exc
    except Term:  # (a CI timeout): pip was stopped and the build's folder removed; nothing was written yet
        raise Terminated(f"terminated (SIGTERM) while building the wheel of {comp.path}; its temporary folder was "
                         f"removed and nothing was written") from None


def source_digest(src: Path) -> str:
    """The sha256 over what :func:`build_wheel` copies of ``src``: each file's path, mode and bytes, each
    link's path and target, in a fixed order (the copy's ignore patterns apply)."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(src):
        ignored = _IGNORE(folder, dirs + files)
        dirs[:] = sorted(d for d in dirs if d not in ignored)
        for name in sorted(n for n in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]
                           if n not in ignored):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, src).encode("utf-8", "surrogateescape")
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                body = b"link:" + os.fsencode(os.readlink(path))
            else:
                with open(path, "rb") as fh:
                    body = hashlib.sha256(fh.read()).digest()
            digest.update(b"%d:%s:%o:%s\0" % (len(rel), rel, st.st_mode, body))
    return digest.hexdigest()


def build_wheel(src: Path, work: Path) -> Path:
    """``pip wheel`` of a copy of ``src`` with the running Python; no index, no build isolation."""
    copy = work / "src"
    shutil.copytree(src, copy, ignore=_IGNORE, symlinks=True)
    out = work / "dist"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "-q", "-w", str(out), str(copy)]
    (work / "tmp").mkdir()  # pip's own temporary folders, inside ours: gone with it however the build ends
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600, cwd=work,
                              env={**os.environ, "TMPDIR": str(work / "tmp")})  # (cwd: the caller's may be gone)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(f"cannot build the wheel of {src}: {exc}; nothing was written") from exc
    wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
    if proc.returncode != 0 or len(wheels) != 1:
        said = (proc.stderr or proc.stdout).strip()
        tail = "\n".join(said.splitlines()[-12:])  # whole lines: a cut by characters began mid-word
        need = (f"free space in the temporary folder {work.parent} (or set TMPDIR to a folder with room)"
                if says_disk_full(said) else
                f"setuptools older than 70.1 builds wheels only with the wheel package: install wheel, or "
                f"setuptools>=70.1, into the running Python ({sys.executable})"
                if "invalid command 'bdist_wheel'" in said else
                f"the running Python needs pip, setuptools (70.1 or newer, or with the wheel package) and installer "
                f"({sys.executable})")
        raise EnvironmentProblem(
            f"building the wheel of {src} failed ({' '.join(cmd[:7])} ... exit {proc.returncode}):\n{tail}\n"
            f"{need}; nothing was written")
    return wheels[0]


def wheel_layout(wheel: Path, root: Path) -> Layout:
    """The files installing ``wheel`` into ``root`` writes, in memory (nothing touches ``root``)."""
    dest = _Memory(root)
    try:
        with WheelFile.open(wheel) as source:
            install(source, dest, {"INSTALLER": INSTALLER_NAME})
            name, version, dist_info = source.distribution, source.version, source.dist_info_dir
    except (InstallerError, ValueError, OSError) as exc:
        raise BadInputError(f"{wheel}: not a wheel that can be installed into site-packages: {exc}") from exc
    return Layout(name, version, dist_info, dest.files, tuple(dest.skipped))


class _Memory(SchemeDictionaryDestination):
    """A SchemeDictionaryDestination that keeps what it would write."""

    def __init__(self, root: Path) -> None:
        base = str(root.resolve())
        schemes = {"purelib": base, "platlib": base, "headers": base + "/.headers", "scripts": base + "/.bin",
                   "data": base + "/.data"}
        super().__init__(schemes, interpreter=sys.executable, script_kind="posix")
        self.files: dict[str, tuple[bytes, int]] = {}
        self.skipped: list[str] = []

    def write_to_fs(self, scheme: Scheme, path: str, stream: BinaryIO, is_executable: bool) -> RecordEntry:
        if scheme not in _SITE:
            raise BadInputError(f"the wheel installs {path} into the {scheme!r} scheme, outside site-packages; a "
                                f"component installs into site-packages only")
        self._path_with_destdir(scheme, path)  # refuses a path that leaves the folder
        data = stream.read()
        self.files[path] = (data, 0o755 if is_executable else 0o644)
        digest = hashlib.sha256(data).digest()
        return RecordEntry(path, Hash("sha256", base64.urlsafe_b64encode(digest).decode().rstrip("=")), len(data))

    def write_script(self, name: str, module: str, attr: str, section: ScriptSection) -> RecordEntry:
        self.skipped.append(f"console script {name} ({module}:{attr}): not installed, it lies outside "
                            f"site-packages; run python -m {module}")
        return RecordEntry(f"../.bin/{name}", None, None)

    def finalize_installation(self, scheme: Scheme, record_file_path: str,
                              records: Iterable[tuple[Scheme, RecordEntry]]) -> None:
        kept = [(s, r) for s, r in records if s in _SITE]
        super().finalize_installation(scheme, record_file_path, kept)
