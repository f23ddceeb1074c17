"""Revert over fixes of the profile that the image's record does not hold as applied, though their changes are in
the files (found by fresh users): no manifest, a manifest that lost an entry, one whose every listed file is back at
the release, one whose entry says upstreamed where the lock says the release lacks the fix, no usable lock, a fix
only partly there or with one line edited by hand. Each revert said OK (or nothing to do) and left that fix's code
in. Now exit 3, nothing written, naming the fixes; the commands it prints, run as written, end at the release."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import numbered, snapshot
from test_engine import MOD, setup  # noqa: F401 (fixture)

from fixpack import engine
from fixpack.errors import MismatchError


def _refusal(b, target, **kw) -> str:  # type: ignore[no-untyped-def]
    before = snapshot(target)
    with pytest.raises(MismatchError) as exc:
        engine.revert(b.request(target, **kw))
    assert snapshot(target) == before  # nothing written, .fixpack/ included
    return str(exc.value)


def _run_each(said: str, marks: tuple[str, ...]) -> None:
    """Run the commands ``said`` prints after each of ``marks`` (up to the next '; '), in order, as written."""
    for mark in marks:
        command = said.split(mark, 1)[1].split("; ", 1)[0]
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        assert done.returncode == 0, (command, done.stdout, done.stderr)


def _drop(target, *ids: str, state: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """Take the entries ``ids`` out of the manifest (or, with ``state``, set theirs to it)."""
    mpath = target / ".fixpack" / "demo.manifest.json"
    m = json.loads(mpath.read_text())
    if state:
        for f in m["fixes"]:
            if f["id"] in ids:
                f["state"] = state
    else:
        m["fixes"] = [f for f in m["fixes"] if f["id"] not in ids]
        kept = {p for f in m["fixes"] for p in f["files"]}
        m["files"] = {p: h for p, h in m["files"].items() if p in kept}
        m["removed_files"] = {p: k for p, k in m.get("removed_files", {}).items() if p in kept}
    mpath.write_text(json.dumps(m))


def _put_back(said: str, target, paths: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Run the command ``said`` ends with, which puts ``paths`` of the checkout ``target`` back (git's way)."""
    command = said.split(". The command that puts the files back: ", 1)[1]
    assert command == f"git -C {target} checkout HEAD -- {' '.join(paths)}", command
    subprocess.run(command, shell=True, check=True)


HELD = ("record it with: ", "then revert with: ")


@pytest.mark.parametrize("how", ["entry lost", "upstreamed entry"])
def test_a_manifest_without_a_fix_that_is_in(setup, how):  # noqa: F811
    b, _, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    _drop(target, "first", state="upstreamed" if how == "upstreamed entry" else None)
    for dry in (True, False):
        said = _refusal(b, target, dry_run=dry)
        assert " holds first (its post-image is there) but its manifest does not record it as applied. To revert: " \
               "record it with: " in said and said.endswith("; nothing was written"), said
    _run_each(said, HELD)
    assert snapshot(target) == original


def test_a_stale_manifest_whose_files_are_the_release_while_others_hold_fixes(setup):  # noqa: F811
    """Every file the manifest lists is back at the release (it is stale), but fixes it no longer lists are in other
    files: revert removed the stale manifest and said OK."""
    b, _, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target, opt_ins=("extra",))).ok
    _drop(target, "first", "second")
    (target / "demo_pkg/x.py").unlink()  # extra's file, back to the release (which lacks it)
    said = _refusal(b, target)
    assert " holds first, second (their post-images are there) but its manifest does not record them as applied" \
           in said, said
    _run_each(said, ("record them with: ", "then revert with: "))
    assert snapshot(target) == original


def test_no_usable_lock_still_finds_the_fixes_by_their_patches(setup):  # noqa: F811
    """Without the lock (missing, or stale) the hashes say nothing: every fix is placed by its patch."""
    b, _, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    (target / ".fixpack" / "demo.manifest.json").unlink()
    lock = b.pack / "profiles" / "p1.lock"
    saved = lock.read_bytes()
    lock.unlink()
    said = _refusal(b, target)
    assert " holds first, second (their post-images are there) but no manifest records them. To revert: regenerate " \
           "the lock from clean release copies: " in said and "; then record them with: " in said, said
    lock.write_bytes(saved)  # (the lock command needs the release copy, which this pack's profile cannot fetch)
    _run_each(said, ("record them with: ", "then revert with: "))
    assert snapshot(target) == original


