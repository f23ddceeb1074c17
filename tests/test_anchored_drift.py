"""Two fixes append to one file, each hunk written by diff at the file's end (context above, none below): ``a`` adds
NEW, ``b`` adds B after it. Applied, then the file's top edited (a drift above the hunks) and the manifest lost: ``a``'s
post-image is no longer at the file's end (``b``'s line follows it) nor at its stated line (the drift moved it). The
reversed pass refused it there, so status and apply said ``a`` conflict (exit 4) though NEW was in, and revert advised
that apply: a dead end. Reversed, an anchored hunk's post-image (its context and the lines it adds) found once in the
file is the fix's, wherever the file ends now: the chain is recognised, recorded, nothing laid twice; a second place
for the fix's context stays ambiguous."""

import shutil

import pytest
from conftest import numbered, snapshot
from test_add_only_again import outside_state, outside_state_of, states

from fixpack import engine
from fixpack.errors import EXIT_CONFLICT, MismatchError

MOD = "demo_pkg/mod.py"
BASE = numbered(20)
DRIFT = "# local edit\n"


def chain(b):
    clean = b.tree("clean", {MOD: BASE})
    b.add_fix("a", {MOD: BASE}, {MOD: BASE + "NEW\n"})
    b.add_fix("b", {MOD: BASE + "NEW\n"}, {MOD: BASE + "NEW\nB\n"})
    b.profile(["a", "b"])
    b.lock(clean)
    # as diff -u writes an append: three context lines above the added line, none below
    assert (b.pack / "fixes/a/0001-change.patch").read_text().endswith(" line 19\n line 20\n+NEW\n")
    assert (b.pack / "fixes/b/0001-change.patch").read_text().endswith(" line 20\n NEW\n+B\n")
    image = b.tree("image", {MOD: BASE})
    r = engine.apply(b.request(image))
    assert r.exit_code == 0 and states(r) == {"a": ("absent", "applied"), "b": ("absent", "applied")}
    (image / MOD).write_text(DRIFT + (image / MOD).read_text())
    shutil.rmtree(image / ".fixpack")
    return image


def test_a_chain_of_appends_with_a_drift_above_is_recorded_once_its_manifest_is_lost(builder):
    b = builder
    image = chain(b)
    files = snapshot(image)
    assert files[MOD][0] == (DRIFT + BASE + "NEW\nB\n").encode()
    with pytest.raises(MismatchError) as said:  # no manifest: both named, to record with apply, then revert
        engine.revert(b.request(image))
    assert "holds a, b (their post-images are there) but no manifest records them" in str(said.value), said.value
    assert "part of" not in str(said.value) and snapshot(image) == files
    st = engine.status(b.request(image))
    assert st.exit_code == 0 and states(st) == {"a": ("applied", "none"), "b": ("applied", "none")}, st.fixes
    assert snapshot(image) == files
    r = engine.apply(b.request(image))  # recorded, nothing laid a second time
    assert r.exit_code == 0 and states(r) == {"a": ("applied", "none"), "b": ("applied", "none")}, r.fixes
    assert outside_state(image) == outside_state_of(files) and (image / ".fixpack").exists()
    for _ in range(2):  # (the manifest may be written once more: each entry's files as replayed; then it stays)
        recorded = snapshot(image)
        r = engine.apply(b.request(image))
        assert r.exit_code == 0 and states(r) == {"a": ("applied", "none"), "b": ("applied", "none")}
        assert outside_state(image) == outside_state_of(files)
    assert snapshot(image) == recorded
    r = engine.revert(b.request(image))  # the drifted file, without the fixes
    assert r.ok and states(r) == {"a": ("applied", "reverted"), "b": ("applied", "reverted")}, r.fixes
    assert (image / MOD).read_text() == DRIFT + BASE


def test_a_chain_of_appends_with_a_drift_above_and_a_twin_of_its_context_stays_ambiguous(builder):
    """A copy of ``a``'s context appended after the chain: the forward pass places ``a`` at the file's end again. Its
    post-image was refused (not at the end, not at its stated line), so ``a`` was drifted and NEW laid a second time
    (exit 0). Both are there: ambiguous, exit 4, nothing written."""
    image = chain(builder)
    (image / MOD).write_text((image / MOD).read_text() + "line 18\nline 19\nline 20\n")
    files = snapshot(image)
    for run in (engine.status, engine.apply):
        r = run(builder.request(image))
        assert r.exit_code == EXIT_CONFLICT and states(r)["a"] == ("ambiguous", "none"), r.fixes
        assert any("both its pre-image and its post-image are in the file" in m for m in r.fix("a").messages)
        assert snapshot(image) == files and not (image / ".fixpack").exists()


def test_a_reversed_append_is_placed_where_its_lines_are_once_and_a_reversed_removal_is_not(tmp_path):
    """The applier alone: an append's post-image (context and its added line), a line above it and one after it, is
    found reversed where it occurs once (it was refused: not at the end, not at its stated line); a hunk that removes
    the file's last line has only context for a post-image, which says nothing of where the file ends: still refused
    off its anchor, and so is forward placement of the append's context there."""
    from test_applier import hunks_of

    from fixpack.applier import Placement, apply_text

    (append,) = hunks_of(BASE, BASE + "NEW\n", tmp_path)
    moved = DRIFT + BASE + "NEW\nB\n"
    res = apply_text(moved, (append,), reverse=True)
    assert res.text == DRIFT + BASE + "B\n" and res.hunks[0].placement is Placement.OFFSET and res.hunks[0].offset == 1
    assert apply_text(DRIFT + BASE + "B\n", (append,)).hunks[0].placement is Placement.MISSING
    (removal,) = hunks_of(BASE, BASE.replace("line 20\n", ""), tmp_path)
    res = apply_text(DRIFT + numbered(19) + "B\n", (removal,), reverse=True)
    assert res.text is None and res.hunks[0].placement is Placement.MISSING
