"""Chains of fixes on a drifted file, found by an attacking helper (exit 0 with the file wrong before):

- a fix that removes a line finds its post-image inside its own pre-image, so "is it in?" said yes where the line it
  removes was still there; a later fix of the chain that undid the fix's other hunk then made both look applied
  (nothing laid, the line left in);
- with the manifest lost and a line added above a chain whose first fix is anchored to the file's start, the chain
  could be taken off but not laid again (the anchored hunk goes only at its stated line plus the running offset,
  and the re-lay started from 0): the fixes were judged one by one, and one whose added line a later fix changed
  was laid a second time (two '# header' lines, two 'D = 5').
"""

import json
import shutil

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import DamagedStateError

MOD = "demo_pkg/mod.py"


def _pack(b, base, chain):  # type: ignore[no-untyped-def]
    clean = b.tree("clean", {MOD: base})
    prev = base
    for fid, after in chain:
        b.add_fix(fid, {MOD: prev}, {MOD: after})
        prev = after
    b.profile([f for f, _ in chain])
    b.lock(clean)
    return prev


def test_a_line_a_fix_removes_still_there_is_not_taken_for_the_fix_being_in(builder):
    base = numbered(20)
    f0 = base.replace("line 3\n", "three\n").replace("line 20\n", "")  # two hunks: a change, a line removed at the end
    f1 = f0.replace("three\n", "line 3\n")  # undoes the first
    _pack(builder, base, [("f0", f0), ("f1", f1)])
    image = builder.tree("image", {MOD: base + "# local\n"})  # the release, a line appended: nothing applied
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and {f.id: f.state.value for f in st.fixes} == {"f0": "drifted", "f1": "drifted"}
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and [f.action.value for f in r.fixes] == ["applied", "applied"], r.fixes
    assert (image / MOD).read_text() == f1 + "# local\n"  # line 20 taken out, line 3 as it was
    assert engine.status(builder.request(image)).exit_code == 0
    assert engine.revert(builder.request(image)).exit_code == 0
    assert (image / MOD).read_text() == base + "# local\n"


def test_a_lost_manifest_and_a_line_above_a_start_anchored_chain_lays_nothing_twice(builder):
    base = "import os\nA = 1\nB = 2\nC = 3\n"
    f0 = "import os\nimport sys\nA = 1\nB = 2\nC = 3\n"  # anchored to the file's start
    f1 = "# header\n" + f0 + "D = 4\n"  # one hunk, no context line above or below its changes
    f2 = "# header\n" + f0 + "D = 5\n"  # changes f1's added line
    last = _pack(builder, base, [("f0", f0), ("f1", f1), ("f2", f2)])
    image = builder.tree("image", {MOD: base})
    assert engine.apply(builder.request(image)).exit_code == 0
    shutil.rmtree(image / ".fixpack")  # the manifest lost
    (image / MOD).write_text("# local\n" + last)  # and a line added on top
    files = snapshot(image)
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and all(f.state.value == "applied" for f in st.fixes), st.fixes
    assert snapshot(image) == files
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and all(f.state.value == "applied" for f in r.fixes), r.fixes
    assert (image / MOD).read_text() == "# local\n" + last  # recorded again, laid nowhere a second time
    assert engine.revert(builder.request(image)).exit_code == 0
    assert (image / MOD).read_text() == "# local\n" + base


