"""A later fix that changes an earlier fix's added line, on a file drifted since it was applied (an edit above
them), with the manifest lost (a carried gap, found by a fresh user on a pack built for it). The files are none of
the lock's states, so the lock's sha256 cannot take the chain off (:func:`fixpack.replay.popped`), and the earlier
fix's post-image is whole no longer, nor its pre-image: status and apply called the image `conflict` (exit 4), and
revert's advice discarded the drift. The chain is taken off by placement now (:func:`fixpack.replay.placed_off`):
both fixes applied on a drifted file, recorded again by apply (nothing else written), refused under --strict as
drifted, and reverted to the release with the drift kept."""

from __future__ import annotations

import shutil

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import MismatchError

MOD = "demo_pkg/mod.py"
BASE = numbered(20)
A = BASE.replace("line 10\n", "line 10\nX = 1\n")  # a adds a line
B = A.replace("X = 1\n", "X = 2\n")  # b changes it


def pair(b):
    """``a`` and ``b`` (written on ``a``, changing its added line) locked on the release."""
    clean = b.tree("clean", {MOD: BASE})
    b.add_fix("a", {MOD: BASE}, {MOD: A})
    b.add_fix("b", {MOD: A}, {MOD: B})
    b.profile(["a", "b"])
    b.lock(clean)


@pytest.fixture
def image(builder):
    b = builder
    pair(b)
    image = b.tree("image", {MOD: BASE})
    assert engine.apply(b.request(image)).ok
    return b, image


def states(r):
    return {f.id: f.state.value for f in r.fixes}


@pytest.mark.parametrize("drift", ["above", "between"])
def test_a_chain_on_a_drifted_file_with_its_manifest_lost_is_found_and_recorded(image, drift):
    b, image = image
    text = (image / MOD).read_text()
    drifted = "# drift\n" + text if drift == "above" else text.replace("line 15\n", "line 15\n# drift\n")
    (image / MOD).write_text(drifted)
    shutil.rmtree(image / ".fixpack")
    before = snapshot(image)
    st = engine.status(b.request(image))
    assert st.exit_code == 0 and states(st) == {"a": "applied", "b": "applied"}, st.as_dict()
    assert "on files drifted since" in st.fix("a").messages[0], st.fix("a").messages
    strict = engine.apply(b.request(image, strict=True))
    assert strict.exit_code == 3 and snapshot(image) == before, strict.as_dict()
    with pytest.raises(MismatchError) as exc:  # no record to revert by: its steps are apply, then revert
        engine.revert(b.request(image))
    said = str(exc.value)
    assert "record it with: " in said and "; then revert with: " in said and "cp " not in said, said
    assert snapshot(image) == before
    r = engine.apply(b.request(image))
    assert r.ok and states(r) == {"a": "applied", "b": "applied"}, r.as_dict()
    assert (image / MOD).read_text() == drifted and (image / ".fixpack").is_dir()  # the manifest alone written
    assert engine.status(b.request(image)).exit_code == 0
    assert engine.revert(b.request(image)).ok
    assert (image / MOD).read_text() == drifted.replace("X = 2\n", "")  # the release's, the drift kept


def test_a_chain_that_does_not_lay_again_where_it_was_taken_off_is_no_finding(builder):
    """Taking off must be an unwinding: laid again, the fixes give the file's bytes. Here b's post-image is there
    once, but a copy of b's pre-image block (X = 1 and its context) is there too, so once b is taken off its
    pre-image is there twice and it would not lay again: no chain is found by placement, and no fix is said to be
    recorded (the unwinding of a chain found would call b tampered: "the manifest records it as applied"). Nothing
    is written."""
    b = builder
    pair(b)
    twin = "".join(A.splitlines(keepends=True)[7:14])  # lines 8-10, X = 1, lines 11-13
    image = b.tree("image", {MOD: "# drift\n" + B + twin})
    before = snapshot(image)
    r = engine.apply(b.request(image))
    assert r.exit_code == 4 and snapshot(image) == before, r.as_dict()
    assert "tampered" not in states(r).values() and not any("manifest records" in m for f in r.fixes
                                                              for m in f.messages), r.as_dict()
