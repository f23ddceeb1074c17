"""Clean release copies of targets, fetched once and cached outside the repository.

- A PyPI target (``source.pypi``): the sdist of the exact version, through the index's simple API
  (``pypi-simple``), its sha256 checked against the index's digest (a cached tarball's too, before it is
  unpacked: one that differs is removed and downloaded again), unpacked to
  ``<cache>/<target>-<version>/`` (the release root: it holds ``<package>/``). A copy whose files changed
  since (fixes applied to it, an edit: checked by each file's bytes) is unpacked again, from the cached tarball
  without the index when the tarball still has the sha256 the index gave at the first unpack. A file or a
  symbolic link in the copy's place is refused (it is never taken for the release), before any download.
- A git target (``source.git``): cloned through GitPython and checked out at the pinned commit.

The cache is ``--cache``, else ``$XDG_CACHE_HOME/fixpack``, else ``~/.cache/fixpack``. A copy is
checked against the profile's pin before it is returned; a copy that fails the check is removed.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shlex
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

from .documents import MAX_PACK_TEXT_BYTES
from .errors import BadInputError, EnvironmentProblem, MismatchError
from .gitutil import clone_at
from .model import TargetSpec
from .progress import QUIET, DownloadTracker, Progress
from .runlock import run_lock
from .safepath import TooLargeError, link_to, read_regular, sha256_regular
from .targets import FoundTarget, check_pin, read_facts


def cache_root(cache: Path | None = None) -> Path:
    if cache is not None:
        return cache
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fixpack"


# what to do without the index: only a command that reads release copies takes one (fetch itself downloads)
OFFLINE = ("or give the command a clean release copy you have, where it takes one (lock and edit: --root NAME=PATH; "
           "lock also $GAUDI_FIXES_ROOT, a folder of them): fetch itself only downloads")
TIMEOUT = 60.0  # seconds without a byte from the index before a download is given up
CACHE_WAIT = 1800.0  # seconds a fetch waits for another one filling the same cache (a 42 MB download and unpack)


def fetch(spec: TargetSpec, cache: Path | None = None, version: str = "", url: str = "",
          check: bool = True, progress: Progress = QUIET, timeout: float = TIMEOUT) -> FoundTarget:
    """Return a clean release copy of ``spec`` (fetching it on first use).

    ``version`` overrides the pin's version (used to fetch a newer release for a rebase; the pin
    is then not checked). ``url`` overrides the git source. ``progress`` hears about the download,
    which is given up after ``timeout`` seconds without data. Raises MismatchError when the copy does
    not match the pin (the copy is kept: it is the release, the pin is wrong), EnvironmentProblem when it cannot be
    fetched.
    """
    version = version or spec.pin.version
    if version:  # (a git pin may name none: its ref says)
        _check_version(version)
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


def _check_version(version: str) -> None:
    """BadInputError (exit 2) for a ``version`` that is no release version (PEP 440, ``packaging``): it names the
    cache folder the copy is unpacked to (``<target>-<version>``), where ``../../x`` climbed out of the cache, and it
    was looked up on the index first."""
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
        valid = version == version.strip()  # (Version strips it; the cache folder's name would not)
    except InvalidVersion:
        valid = False
    if not valid:
        raise BadInputError(f"version {version!r}: not a release version (PEP 440, e.g. 0.31.0); nothing was "
                            f"fetched")


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
        root = _fetch_git(url or spec.source.git, spec, cache, progress)
    v, c, evidence = read_facts(spec, root)
    found = FoundTarget(spec, root, v, c, evidence, "release copy")
    if check and version == spec.pin.version:  # the copy is the release's, kept: the pin is what is wrong (it was
        check_pin(found)  # removed, under the readers of a shared cache, and unpacked again by the next fetch)
    return found


def _fetch_sdist(project: str, version: str, name: str, cache: Path, progress: Progress = QUIET,
                 timeout: float = TIMEOUT, index: str = "https://pypi.org/simple/") -> Path:
    dest = cache / f"{name}-{version}"
    refuse_odd_entry(dest, "the unpacked release copy")
    if (dest / MARKER).is_file():
        changed = changed_since_unpack(dest)
        if not changed:
            return dest
        progress.note(f"{dest}: {changed}, so it is no longer the release copy fetch unpacked; unpacking it again "
                      f"from the hash-checked sdist")
        checked = _checked_before(dest)
        if checked is not None:  # the tarball it came from, still the bytes the index vouched for: no index read
            progress.note(f"unpacking {checked[0].name}")
            _unpack(*checked, dest=dest)
            return dest
    from pypi_simple import NoDigestsError, PyPISimple  # noqa: F401  (imported lazily: only maintainers fetch)

    with PyPISimple(endpoint=index) as client:
        try:
            page = client.get_project_page(project, timeout=timeout)
        except Exception as exc:  # network or index errors: say what failed and what to do
            raise EnvironmentProblem(f"cannot read the index page of {project!r}: {exc}. Check the network; "
                                     f"{OFFLINE}") from exc
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
        if tarball.is_file() and file_sha256(tarball, True) != pkg.digests["sha256"].lower():  # damaged, or re-uploaded
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
                                         f"network is down). Run again; {OFFLINE}") from exc
            part.rename(tarball)
    progress.note(f"unpacking {tarball.name}")
    _unpack(tarball, pkg.digests["sha256"].lower(), dest=dest)
    return dest


def refuse_odd_entry(dest: Path, what: str) -> None:
    """Refuse a cache entry ``dest`` (where the cache keeps ``what``) that is there and no real folder: a file,
    a symbolic link (to a folder too: a tree elsewhere is never vouched for as the release), a fifo. Said
    before any download. Raises EnvironmentProblem naming it and what to do."""
    if not (dest.exists() or dest.is_symlink()) or (dest.is_dir() and not dest.is_symlink()):
        return
    kind = (f"a symbolic link (to {link_to(dest)})" if dest.is_symlink() else
            "a file" if dest.is_file() else "neither a file nor a folder")
    raise EnvironmentProblem(f"{dest}: {kind}, not a folder, where the release cache keeps {what}; remove it "
                             f"(`rm {shlex.quote(str(dest))}`: nothing else of the cache was changed) and run again")


def _checked_before(dest: Path) -> tuple[Path, str] | None:
    """The cached sdist that the copy ``dest`` was unpacked from and its sha256 (hex), when its marker names it
    and records the sha256 the index gave for it then, and the file's bytes still have that sha256; else None
    (the index is asked again). Lets a changed copy be unpacked again without the network."""
    try:
        lines = read_marker(dest)
    except (OSError, ValueError):  # (a marker too large: changed_since_unpack named it)
        return None
    recorded = next((line[len(SDIST_KEY):] for line in lines if line.startswith(SDIST_KEY)), "")
    name = lines[0] if lines else ""
    tarball = dest.parent / name
    if not recorded or not name or "/" in name or name.startswith(".") or tarball.is_symlink() \
            or not tarball.is_file():
        return None
    return (tarball, recorded) if file_sha256(tarball) == recorded else None


def file_sha256(path: Path, follow: bool = False) -> str:
    """The sha256 of ``path``'s bytes, hex (the form of the simple index's ``#sha256=`` digest), read in blocks
    without blocking, a regular file only, never through a link unless ``follow`` (:func:`sha256_regular`)."""
    return sha256_regular(path, follow)


def _unpack(tarball: Path, sha256: str, dest: Path) -> None:
    """Unpack the sdist ``tarball`` (whose bytes have the index's ``sha256``, hex) to ``dest`` (its one top
    folder), through a ``.unpack-*`` folder beside it; the marker written last records the tarball's name, that
    sha256 and the tree's digest. Raises EnvironmentProblem naming the tarball when it is no readable tar archive."""
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        try:
            with tarfile.open(tarball) as tf:
                tf.extractall(tmp, filter="data")
        except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            why = " ".join(str(exc).split())  # tarfile names each method it tried, a line each
            raise EnvironmentProblem(f"{tarball}: cannot unpack it ({why}), though its sha256 is the index's; remove "
                                     f"it and run again; {OFFLINE}") from exc
        tops = list(tmp.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise EnvironmentProblem(f"{tarball}: expected one top folder in the sdist, found {len(tops)}")
        shutil.rmtree(dest, ignore_errors=True)
        tops[0].rename(dest)
        (dest / MARKER).write_text(f"{tarball.name}\n{SDIST_KEY}{sha256}\n{STAT_KEY}{stat_digest(dest)}\n"
                                   f"{TREE_KEY}{tree_digest(dest)}\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


MARKER = ".fixpack-complete"  # written last by an unpack: the sdist's name, its sha256, then the tree's digest
SDIST_KEY = "sdist-sha256 "
TREE_KEY = "tree-content-sha256 "  # what this fixpack checks a copy by
STAT_KEY = "tree-sha256 "  # what an older fixpack checks it by (paths, sizes, times): still written for it


def read_marker(dest: Path) -> list[str]:
    """The lines of the marker of the copy ``dest``: a regular file, never read through a symbolic link, and no
    further than ``MAX_PACK_TEXT_BYTES`` (the cap of the small records the tool writes: fetch writes four short
    lines). Raises OSError (a link: ELOOP), TooLargeError or UnicodeDecodeError (both ValueErrors)."""
    return read_regular(dest / MARKER, MAX_PACK_TEXT_BYTES, follow=False).decode("utf-8").splitlines()


def tree_digest(root: Path) -> str:
    """The sha256 of every path under ``root`` with its kind: a file its permission bits and the sha256 of its
    bytes (as the lock's fingerprints), a link its target, a folder its entries; the marker and ``__pycache__``
    folders left out. An apply, an edit (one that keeps the size and the time too), a new or removed file, a
    chmod all change it. Reads every file: vLLM 0.30.0's 7,000 files (130 MB) take about 0.3 s."""
    return _walk_digest(root, _content_part)


def _content_part(path: str, st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return f"link:{os.readlink(path)}"
    if stat.S_ISREG(st.st_mode):
        return f"file:{stat.S_IMODE(st.st_mode):o}:{file_sha256(Path(path))}"
    return f"other:{stat.S_IFMT(st.st_mode):o}"


def stat_digest(root: Path) -> str:
    """The digest an older fixpack's marker records and checks (``tree-sha256``): each file's size and
    modification time in place of its bytes. Written beside :func:`tree_digest` so that an older fixpack sharing
    the cache keeps taking the copy (this one never trusts it)."""
    return _walk_digest(root, lambda path, st: os.readlink(path) if stat.S_ISLNK(st.st_mode) else
                        f"{st.st_size}:{st.st_mtime_ns}")


def _walk_digest(root: Path, part: Callable[[str, os.stat_result], str]) -> str:
    """The sha256 of every path under ``root`` (its ``part``), the marker and ``__pycache__`` left out."""
    h = hashlib.sha256()
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(top, d))]):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            if rel == MARKER:
                continue
            h.update(f"{rel}\0{part(path, os.lstat(path))}\n".encode("utf-8", "surrogateescape"))
        h.update(f"{os.path.relpath(top, root)}/\0{','.join(dirs)}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def changed_since_unpack(dest: Path) -> str:
    """Why the cached sdist copy ``dest`` is no longer known to be the tree its unpack left ("" when it is): a
    ``.fixpack`` folder (fixes applied there), a tree digest (:func:`tree_digest`: every file's bytes) other than
    the one the marker records, or a marker of an older fixpack, which records none or one of sizes and times
    only (such a copy cannot be vouched for: it is unpacked again once, and its new marker records the digest)."""
    if (dest / ".fixpack").exists():
        return f"it holds a fixpack manifest ({dest / '.fixpack'}: fixes were applied there)"
    try:
        lines = read_marker(dest)
    except TooLargeError as exc:  # told by its size, never read: unpacked again, which writes it anew
        return f"its marker {dest / MARKER} is {exc.said('a marker')} (fetch writes four short lines)"
    except (OSError, ValueError):
        return f"its marker {dest / MARKER} cannot be read"
    recorded = next((line[len(TREE_KEY):] for line in lines if line.startswith(TREE_KEY)), "")
    if not recorded:
        return ("its marker was written by an older fixpack and records no digest of its files' contents to check "
                "them by")
    try:
        now = tree_digest(dest)
    except OSError as exc:  # a file made unreadable since: not the tree the unpack left either
        return f"a file of it cannot be read ({exc.filename}: {exc.strerror or exc})"
    if recorded != now:
        return "its files changed since it was unpacked (a file written, added or removed, or its mode changed)"
    return ""


def _fetch_git(url: str, spec: TargetSpec, cache: Path, progress: Progress = QUIET) -> Path:
    dest = cache / f"{spec.name}-{spec.pin.commit}"
    refuse_odd_entry(dest, "the cloned release copy")
    if (dest / ".git").is_dir() and (dest / spec.package).is_dir():
        from .gitutil import run

        dirty = run(dest, "status", "--porcelain", "--untracked-files=all").strip()
        if not dirty and not (dest / ".fixpack").exists():
            return dest
        why = "fixes were applied there" if (dest / ".fixpack").exists() else dirty.splitlines()[0].strip()
        progress.note(f"{dest}: its files changed since it was cloned ({why}), so it is no longer the release "
                      f"copy fetch cloned; cloning it again")
    shutil.rmtree(dest, ignore_errors=True)
    clone_at(url, dest, spec.pin.commit, spec.source.ref)
    return dest


def _unpacked_in(ft: FoundTarget, version: str) -> Path | None:
    """The cache folder fetch unpacked the marked copy ``ft`` into (its name ``<target>-<version>``, as fetch names
    it; ``version``: the release when not the pin's), where it is not the default cache (None then, and for a copy
    renamed or moved out of it): the fetch that unpacks it again must be given it (``--cache``)."""
    if ft.root.name != f"{ft.spec.name}-{version or ft.spec.pin.version}":
        return None
    parent = ft.root.parent
    try:
        return None if parent.resolve() == cache_root().resolve() else parent
    except OSError:  # (a loop: the folder it names is given as it is)
        return parent


def refuse_changed_copy(ft: FoundTarget, profile: str, pack_root: Path, doing: str = "fingerprint target",
                        made: str = "a lock is made", version: str = "", way: str = "give --root a clean copy",
                        cache: Path | None = None) -> None:
    """A release copy that carries fetch's marker (``MARKER``) but is no longer the tree fetch unpacked
    (``changed_since_unpack``: an edit, a file added or removed, fixes applied there) is MismatchError
    naming the copy and what changed: a lock made from it would record that edit as the release, and ``lock
    --check`` would call a good lock stale (a patch refreshed on it would carry the edit's offsets). A copy without
    the marker (the user's own) is taken as given. ``doing``, ``made``, ``way``: the command's words; ``profile``
    and ``version`` (the release when not the profile's pin): the fetch that prints a clean copy; ``pack_root`` and
    ``cache`` (the command's --cache): fetch's, where the copy is not in a cache folder of its own
    (:func:`_unpacked_in`)."""
    if not (ft.root / MARKER).is_file():
        return
    why = changed_since_unpack(ft.root)
    if why:
        from .progname import command, pack_words

        cache = _unpacked_in(ft, version) or cache
        fetch = command("fetch", "--profile", profile, "--target", ft.spec.name,
                        *(("--version", version) if version else ()), *(("--cache", str(cache)) if cache else ()),
                        *pack_words(pack_root))
        raise MismatchError(f"cannot {doing} {ft.spec.name}: {ft.root} is no longer the release copy "
                            f"fetch unpacked ({why}); {made} from clean release copies, so nothing was "
                            f"written: {way} (`{fetch}` prints one)")