def test_a_fix_at_a_files_end_whose_lines_are_there_is_not_laid_twice_after_its_record_is_lost(builder):
    """A second attacker: a fix that adds lines at the file's end, applied, its manifest lost, then a line put among
    its lines: its context is still at its stated line and its post-image is not whole, so it was laid again (exit 0,
    its lines twice). The line it puts after its context is there already: refused, nothing written. Lines upstream
    appended after the context are not the fix's: it is laid before them, as before. (At a file's start the stated
    line moves with the lines added above: refused there already.)"""
    base = numbered(10)
    adds = "added 1\nadded 2\n"
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("f0", {MOD: base}, {MOD: base + adds})
    builder.profile(["f0"])
    builder.lock(clean)
    image = builder.tree("image", {MOD: base})
    assert engine.apply(builder.request(image)).exit_code == 0
    shutil.rmtree(image / ".fixpack")
    for drifted in (base + "added 1\n# local\nadded 2\n", base + adds + "# local\n"):
        (image / MOD).write_text(drifted)
        files = snapshot(image)
        r = engine.apply(builder.request(image))
        if drifted.endswith("# local\n"):  # its lines whole, above a line added after them: found applied
            assert r.exit_code == 0 and r.fix("f0").state.value == "applied", r.fixes
            assert (image / MOD).read_text() == drifted  # (recorded again)
            shutil.rmtree(image / ".fixpack")
            continue
        assert r.exit_code == 4 and r.fix("f0").state.value == "conflict", r.fixes
        said = " ".join(r.fix("f0").messages)
        assert "anchored to the end of the file, where its pre-image is not, and at its stated line 8 the line it " \
            "puts after its context is there already (line 11): the lines it adds are there" in said, said
        assert "laying it would put them in twice" in said and snapshot(image) == files, said
    (image / MOD).write_text(base + "def upstream():\n    pass\n")  # not the fix's
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and r.fix("f0").state.value == "drifted", r.fixes
    assert (image / MOD).read_text() == base + adds + "def upstream():\n    pass\n"


def test_a_start_anchored_removal_laid_at_the_running_offset_is_taken_off_there(builder):
    """A third attacker: a later fix anchored to the file's start that only removes lines, laid where the fix before
    it left the running offset (a line added on top of the file). Apply said applied (exit 0); then status said
    tampered (exit 3) and revert refused (exit 4): the reversal started at the stated line, where the anchored hunk's
    post-image is not. The manifest now records where each fix's first hunk was laid, per file where it is not 0, and
    the reversal starts there."""
    base = numbered(12)
    f0 = base.replace("line 8\n", "eight\n")
    f1 = f0.replace("line 1\n", "")  # anchored to the start: no context line above the line it removes
    _pack(builder, base, [("f0", f0), ("f1", f1)])
    image = builder.tree("image", {MOD: "# local\n" + base})
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and [f.action.value for f in r.fixes] == ["applied", "applied"], r.fixes
    assert (image / MOD).read_text() == "# local\n" + f1
    recorded = json.loads((image / ".fixpack/demo.manifest.json").read_text())
    assert [f.get("offsets") for f in recorded["fixes"]] == [{MOD: 1}, {MOD: 1}], recorded
    files = snapshot(image)
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and all(f.state.value == "applied" for f in st.fixes), st.fixes
    assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == files  # nothing to write
    rv = engine.revert(builder.request(image))
    assert rv.exit_code == 0 and [f.action.value for f in rv.fixes] == ["reverted", "reverted"], rv.fixes
    assert (image / MOD).read_text() == "# local\n" + base


def test_a_start_anchored_fix_found_applied_above_a_twin_of_its_context_stays_applied(builder):
    """A third attacker: a fix that adds a line at the file's start, whose context is there twice (the release holds
    it twice), found applied on a file drifted on top with its manifest lost: apply recorded it, then status said
    tampered (exit 3), for the replay placed it anew, where an anchored hunk whose pre-image occurs twice is refused.
    A recorded fix taken off is laid again where it was taken off, hunk by hunk, while the files are as that left
    them; a fix put before it since is placed anew."""
    base = "A\nB\nC\nA\nB\nC\nD\nE\n"
    f0 = "X\n" + base
    _pack(builder, base, [("f0", f0)])
    image = builder.tree("image", {MOD: base})
    assert engine.apply(builder.request(image)).exit_code == 0
    shutil.rmtree(image / ".fixpack")
    (image / MOD).write_text("# local\n" + f0)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and r.fix("f0").state.value == "applied", r.fixes
    files = snapshot(image)
    for _ in range(2):
        st = engine.status(builder.request(image))
        assert st.exit_code == 0 and st.fix("f0").state.value == "applied", st.fixes
        assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == files
    rv = engine.revert(builder.request(image))
    assert rv.exit_code == 0 and rv.fix("f0").action.value == "reverted", rv.fixes
    assert (image / MOD).read_text() == "# local\n" + base
    image2 = builder.tree("image2", {MOD: "# local\n" + base})  # laid anew there: refused, as before
    files = snapshot(image2)
    r = engine.apply(builder.request(image2))
    assert r.exit_code == 4 and r.fix("f0").state.value == "conflict", r.fixes
    assert "its pre-image occurs 2 times in the file" in " ".join(r.fix("f0").messages) and snapshot(image2) == files


