"""A third attacking helper's fuzz (about 9,000 seeded chains of one to three fixes on drifted files, lost
manifests, forged offsets) found these, each exit 0 with a file wrong or a successful apply that the next command
refused:

- a chain whose later fix removes what an earlier one wrote, on a file with a line appended: apply took both as
  applied by a lost run and laid nothing (the line the first one changes left in), and revert then added a line;
- a removal anchored to the file's end whose context is there twice once it is applied: apply laid it, then status
  said tampered and revert refused (the twin refused before the manifest's record of where it was laid was read);
- a removal anchored to the file's end found "in" at its stated line where the file goes on with a line it removes;
- an add-only hunk whose added lines repeat its context, on a release that holds that post-image already: taken as
  applied (its pre-image inside its post-image), and revert took two of the release's own lines out;
- a chain that passes back through the release's bytes (a fix undoing another): the next status called its
  manifest damaged (no fix leaves the release's bytes, it said; this one does, the lock says so);
- a fix laid on files that hold a later fix's change already: its offsets measured there, so the next apply, which
  takes the later one off first, wrote the manifest again.
"""

import difflib
import json

from conftest import numbered, snapshot
from test_drift_chains import MOD, _pack

from fixpack import engine


def _cycle(builder, image, expect):  # type: ignore[no-untyped-def]
    """apply gives ``expect``; a second apply writes nothing; status says applied; revert gives the bytes before."""
    before = (image / MOD).read_text()
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0, r.fixes
    assert (image / MOD).read_text() == expect
    files = snapshot(image)
    assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == files
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and all(f.state.value == "applied" for f in st.fixes), st.fixes
    assert engine.revert(builder.request(image)).exit_code == 0
    assert (image / MOD).read_text() == before


def _refused(builder, image, state, said):  # type: ignore[no-untyped-def]
    files = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 4 and r.fixes[0].state.value == state, r.fixes
    assert said in " ".join(r.fixes[0].messages), r.fixes[0].messages
    assert snapshot(image) == files


def test_a_later_fix_removing_what_an_earlier_one_wrote_is_laid_not_taken_for_a_lost_run(builder):
    base = "a\nb\nc\nd\nA\n"
    _pack(builder, base, [("f0", "a\nb\nc\nd\nX\n"), ("f1", "a\nb\nc\nd\n")])
    _cycle(builder, builder.tree("image", {MOD: base + "# tail\n"}), "a\nb\nc\nd\n# tail\n")


def test_an_end_anchored_removal_whose_context_is_there_twice_is_taken_off_where_it_was_laid(builder):
    base = "a\nb\nc\na\nb\nc\nZ\n"
    _pack(builder, base, [("f0", base.replace("Z\n", ""))])
    image = builder.tree("image", {MOD: "# local\n" + base})
    _cycle(builder, image, "# local\na\nb\nc\na\nb\nc\n")
    assert engine.apply(builder.request(image)).exit_code == 0  # (recorded at offset 1; older manifests: 0)
    path = image / ".fixpack/demo.manifest.json"
    assert json.loads(path.read_text())["fixes"][0]["offsets"] == {MOD: 1}


def test_an_end_anchored_removal_is_not_in_where_the_file_goes_on_with_a_line_it_removes(builder):
    _pack(builder, "l0\nl1\nl2\n", [("f0", "l0\n")])
    _refused(builder, builder.tree("image", {MOD: "l0\nl2\n"}), "conflict", "hunk #1 missing")


def test_added_lines_that_repeat_the_context_on_a_release_holding_that_post_image_are_ambiguous(builder):
    base = "D\nD\nD\nD\nD\nC\n"
    _pack(builder, base, [("f0", "D\nD\nD\nD\nD\nD\nD\nC\n")])
    _refused(builder, builder.tree("image", {MOD: base + "# tail\n"}), "ambiguous",
             "both its pre-image and its post-image are in the file")


def test_a_chain_that_passes_back_through_the_release_bytes_is_no_damaged_manifest(builder):
    base = "a\nb\nc\nd\n"
    _pack(builder, base, [("f0", "a\nb\nX\nc\nd\n"), ("f1", base), ("f2", "H\n" + base)])
    _cycle(builder, builder.tree("image", {MOD: base}), "H\n" + base)


def test_offsets_of_a_fix_laid_under_a_later_fixs_change_are_those_it_has_once_that_is_off(builder):
    base = numbered(9)
    f0 = base.replace("line 5\n", "five\n")
    _pack(builder, base, [("f0", f0), ("f1", f0.replace("line 1\n", ""))])
    image = builder.tree("image", {MOD: base.replace("line 1\n", "")})  # f1's change there already
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and [f.state.value for f in r.fixes] == ["drifted", "applied"], r.fixes
    recorded = json.loads((image / ".fixpack/demo.manifest.json").read_text())
    assert [f.get("offsets") for f in recorded["fixes"]] == [None, None], recorded  # (0 once f1 is off)
    files = snapshot(image)
    assert engine.apply(builder.request(image)).exit_code == 0 and snapshot(image) == files


