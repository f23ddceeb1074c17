"""A fix whose hunk only adds lines after its context (a line appended at a file's end, or a hunk with context above
its change only, placed at its stated line) leaves that context where it was: once applied, the forward pass finds
it again at the same place, inside the fix's own post-image. With the manifest lost, such a fix was laid a second
time (``NEW`` appended twice, exit 0, status said applied), or said ambiguous where a later fix changed the same file
(exit 4). It is recognised by its post-image, recorded again and never laid again; a genuine second place for its
context, or its lines there twice, stays ambiguous (exit 4, nothing written)."""

import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, numbered, snapshot

from fixpack import engine
from fixpack.errors import EXIT_CONFLICT, MismatchError

MOD = "demo_pkg/mod.py"
MANIFEST = ".fixpack/demo.manifest.json"
BASE = numbered(20)
# context above its added line only, in the middle of the file (diff writes such a hunk at a file's end; by hand, or
# with fewer context lines, it is anywhere): anchored to the end, it is placed at its stated line, where its context
# is still there once it is applied
MIDDLE = ("diff --git a/demo_pkg/mod.py b/demo_pkg/mod.py\n--- a/demo_pkg/mod.py\n+++ b/demo_pkg/mod.py\n"
          "@@ -8,3 +8,4 @@\n line 8\n line 9\n line 10\n+NEW\n")
SHAPES = {"end of file": (BASE + "NEW\n", None), "middle": (BASE.replace("line 10\n", "line 10\nNEW\n"), MIDDLE)}
LOST = "applied by an earlier run whose manifest entry was lost"
WRITTEN_AGAIN = (f"no file of the target changed; its manifest {MANIFEST} was written again, to record what is "
                 f"there")


def outside_state(root):
    """The target's files and modes, its .fixpack/ aside (a tree whose manifest was removed)."""
    return outside_state_of(snapshot(root))


def outside_state_of(snap):
    return {p: v for p, v in snap.items() if not p.startswith(".fixpack/")}


def states(report):
    return {f.id: (f.state.value, f.action.value) for f in report.fixes}


def cli(b, root, *args):
    """The installed entry as a user runs it: (exit code, stdout)."""
    cmd = [sys.executable, "-m", "fixpack.cli", *args, "--profile", "p1", "--pack", str(b.pack),
           "--root", f"demo={root}"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    return p.returncode, p.stdout


def one_fix(b, shape, image=BASE):
    after, diff = SHAPES[shape]
    clean = b.tree("clean", {MOD: BASE})
    b.add_fix("one", {MOD: BASE}, {MOD: after}, diff=diff)
    b.profile(["one"])
    b.lock(clean)
    return b.tree("image", {MOD: image})


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_an_add_only_fix_is_recorded_not_laid_again_once_its_manifest_is_lost(builder, shape):
    image = one_fix(builder, shape)
    original = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("absent", "applied")}
    applied = snapshot(image)
    assert applied[MOD][0] == SHAPES[shape][0].encode()
    # the manifest there: a no-op
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("applied", "none")} and snapshot(image) == applied
    shutil.rmtree(image / ".fixpack")
    files = snapshot(image)
    st = engine.status(builder.request(image))
    assert st.exit_code == 0 and states(st) == {"one": ("applied", "none")}
    assert LOST in st.fix("one").messages[0] and snapshot(image) == files
    # apply records it again, the file's bytes as the first apply left them (it ended NEW\nNEW)
    code, out = cli(builder, image, "apply", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["exit_code"] == 0, out
    assert (image / MOD).read_bytes() == applied[MOD][0] and snapshot(image) == applied
    assert [(f["id"], f["state"], f["action"], f["offsets"]) for f in doc["fixes"]] == [("one", "applied", "none", [])]
    assert LOST in doc["fixes"][0]["messages"][0]
    assert doc["targets"][0]["message"] == WRITTEN_AGAIN
    assert [f["id"] for f in json.loads((image / MANIFEST).read_text())["fixes"]] == ["one"]
    recorded = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("applied", "none")} and snapshot(image) == recorded
    r = engine.revert(builder.request(image))
    assert r.ok and states(r) == {"one": ("applied", "reverted")} and snapshot(image) == original


