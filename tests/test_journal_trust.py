"""A journal is untrusted input: a planted or damaged one never removes a file the release ships, never
changes a file this profile could not have written, nor its mode or owner beyond what it had, and its
recovery steps, run as printed, keep the release's files byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, numbered, snapshot

MOD = "demo_pkg/mod.py"


def _pack(builder, tmp_path, kind):
    base = numbered(30)
    release, source = builder.git_release({MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"], extra_targets=source)
    builder.lock(release)
    target = release
    if kind == "plain copy":
        target = tmp_path / "image"
        shutil.copytree(release, target, ignore=shutil.ignore_patterns(".git"))
        (target / "demo_pkg/_version.py").write_text(f"__version__ = '1.0'\n__commit_id__ = 'g{builder.commit}'\n")
    return target


def _cli(builder, target, *args):
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args, "--pack", str(builder.pack), "-p", "p1",
                           "--root", f"demo={target}"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def _steps(message: str) -> list[str]:
    one = message.split("In this order: 1. ", 1)[1].split("; 2. ", 1)[0]
    two = message.split("; 2. ", 1)[1].split("; 3. ", 1)[0]
    return [one.split(": ", 1)[1], two.split(": ", 1)[1].split(" (a manifest stays", 1)[0]]


@pytest.mark.parametrize("kind", ["git checkout", "plain copy"])
def test_damaged_journal_steps_never_remove_a_file_the_release_has(builder, tmp_path, kind):
    """A journal saying the release's ``__init__.py`` did not exist (and a file only the image has): the steps
    put the first back from the release, leave the second, and apply then works."""
    target = _pack(builder, tmp_path, kind)
    (target / "demo_pkg/built.so").write_bytes(b"\x7fELF only the image has it\n")
    clean = snapshot(target)
    (target / ".fixpack").mkdir()
    entries = [{"backup": None, "existed": False, "mode": None, "owner": None, "path": p, "sha256": None}
               for p in ("demo_pkg/__init__.py", "demo_pkg/built.so")]
    (target / ".fixpack/journal.json").write_text(json.dumps({"dirs": [], "entries": entries}))
    said = _cli(builder, target, "apply")
    assert said.returncode == 3, said.stderr
    steps = _steps(" ".join(said.stderr.split()))
    assert "rm -f" not in steps[0], steps[0]
    for step in steps:
        subprocess.run(["bash", "-c", step], cwd=tmp_path, check=True, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert snapshot(target) == clean
    assert _cli(builder, target, "apply").returncode == 0
    assert (target / "demo_pkg/__init__.py").read_bytes() == (builder.base / "release/demo_pkg/__init__.py").read_bytes()
    assert (target / "demo_pkg/built.so").read_bytes() == b"\x7fELF only the image has it\n"
