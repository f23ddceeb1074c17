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


def test_a_file_the_patch_creates_already_there_names_the_patchs_file_section(builder):
    """A fresh user: a fix that creates a file the image already holds (or whose patch says `@@ -0,0` of one) was
    refused with "exists already (the patch creates it)" and no place in the patch, where other refused hunks name
    their patch file and line. It names the file section's line in the patch."""
    new = "demo_pkg/made.py"
    clean = builder.tree("clean", {"demo_pkg/mod.py": numbered(5)})
    folder = builder.add_fix("make", {new: None}, {new: "x = 1\n"})
    builder.profile(["make"])
    builder.lock(clean)
    image = builder.tree("image", {"demo_pkg/mod.py": numbered(5), new: "y = 2\n"})
    before = snapshot(image)
    patch = next(folder.glob("*.patch"))
    line = patch.read_text().splitlines().index(f"diff --git a/{new} b/{new}") + 1
    report = engine.apply(builder.request(image))
    text = " ".join(m for f in report.fixes for m in f.messages)
    assert report.exit_code == 4 and snapshot(image) == before, text
    assert f"{new}: exists already (the patch creates it; its file section is at {patch}:" in text, text
    assert f"{patch}:{line})" in text, (line, text)
