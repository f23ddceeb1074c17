"""A lost manifest (or entry) on a chain where a later fix changes a line of an earlier fix's context: ``three``
changes ``row 6``, a context line of ``two``'s hunk, so that neither two's pre-image nor its post-image is in the file
as a whole once three is in. Replayed forward on the files as they are, two was a conflict: status and apply said
exit 4 and the image could not be recorded again; revert told the user to put the file back to the release. The
files are the lock's states along the chain (each fix taken off last first, down to the release's sha256), so the
fixes are found applied and recorded as a fresh apply records them, nothing written to the target's files."""

import json
import shutil

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import MismatchError

MOD, OTHER = "demo_pkg/mod.py", "demo_pkg/other.py"
MANIFEST = ".fixpack/demo.manifest.json"
LOST = "applied by an earlier run whose manifest entry was lost"
AGAIN = "was written again, to record what is there"
CHAIN = ("one", "two", "three")


def chain(b, other=False):
    """one (row 2), two (row 9: context rows 6-8 and 10-12), three (row 6) on mod.py; with ``other``, four on
    other.py too (a chain of its own: it shares no file with them)."""
    text, rows = numbered(20, "row"), numbered(20, "line")
    files = {MOD: text, **({OTHER: rows} if other else {})}
    clean = b.tree("clean", files)
    now = text
    for fid, edit in [("one", ("row 2\n", "R2\n")), ("two", ("row 9\n", "R9\n")), ("three", ("row 6\n", "R6\n"))]:
        after = now.replace(*edit)
        b.add_fix(fid, {MOD: now}, {MOD: after})
        now = after
    if other:
        b.add_fix("four", {OTHER: rows}, {OTHER: rows.replace("line 4\n", "L4\n")})
    b.profile(list(b.series))
    b.lock(clean)
    return b.tree("image", files)


def states(report):
    return {f.id: f.state.value for f in report.fixes}


def applied_then_lost(b, other=False):
    image = chain(b, other)
    original = snapshot(image)
    assert engine.apply(b.request(image)).exit_code == 0
    fresh = snapshot(image)
    shutil.rmtree(image / ".fixpack")
    return image, original, fresh


def test_a_lost_manifest_of_an_overlapping_chain_is_recorded_again(builder):
    """status says applied (exit 0, nothing written); apply records the manifest a fresh apply wrote, byte for byte,
    and no file; apply again writes nothing; revert gives back the release's bytes."""
    image, original, fresh = applied_then_lost(builder)
    lost = {k: v for k, v in fresh.items() if k != MANIFEST}
    r = engine.status(builder.request(image))
    assert r.exit_code == 0 and states(r) == dict.fromkeys(CHAIN, "applied"), r.fixes
    assert all(LOST in r.fix(f).messages[0] for f in CHAIN) and snapshot(image) == lost
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and all(LOST in r.fix(f).messages[0] for f in CHAIN), r.fixes
    assert r.target("demo").notes == [f"no file of the target changed; its manifest {MANIFEST} {AGAIN}"]
    assert snapshot(image) == fresh  # the manifest too, byte for byte: each entry's sha256 its own fix's
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and r.target("demo").notes == [] and snapshot(image) == fresh
    assert {f.id: (f.state.value, f.action.value) for f in r.fixes} == dict.fromkeys(CHAIN, ("applied", "none"))
    assert engine.revert(builder.request(image)).ok and snapshot(image) == original


@pytest.mark.parametrize("gone", ["three"])
def test_a_lost_entry_of_an_overlapping_chain_is_recorded_again(builder, gone):
    """The manifest lost one entry (the others recorded): unwinding the recorded ones met the unrecorded fix in the
    way (three's row 6 in two's context: two tampered, exit 3), or replaying met it (two: conflict, exit 4)."""
    image = chain(builder)
    original = snapshot(image)
    assert engine.apply(builder.request(image)).exit_code == 0
    fresh = snapshot(image)
    doc = json.loads(fresh[MANIFEST][0])
    doc["fixes"] = [f for f in doc["fixes"] if f["id"] != gone]
    (image / MANIFEST).write_text(json.dumps(doc, indent=2) + "\n")
    r = engine.status(builder.request(image))
    assert r.exit_code == 0 and states(r) == dict.fromkeys(CHAIN, "applied"), r.fixes
    assert LOST in r.fix(gone).messages[0]
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and snapshot(image) == fresh, r.fixes
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and r.target("demo").notes == [] and snapshot(image) == fresh
    assert engine.revert(builder.request(image)).ok and snapshot(image) == original


