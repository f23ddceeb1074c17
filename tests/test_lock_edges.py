"""Edges of the lock and of names: a patch changed without a version bump (refused by `lock`; an image that
holds the old patch gets a way out), `lock --check` on a pack changed since its lock (stale, exit 2, as
`check` and `apply` say), `check`'s relock command on a profile of two targets (it runs as printed), and an
unknown fix with no close match (the profile's fixes listed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, PackBuilder, numbered, snapshot

from fixpack import engine
from fixpack.errors import UnknownNameError

MOD = "demo_pkg/mod.py"


def fixpack(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout, run from a folder without a ``fixpack`` package (the tmp folder)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or Path(os.environ["HOME"]).parent)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


def _proof(b: PackBuilder, fid: str) -> None:
    (b.pack / "fixes" / fid / f"test_{fid.replace('-', '_')}.py").write_text("def test_it():\n    pass\n")


# --- 4. an unknown fix with no close match lists the profile's fixes -------------------------------------

def test_an_unknown_fix_without_a_close_match_lists_the_profiles_fixes(builder):
    """"unknown fix 'x' (no close match)" named nothing to pick from: the profile's fixes are listed, opt-in
    first (those are named), a handful, then "and N more"; a close match is still said alone."""
    b = builder
    base = numbered(40)
    ids = [f"fix-{c}" for c in "abcdefgh"]
    for n, fid in enumerate(ids):
        b.add_fix(fid, {MOD: base}, {MOD: base.replace(f"line {4 * n + 2}\n", f"{fid}\n")}, opt_in=fid in ids[-2:])
    b.profile(ids[:-2], ids[-2:])
    clean = b.tree("clean", {MOD: base})
    b.lock(clean)
    image = b.tree("image", {MOD: base})
    with pytest.raises(UnknownNameError) as exc:
        engine.status(b.request(image, opt_ins=("zzzqqq",)))
    said = str(exc.value)
    assert said.startswith("unknown fix 'zzzqqq' (no close match; the fixes of profile p1 ("), said
    assert "): fix-g (opt-in), fix-h (opt-in), fix-a, fix-b, fix-c, fix-d and 2 more: name one of its opt-in " \
           "fixes, or none)" in said, said
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "zzzqqq")
    assert r.returncode == 2 and "fix-g (opt-in), fix-h (opt-in), fix-a" in r.stderr and "and 2 more" in r.stderr
    r = fixpack("apply", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "fix-q")
    assert r.returncode == 2 and "(close matches: fix-" in r.stderr and "(opt-in)" not in r.stderr, r.stderr
