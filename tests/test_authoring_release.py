"""The maintainer's loop on the real vLLM 0.30.0 release copy (cached; ``release`` marker), on a copy of
this repository's pack: edit seeded-sampling and refresh a comment change; start a new fix; export the
chain with both opt-ins and compare `git am` with `apply`, byte for byte."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, git
from test_authoring import AUTHOR, assert_git_am_equals_apply, mail_patch

from fixpack import engine, lockfile, release
from fixpack.editrefresh import refresh_from_work
from fixpack.editwork import start
from fixpack.exchange import export, import_mails
from fixpack.loader import load_pack, load_profile
from fixpack.pack_tools import stale_patches
from fixpack.patchmail import read_mail

pytestmark = pytest.mark.release
SAMPLER = "vllm/v1/sample/ops/topk_topp_sampler.py"
LATER = ["prompt-order", "topk-subset-sampler", "vllm-long-prefill-share"]


@pytest.fixture(scope="module")
def clean() -> Path:
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to fetch the release copy")
    return release.fetch(load_profile(load_pack(REPO), "v0.30.0").target("vllm"), Path(cache)).root


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    """This repository's pack (fixes, profiles, the components' folders), copied."""
    out = tmp_path / "pack"
    for name in ("fixes", "profiles", "ports", "kernels"):
        shutil.copytree(REPO / name, out / name, ignore=shutil.ignore_patterns("__pycache__", ".*_cache"))
    return out


def req(pack: Path, root: Path, **kw) -> engine.Request:
    return engine.Request(pack_root=pack, profile="v0.30.0", roots={"vllm": root}, only_targets=("vllm",), **kw)


def lock_matches(pack: Path) -> None:
    """The lock the refresh wrote (by the lock generation, on the release copy) is the pack's: a run accepts
    it (regenerating it once more to compare would double the test's time)."""
    loaded = load_pack(pack)
    profile = load_profile(loaded, "v0.30.0")
    lockfile.check_lock_matches(loaded.for_profile("v0.30.0"), profile, lockfile.read_lock(profile))


def test_edit_seeded_sampling_refresh_a_comment(pack, clean):
    patch = pack / "fixes/seeded-sampling/0001-seeded-sampling-generator-device.patch"
    before = patch.read_text()
    work = Path(start(pack, "v0.30.0", "seeded-sampling", roots={"vllm": clean}).work)
    assert git(work, "log", "--format=%s", "fixpack-upstream..fixpack-base").count("\n") == 2  # the two fixes before
    text = (work / SAMPLER).read_text()
    assert "# on the generator's device and copy it over.\n" in text
    (work / SAMPLER).write_text(text.replace("# on the generator's device and copy it over.\n",
                                             "# on the generator's device, then copy it over.\n"))
    git(work, "commit", "-qa", "--amend", "--no-edit")
    done = refresh_from_work(pack, "seeded-sampling")
    assert done is not None and [(f.id, f.state) for f in done.outcome.later] == [(i, "exact") for i in LATER]
    after = patch.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert changed == [("+                # on the generator's device and copy it over.",
                        "+                # on the generator's device, then copy it over.")]
    assert read_mail(after).author == read_mail(before).author and read_mail(after).trailers == \
        read_mail(before).trailers
    assert "\nversion = 2\n" in (pack / "fixes/seeded-sampling/fix.toml").read_text()  # the change changed
    lock_matches(pack)
    assert stale_patches(load_pack(pack)) == []


def test_new_small_fix_lands_in_series_profile_and_lock(pack, clean):
    work = Path(start(pack, "v0.30.0", "tiny-fix", new=True, target="vllm", roots={"vllm": clean}).work)
    assert git(work, "log", "-1", "--format=%s").startswith("Defer prefix-cache hits")  # after the last default
    text = (work / SAMPLER).read_text()
    (work / SAMPLER).write_text(text.replace('"""Sample from the probabilities.', '"""Sample from the probs.', 1)
                                if '"""Sample from the probabilities.' in text else text + "# tiny\n")
    git(work, "commit", "-qam", "A tiny fix\n\nIt shows the loop.")
    done = refresh_from_work(pack, "tiny-fix")
    assert done is not None and [f.id for f in done.outcome.later] == LATER[1:]
    loaded = load_pack(pack)
    assert loaded.series.index("tiny-fix") == loaded.series.index("prompt-order") + 1
    assert "tiny-fix" in load_profile(loaded, "v0.30.0").default
    lock_matches(pack)


def test_import_a_mail_onto_the_real_chain_round_trips_through_format(pack, clean, tmp_path):
    path = "vllm/v1/engine/detokenizer.py"
    text = (clean / path).read_text()
    changed = text.replace("\n", "\n# imported\n", 1)
    mail = tmp_path / "in.patch"
    body = mail_patch(tmp_path, text, changed).replace("demo_pkg/mod.py", path)
    mail.write_text(body)
    done = import_mails(pack, mail, "imported", "v0.30.0", roots={"vllm": clean})
    assert done.outcome.changed and stale_patches(load_pack(pack)) == []
    assert read_mail((pack / done.patches[0]).read_text()).author == AUTHOR


def test_export_with_both_opt_ins_git_am_gives_apply_s_bytes(clean, tmp_path):
    out = tmp_path / "series"
    export(REPO, "v0.30.0", ("topk-subset-sampler", "vllm-long-prefill-share"), out)
    assert len((out / "series").read_text().split()) == 6
    base = tmp_path / "release"
    shutil.copytree(clean / "vllm", base / "vllm")
    assert_git_am_equals_apply(base, out, lambda root: engine.apply(req(REPO, root, all_opt_in=True)), tmp_path)
