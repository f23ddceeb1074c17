"""A pack file or folder this user may not read (mode 000, as non-root; found by a fresh user): each was said as a
problem of the pack's contents, with advice that misled: the lock "regenerate it", a fix's folder "has no fix.toml
(create the fix or remove the line)", the profiles folder "unknown profile", a profile or the series "is invalid"
(all exit 2). Now exit 5, the file and the errno, what to do, and nothing written. As root the permissions are not
enforced, so the refusal is simulated (the OS calls for paths inside a denied folder, or a denied file's open and
listing, raise EACCES as the kernel would); as another user, the real modes are set too."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, one_fix_pack, snapshot

from fixpack.cli import main

MOD = "demo_pkg/mod.py"
CASES = {  # what is made unreadable (mode 000; 111: searchable, not listable) -> the path the message names
    "fixes/series": "fixes/series",
    "profiles/p1.toml": "profiles/p1.toml",
    "profiles/p1.lock": "profiles/p1.lock",
    "fixes/one/fix.toml": "fixes/one/fix.toml",
    "fixes/one": "fixes/one/fix.toml",
    "fixes/one/0001-change.patch": "fixes/one/0001-change.patch",
    "profiles": "profiles",
    "fixes/one/p1": "fixes/one/p1/variant.toml",  # the fix's variant for p1: it was taken for none, exit 0
    "fixes/one:111": "fixes/one",
    "fixes:111": "fixes",
    "profiles:111": "profiles",
}


def _deny(monkeypatch: pytest.MonkeyPatch, denied: Path, mode: str = "000") -> None:
    """What mode 000 on ``denied`` does to a user who does not own it: a path inside it cannot be looked at, its
    listing and its own open fail (EACCES); the lstat or stat of ``denied`` itself still works. Mode 111 (search,
    no read) refuses only the folder's listing."""
    def refused(p: object, itself: bool) -> bool:
        try:
            path = Path(os.fsdecode(p))  # type: ignore[arg-type]
        except TypeError:  # a file descriptor
            return False
        path = path if path.is_absolute() else Path.cwd() / path
        return (mode == "000" and denied in path.parents) or (itself and path == denied)

    def wrap(name: str, itself: bool):  # type: ignore[no-untyped-def]
        real = getattr(os, name)

        def call(p, *a, **kw):  # type: ignore[no-untyped-def]
            if refused(p, itself):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(p))
            return real(p, *a, **kw)
        monkeypatch.setattr(os, name, call)
    for name, itself in (("lstat", False), ("stat", False), ("open", mode == "000"), ("listdir", True),
                         ("scandir", True)):
        wrap(name, itself)


def _said(res) -> str:  # type: ignore[no-untyped-def]
    return " ".join(res.output.split())


@pytest.mark.parametrize("command", ["status", "apply"])
@pytest.mark.parametrize("what", sorted(CASES))
def test_an_unreadable_pack_file_is_exit_5_naming_it(builder, monkeypatch, what, command):
    image = one_fix_pack(builder)
    (builder.pack / "fixes/one/p1").mkdir()
    before = snapshot(image), snapshot(builder.pack)
    path, _, mode = what.partition(":")
    _deny(monkeypatch, builder.pack / path, mode or "000")
    res = CliRunner().invoke(main, [command, "-p", "p1", "--pack", str(builder.pack), "--root", f"demo={image}",
                                    "--color", "never"])
    monkeypatch.undo()
    said = _said(res)
    assert res.exit_code == 5, said
    assert f"{builder.pack / CASES[what]}: cannot be read: Permission denied (EACCES); run as a user who may read " \
           f"the pack" in said, said
    for wrong in ("regenerate", "create the fix", "unknown profile", "is invalid", "internal error"):
        assert wrong not in said, said
    assert (snapshot(image), snapshot(builder.pack)) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of any mode (the simulated case above runs)")
@pytest.mark.parametrize("what", sorted(CASES))
def test_an_unreadable_pack_file_with_its_real_mode(builder, what):
    image = one_fix_pack(builder)
    (builder.pack / "fixes/one/p1").mkdir()
    path, _, mode = what.partition(":")
    target = builder.pack / path
    target.chmod(int(mode or "0", 8))
    try:
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "-p", "p1", "--pack", str(builder.pack),
                            "--root", f"demo={image}", "--color", "never"], capture_output=True, text=True,
                           cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    finally:
        target.chmod(0o755 if target.is_dir() else 0o644)
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 5 and f"{builder.pack / CASES[what]}: cannot be read: Permission denied (EACCES)" in said, \
        said
    assert "three" not in (image / MOD).read_text() and not (image / ".fixpack").exists()
    shutil.rmtree(builder.pack)


def test_the_same_pack_readable_runs(builder):
    """The cases above on a pack this user may read: the run goes through (the empty variant folder is none)."""
    image = one_fix_pack(builder)
    (builder.pack / "fixes/one/p1").mkdir()
    res = CliRunner().invoke(main, ["apply", "-p", "p1", "--pack", str(builder.pack), "--root", f"demo={image}"])
    assert res.exit_code == 0 and "three" in (image / MOD).read_text(), _said(res)


def test_lock_does_not_replace_a_lock_it_may_not_read(builder, monkeypatch):
    """`lock` with the lock on disk unreadable wrote a new one over it (exit 0; its owner's file, root's 000, became
    the user's 644; found by a fresh user): exit 5 naming it, nothing written."""
    one_fix_pack(builder)
    before = snapshot(builder.pack)
    _deny(monkeypatch, builder.pack / "profiles/p1.lock")
    res = CliRunner().invoke(main, ["lock", "-p", "p1", "--pack", str(builder.pack), "--root",
                                    f"demo={builder.base / 'clean'}", "--color", "never"])
    monkeypatch.undo()
    assert res.exit_code == 5, _said(res)
    assert f"{builder.pack / 'profiles/p1.lock'}: cannot be read: Permission denied (EACCES)" in _said(res)
    assert snapshot(builder.pack) == before
