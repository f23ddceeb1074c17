"""Revert over records and files that disagree (found by a fresh user). A manifest record that says "upstreamed"
where the files do not bear it out and do not show the fix absent either (its file missing, a line of its
pre-image edited, or the fix in with one of its added lines edited by hand): revert said "upstreamed: not ours to
revert", OK, exit 0, and deleted the manifest (in the last case leaving the fix's other lines in). With the manifest
lost, a fix in with one of its added lines edited by hand was not named at all. Now each is refused (exit 3,
nothing written), naming the fix, with the command that puts its files back; run as written, they end at the
release."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import numbered, snapshot

from fixpack import engine
from fixpack.errors import MismatchError

MOD = "demo_pkg/mod.py"
OTHER = "demo_pkg/b.py"
BASE = numbered(40)
BLOCK = "# keep the cache warm\ncache = {}\ncache_size = 64\n"
ONE = BASE.replace("line 5\n", "line 5\n" + BLOCK)
TWO = BASE.replace("line 9\n", "nine\n")


def _pack(builder):  # type: ignore[no-untyped-def]
    target, source = builder.git_release({MOD: BASE, OTHER: BASE})
    builder.add_fix("one", {MOD: BASE}, {MOD: ONE})
    builder.add_fix("two", {OTHER: BASE}, {OTHER: TWO})
    builder.profile(["one", "two"], extra_targets=source)
    builder.lock(target)
    return target


def _refusal(b, target, **kw) -> str:  # type: ignore[no-untyped-def]
    before = snapshot(target)
    with pytest.raises(MismatchError) as exc:
        engine.revert(b.request(target, **kw))
    assert exc.value.exit_code == 3 and snapshot(target) == before  # nothing written, .fixpack/ included
    return str(exc.value)


def _put_back_and_revert(b, target, said: str) -> None:  # type: ignore[no-untyped-def]
    command = said.split(". The command that puts the files back: ", 1)[1]
    assert command.startswith(f"git -C {target} checkout HEAD -- "), command
    subprocess.run(command, shell=True, check=True)
    assert engine.revert(b.request(target)).ok
    assert (target / MOD).read_text() == BASE and (target / OTHER).read_text() == BASE
    assert not (target / ".fixpack").exists()


@pytest.mark.parametrize("how", ["file missing", "pre-image line edited", "added line edited"])
def test_an_upstreamed_record_the_files_do_not_bear_out_is_refused(builder, how):
    target = _pack(builder)
    assert engine.apply(builder.request(target)).ok
    mpath = target / ".fixpack" / "demo.manifest.json"
    m = json.loads(mpath.read_text())
    for f in m["fixes"]:
        if f["id"] == "one":
            f["state"], f["files"] = "upstreamed", {}
    m["files"].pop(MOD)
    mpath.write_text(json.dumps(m))
    if how == "file missing":
        (target / MOD).unlink()
    elif how == "pre-image line edited":
        (target / MOD).write_text(BASE.replace("line 6\n", "line 6 (tuned by hand)\n"))
        st = engine.status(builder.request(target))
        assert st.exit_code == 4 and st.fix("one").state.value == "conflict"
    else:
        (target / MOD).write_text(ONE.replace("cache_size = 64\n", "cache_size = 128\n"))
    for dry in (True, False):
        said = _refusal(builder, target, dry_run=dry)
        assert "records one v1 as upstreamed, but its post-image is not in the files" in said, said
        assert "To revert: put its files and every file the manifest lists back to the release with the command at " \
               "the end; then revert with: " in said and "; nothing was written" in said, said
    _put_back_and_revert(builder, target, said)


@pytest.mark.parametrize("others", ["in", "back at the release"])
def test_no_manifest_and_a_fix_with_an_added_line_edited_is_named(builder, others):
    target = _pack(builder)
    assert engine.apply(builder.request(target)).ok
    (target / MOD).write_text(ONE.replace("# keep the cache warm\n", "# keep the cache warm (by hand)\n"))
    shutil.rmtree(target / ".fixpack")
    if others == "back at the release":
        (target / OTHER).write_text(BASE)
    said = _refusal(builder, target)
    assert "holds part of one (some of its hunks, or its lines edited by hand: `status` names them), which no " \
           "manifest records" in said, said
    assert (" holds two (its post-image is there)" in said) == (others == "in"), said
    if others == "back at the release":
        _put_back_and_revert(builder, target, said)


def test_a_fix_absent_with_a_line_of_its_context_edited_is_not_named(builder):
    """The other side: on the release with a context line of a fix edited (status: conflict), nothing of the fix is in;
    context lines, and lines the release has elsewhere, are not its post-image. Revert says nothing to do."""
    target = _pack(builder)
    (target / MOD).write_text(BASE.replace("line 6\n", "line 6 (tuned by hand)\n") + "cache = {}\n")
    assert engine.status(builder.request(target)).fix("one").state.value == "conflict"
    r = engine.revert(builder.request(target))
    assert r.ok, r.as_dict()
