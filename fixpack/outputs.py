"""Where a command writes what it reports besides its target (``apply --reject DIR``, ``apply --sbom FILE``,
``sbom --out FILE``): checked before anything is written, so that a run that cannot write its output
stops before it touches the image.

Each check names the option as the user gave it. An output inside a target is bad input (exit 2: it would
be a file of the image it describes), and so is one inside the pack the run reads (its lock, series, patches); a
missing parent folder is bad input too (it is named, never made: a typo should not grow a tree of folders); a folder
that exists but cannot be written is the environment
(exit 5), as is a write that still fails later (:func:`write_failed`).
"""

from __future__ import annotations

import errno
import os
from datetime import datetime, timezone
from pathlib import Path

from .errors import BadInputError, EnvironmentProblem
from .fsio import temp_folder
from .run import Request, find_target, prepare
from .safepath import link_to


def target_roots(req: Request) -> tuple[list[tuple[str, Path]], Path]:
    """The (name, root) of every target the request locates (the skipped ones are not looked for), and the pack's
    root."""
    ctx = prepare(req, "status", need_lock=False)  # loads the pack and the profile; parses no patch
    found = [find_target(spec, req)[1] for spec in ctx.profile.targets]
    return [(ft.spec.name, ft.root) for ft in found if ft is not None], ctx.pack.root


IN_PACK = ("the pack's files (its lock, series, patches) are what a run reads: give a path outside the pack; nothing "
           "was written")


def refuse_inside(out: Path, option: str, roots: list[tuple[str, Path]], why: str, pack: Path | None = None) -> None:
    """BadInputError when ``out`` is, or lies inside, one of the targets' roots, or the ``pack`` the run reads (an
    SBOM written over its lock or series, rejects among its patches: found by a fresh user, exit 0)."""
    where = out.expanduser().resolve()
    inside = [(f"the target {name}", root.resolve(), why) for name, root in roots]
    for what, root, said in inside + ([("the pack", pack.resolve(), IN_PACK)] if pack is not None else []):
        if where == root or root in where.parents:
            raise BadInputError(f"{option} {out}: inside {what} at {root}; {said}")


def check_file(out: Path, option: str) -> None:
    """``out`` can be written as a file: not a folder; its folder exists, is a folder, and is writable; an
    existing ``out`` is writable (not immutable), a regular file and no symbolic link: the file is written by
    renaming a new one over it, which would put a plain file in place of a device (``/dev/null``), a FIFO or
    the link itself. Raises BadInputError (2) or EnvironmentProblem (5)."""
    out = out.expanduser()
    if out.is_symlink():
        raise BadInputError(f"{option} {out}: a symbolic link (to {link_to(out)}); the file is written by "
                            f"renaming a new one into place, which would replace the link: give the file it "
                            f"points to, or another file; nothing was written")
    if out.exists() and not out.is_dir() and not out.is_file():
        raise BadInputError(f"{option} {out}: not a regular file (a device, FIFO or socket); the file is written "
                            f"by renaming a new one into place, which would replace it: give a regular file's "
                            f"path; nothing was written")
    if out.is_dir():
        raise BadInputError(f"{option} {out}: a folder; give a file name")
    tmp = temp_folder(out)  # where the file is written, then renamed
    if tmp is not None:
        raise BadInputError(f"{option} {out}: {tmp} is a folder where the file is written before it is renamed "
                            f"into place; move it away (nothing of fixpack's is in it); nothing was written")
    _check_folder(out.parent if str(out.parent) else Path("."), option, out)
    if out.exists() and not os.access(out, os.W_OK):
        raise EnvironmentProblem(f"{option} {out}: the file cannot be written (read-only or immutable); make it "
                                 f"writable or give another file; nothing was written")


def check_folder(out: Path, option: str) -> None:
    """``out`` can hold the files written under it: a writable folder, or a missing one whose parent is."""
    out = out.expanduser()
    if out.exists() or out.is_symlink():
        _check_folder(out, option, out)
    else:
        _check_folder(out.parent if str(out.parent) else Path("."), option, out)


def _check_folder(folder: Path, option: str, out: Path) -> None:
    if not folder.exists():
        raise BadInputError(f"{option} {out}: the folder {folder} does not exist; create it first (it is not made "
                            f"for you) or give another path; nothing was written")
    if not folder.is_dir():
        raise BadInputError(f"{option} {out}: {folder} is not a folder; give another path; nothing was written")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise EnvironmentProblem(f"{option} {out}: the folder {folder} cannot be written to (permissions, "
                                 f"immutable or read-only); make it writable or give another path; nothing "
                                 f"was written")


def write_failed(exc: OSError, path: Path, option: str, done: str) -> EnvironmentProblem:
    """The exit-5 error of a write to ``path`` that failed (``done``: what the run had already done)."""
    name = errno.errorcode.get(exc.errno or 0, "")
    return EnvironmentProblem(f"{option} {path}: cannot write {exc.filename or path}: {exc.strerror or exc}"
                              f"{f' ({name})' if name else ''}; {done}")


def check_outputs(req: Request, reject_dir: Path | None, sbom_out: Path | None) -> None:
    """``apply``'s ``--reject DIR`` and ``--sbom FILE``, before anything is written: outside every target,
    their folders there and writable."""
    roots, pack = target_roots(req)
    if reject_dir is not None:
        refuse_inside(reject_dir, "--reject", roots,
                      "give a folder outside the target (rejects never go next to its files); nothing was written",
                      pack)
        check_folder(reject_dir, "--reject")
    if sbom_out is not None:
        refuse_inside(sbom_out, "--sbom", roots, "write it outside the target (the SBOM describes the image, "
                                                 "it is not a file of it); nothing was written", pack)
        check_file(sbom_out, "--sbom")
        sbom_ready()


def sbom_ready() -> None:
    """Before anything is written: the SBOM's libraries are there (EnvironmentProblem, exit 5: an apply --sbom
    without them patched the image, then said "nothing was written") and ``$SOURCE_DATE_EPOCH`` can be read."""
    import importlib
    import sys

    try:  # the SBOM's module, with all it imports (cyclonedx-python-lib's own needs too: typing_extensions, ...)
        importlib.import_module("fixpack.sbom")
    except ModuleNotFoundError as exc:
        raise EnvironmentProblem(f"the Python package {exc.name!r} is not installed in {sys.executable}: apply "
                                 f"--sbom, sbom and verify need `pip install 'cyclonedx-python-lib[json-validation]'` "
                                 f"(setup.cfg's sbom extra, with what it needs); nothing was written") from None
    source_date_epoch()


def source_date_epoch() -> datetime | None:
    """``$SOURCE_DATE_EPOCH`` (reproducible builds: seconds since 1970, UTC) as the SBOM's timestamp; None when unset
    or empty. BadInputError (exit 2) for one that is not ASCII digits or lies past year 9999 (it was an internal
    error, exit 1, after the apply had written)."""
    raw = os.environ.get("SOURCE_DATE_EPOCH", "")
    if not raw:
        return None
    try:
        if not (raw.isascii() and raw.isdigit()):
            raise ValueError(raw)
        return datetime.fromtimestamp(int(raw), tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        raise BadInputError(f"$SOURCE_DATE_EPOCH={raw[:40]!r}: not a time the SBOM can carry (whole seconds since "
                            f"1970-01-01 UTC, up to year 9999); unset it or give one; nothing was written") from None
