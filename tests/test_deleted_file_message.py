"""A file a fix deletes, made again by hand after the fix was applied: revert and status said the file
"exists already (the patch creates it)", though the patch deletes it (found by a fresh user). They say the fix
deletes it and what reverting would do."""

from conftest import numbered, snapshot

from fixpack import engine

GONE = "demo_pkg/gone.py"


def test_a_remade_file_that_the_fix_deletes_is_said_so(builder):
    base = numbered(5)
    clean = builder.tree("clean", {GONE: base})
    builder.add_fix("drop", {GONE: base}, {GONE: None})
    builder.profile(["drop"])
    builder.lock(clean)
    image = builder.tree("image", {GONE: base})
    assert engine.apply(builder.request(image)).ok and not (image / GONE).exists()
    (image / GONE).write_text("made again\n")
    before = snapshot(image)
    said = []
    for run in (engine.revert, engine.status):
        report = run(builder.request(image))
        said.append(repr(report.as_dict()))
    assert snapshot(image) == before
    text = "\n".join(said)
    assert "the patch creates it" not in text, text
    assert f"{GONE}: exists, though fix drop deletes it" in text, text