@pytest.mark.parametrize("kind", ["partial", "a line edited"])
def test_a_fix_partly_there_is_named_with_the_command_that_puts_its_files_back(builder, kind):
    """One hunk of two in the file (status: partial), or both with a line of one edited by hand (status: conflict);
    the target is a checkout at the pin, so the way back is git's."""
    base = numbered(40)
    target, source = builder.git_release({MOD: base})
    post = base.replace("line 5\n", "five\nfive and a half\n").replace("line 30\n", "thirty\nthirty-one\n")
    builder.add_fix("two", {MOD: base}, {MOD: post})
    builder.profile(["two"], extra_targets=source)
    builder.lock(target)
    there = base.replace("line 5\n", "five\nfive and a half\n") if kind == "partial" else \
        post.replace("thirty-one\n", "thirty-one (tuned by hand)\n")
    (target / MOD).write_text(there)
    assert engine.status(builder.request(target)).fix("two").state.value == \
        ("partial" if kind == "partial" else "conflict")
    said = _refusal(builder, target)
    assert " holds part of two (some of its hunks, or its lines edited by hand: `status` names them), which no " \
           "manifest records. To revert: put its files back to the release with the command at the end; then " \
           "revert with: " in said, said
    _put_back(said, target, [MOD])
    assert (target / MOD).read_text() == base and engine.revert(builder.request(target)).ok


def test_a_partial_fix_beside_a_recorded_one_goes_back_with_every_file_the_manifest_lists(builder):
    """Fix a (files A and B) lost its entry and is only partly there; fix b (files B and C) is recorded. The command
    put back a's files only: B went to the release under b, which the next revert called tampered (found by a fresh
    user). It puts back every file the manifest lists too: one revert after it ends at the release."""
    files = {f"demo_pkg/{n}.py": numbered(20) for n in "abc"}
    target, source = builder.git_release(files)
    a, b_, c = (f"demo_pkg/{n}.py" for n in "abc")
    after_a = {a: files[a].replace("line 3\n", "three\nmore\n"), b_: files[b_].replace("line 3\n", "three\nmore\n")}
    builder.add_fix("fa", {a: files[a], b_: files[b_]}, after_a)
    builder.add_fix("fb", {b_: after_a[b_], c: files[c]}, {b_: after_a[b_].replace("line 15\n", "fifteen\n"),
                                                          c: files[c].replace("line 15\n", "fifteen\n")})
    builder.profile(["fa", "fb"], extra_targets=source)
    builder.lock(target)
    assert engine.apply(builder.request(target)).ok
    _drop(target, "fa")
    subprocess.run(["git", "-C", str(target), "checkout", "HEAD", "--", a], check=True)  # a's first file back
    said = _refusal(builder, target)
    assert " holds part of fa (some of its hunks, or its lines edited by hand: `status` names them), which its " \
           "manifest does not record as applied. To revert: put its files and every file the manifest lists back " \
           "to the release" in said, said
    _put_back(said, target, [a, b_, c])
    r = engine.revert(builder.request(target))
    assert r.ok and not (target / ".fixpack").exists()
    assert all((target / p).read_text() == t for p, t in files.items())


