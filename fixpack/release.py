"""Clean release copies of targets, fetched once and cached outside the repository.

- A PyPI target (``source.pypi``): the sdist of the exact version, through the index's simple API
  (``pypi-simple``), its sha256 checked against the index's digest (a cached tarball's too, before it is
  unpacked: one that differs is removed and downloaded again), unpacked to
  ``<cache>/<target>-<version>/`` (the release root: it holds ``<package>/``).
- A git target (``source.git``): cloned through GitPython and checked out at the pinned commit.

The cache is ``--cache``, else ``$XDG_CACHE_HOME/fixpack``, else ``~/.cache/fixpack``. A copy is
checked against the profile's pin before it is returned; a copy that fails the check is removed.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

from .errors import BadInputError, EnvironmentProblem, MismatchError
from .gitutil import clone_at
from .model import TargetSpec
from .progress import QUIET, DownloadTracker, Progress
from .runlock import run_lock
from .targets import FoundTarget, check_pin, read_facts


def cache_root(cache: Path | None = None) -> Path:
    if cache is not None:
        return cache
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fixpack"


TIMEOUT = 60.0  # seconds without a byte from the index before a download is given up
CACHE_WAIT = 1800.0  # seconds a fetch waits for another one filling the same cache (a 42 MB download and unpack)


def fetch(spec: TargetSpec, cache: Path | None = None, version: str = "", url: str = "",
          check: bool = True, progress: Progress = QUIET, timeout: float = TIMEOUT) -> FoundTarget:
    """Return a clean release copy of ``spec`` (fetching it on first use).

    ``version`` overrides the pin's version (used to fetch a newer release for a rebase; the pin
    is then not checked). ``url`` overrides the git source. ``progress`` hears about the download,
    which is given up after ``timeout`` seconds without data. Raises MismatchError when the copy does
    not match the pin, EnvironmentProblem when it cannot be fetched.
    """
    version = version or spec.pin.version
    if not (spec.source.pypi or spec.source.git or url):
        raise BadInputError(f"target {spec.name} has no [targets.{spec.name}.source] (pypi or git) to fetch from")
    folder = cache_root(cache)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(f"{folder}: cannot make the release cache ({exc.strerror}); pass --cache DIR "
                                 f"or set $XDG_CACHE_HOME to a folder you may write") from exc
    # one fetch at a time per cache: two at once downloaded into the same .part file, and the later
    # unpack removed the copy the earlier one had just returned
    with run_lock(folder, wait=CACHE_WAIT, progress=progress, what="the release cache",
                  how_long="a fetch waits for another one filling the same cache that long"):
        drop_dead_unpacks(folder, progress)
        return _fetch_locked(spec, folder, version, url, check, progress, timeout)


def drop_dead_unpacks(cache: Path, progress: Progress = QUIET) -> None:
    """Remove the ``.unpack-*`` folders in ``cache`` (call it holding the cache's lock: any found then is
    the leftover of a fetch killed while unpacking). Only folders, never through a symbolic link.
    Raises EnvironmentProblem naming a folder that cannot be removed."""
    with os.scandir(cache) as entries:
        dead = sorted(e.path for e in entries if e.name.startswith(".unpack-") and e.is_dir(follow_symlinks=False))
    for path in dead:
        progress.note(f"removing {path}, left by a fetch killed while unpacking")
        try:
            shutil.rmtree(path)
        except OSError as exc:
            raise EnvironmentProblem(f"{path}: cannot remove this leftover of a killed fetch ({exc.strerror or exc}); "
                                     f"remove it by hand and run again") from exc


def _fetch_locked(spec: TargetSpec, cache: Path, version: str, url: str, check: bool, progress: Progress,
                  timeout: float) -> FoundTarget:
    if spec.source.pypi:
        root = _fetch_sdist(spec.source.pypi, version, spec.name, cache, progress, timeout)
    else:
        root = _fetch_git(url or spec.source.git, spec, cache)
    v, c, evidence = read_facts(spec, root)
    found = FoundTarget(spec, root, v, c, evidence, "release copy")
    if check and version == spec.pin.version:
        try:
            check_pin(found)
        except MismatchError:
            shutil.rmtree(root, ignore_errors=True)
            raise
    return found


def _fetch_sdist(project: str, version: str, name: str, cache: Path, progress: Progress = QUIET,
                 timeout: float = TIMEOUT, index: str = "https://pypi.org/simple/") -> Path:
    dest = cache / f"{name}-{version}"
    if (dest / ".fixpack-complete").is_file():
        return dest
    from pypi_simple import NoDigestsError, PyPISimple  # noqa: F401  (imported lazily: only maintainers fetch)

    with PyPISimple(endpoint=index) as client:
        try:
            page = client.get_project_page(project, timeout=timeout)
        except Exception as exc:  # network or index errors: say what failed and what to do
            raise EnvironmentProblem(f"cannot read the index page of {project!r}: {exc}. Check the network, or "
                                     f"point $GAUDI_FIXES_ROOT at a folder of release copies") from exc
        sdists = [p for p in page.packages if p.version == version and p.package_type == "sdist"]
        if not sdists:
            raise BadInputError(f"{project} {version}: no sdist on the index (is the version right?)")
        pkg = sdists[0]
        if "sha256" not in pkg.digests:
            raise EnvironmentProblem(f"{pkg.filename}: the index gives no sha256 digest; refusing an unchecked copy")
        tarball = cache / pkg.filename
        for path in (tarball, tarball.with_suffix(".part")):
            if (path.exists() or path.is_symlink()) and not path.is_file():  # a folder, a dangling link, a fifo
                raise EnvironmentProblem(f"{path}: not a file, where the release cache keeps the sdist it downloads; "
                                         f"remove it (nothing else of the cache was changed) and run again")
        if tarball.is_file() and file_sha256(tarball) != pkg.digests["sha256"].lower():  # damaged, or another upload
            progress.note(f"{tarball}: its sha256 is not the index's {pkg.digests['sha256']}; removing it and "
                          f"downloading again")
            tarball.unlink()
        if not tarball.is_file():
            part = tarball.with_suffix(".part")
            tracker = lambda total: DownloadTracker(progress, pkg.filename, total)
            try:  # raises DigestMismatchError on a bad hash
                client.download_package(pkg, path=part, verify=True, progress=tracker, timeout=timeout)
            except OSError as exc:  # requests' timeouts and connection errors are OSErrors
                raise EnvironmentProblem(f"downloading {pkg.url}: {exc} (no data for {timeout:g} s, or the "
                                         f"network is down). Run again, or point $GAUDI_FIXES_ROOT at a folder "
                                         f"of release copies") from exc
            part.rename(tarball)
    progress.note(f"unpacking {tarball.name}")
    _unpack(tarball, dest)
    return dest


def file_sha256(path: Path) -> str:
    """The sha256 of ``path``'s bytes, hex (the form of the simple index's ``#sha256=`` digest)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _unpack(tarball: Path, dest: Path) -> None:
    """Unpack the sdist ``tarball`` to ``dest`` (its one top folder), through a ``.unpack-*`` folder beside
    it. Raises EnvironmentProblem naming the tarball when it is no readable tar archive."""
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        try:
            with tarfile.open(tarball) as tf:
                tf.extractall(tmp, filter="data")
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            why = " ".join(str(exc).split())  # tarfile names each method it tried, a line each
            raise EnvironmentProblem(f"{tarball}: cannot unpack it ({why}), though its sha256 is the index's; remove "
                                     f"it and run again, or point $GAUDI_FIXES_ROOT at a folder of release "
                                     f"copies") from exc
        tops = list(tmp.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise EnvironmentProblem(f"{tarball}: expected one top folder in the sdist, found {len(tops)}")
        shutil.rmtree(dest, ignore_errors=True)
        tops[0].rename(dest)
        (dest / ".fixpack-complete").write_text(tarball.name + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fetch_git(url: str, spec: TargetSpec, cache: Path) -> Path:
    dest = cache / f"{spec.name}-{spec.pin.commit}"
    if (dest / ".git").is_dir() and (dest / spec.package).is_dir():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    clone_at(url, dest, spec.pin.commit, spec.source.ref)
    return dest