# a fix's first hunk at the top, its last anchored to the end, whose post-image ("C A C") is twice in the file
TWINS_BASE = "h0\nx1\nx2\nx3\nx4\n" + "C\nA\nC\n" + "".join(f"m{i}\n" for i in range(7)) + "C\nA\nC\n" + "t0\n"


def _settled(builder, image, drifted):  # type: ignore[no-untyped-def]
    """After apply: status says f0 applied, a second apply writes nothing, revert gives the drifted bytes back."""
    files = snapshot(image)
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and st.fix("f0").state.value == "applied", (st.error, st.fix("f0").messages)
    assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == files
    assert engine.revert(builder.request(image)).exit_code == 0
    assert (image / MOD).read_text() == drifted


def test_a_drift_between_two_hunks_of_a_file_is_recorded_per_hunk(builder):
    """The attacking fuzz (seed 4280): a line removed between a fix's first hunk and its last, which is anchored to
    the file's end and whose post-image is twice in the file. Apply laid the last hunk one line up and recorded the
    first hunk's offset alone; taken off from the running offset, the last hunk was not at its line, and its twins
    made it ambiguous: status said tampered (exit 3) and revert refused, on the image apply had just written. Each
    hunk's offset is now recorded where the file's hunks were laid at different offsets ("hunk_offsets")."""
    base = TWINS_BASE
    fixed = base.replace("h0\n", "H0\n").removesuffix("t0\n")
    _pack(builder, base, [("f0", fixed)])
    drifted = base.replace("m3\n", "")
    image = builder.tree("image", {MOD: drifted})
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0, r.error
    assert (image / MOD).read_text() == fixed.replace("m3\n", "")
    entry = json.loads((image / ".fixpack/demo.manifest.json").read_text())["fixes"][0]
    assert entry.get("hunk_offsets") == {MOD: [0, -1]} and "offsets" not in entry, entry
    _settled(builder, image, drifted)


def test_a_drift_between_two_patch_files_of_a_fix_on_one_file_is_recorded_per_hunk(builder):
    """A fresh user: the case above with the fix's two hunks in two patch files (one hunk each). The offsets were
    grouped per file across the fix's patches but read per file patch, so the second patch's hunk was taken off from
    the first one's offset: status said tampered (exit 3) and revert refused again."""
    from conftest import HEADER, make_diff

    base = TWINS_BASE
    top = base.replace("h0\n", "H0\n")
    fixed = top.removesuffix("t0\n")
    clean = builder.tree("clean", {MOD: base})
    folder = builder.add_fix("f0", {MOD: base}, {MOD: top})
    (folder / "0002-end.patch").write_text(HEADER.format(summary="end") +
                                           make_diff({MOD: top}, {MOD: fixed}, builder.base / "diffs2"))
    toml = folder / "fix.toml"
    toml.write_text(toml.read_text().replace('patches = ["0001-change.patch"]',
                                             'patches = ["0001-change.patch", "0002-end.patch"]'))
    builder.profile(["f0"])
    builder.lock(clean)
    drifted = base.replace("m3\n", "")
    image = builder.tree("image", {MOD: drifted})
    assert engine.apply(builder.request(image)).exit_code == 0
    assert (image / MOD).read_text() == fixed.replace("m3\n", "")
    entry = json.loads((image / ".fixpack/demo.manifest.json").read_text())["fixes"][0]
    assert entry.get("hunk_offsets") == {MOD: [0, -1]}, entry
    _settled(builder, image, drifted)