@pytest.mark.parametrize("appended", ["first", "last"])
def test_an_appended_line_with_another_fix_of_its_file_is_recorded_once_its_manifest_is_lost(builder, appended):
    """The file is the chain's last post-image: the append is ours either way. Appended first, the file was not its
    own post-image and the fix was said ambiguous (exit 4; revert named the other fix alone, to record with that
    apply); appended last, it was appended a second time."""
    b = builder
    clean = b.tree("clean", {MOD: BASE})
    three = ("two", lambda t: t.replace("line 3\n", "three\n"))
    new = ("one", lambda t: t + "NEW\n")
    text = BASE
    for fid, change in [new, three] if appended == "first" else [three, new]:
        b.add_fix(fid, {MOD: text}, {MOD: change(text)})
        text = change(text)
    b.profile(list(b.series))
    b.lock(clean)
    image = b.tree("image", {MOD: BASE})
    original = snapshot(image)
    assert engine.apply(b.request(image)).exit_code == 0
    applied = snapshot(image)
    assert applied[MOD][0] == text.encode() and text.count("NEW") == 1
    shutil.rmtree(image / ".fixpack")
    with pytest.raises(MismatchError) as said:  # named both (appended first: two alone, and its apply was exit 4)
        engine.revert(b.request(image))
    assert f"holds {', '.join(b.series)} (their post-images are there) but no manifest records them" in str(said.value)
    assert outside_state(image) == outside_state_of(applied) and not (image / ".fixpack").exists()
    st = engine.status(b.request(image))
    assert st.exit_code == 0 and states(st) == {"one": ("applied", "none"), "two": ("applied", "none")}, st.fixes
    r = engine.apply(b.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("applied", "none"), "two": ("applied", "none")}
    assert snapshot(image) == applied  # the manifest the first apply wrote, byte for byte (each fix's own sha256)
    assert LOST in r.fix("one").messages[0] and r.targets[0].notes == [WRITTEN_AGAIN]
    r = engine.apply(b.request(image))  # nothing to write
    assert r.exit_code == 0 and states(r) == {"one": ("applied", "none"), "two": ("applied", "none")}
    assert snapshot(image) == applied and r.targets[0].notes == []
    assert engine.revert(b.request(image)).ok and snapshot(image) == original


def test_an_add_only_fix_on_a_drifted_file_is_recorded_once_its_manifest_is_lost(builder):
    """The image differs from the release below the hunk (no offset): the first apply says drifted. With the manifest
    lost the file is none of the lock's post-images; its context, still at the stated line, made the fix ambiguous
    (exit 4). The post-image is there, and the lock found the pre-image on the release: ours, recorded again."""
    image = one_fix(builder, "middle", image=BASE.replace("line 15\n", "fifteen\n"))
    original = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("drifted", "applied")}
    applied = snapshot(image)
    shutil.rmtree(image / ".fixpack")
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("applied", "none")}, r.fixes
    assert "not upstream's: apply records it as applied" in r.fix("one").messages[0]
    assert snapshot(image) == applied and (image / MOD).read_text().count("NEW") == 1
    recorded = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0 and states(r) == {"one": ("applied", "none")} and snapshot(image) == recorded
    assert engine.revert(builder.request(image)).ok and snapshot(image) == original


@pytest.mark.parametrize("edit", ["a twin of its context after it", "its line twice"])
def test_an_appended_line_with_a_second_place_for_it_stays_ambiguous(builder, edit):
    """The post-image is there, and so is a second place for the fix: a copy of its context at the file's end now
    (where the hunk goes), or its line a second time after it (which of the two is the fix's cannot be told). No
    manifest: ambiguous, exit 4, nothing written or recorded."""
    image = one_fix(builder, "end of file")
    assert engine.apply(builder.request(image)).exit_code == 0
    shutil.rmtree(image / ".fixpack")
    tail = "line 18\nline 19\nline 20\n" if edit.startswith("a twin") else "NEW\n"
    (image / MOD).write_text((image / MOD).read_text() + tail)
    files = snapshot(image)
    for run in (engine.status, engine.apply):
        r = run(builder.request(image))
        assert r.exit_code == EXIT_CONFLICT and states(r) == {"one": ("ambiguous", "none")}
        assert any("both its pre-image and its post-image are in the file" in m for m in r.fix("one").messages)
        assert snapshot(image) == files and not (image / ".fixpack").exists()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_copy_with_the_lines_added_already_is_not_locked_as_the_release(builder, shape):
    """lock on a copy that holds such a fix already (a tree it was applied to, its .fixpack removed; no lock on disk to
    compare with) took the file as the release's pre-image: the fix locked as absent, and apply on that image laid it a
    second time (exit 0). It is refused as any copy holding a fix's post-image is (exit 3, nothing written), and
    locked as found where the fix is declared upstreamed."""
    after, diff = SHAPES[shape]
    builder.add_fix("one", {MOD: BASE}, {MOD: after}, diff=diff)
    builder.profile(["one"])
    patched = builder.tree("patched", {MOD: after})
    before = snapshot(builder.pack)
    with pytest.raises(MismatchError, match="holds fix one's post-image") as exc:
        builder.lock(patched)
    assert exc.value.exit_code == 3 and str(exc.value).endswith("nothing was written"), str(exc.value)
    assert snapshot(builder.pack) == before
    engine.write_lock(builder.request(patched, upstreamed=("one",)))  # a release that took it: as found
    (entry,) = json.loads((builder.pack / "profiles/p1.lock").read_text())["fixes"]
    assert all(f["pre"] == f["post"] for f in entry["files"]), entry
    clean = builder.tree("clean", {MOD: BASE})
    builder.lock(clean)  # the clean copy locks, and the fix is laid once
    assert engine.apply(builder.request(clean)).exit_code == 0
    assert (clean / MOD).read_text() == after