def test_revert_without_the_manifest_says_to_record_the_chain_then_revert(builder):
    """Revert with the manifest lost refuses (exit 3, nothing written), naming the three fixes as there and the
    steps: record them with apply, then revert; followed, they give back the release. (It named two as only partly
    there and said to put the file back to the release first.)"""
    image, original, fresh = applied_then_lost(builder)
    lost = {k: v for k, v in fresh.items() if k != MANIFEST}
    with pytest.raises(MismatchError) as exc:
        engine.revert(builder.request(image))
    said = str(exc.value)
    assert "holds one, two, three (their post-images are there)" in said and "part of" not in said, said
    assert "To revert: record them with: " in said and " apply --profile p1 " in said, said
    assert "; then revert with: " in said and "back to the release" not in said, said
    assert snapshot(image) == lost
    assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == fresh
    assert engine.revert(builder.request(image)).ok and snapshot(image) == original


def test_a_drifted_file_of_the_chain_is_found_by_placement_and_nothing_is_laid_twice(builder):
    """A line of mod.py away from every hunk changed by hand after the apply, the manifest lost: the file is no state
    the lock knows, so the lock's sha256 cannot take the chain off. Two (row 9, its context holding three's row 6)
    was a conflict (exit 4), and revert's steps put the release's file back, the edit lost. The chain is taken off
    by placement now (replay.placed_off): status says applied (exit 0), --strict refuses it as drifted (exit 3),
    apply records it (the manifest alone written, nothing laid twice), revert gives the release back with the edit
    kept."""
    image, original, _ = applied_then_lost(builder)
    (image / MOD).write_text((image / MOD).read_text().replace("row 18\n", "edited 18\n"))
    drifted = snapshot(image)
    r = engine.status(builder.request(image))
    assert r.exit_code == 0 and states(r) == dict.fromkeys(CHAIN, "applied"), r.fixes
    assert engine.apply(builder.request(image, strict=True)).exit_code == 3 and snapshot(image) == drifted
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == dict.fromkeys(CHAIN, "applied"), r.fixes
    assert {k: v for k, v in snapshot(image).items() if k != MANIFEST} == drifted
    assert engine.apply(builder.request(image)).exit_code == 0  # recorded: nothing to do
    assert engine.revert(builder.request(image)).ok
    assert snapshot(image) == {MOD: (original[MOD][0].replace(b"row 18\n", b"edited 18\n"), original[MOD][1]),
                               **{k: v for k, v in original.items() if k != MOD}}


def test_a_drifted_file_of_another_chain_leaves_the_overlapping_one_found(builder):
    """other.py (four's, a chain of its own) edited by hand away from its hunk, the manifest lost: mod.py is still
    the lock's states, so one, two and three are found applied (two was a conflict, exit 4); four is found as it
    was (its post-image is there, in a file that is not the lock's): recorded, nothing laid twice."""
    image, original, fresh = applied_then_lost(builder, other=True)
    (image / OTHER).write_text((image / OTHER).read_text().replace("line 18\n", "edited 18\n"))
    drifted = snapshot(image)
    r = engine.status(builder.request(image))
    assert r.exit_code == 0 and states(r) == dict.fromkeys((*CHAIN, "four"), "applied"), r.fixes
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and all(LOST in r.fix(f).messages[0] for f in CHAIN), r.fixes
    after = snapshot(image)
    assert {k: v for k, v in after.items() if k != MANIFEST} == drifted
    doc, was = json.loads(after[MANIFEST][0]), json.loads(fresh[MANIFEST][0])
    assert [f["files"] for f in doc["fixes"][:3]] == [f["files"] for f in was["fixes"][:3]]
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and r.target("demo").notes == [] and snapshot(image) == after
    assert engine.revert(builder.request(image)).ok
    assert snapshot(image) == {**original, OTHER: ((image / OTHER).read_bytes(), original[OTHER][1])}
    assert (image / OTHER).read_text() == numbered(20, "line").replace("line 18\n", "edited 18\n")
