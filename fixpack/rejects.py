"""``--reject DIR``: the refused hunks of a run as git-style ``.rej`` files, outside the target.

One file per target file, ``DIR/<path>.rej``, in git's form: a ``diff a/<path> b/<path>`` line marked
``(rejected hunks)``, then each refused hunk as the patch writes it. A maintainer reads them next to the
report's diagnostics, or applies them by hand once the right place is known.
"""

from __future__ import annotations

from pathlib import Path

from .errors import BadInputError, EnvironmentProblem, io_advice, io_said
from .nofollow import atomic_write
from .report import Report, rejects_held
from .safepath import file_on_the_way, link_on_the_way


def write_rejects(report: Report, folder: Path) -> list[Path]:
    """Write the refused hunks of ``report`` under ``folder``; returns the files written (sorted).

    Raises BadInputError when ``folder`` lies inside a target's root (rejects never go next to the
    target's files) or a folder on the way to a ``.rej`` file under it is a symbolic link (it could lead
    into the target), :class:`RejectsNotWritten` (exit 5) when a file cannot be written (the message says the
    target was left as it was and names the files written before it, which stay; each fix whose next step said its
    .rej files hold its hunks says which of them were written and which one failed: :func:`_retold`).
    """
    given, folder = folder, folder.expanduser().resolve()
    for t in report.targets:
        root = Path(t.root).resolve() if t.root else None
        if root is not None and (folder == root or root in folder.parents):
            raise BadInputError(f"--reject {folder}: inside the target {t.name} at {root}; give a folder outside "
                                f"the target (rejects never go next to its files)")
    by_file: dict[str, list[str]] = {}
    for fix in report.fixes:
        for h in fix.refused:
            by_file.setdefault(str(h["file"]), []).append(str(h.get("patch", "")))
    for path in sorted(by_file):  # every check before the first write
        link = link_on_the_way(folder, f"{path}.rej")
        if link is not None and link != f"{path}.rej":  # a link as the .rej itself is replaced, not followed
            raise BadInputError(f"--reject {folder}: {folder / link} is a symbolic link; rejects are never written "
                                f"through one (it may lead into the target). Remove it or give another folder")
    written: list[Path] = []
    for path, hunks in sorted(by_file.items()):
        dest = folder / f"{path}.rej"
        body = f"diff a/{path} b/{path}\t(rejected hunks)\n" + "".join(h if h.endswith("\n") else h + "\n"
                                                                         for h in hunks if h)
        try:
            atomic_write(dest, body.encode("utf-8", "surrogateescape"), 0o644)
        except OSError as exc:  # (a refused hunk means a refused run: the target was left as it was)
            report.elsewhere = (f"{len(written)} reject file(s) under {folder}: {', '.join(map(str, written))}"
                                if written else f"no reject file under {folder}")
            _retold(report, rejects_held(given), folder, written, dest, exc)
            todo = _todo(exc, folder, dest)
            raise RejectsNotWritten(f"cannot write {io_said(exc, dest)}; the run was refused, and "
                                    f"{report.nothing_written()}. {todo[:1].upper()}{todo[1:]}, or give another "
                                    f"--reject folder, and run again", written) from exc
        written.append(dest)
    return written


def _todo(exc: OSError, folder: Path, dest: Path) -> str:
    """What to do about a .rej file ``dest`` (under ``folder``) that could not be written: a folder in its place (not a
    link to one) moved away, or a file where a folder on its way under ``folder`` must be made (named: "remove the
    cause" did not say which), else what its errno asks (free space, permissions, ...)."""
    if dest.is_dir() and not dest.is_symlink():
        return "move the folder there away"
    way = file_on_the_way(folder, dest.relative_to(folder).as_posix())
    if way is not None:
        return f"move {folder / way} away (a file where a folder on the way to the .rej file must be made)"
    return io_advice(exc)


def _retold(report: Report, held: str, folder: Path, written: list[Path], failed: Path, exc: OSError) -> None:
    """Once ``failed`` could not be written (``exc``): a fix's next step that says its .rej files hold its refused hunks
    (``held``, in the words :func:`fixpack.report.rejects_held` gave it) says instead, when any of them is not
    written, which were (``written``), which failed and why, which the run never reached, and what to do."""
    done = set(written)
    for fix in report.fixes:
        mine = [folder / f"{f}.rej" for f in sorted({str(h["file"]) for h in fix.refused})]
        if all(p in done for p in mine):
            continue
        ok, rest = [p for p in mine if p in done], [p for p in mine if p not in done and p != failed]
        said = [f"of its .rej files under {folder}, {_listed(ok)} {'was' if len(ok) == 1 else 'were'} written"
                if ok else f"no .rej file of its hunks was written under {folder}"]
        said += [f"cannot write {io_said(exc, failed)}"] if failed in mine else []
        said += [f"{_listed(rest)} {'was' if len(rest) == 1 else 'were'} not written (the run stopped at "
                 f"{failed})"] if rest else []
        said.append(f"{_todo(exc, folder, failed)}, or give another --reject folder, and run again to have them")
        fix.messages = [m.replace(held, "; ".join(said)) for m in fix.messages]


def _listed(paths: list[Path]) -> str:
    return ", ".join(map(str, paths))


class RejectsNotWritten(EnvironmentProblem):
    """A ``.rej`` file that could not be written (exit 5); ``written``: those written before it, which stay."""

    def __init__(self, message: str, written: list[Path]) -> None:
        super().__init__(message)
        self.written = written