def test_hunk_offsets_of_another_length_than_the_fix_has_hunks_are_damaged_state(builder):
    """A fresh user: hunk_offsets with one offset too many or too few were read as no record of each hunk (the
    file's first offset alone), and apply wrote the manifest again with exit 0: now exit 3 at its line, from every
    command, nothing written."""
    base = TWINS_BASE
    _pack(builder, base, [("f0", base.replace("h0\n", "H0\n").removesuffix("t0\n"))])
    image = builder.tree("image", {MOD: base.replace("m3\n", "")})
    assert engine.apply(builder.request(image)).exit_code == 0
    path = image / ".fixpack/demo.manifest.json"
    for forged in ([0, -1, -1], [0, 5, -1, 2]):
        m = json.loads(path.read_text())
        m["fixes"][0]["hunk_offsets"] = {MOD: forged}
        path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
        lines = path.read_text().splitlines()
        line = lines.index(f'{" " * 8}"{MOD}": [', lines.index('      "hunk_offsets": {')) + 1
        files = snapshot(image)
        for run in (engine.status, engine.apply, engine.revert):
            with pytest.raises(DamagedStateError) as exc:
                run(builder.request(image))
            assert exc.value.exit_code == 3 and f"line {line}: fix f0's entry records {len(forged)} hunk offsets in " \
                f"{MOD}, where its patch has 2 hunks there" in str(exc.value), (run.__name__, str(exc.value))
            assert snapshot(image) == files


@pytest.mark.parametrize("key, forged", [("hunk_offsets", [0, -3]), ("hunk_offsets", [0, 2]), ("offsets", 4)])
def test_offsets_that_do_not_take_a_fix_off_a_file_as_recorded_are_damaged_state(builder, key, forged):
    """A fresh user: an entry's hunk offsets edited (the file untouched) made status say tampered, with advice to undo
    an edit of the file there was none of, and revert refuse. The file is byte for byte as the entry records the fix
    leaving it, so the record is what was edited: exit 3 at the key's line, from every command, nothing written."""
    base = TWINS_BASE
    _pack(builder, base, [("f0", base.replace("h0\n", "H0\n").removesuffix("t0\n"))])
    image = builder.tree("image", {MOD: base.replace("m3\n", "")})
    assert engine.apply(builder.request(image)).exit_code == 0
    path = image / ".fixpack/demo.manifest.json"
    m = json.loads(path.read_text())
    if key == "offsets":
        del m["fixes"][0]["hunk_offsets"]
    m["fixes"][0][key] = {MOD: forged}
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    lines = path.read_text().splitlines()
    line = lines.index(f'{" " * 8}"{MOD}": {"[" if key == "hunk_offsets" else forged}', lines.index(f'      "{key}": {{')) + 1
    laid = ", ".join(f"{n:+d}" for n in (forged if key == "hunk_offsets" else [forged]))
    files = snapshot(image)
    for run, dry in ((engine.status, False), (engine.apply, True), (engine.apply, False), (engine.revert, True),
                     (engine.revert, False)):
        with pytest.raises(DamagedStateError) as exc:
            run(builder.request(image, dry_run=dry))
        said = str(exc.value)
        assert exc.value.exit_code == 3 and f"line {line}: fix f0's entry records its hunks in {MOD} laid at " \
            f"offset{'s' * (key == 'hunk_offsets')} {laid}, but its hunk #" in said, (run.__name__, said)
        assert "the record was edited (by hand?), not the file" in said and "remove the file" in said, said
        assert snapshot(image) == files


