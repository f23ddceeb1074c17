"""An import that fails at any I/O call, in the pack or in its staging copy under $TMPDIR (disk full, I/O
error): exit 5 naming the file and the errno, every byte of the pack as before, no folder left, and words for a
pack (found when a full $TMPDIR made import an internal error, exit 1: its staging copy's lock write raised a bare
OSError). Faults come from the engine's own hook ($FIXPACK_IO_FAULT), as in test_io_faults."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from conftest import numbered, snapshot
from test_authoring import MOD, mail_patch, pack3  # noqa: F401

from fixpack import fsio
from fixpack.errors import EnvironmentProblem, FixpackError
from fixpack.exchange import import_mails


def _all(root: Path) -> tuple[dict, list[str]]:
    return snapshot(root), sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


def test_an_import_failing_at_every_io_call_writes_nothing_and_says_so_for_the_pack(pack3, tmp_path,  # noqa: F811
                                                                                    monkeypatch):
    builder, clean = pack3
    base = numbered(60)
    before_c = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace(
        "line 50\n", "fifty\n")
    mail = tmp_path / "in.patch"
    mail.write_text(mail_patch(tmp_path, before_c, before_c.replace("line 55\n", "fifty-five\n")))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)  # $TMPDIR read again

    def run():  # type: ignore[no-untyped-def]
        return import_mails(builder.pack, mail, "imp", "p1", target="demo", roots={"demo": clean}, after="a")

    before = _all(builder.pack)
    saved = tmp_path / "saved"
    shutil.copytree(builder.pack, saved, symlinks=True)
    monkeypatch.setenv(fsio.IO_FAULT_ENV, "1000000:EIO")
    fsio.reset_fault_counters()
    done = run()
    points = fsio.io_calls()
    assert done.outcome.changed and points >= 30
    staged = set()
    for n in range(1, points + 1):
        shutil.rmtree(builder.pack)
        shutil.copytree(saved, builder.pack, symlinks=True)  # the pack as it was (the counting run wrote it)
        assert _all(builder.pack) == before
        name = ("ENOSPC", "EIO")[n % 2]
        monkeypatch.setenv(fsio.IO_FAULT_ENV, f"{n}:{name}")
        fsio.reset_fault_counters()
        try:
            out, exc = run(), None
        except FixpackError as e:
            out, exc = None, e
        finally:
            monkeypatch.delenv(fsio.IO_FAULT_ENV)
        if exc is None and n == points:  # the pack folder's fsync after the commit: done, not undone
            assert out is not None and out.outcome.changed
            break
        assert isinstance(exc, EnvironmentProblem) and exc.exit_code == 5, f"I/O call {n} ({name}): {out or exc}"
        said = str(exc)
        assert os.strerror(getattr(errno, name)) in said and f"({name})" in said, said
        assert "target" not in said and ("nothing in the pack was" in said or "the pack holds its bytes" in said), said
        staged |= {"while staging the import;" in said and "set TMPDIR to a folder with room" in said}
        assert _all(builder.pack) == before, f"I/O call {n} ({name}): the pack changed: {said}"
        assert not list((tmp_path / "tmp").iterdir()), f"I/O call {n}: the staging copy was left"
    assert staged == {True, False}  # faults in the staging copy and in the pack were both met


def test_a_git_run_out_of_space_says_to_free_it_or_move_tmpdir(tmp_path, monkeypatch):
    """An import's or refresh's scratch repository lives under $TMPDIR: git's own ENOSPC is exit 5 with what to do."""
    import git

    from fixpack.errors import GitError
    from fixpack.gitutil import run

    said = "fatal: cannot copy 'hooks/x.sample' to '/t/repo/.git/hooks/x.sample': No space left on device"
    monkeypatch.setattr(git.Git, "execute", lambda self, *a, **kw: (128, "", said))
    try:
        run(tmp_path, "init", "--quiet")
    except GitError as exc:
        assert exc.exit_code == 5 and said in str(exc) and "set TMPDIR to a folder with room" in str(exc), str(exc)
    else:
        raise AssertionError("no GitError")
    monkeypatch.setattr(git.Git, "execute", lambda self, *a, **kw: (1, "", "error: something else"))
    try:
        run(tmp_path, "init", "--quiet")
    except GitError as exc:
        assert "TMPDIR" not in str(exc)
