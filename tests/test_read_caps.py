"""The readers that read a whole file whatever its size (found by review), each now capped as
``documents.read_capped`` is: an oversized file is refused by its size, named, with its exit code, and never read
whole (a spy on every read of it: through an open file, ``Path.read_text`` or ``Path.read_bytes``). The files here
are sparse: only their size is big.

- ``verify --sbom FILE`` (``MAX_SBOM_BYTES``, exit 2), and the ``--out`` a re-run of ``sbom`` compares with
  (never read through a link, nor past the cap: it is replaced);
- a dist-info's ``direct_url.json`` (the target's facts; exit 3: no file pip wrote);
- the manifest read again for a line number (no line, nothing read whole);
- an export's record ``.fixpack-export`` (exit 2) and a release copy's marker ``.fixpack-complete`` (unpacked
  again);
- the state's manifest and journal: read to at most their cap and one byte, should they grow after the size check;
- a rebase whose ``state.json`` would hold backups past ``MAX_STATE_BYTES``: refused before anything is written."""

from __future__ import annotations

import os
import pathlib
from pathlib import Path

import pytest

from fixpack import documents
from fixpack.errors import FixpackError


def big(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)
    return path


def reads_of(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes asked of each read of ``path`` (its real path), as they happen: -1 for the whole file (through an
    open file from ``os.fdopen``, or ``Path.read_text`` / ``Path.read_bytes``, which read it whole)."""
    real_path, asked = os.path.realpath(path), []
    fdopen, read_text, read_bytes = os.fdopen, pathlib.Path.read_text, pathlib.Path.read_bytes

    class Spy:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            asked.append(n)
            return self.f.read(n)

    def spy_fdopen(fd, *args, **kw):
        f = fdopen(fd, *args, **kw)
        return Spy(f) if os.readlink(f"/proc/self/fd/{fd}") == real_path else f

    def spy_text(self, *args, **kw):
        if os.path.realpath(self) == real_path:
            asked.append(-1)
        return read_text(self, *args, **kw)

    def spy_bytes(self):
        if os.path.realpath(self) == real_path:
            asked.append(-1)
        return read_bytes(self)

    monkeypatch.setattr(os, "fdopen", spy_fdopen)
    monkeypatch.setattr(pathlib.Path, "read_text", spy_text)
    monkeypatch.setattr(pathlib.Path, "read_bytes", spy_bytes)
    return asked


def whole(asked: list[int], limit: int) -> bool:
    """Whether a read asked for more than ``limit + 1`` bytes (or all of them)."""
    return any(n < 0 or n > limit + 1 for n in asked)


# --- the manifest, read again for a line ----------------------------------------------------------------

def test_the_manifest_read_for_a_line_is_never_read_whole_nor_through_a_link(tmp_path, monkeypatch):
    """state.manifest_line read the manifest whole (a line number for a message): past the state's cap it says
    no line, unread; a link is not read through (the state never is)."""
    from fixpack import state

    path = big(tmp_path / ".fixpack/demo.manifest.json", documents.MAX_STATE_BYTES + 1)
    asked = reads_of(path, monkeypatch)
    assert state.manifest_line(path, "one", "demo_pkg/mod.py") is None
    assert asked == []
    monkeypatch.undo()
    real = tmp_path / "real.json"
    real.write_text('{\n  "fixes": [\n    {\n      "files": {\n        "a.py": "x"\n      },\n      "id": "one"\n'
                    '    }\n  ]\n}\n')
    assert state.manifest_line(real, "one", "a.py") == 5
    link = tmp_path / ".fixpack/link.manifest.json"
    link.symlink_to(real)
    assert state.manifest_line(link, "one", "a.py") is None


# --- the state's manifest and journal --------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["manifest", "journal"])
def test_a_state_file_that_grows_after_its_size_is_told_is_read_no_further(tmp_path, monkeypatch, which):
    """The manifest's and the journal's reader checked the size, then read the whole file: one that grew after
    the check was read whole. Now at most the cap and one byte are read, and it is damaged state (exit 3) named
    with its size. (The cap is lowered here so that the growth stays small.)"""
    from fixpack import state

    root = tmp_path / "t"
    path = root / ".fixpack" / ("demo.manifest.json" if which == "manifest" else "journal.json")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{}")
    limit = 1000
    monkeypatch.setattr(state, "MAX_STATE_BYTES", limit)
    fstat, grown = os.fstat, []

    def grow_after_fstat(fd):  # the file grows once its size has been told by the open file, before the read
        st = fstat(fd)
        if not grown and os.readlink(f"/proc/self/fd/{fd}") == str(path):
            grown.append(1)
            with open(path, "ab") as f:
                f.write(b" " * (limit * 10))
        return st
    monkeypatch.setattr(os, "fstat", grow_after_fstat)
    asked = reads_of(path, monkeypatch)
    with pytest.raises(FixpackError) as exc:
        state.read_manifest(root, "demo") if which == "manifest" else state.load_journal(root)
    assert exc.value.exit_code == 3 and str(path) in str(exc.value), str(exc.value)
    assert "more than any state this tool writes" in str(exc.value), str(exc.value)
    assert asked and not whole(asked, limit), asked


def test_a_state_file_linked_after_the_check_is_not_read_through(tmp_path, monkeypatch):
    """The reader's O_NOFOLLOW stays: a link put in the manifest's place after the lstat is damaged state, never
    read through."""
    from fixpack import state

    root = tmp_path / "t"
    path = root / ".fixpack/demo.manifest.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{}")
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"{}")
    lstat = os.lstat

    def link_after_lstat(p, *a, **kw):
        st = lstat(p, *a, **kw)
        if os.fspath(p) == str(path) and not path.is_symlink():
            path.unlink()
            path.symlink_to(outside)
        return st
    monkeypatch.setattr(os, "lstat", link_after_lstat)
    with pytest.raises(FixpackError) as exc:
        state.read_manifest(root, "demo")
    assert exc.value.exit_code == 3 and "symbolic link" in str(exc.value), str(exc.value)