def test_offsets_edited_where_the_hunks_are_found_anyway_are_said_by_status_before_apply_writes_them(builder):
    """A fresh user: offsets edited where each hunk's post-image is there once, so the fix comes off anyway (found
    by search): apply wrote the manifest again with what is there and said so, but status and a dry run, which say
    what apply would do, said nothing of it. They now say the manifest would be written again; after apply, nothing."""
    base = "h0\nx1\nx2\nx3\nx4\n" + "C\nA\nC\n" + "".join(f"m{i}\n" for i in range(7)) + "D\nB\nD\n" + "t0\n"
    _pack(builder, base, [("f0", base.replace("h0\n", "H0\n").removesuffix("t0\n"))])
    image = builder.tree("image", {MOD: base.replace("m3\n", "")})
    assert engine.apply(builder.request(image)).exit_code == 0
    path = image / ".fixpack/demo.manifest.json"
    laid = path.read_bytes()
    m = json.loads(laid)
    assert m["fixes"][0]["hunk_offsets"] == {MOD: [0, -1]}
    m["fixes"][0]["hunk_offsets"] = {MOD: [0, -3]}
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    files = snapshot(image)
    will = "no file of the target would change; a run would write its manifest .fixpack/demo.manifest.json again"
    for run in (engine.status(builder.request(image)), engine.apply(builder.request(image, dry_run=True))):
        assert run.exit_code == 0 and run.fix("f0").state.value == "applied"
        assert any(n.startswith(will) for n in run.target("demo").notes), run.target("demo").notes
        assert snapshot(image) == files
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and r.target("demo").notes == [
        "no file of the target changed; its manifest .fixpack/demo.manifest.json was written again, to record what "
        "is there"]
    assert path.read_bytes() == laid
    for run in (engine.status(builder.request(image)), engine.apply(builder.request(image, dry_run=True))):
        assert run.exit_code == 0 and run.target("demo").notes == []


def test_a_hunk_of_a_fix_with_several_patch_files_is_named_with_its_patch_file(builder):
    """A fresh user: a fix with two patch files on one file said "hunk #1" of either, so which patch's hunk moved or
    was refused could not be told. Where a fix has several patch files, its hunks are named with theirs; a fix of one
    keeps its messages as they were."""
    from conftest import HEADER, make_diff

    base = TWINS_BASE.replace("C\nA\nC\nt0\n", "E\nF\nG\nt0\n")
    top = base.replace("h0\n", "H0\n")
    fixed = top.replace("F\n", "F2\n")
    folder = builder.add_fix("f0", {MOD: base}, {MOD: top})
    (folder / "0002-end.patch").write_text(HEADER.format(summary="end") +
                                           make_diff({MOD: top}, {MOD: fixed}, builder.base / "diffs2"))
    toml = folder / "fix.toml"
    toml.write_text(toml.read_text().replace('patches = ["0001-change.patch"]',
                                             'patches = ["0001-change.patch", "0002-end.patch"]'))
    builder.profile(["f0"])
    builder.lock(builder.tree("clean", {MOD: base}))
    moved = engine.status(builder.request(builder.tree("moved", {MOD: base.replace("m3\n", "")})))
    assert f"{MOD}: hunk #1 of 0002-end.patch applies at line" in " ".join(moved.fix("f0").messages), moved.fix("f0")
    gone = builder.tree("gone", {MOD: base.replace("F\n", "X\n")})
    said = " ".join(engine.status(builder.request(gone)).fix("f0").messages)
    assert f"{MOD}: hunk #1 of 0002-end.patch missing" in said and "0001-change.patch" not in said, said
    part = builder.tree("part", {MOD: base.replace("F\n", "F2\n")})  # the second patch's change alone is in
    said = " ".join(engine.status(builder.request(part)).fix("f0").messages)
    assert f"present: {MOD} hunk #1 of 0002-end.patch (line" in said and \
        f"not present: {MOD} hunk #1 of 0001-change.patch (line 1)" in said, said


def test_a_hunk_whose_post_image_the_fix_copies_elsewhere_comes_off_where_it_was_laid(builder):
    """A fresh user: a fix whose first hunk puts in a copy of its second hunk's post-image, laid on a drifted file
    (exit 0): the second hunk, not anchored, was taken off by search, found twice, and every command then refused
    the image apply had just written (tampered, then 'the record was edited'). A recorded fix's hunk is now taken off
    where the manifest records it was laid, whatever twin of its post-image the file holds, as an anchored one was."""
    base = numbered(40)
    block = "line 20\nline 21\nline 22\nnew\nline 24\nline 25\nline 26\n"
    _pack(builder, base, [("f0", base.replace("line 5\n", "line 5\n" + block).replace("line 23\n", "new\n"))])
    drifted = "# drift\n" + base
    image = builder.tree("image", {MOD: drifted})
    assert engine.apply(builder.request(image)).exit_code == 0
    _settled(builder, image, drifted)


