"""A lost manifest recorded again holds what apply from the release records: with two or more fixes on one file, each
entry's sha256 of that file is the one its fix left (the chain's bytes after it), not the file's last bytes. The
recovered entries held the last bytes for every fix of the file, so the next apply found the manifest unlike the one
it would write and wrote it again ("written again", no file changed); only the third apply wrote nothing."""

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import REPO, numbered, snapshot

from fixpack import engine, release
from fixpack.loader import load_pack, load_profile

MOD, OTHER = "demo_pkg/mod.py", "demo_pkg/other.py"
MANIFEST = ".fixpack/demo.manifest.json"
LOST = "applied by an earlier run whose manifest entry was lost"
AGAIN = "was written again, to record what is there"


def chain(b, opt_in=()):
    """one (mod.py), two (mod.py and other.py), three (other.py): the entry of one for mod.py needs two taken out,
    and taking two out needs three taken out of other.py first. ``opt_in``: those of them the profile makes opt-in."""
    mod, other = numbered(20), numbered(20, "row")
    clean = b.tree("clean", {MOD: mod, OTHER: other})
    steps = [("one", {MOD: lambda t: t.replace("line 3\n", "three\n")}),
             ("two", {MOD: lambda t: t.replace("line 12\n", "twelve\n"), OTHER: lambda t: t.replace("row 5\n", "R5\n")}),
             ("three", {OTHER: lambda t: t.replace("row 15\n", "R15\n")})]
    now = {MOD: mod, OTHER: other}
    for fid, edits in steps:
        after = {p: edit(now[p]) for p, edit in edits.items()}
        b.add_fix(fid, {p: now[p] for p in edits}, after)
        now.update(after)
    b.profile([f for f in b.series if f not in opt_in], list(opt_in))
    b.lock(clean)
    return b.tree("image", {MOD: mod, OTHER: other}), now


def notes(report, target="demo"):
    return report.target(target).notes


@pytest.mark.parametrize("opt_in", [(), ("three",), ("two", "three")])
def test_a_lost_manifest_is_recorded_again_as_apply_from_the_release_records_it(builder, opt_in):
    """Recovered without naming the opt-ins (found where they are, recorded with the chain): the manifest is the
    first apply's byte for byte, and the next apply writes nothing."""
    image, final = chain(builder, opt_in)
    original = snapshot(image)
    r = engine.apply(builder.request(image, opt_ins=tuple(opt_in)))
    assert r.exit_code == 0 and {f.id: f.action.value for f in r.fixes} == dict.fromkeys(builder.series, "applied")
    fresh = snapshot(image)
    assert fresh[MOD][0].decode() == final[MOD] and fresh[OTHER][0].decode() == final[OTHER]
    by_fix = {f["id"]: f["files"] for f in json.loads(fresh[MANIFEST][0])["fixes"]}
    assert by_fix["one"][MOD] != by_fix["two"][MOD] and by_fix["two"][OTHER] != by_fix["three"][OTHER]
    shutil.rmtree(image / ".fixpack")
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and all(LOST in r.fix(f).messages[0] for f in builder.series), r.fixes
    assert notes(r) == [f"no file of the target changed; its manifest {MANIFEST} {AGAIN}"]
    assert snapshot(image) == fresh  # the manifest too, byte for byte
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and notes(r) == [] and snapshot(image) == fresh
    assert {f.id: (f.state.value, f.action.value) for f in r.fixes} == dict.fromkeys(builder.series, ("applied", "none"))
    assert engine.revert(builder.request(image)).ok and snapshot(image) == original


def test_a_lost_entry_of_a_later_fix_is_recorded_again_as_apply_records_it(builder):
    """The manifest lost two's entry alone (one and three recorded): the record written holds two's own bytes."""
    image, _ = chain(builder)
    assert engine.apply(builder.request(image)).exit_code == 0
    fresh = snapshot(image)
    doc = json.loads(fresh[MANIFEST][0])
    doc["fixes"] = [f for f in doc["fixes"] if f["id"] != "two"]
    (image / MANIFEST).write_text(json.dumps(doc, indent=2) + "\n")
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and snapshot(image) == fresh, r.fixes
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and notes(r) == [] and snapshot(image) == fresh


@pytest.mark.release
def test_the_release_with_every_opt_in_recovers_its_manifest_once(tmp_path):
    """v0.30.0's chain has two files two fixes each change (seeded-sampling then topk-subset-sampler, prompt-order
    then vllm-long-prefill-share): recovered, its manifest is the first apply's, and the next apply writes nothing."""
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to fetch the release copy")
    spec = load_profile(load_pack(REPO), "v0.30.0").target("vllm")
    image = tmp_path / "vllm"
    shutil.copytree(release.fetch(spec, Path(cache)).root, image, symlinks=True)
    manifest = image / ".fixpack" / "vllm.manifest.json"

    def apply(**kw):
        return engine.apply(engine.Request(pack_root=REPO, profile="v0.30.0", roots={"vllm": image},
                                           only_targets=("vllm",), **kw))

    assert apply(all_opt_in=True).exit_code == 0
    fresh = manifest.read_bytes()
    shutil.rmtree(image / ".fixpack")
    r = apply()
    assert r.exit_code == 0 and manifest.read_bytes() == fresh
    assert notes(r, "vllm") == ["no file of the target changed; its manifest .fixpack/vllm.manifest.json " + AGAIN]
    r = apply()
    assert r.exit_code == 0 and notes(r, "vllm") == [] and manifest.read_bytes() == fresh
