"""An import that fails at any I/O call, in the pack or in its staging copy under $TMPDIR (disk full, I/O
error): exit 5 naming the file and the errno, every byte of the pack as before, no folder left, and words for a
pack (found when a full $TMPDIR made import an internal error, exit 1: its staging copy's lock write raised a bare
OSError). Faults come from the engine's own hook ($FIXPACK_IO_FAULT), as in test_io_faults."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, numbered, snapshot
from test_authoring import MOD, mail_patch, pack3  # noqa: F401

from fixpack import fsio
from fixpack.errors import EnvironmentProblem, FixpackError
from fixpack.exchange import import_mails


def _all(root: Path) -> tuple[dict, list[str]]:
    return snapshot(root), sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())


def _mail_and_tmpdir(tmp_path: Path, monkeypatch) -> Path:  # type: ignore[no-untyped-def]
    """A mail of fix c's next change (line 55) to import, and $TMPDIR at ``tmp_path/tmp`` (read again)."""
    base = numbered(60)
    before_c = base.replace("line 10\n", "ten\n").replace("line 30\n", "# a comment\nthirty\n").replace(
        "line 50\n", "fifty\n")
    mail = tmp_path / "in.patch"
    mail.write_text(mail_patch(tmp_path, before_c, before_c.replace("line 55\n", "fifty-five\n")))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", None)  # $TMPDIR read again
    return mail


def test_an_import_failing_at_every_io_call_writes_nothing_and_says_so_for_the_pack(pack3, tmp_path,  # noqa: F811
                                                                                    monkeypatch):
    builder, clean = pack3
    mail = _mail_and_tmpdir(tmp_path, monkeypatch)

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


def _cli(args: list[str], fault: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)} | ({fsio.IO_FAULT_ENV: fault} if fault else {})
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=Path(os.environ["HOME"]).parent)


def test_lock_and_format_on_a_full_disk_are_exit_5_naming_the_file(builder):
    """Found by a fresh user: `lock` and `format` on a full disk were internal errors (exit 1, a bare OSError from
    the write of the lock or a patch). Now exit 5 naming the file and the errno, the file as it was, and what to
    do: at every I/O call of the write."""
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {MOD: base}, {MOD: base.replace("line 15\n", "fifteen\n")})
    builder.profile(["one", "two"])
    builder.lock(clean)
    lock = builder.pack / "profiles/p1.lock"
    lock.unlink()
    for n in range(1, 20):
        r = _cli(["lock", "-p", "p1", "--pack", str(builder.pack), "--root", f"demo={clean}"], f"{n}:ENOSPC")
        if r.returncode == 0:
            break
        said = " ".join(r.stderr.split())
        assert r.returncode == 5 and not list(lock.parent.glob(".*fixpack-tmp")), (n, said)
        if lock.exists():  # the rename was done: the folder's sync failed
            assert f"cannot sync the folder of {lock} after it was written ({lock.parent}: No space left on device " \
                   "(ENOSPC)); the file holds its new bytes, which a crash may still lose. Free space" in said, said
            lock.unlink()
        else:
            assert f"cannot write {lock}: No space left on device (ENOSPC); the file is as it was. Free space on " \
                   "its file system and run again" in said, (n, said)
    assert lock.is_file() and n > 1, n
    patches = sorted((builder.pack / "fixes").glob("*/*.patch"))
    for p in patches:  # stale: a header line format drops
        p.write_text(re.sub(r"\n(diff --git [^\n]*\n)", r"\n\1index 1234567..89abcde 100644\n", p.read_text(), count=1))
    stale = {p: p.read_bytes() for p in patches}
    for n in range(1, 20):
        r = _cli(["format", "--pack", str(builder.pack)], f"{n}:ENOSPC")
        if r.returncode == 0:
            break
        said = " ".join(r.stderr.split())
        assert r.returncode == 5 and "No space left on device (ENOSPC)" in said, (n, said)
        done = [p for p in patches if p.read_bytes() != stale[p]]
        synced = "cannot sync the folder of" in said  # (the last one written, its folder not synced)
        assert ("no other patch was rewritten" in said) == (len(done) == synced) and all(str(p) in said for p in done), \
            (n, said)  # (the sync of its folder failed: that one holds its new bytes, said so, and no other)
        for p in patches:
            p.write_bytes(stale[p])
    assert all(p.read_bytes() != stale[p] for p in patches), n


def test_a_full_tmpdir_while_copying_the_pack_is_said_of_tmpdir_not_of_a_pack_file(pack3, tmp_path,  # noqa: F811
                                                                                    monkeypatch):
    """A fresh user: with $TMPDIR on a small tmpfs an import's staging copy of the pack failed (ENOSPC), and the error
    blamed a file of the pack ("fixes/c/fix.toml: cannot be copied ... make it readable or remove it"). The copy's
    file system is what is full: exit 5, the errno, and to free space there or set TMPDIR; the pack as it was."""
    builder, clean = pack3
    mail = _mail_and_tmpdir(tmp_path, monkeypatch)
    real = shutil.copy2

    def full(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(dst).startswith(str(tmp_path / "tmp")) and str(src).endswith("fix.toml"):
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst, *args, **kwargs)
    tree = shutil.copytree
    monkeypatch.setattr(shutil, "copytree", lambda *a, **kw: tree(*a, **kw) if len(a) > 4 else  # (its recursion)
                        tree(*a, **{"copy_function": full, **kw}))
    before = _all(builder.pack)
    try:
        import_mails(builder.pack, mail, "imp", "p1", target="demo", roots={"demo": clean}, after="a")
        raise AssertionError("the import went through")
    except EnvironmentProblem as exc:
        said = str(exc)
    assert "No space left on device (ENOSPC)" in said and "set TMPDIR to a folder with room" in said, said
    assert "make it readable" not in said and "nothing in the pack was written" in said, said
    assert _all(builder.pack) == before