@pytest.mark.parametrize("edit", ["offsets", "order", "files", "version"])
def test_an_entry_apply_would_write_again_on_files_the_lock_vouches_for_is_said_by_status_too(builder, edit):
    """A fresh user: status's fast path (files the lock's post-images, no hunk placed) said nothing of an entry edited
    so that apply wrote it again (an offset, the entries' order, a fix's files' sha256, its version); such a manifest
    now goes the full way, which says so. After apply, the fast path holds again and nothing is said."""
    base = numbered(30)
    one = base.replace("line 5\n", "five\n")
    _pack(builder, base, [("f0", one), ("f1", one.replace("line 20\n", "twenty\n"))])
    image = builder.tree("image", {MOD: base})
    assert engine.apply(builder.request(image)).exit_code == 0
    path = image / ".fixpack/demo.manifest.json"
    laid = path.read_bytes()
    m = json.loads(laid)
    first = m["fixes"][0]
    if edit == "offsets":
        first["offsets"] = {MOD: 3}
    elif edit == "order":
        m["fixes"].reverse()
    elif edit == "files":
        first["files"] = m["fixes"][1]["files"]
    else:
        first["version"] = 7
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and any("a run would write its manifest .fixpack/demo.manifest.json again" in n
                                     for n in st.target("demo").notes), (st.error, st.target("demo").notes)
    assert engine.apply(builder.request(image)).exit_code == 0 and path.read_bytes() == laid
    assert engine.status(builder.request(image)).target("demo").notes == []



def _moved_block(builder, twin):  # type: ignore[no-untyped-def]
    """f0: hunk #1 adds NEW after line 10, hunk #2 puts 8 lines for line 45; upstream moved lines 40-50 (hunk #2's
    block) to the file's top, so apply lays hunk #2 above hunk #1. ``twin``: a copy of hunk #1's post-image right
    above its context ("above"), at the file's end ("far"), or none."""
    base = numbered(60)
    _pack(builder, base, [("f0", base.replace("line 10\n", "line 10\nNEW\n")
                           .replace("line 45\n", "".join(f"A{i}\n" for i in range(8))))])
    lines = base.splitlines(keepends=True)
    post1 = "line 8\nline 9\nline 10\nNEW\nline 11\nline 12\nline 13\n"
    mid = "".join(lines[:7]) + post1 + "".join(lines[7:39]) if twin == "above" else "".join(lines[:39])
    drifted = "".join(lines[39:50]) + mid + "".join(lines[50:]) + (post1 if twin == "far" else "")
    return builder.tree("image", {MOD: drifted}), drifted


@pytest.mark.parametrize("twin", ["none", "above", "far"])
def test_hunks_laid_out_of_the_patchs_order_are_recorded_where_they_come_off(builder, twin):
    """A fresh user: upstream moved a fix's second hunk's block above its first, and apply laid them so (exit 0). Each
    hunk's offset was recorded as measured before the other was laid, where taking it off looks in the file after:
    hunk #1 lay 7 lines lower (hunk #2's added lines above it), hunk #2 a line higher. Status said tampered, a second
    apply exit 3; with a twin of hunk #1's post-image above it, revert took the twin off (exit 0, wrong bytes); with a
    twin elsewhere, every command called the record edited by hand. Offsets are now recorded as the other way
    measures them."""
    image, drifted = _moved_block(builder, twin)
    assert engine.apply(builder.request(image)).exit_code == 0
    _settled(builder, image, drifted)