def _one_context_line(builder, base, after):  # type: ignore[no-untyped-def]
    """One fix from ``base`` to ``after`` written with one context line (git diff -U1), locked on ``base``."""
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("f0", {}, {}, diff=(
        f"--- a/{MOD}\n+++ b/{MOD}\n" + "".join(make_hunks(base, after))))
    builder.profile(["f0"])
    builder.lock(clean)


def make_hunks(before, after):  # type: ignore[no-untyped-def]
    return list(difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=1))[2:]


def test_a_recorded_end_anchored_hunk_at_its_stated_line_is_taken_off_there_twin_or_not(builder):
    """Laid at its stated line (a line appended since the release, so not at the file's end), its post-image then
    there twice (``B B`` in ``B B B``): status said tampered and revert refused. Recorded, it is taken off at its stated
    line plus the offset the manifest records, where its post-image is."""
    base = "a\nb\nB\nB\nC\n"
    _one_context_line(builder, base, "a\nb\nB\nB\nB\n")
    _cycle(builder, builder.tree("image", {MOD: base + "# tail\n"}), "a\nb\nB\nB\nB\n# tail\n")


def test_an_anchored_removal_whose_context_alone_is_at_its_stated_line_is_not_in(builder):
    """A removal at the file's end with one context line, on a file where a line went in after that context: its
    post-image (the context line alone) is at its stated line, and it was taken for applied (exit 0, the lines it
    removes left in). Off the file's end, a removal's post-image is no sign of it: a conflict, nothing written."""
    _one_context_line(builder, "l0\nD\nl2\nx\n", "l0\nD\n")
    _refused(builder, builder.tree("image", {MOD: "l0\nD\n# mid\nl2\nx\n"}), "conflict", "hunk #1 missing")


def test_a_removal_at_the_files_end_whose_context_is_its_own_last_removed_line_is_not_in(builder):
    """A removal at the file's end (``D A C`` after the context line ``C``), on a file whose line above the removed
    lines went away (``D B D A C``): its post-image, ``C`` alone, is at the file's end, as the last line it removes,
    and it was taken for applied (exit 0); revert then put ``D A C`` in a second time. Not in: a conflict."""
    _one_context_line(builder, "D\nB\nC\nD\nA\nC\n", "D\nB\nC\n")
    _refused(builder, builder.tree("image", {MOD: "D\nB\nD\nA\nC\n"}), "conflict", "hunk #1 missing")


def test_a_fix_that_would_leave_the_releases_bytes_on_a_drifted_file_is_refused(builder):
    """The fix takes out the file's last line, and a drift appended that line again: laid (at its stated line, where
    its pre-image is, once), it gave the release's very bytes, so the next run took the file for the release and laid
    it a second time (the next apply took out the copy too). In a chain, such a fix's record was read as written by
    hand (damaged, exit 3, from every command). Refused, nothing written, by status and apply alike."""
    base = "B\nl1\nl2\nl3\nC\n"
    _pack(builder, base, [("f0", "B\nl1\nl2\nl3\n")])
    image = builder.tree("image", {MOD: base + "C\n"})
    st = engine.status(builder.request(image))
    assert st.exit_code == 4 and st.fix("f0").state.value == "conflict", st.fixes
    _refused(builder, image, "conflict", f"laid on this tree, it leaves {MOD} byte for byte as the release has it")


def test_a_chain_fix_that_would_leave_the_releases_bytes_on_a_drifted_file_is_refused(builder):
    base = numbered(6)
    f0 = base.replace("line 6\n", "x = 1\n")
    _pack(builder, base, [("f0", f0), ("f1", numbered(5))])
    image = builder.tree("image", {MOD: base + "line 6\n"})
    files = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 4 and [f.state.value for f in r.fixes] == ["drifted", "conflict"], r.fixes
    assert snapshot(image) == files


def test_a_fix_whose_end_hunk_alone_is_in_already_is_partial_not_laid_again(builder):
    """A fresh user, on the prompt-order fix's last hunk (the pack's one hunk anchored to its file's end): with only
    that hunk's added lines there (appended by hand), status said would-apply and apply laid the whole fix, the
    twelve lines a second time (exit 0). Its pre-image lies at the start of its own post-image, which is whole there:
    that hunk is in, the others not: partial, exit 4, nothing written."""
    base = numbered(12)
    adds = "def extra():\n    return 1\n"
    after = base.replace("line 2\n", "two\n") + adds
    _pack(builder, base, [("f0", after)])
    image = builder.tree("image", {MOD: base + adds})
    st = engine.status(builder.request(image))
    assert st.exit_code == 4 and st.fix("f0").state.value == "partial", st.fixes
    _refused(builder, image, "partial", "hunk #2 (the lines it adds are there already, beside its context at line 10")