def test_a_partial_fix_beside_fixes_that_are_in_puts_its_files_back_first(builder):
    """Fix one is in whole, fix two only in part, no manifest: the apply that records one refuses while two is
    partly there (exit 4), so the put-back comes first (the message named it last; found by a fresh user). The
    steps, run in the order said, end at the release."""
    base = numbered(40)
    target, source = builder.git_release({MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {"demo_pkg/b.py": base}, {"demo_pkg/b.py": base.replace("line 9\n", "nine\n")})
    post = base.replace("line 5\n", "five\nfive and a half\n").replace("line 30\n", "thirty\nthirty-one\n")
    builder.add_fix("two", {MOD: base}, {MOD: post})
    builder.profile(["one", "two"], extra_targets=source)
    builder.lock(target)
    (target / "demo_pkg/b.py").write_text(base.replace("line 9\n", "nine\n"))
    (target / MOD).write_text(base.replace("line 5\n", "five\nfive and a half\n"))
    said = _refusal(builder, target)
    assert "To revert: put its files back to the release with the command at the end; then record it with: " in said
    _put_back(said, target, [MOD])
    _run_each(said, ("record it with: ", "then revert with: "))
    assert (target / MOD).read_text() == base and (target / "demo_pkg/b.py").read_text() == base


@pytest.mark.parametrize("how", ["entry lost", "applied by hand"])
def test_an_unselected_opt_in_in_the_files_that_the_manifest_lacks(setup, how):  # noqa: F811
    """A manifest that records the defaults, and an opt-in's post-image in the files (its entry lost, or its change
    made by hand): status listed it as "not selected", apply said nothing of it, and revert refused. Now status says
    it is applied and apply records it (as with no manifest), so that revert removes it."""
    b, _, target = setup
    original = snapshot(target)
    if how == "entry lost":
        assert engine.apply(b.request(target, opt_ins=("extra",))).ok
        _drop(target, "extra")
    else:
        assert engine.apply(b.request(target)).ok
        (target / "demo_pkg/x.py").write_text("x = 1\n")
    before = snapshot(target)
    st = engine.status(b.request(target))
    assert st.ok and st.fix("extra").state == "applied" and not st.fix("extra").selected, st.fix("extra")
    assert "apply records it again" in st.fix("extra").messages[0] and snapshot(target) == before
    r = engine.apply(b.request(target))
    assert r.ok and r.fix("extra").state == "applied" and r.fix("extra").action == "none"
    m = json.loads((target / ".fixpack" / "demo.manifest.json").read_text())
    assert [f["id"] for f in m["fixes"]] == ["first", "second", "extra"]
    assert engine.status(b.request(target)).fix("extra").messages[0] == "already applied"
    assert engine.revert(b.request(target)).ok and snapshot(target) == original


@pytest.mark.parametrize("how", ["entry lost", "applied by hand"])
def test_an_unselected_opt_in_between_recorded_fixes_that_the_manifest_lacks(builder, how):
    """The same for an opt-in that shares its file with the recorded fixes around it (placed, not hashed). Made by
    hand there, the recorded fixes' file changed since they were applied: tampered, as before, and the opt-in named."""
    base = numbered(40)
    clean = builder.tree("clean", {MOD: base})
    a = base.replace("line 3\n", "three\n")
    builder.add_fix("a", {MOD: base}, {MOD: a})
    m = a.replace("line 20\n", "twenty\n")
    builder.add_fix("mid", {MOD: a}, {MOD: m}, opt_in=True)
    builder.add_fix("z", {MOD: m}, {MOD: m.replace("line 37\n", "thirty-seven\n")})
    builder.profile(["a", "z"], ["mid"])
    builder.lock(clean)
    original = snapshot(clean)
    if how == "entry lost":
        assert engine.apply(builder.request(clean, opt_ins=("mid",))).ok
        _drop(clean, "mid")
    else:
        assert engine.apply(builder.request(clean)).ok
        (clean / MOD).write_text((clean / MOD).read_text().replace("line 20\n", "twenty\n"))
    before = snapshot(clean)
    for run in (engine.status, engine.apply):
        r = run(builder.request(clean))
        assert r.fix("mid").state == "applied" and "or by hand" in r.fix("mid").messages[0], r.fixes
        if how == "applied by hand":
            assert r.exit_code == 3 and r.fix("a").state == r.fix("z").state == "tampered"
            assert snapshot(clean) == before
            return
        assert r.ok, r.fixes
    assert engine.revert(builder.request(clean)).ok and snapshot(clean) == original


def test_no_manifest_and_a_fix_whose_post_image_occurs_twice_is_named_with_its_way_back(builder):
    """Found by a fresh user: with the manifest gone and the patched block copied by hand (it occurs twice: the fix
    is ambiguous), revert named only the other fixes and said to record them with apply, which then failed on the
    ambiguous one (exit 4). It is named as partly there: its files go back to the release first."""
    base = numbered(40)
    target, source = builder.git_release({MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    builder.add_fix("two", {"demo_pkg/b.py": base}, {"demo_pkg/b.py": base.replace("line 9\n", "nine\n")})
    builder.profile(["one", "two"], extra_targets=source)
    builder.lock(target)
    assert engine.apply(builder.request(target)).ok
    (target / ".fixpack" / "demo.manifest.json").unlink()
    (target / ".fixpack").rmdir()
    text = (target / MOD).read_text()
    (target / MOD).write_text(text + "".join(text.splitlines(True)[:9]))  # the block around "five", twice
    assert engine.status(builder.request(target)).fix("one").state.value == "ambiguous"
    said = _refusal(builder, target)
    assert " holds two (its post-image is there) but no manifest records it; it also holds part of one " in said, said
    _put_back(said, target, [MOD])
    _run_each(said, HELD)
    assert (target / MOD).read_text() == base and (target / "demo_pkg/b.py").read_text() == base


def test_an_ambiguous_fix_on_an_image_gets_the_step_that_puts_its_file_back(builder):
    """Found by a fresh user: an ambiguous fix (its block copied by hand in the image) had only a maintainer's advice
    (refresh, rebase); conflict and partial got the command that puts the file back to the release. It has it too."""
    base = numbered(40)
    target, source = builder.git_release({MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    builder.profile(["one"], extra_targets=source)
    builder.lock(target)
    (target / MOD).write_text(base + "".join(base.splitlines(True)[:9]))  # the fix's block, twice
    r = engine.apply(builder.request(target))
    assert r.exit_code == 4 and r.fix("one").state.value == "ambiguous"
    step = r.fix("one").messages[-1]
    assert step.startswith(f"next: {MOD} differs from the release where the fix goes; if it was changed after the "
                           f"release, put it back: git -C {target} checkout HEAD -- {MOD}; then run "), step
    subprocess.run(step.split("put it back: ", 1)[1].split("; then run ", 1)[0], shell=True, check=True)
    assert engine.apply(builder.request(target)).ok


@pytest.mark.parametrize("lock", ["the lock", "no usable lock"])
def test_a_manifest_planted_with_every_fix_upstreamed_is_held_to_the_files(setup, lock):  # noqa: F811
    """Found by a fresh user: a manifest planted on a clean image with every fix recorded "upstreamed" (files {}):
    status said each fix absent, but revert took the record at its word ("upstreamed: not ours to revert", OK: 2
    upstreamed). Revert holds an upstreamed record to the files as status does: a fix whose pre-image is there, not
    its post-image, is absent, said so with the record it contradicts (exit 0: nothing of it is there to revert, and
    the manifest goes, as a stale one does); with no usable lock its patch says it."""
    b, _, target = setup
    original = snapshot(target)
    assert engine.apply(b.request(target)).ok
    mpath = target / ".fixpack" / "demo.manifest.json"
    data = json.loads(mpath.read_text())
    assert engine.revert(b.request(target)).ok and snapshot(target) == original
    for f in data["fixes"]:
        f["state"], f["files"] = "upstreamed", {}
    data["files"], data["removed_files"] = {}, {}
    mpath.parent.mkdir()
    mpath.write_text(json.dumps(data))
    if lock == "the lock":
        st = engine.status(b.request(target))
        assert st.ok and {f.id: f.state.value for f in st.fixes if f.id != "extra"} == {"first": "absent",
                                                                                        "second": "absent"}
    else:
        (b.pack / "profiles" / "p1.lock").unlink()
    planted = snapshot(target)
    for dry in (True, False):
        r = engine.revert(b.request(target, dry_run=dry))
        assert r.ok and {f.id: f.state.value for f in r.fixes} == {"first": "absent", "second": "absent"}, r.as_dict()
        assert all(f.messages == ["the manifest records it as upstreamed, but its pre-image is in the files, not its "
                                  "post-image (status says absent): it is not upstream's, and not in, so there is "
                                  "nothing of it to revert"] for f in r.fixes), r.as_dict()
        assert snapshot(target) == (planted if dry else original)


def test_an_upstreamed_record_the_files_bear_out_stays_upstreamed(builder):
    """The other side of the check above: a release that holds fix first (fixed_in its version: the lock records it
    upstreamed), fix second applied over it; revert reverts second and leaves first, said upstreamed."""
    base = numbered(40)
    held = base.replace("line 5\n", "five\n")
    clean = builder.tree("clean", {MOD: held})
    builder.add_fix("first", {MOD: base}, {MOD: held}, upstream={"status": "accepted", "fixed_in": "1.0"})
    builder.add_fix("second", {MOD: held}, {MOD: held.replace("line 30\n", "thirty\n")})
    builder.profile(["first", "second"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: held})
    original = snapshot(target)
    r = engine.apply(builder.request(target))
    assert r.ok and {f.id: f.state.value for f in r.fixes} == {"first": "upstreamed", "second": "absent"}
    r = engine.revert(builder.request(target))
    assert r.ok and {f.id: (f.state.value, f.action.value) for f in r.fixes} == {
        "first": ("upstreamed", "none"), "second": ("applied", "reverted")}, r.as_dict()
    assert r.fix("first").messages == ["upstreamed: not ours to revert"] and snapshot(target) == original


@pytest.mark.parametrize("manifest", ["kept", "lost"])
def test_an_unselected_opt_in_partly_in_the_files_is_named_partial_not_skipped(builder, manifest):
    """Carried from a fresh user: an opt-in the run does not select, one of its two hunks in its file (a run cut
    short, or a hand edit), and status and apply listed it as skipped, exit 0, though revert's refusal says that
    `status` names it. Now status and apply call it partial (exit 4, nothing written), not selected; revert names it
    and its put-back command, run as written, ends at the release."""
    base = numbered(40)
    other = "demo_pkg/b.py"
    target, _ = builder.git_release({MOD: base, other: base})
    builder.add_fix("a", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {other: base},
                    {other: base.replace("line 10\n", "ten\n").replace("line 35\n", "thirty-five\n")}, opt_in=True)
    builder.profile(["a"], ["two"])
    builder.lock(target)
    assert engine.apply(builder.request(target)).ok
    if manifest == "lost":
        subprocess.run(["rm", "-r", str(target / ".fixpack")], check=True)
    (target / other).write_text(base.replace("line 10\n", "ten\n"))  # one hunk of two
    before = snapshot(target)
    for run in (engine.status, engine.apply):
        r = run(builder.request(target))
        assert r.exit_code == 4 and r.fix("two").state == "partial" and not r.fix("two").selected, r.fixes
        assert r.fix("a").state == "applied" and snapshot(target) == before
        assert r.fix("two").messages[0].startswith("opt-in, not selected in this run, but part of it is in "
                                                   f"{other}"), r.fix("two").messages
    said = _refusal(builder, target)
    assert "holds part of two" in said, said
    _put_back(said, target, [other] if manifest == "lost" else sorted([MOD, other]))
    if manifest == "lost":  # a's post-image is still there: recorded, then reverted
        _run_each(said, HELD)
    else:  # every file the manifest lists went back: the revert finds the release
        _run_each(said, ("then revert with: ",))
    assert (target / other).read_text() == base and (target / MOD).read_text() == base


def _sharing_partial(builder):  # type: ignore[no-untyped-def]
    """A release checkout with the default fix d over two files and the opt-in two over one of them, d applied and
    its manifest lost, one hunk of two's laid by hand: (target, the files' release text, two's file)."""
    base = numbered(40)
    other = "demo_pkg/b.py"
    target, _ = builder.git_release({MOD: base, other: base})
    builder.add_fix("d", {MOD: base, other: base},
                    {MOD: base.replace("line 3\n", "three\n"), other: base.replace("line 20\n", "twenty\n")})
    after_d = base.replace("line 20\n", "twenty\n")
    builder.add_fix("two", {other: after_d},
                    {other: after_d.replace("line 5\n", "five\n").replace("line 35\n", "thirty-five\n")}, opt_in=True)
    builder.profile(["d"], ["two"])
    builder.lock(target)
    assert engine.apply(builder.request(target)).ok
    subprocess.run(["rm", "-r", str(target / ".fixpack")], check=True)
    (target / other).write_text(after_d.replace("line 5\n", "five\n"))  # one hunk of two
    return target, base, other


def test_a_partial_opt_in_sharing_a_file_with_a_found_fix_puts_back_that_fix_files_too(builder):
    """Found by a fresh user on the real release: no manifest, a default fix over two files, and an opt-in partly in
    one of them. Revert's steps put back the opt-in's file only, so the default fix was left in its other file and
    the steps' apply stopped on it (partial, exit 4). The put-back now takes every file of a fix found whole that
    shares a file with what goes back; the steps, run as written, end at the release."""
    target, base, other = _sharing_partial(builder)
    said = _refusal(builder, target)
    assert "holds part of two" in said and "holds d" in said, said
    _put_back(said, target, sorted([MOD, other]))
    _run_each(said, HELD)
    assert (target / other).read_text() == base and (target / MOD).read_text() == base


def test_status_next_step_for_a_partial_opt_in_takes_the_files_of_a_fix_sharing_them(builder):
    """Seen by two fresh users on the real release: status's next step for an opt-in partly in a file that a lost
    default fix (found whole) also changes put back that file alone, so the next status found the default fix
    partial (exit 4) and it took a second round. The step now puts back that fix's other files too: the status after
    it is clean, and the fix's files differ is said in the plural."""
    target, base, other = _sharing_partial(builder)
    st = engine.status(builder.request(target))
    assert st.exit_code == 4 and st.fix("two").state == "partial" and st.fix("d").state == "applied", st.fixes
    step = st.fix("two").messages[-1]
    assert step.startswith(f"next: {other} differs from the release where the fix goes"), step
    command = step.split("put it back: ", 1)[1].split("; then run ", 1)[0]
    assert command == f"git -C {target} checkout HEAD -- {other} {MOD}", command
    subprocess.run(command, shell=True, check=True)
    again = engine.status(builder.request(target))
    assert again.exit_code == 0 and again.fix("d").state == "absent", again.fixes
