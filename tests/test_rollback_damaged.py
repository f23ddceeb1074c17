"""A rollback that finds the state folder swapped for a link while the run wrote refuses to write through it. Its
message said to remove the link, and that the journal was left in ``.fixpack``: removed so, the journal (where the link
led) was lost to the next run. It says now where the journal is and how to put the folder back, and the next run
rolls back first."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
from conftest import numbered, snapshot

from fixpack import engine, nofollow
from fixpack.errors import EnvironmentProblem, MismatchError

MOD = "demo_pkg/mod.py"


def _apply_cut(builder, monkeypatch, plant, errno_name):  # type: ignore[no-untyped-def]
    """Apply one fix to a fresh image whose state folder ``plant(state, aside)`` changes right after the fix's file is
    written, then the disk fails (``errno_name``): (the image, its bytes before, .fixpack, the folder aside, the
    run's message). The rollback must not follow what was planted."""
    base = numbered(30)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    target = builder.tree("image", {MOD: base})
    before = snapshot(target)
    real_rename = nofollow.rename_at
    state, aside = target / ".fixpack", target.parent / "state-aside"

    def write_then_plant(fd, src, dst, path):  # type: ignore[no-untyped-def]
        real_rename(fd, src, dst, path)
        if dst == "mod.py":
            plant(state, aside)
            code = getattr(errno, errno_name)
            raise OSError(code, os.strerror(code), str(path))
    monkeypatch.setattr(nofollow, "rename_at", write_then_plant)
    with pytest.raises(EnvironmentProblem) as exc:  # (not went on through a planted state folder)
        engine.apply(builder.request(target))
    monkeypatch.undo()
    return target, before, state, aside, str(exc.value)


def _swap_for_a_link(state, aside):  # type: ignore[no-untyped-def]
    os.rename(state, aside)  # another program swaps .fixpack for a link
    os.symlink(aside, state)


def _make_a_file(state, aside):  # type: ignore[no-untyped-def]
    os.rename(state, aside)
    state.write_text("planted\n")


def test_a_rollback_refused_by_a_planted_state_folder_leaves_the_journal_for_the_next_run(builder, monkeypatch):
    target, before, state, aside, said = _apply_cut(builder, monkeypatch, _swap_for_a_link, "EIO")
    assert f"rolling back failed too ({state} is a symbolic link (to {aside})" in said, said
    assert "nothing was written" not in said, said
    assert f"The journal is left where the link {state} leads ({aside}/journal.json)" in said, said
    put_back = f"rm -- {state} && mv -T -- {aside} {state}"
    assert f"moved by another program, put it back ({put_back}); check the disk, then run fixpack again" in said, said
    assert "it rolls the target back to its bytes before this run first" in said, said
    assert (target / MOD).read_text() != numbered(30)  # the write stands until the rollback
    with pytest.raises(MismatchError) as later:  # a run before the folder is put back says the same way back
        engine.status(builder.request(target))
    assert f"It leads to a folder with a journal: if that is this target's state folder, moved by another program " \
        f"(a run that died leaves a journal to roll back), put it back ({put_back}) and run again" in str(later.value)
    assert subprocess.run(put_back, shell=True).returncode == 0  # the commands as printed: the next run rolls back
    assert engine.revert(builder.request(target)).ok
    assert snapshot(target) == before


def test_a_rollback_refused_by_a_state_folder_made_a_file_does_not_say_nothing_was_written(builder, monkeypatch):
    """The same with ``.fixpack`` made a file (damaged state): its words said "(nothing was written)" though the run
    had written; the journal is said left, and the next run's own words for a damaged state are promised."""
    target, before, state, aside, said = _apply_cut(builder, monkeypatch, _make_a_file, "ENOSPC")
    assert f"rolling back failed too (the state in {state} is damaged: it is not a folder" in said, said
    assert "nothing was written" not in said and f"{state} is no folder now, so the journal this run wrote there is " \
        "not in it: put the run's state folder back in its place if another program moved it; free space" in said, said
    assert "where that run still finds the state damaged, it names the files to put back by hand" in said, said
    state.unlink()
    os.rename(aside, state)
    assert engine.revert(builder.request(target)).ok
    assert snapshot(target) == before
