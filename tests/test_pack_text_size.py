"""A pack text file (``fixes/series``, a profile, ``fix.toml``, a lock) larger than ``MAX_PACK_TEXT_BYTES`` is refused
unread, exit 2 naming it, as the state's manifest and journal are past theirs. Found by a fresh user: a 300 MB
series was read whole (4.9 GB of memory). (The files here are sparse: only their size is big.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, one_fix_pack, reads_of, snapshot

from fixpack import documents, engine
from fixpack.errors import FixpackError


@pytest.mark.parametrize("where, kind", [("fixes/series", "series file"), ("profiles/p1.toml", "TOML file"),
                                         ("fixes/one/fix.toml", "TOML file")])
def test_a_pack_text_file_too_large_is_refused_unread(builder, where, kind):
    image = one_fix_pack(builder)
    path = builder.pack / where
    size = 8 << 20  # (the cap is 4 MiB)
    with path.open("r+b") as f:
        f.truncate(size)
    before = snapshot(builder.base / "image")
    for call in (engine.status, engine.apply):
        with pytest.raises(FixpackError) as exc:
            call(builder.request(image))
        assert exc.value.exit_code == 2, str(exc.value)
        assert f"{where}: {size} bytes, more than the 4 MiB a pack's {kind} may have" in str(exc.value), str(exc.value)
    assert snapshot(builder.base / "image") == before


def test_a_pack_text_file_at_the_cap_is_read(builder):
    image = one_fix_pack(builder)
    path = builder.pack / "fixes/series"
    assert documents.MAX_PACK_TEXT_BYTES == 4 << 20
    with path.open("a") as f:
        f.write("#" * (documents.MAX_PACK_TEXT_BYTES - os.path.getsize(path) - 1) + "\n")
    assert os.path.getsize(path) == documents.MAX_PACK_TEXT_BYTES
    assert engine.status(builder.request(image)).ok, "read as before"


def test_a_lock_too_large_is_refused_unread(builder, monkeypatch):
    """A 5 MiB lock was read whole (then refused as no JSON): now its size refuses it, as a profile's, exit 2
    naming it and the command that regenerates it, before a byte of it is read."""
    image = one_fix_pack(builder)
    lock = builder.pack / "profiles/p1.lock"
    size = 5 << 20
    with lock.open("r+b") as f:
        f.truncate(size)
    before = snapshot(builder.base / "image")
    asked = reads_of(lock.resolve(), monkeypatch)
    for call in (engine.status, engine.apply):
        with pytest.raises(FixpackError) as exc:
            call(builder.request(image))
        said = str(exc.value)
        assert exc.value.exit_code == 2, said
        assert f"{lock}: {size} bytes, more than the 4 MiB a pack's lock file may have" in said, said
        assert "lock --profile p1" in said, said
    assert asked == [] and snapshot(builder.base / "image") == before
    monkeypatch.undo()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args in (["lock", "--check", "-p", "p1", "--root", f"demo={builder.base / 'clean'}"], ["check"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(builder.pack)], env=env,
                           capture_output=True, text=True, cwd=builder.base)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and f"{size} bytes, more than the 4 MiB a pack's lock file may have" in out, out
        assert str(lock) in out or "profiles/p1.lock" in out, out
    assert snapshot(builder.base / "image") == before and os.path.getsize(lock) == size


def test_a_lock_at_the_cap_is_read(builder):
    image = one_fix_pack(builder)
    lock = builder.pack / "profiles/p1.lock"
    with lock.open("a") as f:  # JSON's own whitespace: the same lock
        f.write(" " * (documents.MAX_PACK_TEXT_BYTES - os.path.getsize(lock) - 1) + "\n")
    assert os.path.getsize(lock) == documents.MAX_PACK_TEXT_BYTES
    assert engine.status(builder.request(image)).ok, "read as before"
