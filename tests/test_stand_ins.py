"""The stand-in images tools/test.sh builds share their files with .venv, never vLLM's (README, "disk").

tools/image-venv.sh VERSION .venv-vllm-VERSION .venv [earlier stand-ins] makes each non-empty file of
the stand-in's site-packages that is byte-for-byte the same as .venv's file at the same path (same mode
too) a hard link to it, so the four environments take about 16 GB, not 27; the vllm package is never
linked, since a proof patches it in place. Skipped without $FIXPACK_IMAGE_PYTHONS naming tools/test.sh's
own stand-ins, or without util-linux's hardlink (image-venv.sh then shares nothing and says so).
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LATER = sorted(p.stem for p in (REPO / "profiles").glob("*.toml") if p.stem != "v0.30.0")


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    assert found, f"{venv}: no lib/python3*/site-packages"
    return found[0]


def stand_in(profile: str) -> Path:
    """The venv of tools/test.sh's stand-in for PROFILE (skips for any other Python)."""
    pairs = dict(p.split("=", 1) for p in os.environ.get("FIXPACK_IMAGE_PYTHONS", "").split() if "=" in p)
    python = pairs.get(profile)
    if python is None:
        pytest.skip(f"no image Python for {profile} in $FIXPACK_IMAGE_PYTHONS (tools/test.sh sets it)")
    venv = Path(python).parent.parent
    if venv.parent.resolve() != REPO or not venv.name.startswith(".venv-vllm-"):
        pytest.skip(f"{python} is not a stand-in tools/test.sh made (REPO/.venv-vllm-VERSION)")
    probe = subprocess.run(["hardlink", "--version"], capture_output=True, text=True) \
        if shutil.which("hardlink") else None
    if probe is None or "util-linux" not in probe.stdout:
        pytest.skip("no util-linux hardlink here: tools/image-venv.sh shares no files")
    return venv


@pytest.mark.parametrize("profile", LATER)
def test_stand_in_shares_files_with_venv_but_not_vllm(profile: str) -> None:
    site, base = site_packages(stand_in(profile)), site_packages(REPO / ".venv")
    vllm_linked = [p for p in (site / "vllm").rglob("*") if p.is_file() and p.stat().st_nlink > 1]
    assert not vllm_linked, f"vllm files of the stand-in are hard links: {vllm_linked[:5]}"
    shared = copies = 0
    for path in site.rglob("*.py"):
        rel = path.relative_to(site)
        twin = base / rel
        if rel.parts[0] == "vllm" or not twin.is_file() or path.stat().st_size == 0:  # hardlink skips empty files
            continue
        mine, theirs = path.stat(), twin.stat()
        if (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino):
            shared += 1
        elif mine.st_mode == theirs.st_mode and mine.st_size == theirs.st_size \
                and filecmp.cmp(path, twin, shallow=False):
            copies += 1
    assert copies == 0, f"{copies} files of {site} are copies of .venv's, not hard links to them"
    assert shared > 1000, f"only {shared} files of {site} are shared with .venv"