def test_a_lost_fix_whose_post_image_a_later_fix_changed_is_not_found_at_an_upstream_twin(builder):
    """A fresh user: f2 changes a line of f1's second hunk's post-image, and upstream holds a copy of that post-image
    elsewhere. With the manifest lost, apply judged f1 on the file with f2 in, where the only whole copy is
    upstream's, and recorded f1 there (exit 0); revert then changed upstream's lines (exit 0, wrong bytes). Taken off
    after f2, f1's post-image is there twice: which is f1's cannot be told, so nothing is recorded or written."""
    base = numbered(40)
    f1 = base.replace("line 5\n", "five\n").replace("line 20\n", "F\n")
    _pack(builder, base, [("f1", f1), ("f2", f1.replace("line 18\n", "X\n"))])
    drifted = base + "line 17\nline 18\nline 19\nF\nline 21\nline 22\nline 23\n"
    image = builder.tree("image", {MOD: drifted})
    assert engine.apply(builder.request(image)).exit_code == 0
    shutil.rmtree(image / ".fixpack")
    files = snapshot(image)
    for run in (engine.status, engine.apply):
        r = run(builder.request(image))
        assert r.exit_code == 4 and r.fix("f1").state.value == "ambiguous", (r.error, r.fix("f1"))
        assert snapshot(image) == files


@pytest.mark.parametrize("named", [True, False])
def test_an_opt_in_laid_by_hand_in_a_recorded_fixs_file_is_not_promised_a_record(builder, named):
    """A fresh user: an opt-in laid by hand (patch -p1) in a file a recorded default fix changes: that file is
    tampered (exit 3, nothing written), as designed, but the opt-in's line said "apply records it again", which apply
    did not. It now says apply does not record it while the file is tampered."""
    base = numbered(30)
    one = base.replace("line 5\n", "five\n")
    _pack(builder, base, [("f0", one), ("f1", one.replace("line 20\n", "twenty\n"))])
    builder.profile(["f0"], ["f1"])
    image = builder.tree("image", {MOD: base})
    assert engine.apply(builder.request(image)).exit_code == 0
    (image / MOD).write_text(one.replace("line 20\n", "twenty\n"))  # f1 laid by hand
    files = snapshot(image)
    opt = ("f1",) if named else ()
    for run in (engine.status, engine.apply):
        r = run(builder.request(image, opt_ins=opt))
        said = " ".join(r.fix("f1").messages)
        assert r.exit_code == 3 and r.fix("f0").state.value == "tampered", (r.error, r.fix("f0"))
        assert "apply records it" not in said and f"apply does not record it while {MOD} is tampered" in said, said
        assert snapshot(image) == files


@pytest.mark.parametrize("later", ["change", "insert", "no twin"])
def test_a_later_fixs_entry_lost_does_not_move_an_earlier_fixs_record_to_a_twin(builder, later):
    """A fresh user: f1 changes (or inserts next to) a line of f0's second hunk's post-image, upstream holds a copy of
    that post-image elsewhere, and f1's entry is lost from the manifest. f0 was taken off the files with f1 still in,
    where its post-image is whole only at upstream's copy: apply recorded f0 there (exit 0), then revert swapped
    upstream's line with f0's, or status said tampered. f1, found in, is now taken off first, as with a lost
    manifest; both are recorded where they are, and revert gives the drifted bytes back. Without the twin, the same
    entry lost was called tampered: it is recovered now too."""
    base = numbered(40)
    f0 = base.replace("line 5\n", "five\n").replace("line 20\n", "F\n")
    f1 = f0.replace("line 18\n", "X\n") if later == "change" else f0.replace("line 21\n", "line 21\nINS\n")
    _pack(builder, base, [("f0", f0), ("f1", f1)])
    drifted = "# drift\n" + base if later == "no twin" else base + "line 17\nline 18\nline 19\nF\nline 21\nline 22\nline 23\n"
    image = builder.tree("image", {MOD: drifted})
    assert engine.apply(builder.request(image)).exit_code == 0
    path = image / ".fixpack/demo.manifest.json"
    laid = json.loads(path.read_text())
    m = json.loads(path.read_text())
    del m["fixes"][1]
    path.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    assert engine.apply(builder.request(image)).exit_code == 0
    assert json.loads(path.read_text())["fixes"] == laid["fixes"]  # (f0's record as it was, f1's back)
    files = snapshot(image)
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and {f.state.value for f in st.fixes if f.id in ("f0", "f1")} == {"applied"}, st.error
    assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == files
    assert engine.revert(builder.request(image)).exit_code == 0
    assert (image / MOD).read_text() == drifted
