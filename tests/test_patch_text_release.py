"""A patch's text as a fresh user met it on the real vLLM 0.30.0 release copy (cached; ``release``
marker): a file of the release with CRLF line ends fixed through new / refresh / apply / revert, byte for
byte; git's ``index`` line and a lost final newline read one way by check, lock, format and the applier."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import git, snapshot
from test_authoring_release import clean, pack, req  # noqa: F401 (fixtures)

from fixpack import engine, lockfile
from fixpack.editrefresh import refresh_from_work
from fixpack.editwork import start
from fixpack.loader import load_pack, load_profile
from fixpack.pack_tools import rewrite_patches, stale_patches

pytestmark = pytest.mark.release
CRLF_FILE = "vllm/config/fault_tolerance.py"
SEEDED = "fixes/seeded-sampling/0001-seeded-sampling-generator-device.patch"


def stale(pack_root: Path) -> list[tuple[tuple[str, str], str]]:
    """What check calls stale in the v0.30.0 lock (the fixes' part of it)."""
    loaded = load_pack(pack_root)
    profile = load_profile(loaded, "v0.30.0")
    entries = lockfile.stale_entries(loaded.for_profile("v0.30.0"), profile, lockfile.read_lock(profile))
    return [e for e in entries if e[0][0] == "fix"]


def test_a_crlf_file_of_the_release_is_fixed_new_refresh_apply_revert(pack, clean, tmp_path):  # noqa: F811
    data = (clean / CRLF_FILE).read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n") == 18  # the release's file: CRLF on every line
    work = Path(start(pack, "v0.30.0", "crlf-fix", new=True, target="vllm", roots={"vllm": clean}).work)
    changed = data.replace(b"\r\n", b"\r\n# crlf fix\r\n", 1)
    (work / CRLF_FILE).write_bytes(changed)
    git(work, "commit", "-qam", "Fix a CRLF file")
    done = refresh_from_work(pack, "crlf-fix")
    assert done is not None
    patch = next((pack / "fixes/crlf-fix").glob("0*.patch")).read_bytes()
    assert b"+# crlf fix\r\n" in patch and b"diff --git a/vllm/config/fault_tolerance.py" in patch
    assert b"diff --git a/vllm/config/fault_tolerance.py b/vllm/config/fault_tolerance.py\n" in patch  # LF itself
    assert stale_patches(load_pack(pack)) == [] and stale(pack) == []
    image = tmp_path / "image"
    shutil.copytree(clean / "vllm", image / "vllm")
    before = snapshot(image)
    assert engine.apply(req(pack, image)).exit_code == 0
    assert (image / CRLF_FILE).read_bytes() == changed  # the CR kept on each line, the new line's too
    assert engine.revert(req(pack, image)).exit_code == 0
    assert snapshot(image) == before


def test_index_line_and_format_agree_with_the_lock(pack):  # noqa: F811
    path = pack / SEEDED
    original = path.read_bytes()
    text = original.decode()
    head = text.index("\n", text.index("diff --git ")) + 1
    path.write_text(text[:head] + "index aeb82de..abcdef1 100644\n" + text[head:])
    assert stale(pack) == []  # check: the lock's change hash leaves the index line out, as format does
    assert stale_patches(load_pack(pack)) == [path]  # format --check: churn to drop
    assert rewrite_patches(load_pack(pack)) == [path] and path.read_bytes() == original
    assert stale(pack) == [] and stale_patches(load_pack(pack)) == []


def test_a_lost_final_newline_is_read_as_format_writes_it(pack, clean, tmp_path):  # noqa: F811
    path = pack / SEEDED
    original = path.read_bytes()
    path.write_bytes(original[:-1])
    assert stale(pack) == []  # the same change: the lock is fresh
    image = tmp_path / "image"
    shutil.copytree(clean / "vllm", image / "vllm")
    assert engine.apply(req(pack, image)).exit_code == 0  # the applier reads the last line with its newline
    assert rewrite_patches(load_pack(pack)) == [path] and path.read_bytes() == original
    assert stale(pack) == []
