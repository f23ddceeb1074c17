"""A recorded fix whose post-image was copied by hand into the image, a second time: status, apply and revert said it
tampered (right), with ``its post-image occurs 2 times`` (right) and advised ``Refresh the fix against this tree
(fixpack refresh) or rebase it onto this release``: advice for the pack, while the image was edited. They say what to
do about the file; the manifest's put-back step after it works (then apply lays the fix once)."""

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import EXIT_MISMATCH

MOD = "demo_pkg/mod.py"
BASE = numbered(20)
AFTER = BASE.replace("line 10\n", "line ten\n")
BLOCK = "line 7\nline 8\nline 9\nline ten\nline 11\nline 12\nline 13\n"  # the fix's post-image, as a hunk of it


@pytest.mark.parametrize("command", ["status", "apply", "revert"])
def test_a_post_image_copied_by_hand_is_advised_about_the_image_not_the_pack(builder, command):
    b = builder
    clean = b.tree("clean", {MOD: BASE})
    b.add_fix("one", {MOD: BASE}, {MOD: AFTER})
    b.profile(["one"])
    b.lock(clean)
    image = b.tree("image", {MOD: BASE})
    assert engine.apply(b.request(image)).exit_code == 0
    (image / MOD).write_text(AFTER + BLOCK)
    files = snapshot(image)
    r = getattr(engine, command)(b.request(image))
    assert r.exit_code == EXIT_MISMATCH and r.fix("one").state.value == "tampered", r.fixes
    said = " ".join(r.fix("one").messages)
    assert "hunk #1 is ambiguous: its post-image occurs 2 times in the file at lines [7, 21]" in said, said
    assert "refresh" not in said.lower() and "rebase" not in said, said
    assert ("the file was changed since the fix was applied (a block copied or removed by hand?). Check the file by "
            "hand and undo that change, or put it back to the release and run again") in said, said
    assert "next: undo that change, or put every file the manifest lists back to the clean release" in said, said
    assert snapshot(image) == files
    (image / MOD).write_text(BASE)  # put back to the release: the manifest is stale, and the fix is laid once
    r = getattr(engine, command)(b.request(image))
    assert r.exit_code == 0, r.fixes
    assert (image / MOD).read_text() == (AFTER if command == "apply" else BASE)
