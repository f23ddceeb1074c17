"""How the rebase names a file it could not write, remove or put back (the environment class of errors, exit 5): the
file, the errno's text and name (``Permission denied (EACCES)``). A put-back (``--abort``, ``--undo``, a cut pack
write) tries every file before it says which it could not put back (:class:`NotPutBack`)."""

from __future__ import annotations

import errno
from pathlib import Path


def errno_text(exc: OSError) -> str:
    """``No space left on device (ENOSPC)``: the error's text and its errno's name."""
    name = errno.errorcode.get(exc.errno or 0, "")
    return f"{exc.strerror or exc}" + (f" ({name})" if name else "")


def cannot(exc: OSError, path: Path | str | None = None, what: str = "write") -> str:
    """``cannot write PATH: Permission denied (EACCES)``; ``path``: the file the run was at (else the error's)."""
    return f"cannot {what} {path if path is not None else exc.filename or '?'}: {errno_text(exc)}"


class NotPutBack(OSError):
    """Pack files a put-back could not put back, each tried (``failed``: the path relative to the pack -> its error);
    ``restored``: those it put back meanwhile."""

    def __init__(self, restored: list[str], failed: dict[str, OSError]) -> None:
        first = next(iter(failed.values()))
        super().__init__(first.errno, first.strerror)
        self.restored, self.failed = restored, failed

    def named(self) -> str:
        """``fixes/a/v2/0001-x.patch (Permission denied (EACCES)), ...``"""
        return ", ".join(f"{k} ({errno_text(e)})" for k, e in sorted(self.failed.items()))
