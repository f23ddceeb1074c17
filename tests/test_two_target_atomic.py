"""A run over two targets (two roots: vLLM and the vllm-gaudi plugin) writes both or neither. A write of the second
that fails part-way (the engine's own I/O fault hook, $FIXPACK_IO_FAULT, failing the real transaction at each of its
I/O calls in turn) puts the first back too, files and state folder, and says nothing was written; a put-back that
fails itself is exit 5, the journal kept, and the next run puts both back. A run killed (SIGKILL, $FIXPACK_FAULT_AT)
at any write point leaves journals that the next status, revert and apply treat as one run: both targets rolled
back, or both kept as written (once the run committed). Every byte of both targets, and of a file beside them, is
compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GAUDI_RUNNER, REPO, snapshot, two_target_pack, with_fault

from fixpack import engine, fsio
from fixpack.errors import EnvironmentProblem, FixpackError, MismatchError
from fixpack.states import Action, State

ERRNOS = ("ENOSPC", "EIO", "EROFS", "EACCES")
JOURNAL = ".fixpack/journal.json"


def _all(*roots: Path) -> list[tuple[dict, list[str]]]:
    """Every file of each root with its bytes and mode, and every folder (a rolled-back run leaves none it made)."""
    return [(snapshot(r), sorted(str(p.relative_to(r)) for p in r.rglob("*") if p.is_dir() and ".git" not in p.parts))
            for r in roots]


@pytest.fixture
def two(builder, tmp_path):
    """Both targets clean, a file of the user's beside them; returns the request, the roots, that file, and the
    snapshots of the three clean and applied."""
    req, demo, gaudi = two_target_pack(builder, tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    clean = _all(demo, gaudi, tmp_path / "pack") + [outside.read_bytes()]
    assert engine.apply(req).ok
    applied = _all(demo, gaudi, tmp_path / "pack") + [outside.read_bytes()]
    assert engine.revert(req).ok and _now(demo, gaudi, outside) == clean
    return req, demo, gaudi, outside, clean, applied


def _now(demo: Path, gaudi: Path, outside: Path) -> list:
    return _all(demo, gaudi, outside.parent / "pack") + [outside.read_bytes()]


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_write_failing_at_any_io_call_leaves_both_targets_as_they_were(two, monkeypatch, command):
    """Each I/O call of the run fails in turn (ENOSPC, EIO, EROFS, EACCES). A failure before the run committed leaves
    both targets, their manifests and state folders, as they were (exit 5, "nothing was written"), and one in the
    second target's write names the first as rolled back; a failure after it (removing the backups) leaves both
    written. Before this, a failure in the second target's write left the first written and recorded."""
    req, demo, gaudi, outside, clean, applied = two
    start, end = (clean, applied) if command == "apply" else (applied, clean)
    if command == "revert":
        assert engine.apply(req).ok
    report, exc = with_fault(monkeypatch, "1000000:EIO", lambda: getattr(engine, command)(req))
    assert exc is None and report.ok
    points = fsio.io_calls()
    assert (engine.revert if command == "apply" else engine.apply)(req).ok and _now(demo, gaudi, outside) == start
    failed = named = 0
    for n in range(1, points + 1):
        name = ERRNOS[n % len(ERRNOS)]
        report, exc = with_fault(monkeypatch, f"{n}:{name}", lambda: getattr(engine, command)(req))
        if exc is None:  # a call of the run once committed (a journal's or the backups' removal): both written
            assert report.ok
            notes = " ".join(n for t in report.targets for n in t.notes)
            if (demo / JOURNAL).exists() or (gaudi / JOURNAL).exists():  # the next run removes them, noted
                assert "this run is complete, but its journal" in notes and "the files as they are" in notes, notes
            st = engine.status(req)
            done = (State.APPLIED, Action.NONE) if command == "apply" else (State.ABSENT, Action.WOULD_APPLY)
            assert st.ok and all((f.state, f.action) == done for f in st.fixes), (n, st.as_dict())
        else:
            failed += 1
            assert isinstance(exc, EnvironmentProblem), (n, exc)
            assert any(w in str(exc) for w in ("nothing was written", "nothing in the target was changed",
                                               "the run was rolled back: the target holds its bytes from before")), n
            assert _now(demo, gaudi, outside) == start, (n, name, str(exc))  # both, every byte, every folder
            if str(gaudi) in str(exc).split(";")[0]:  # the second target's write failed: the first was put back
                named += 1
                assert f"Target demo ({demo}), written before it in this run, was rolled back too: nothing was " \
                       f"written" in str(exc), (n, exc)
            continue
        assert (engine.revert if command == "apply" else engine.apply)(req).ok
        assert _now(demo, gaudi, outside) == start, n
    assert failed > 10 and named > 3, (failed, named)
    assert getattr(engine, command)(req).ok and _now(demo, gaudi, outside) == end  # and the run, unfaulted, does both


def test_a_failed_put_back_of_the_first_target_is_exit_5_and_the_next_run_puts_both_back(two, monkeypatch):
    """Every I/O call from the N-th on fails (a file system gone read-only), for each N: the run is exit 5 or ends
    complete. Where the first target could not be put back, the error says so, that its journal is kept and what the
    next run does; status already shows neither fix applied, and the next revert puts both targets back."""
    req, demo, gaudi, outside, clean, applied = two
    with_fault(monkeypatch, "1000000:EIO", lambda: engine.apply(req))
    points = fsio.io_calls()
    assert engine.revert(req).ok and _now(demo, gaudi, outside) == clean
    kept = 0
    for n in range(1, points + 1):
        report, exc = with_fault(monkeypatch, f"{n}:EROFS+", lambda: engine.apply(req))
        states = {f.id: (f.state, f.action) for f in engine.status(req).fixes}
        assert states["core"] == states["plugin"], (n, states, exc)  # both applied, or both still to apply
        if exc is not None:
            assert exc.exit_code == 5 and isinstance(exc, EnvironmentProblem), (n, exc)
            assert states["core"] == (State.ABSENT, Action.WOULD_APPLY), (n, states)
            if "Putting back target demo" in str(exc):
                kept += 1
                when = "in this run" if "while committing the run" in str(exc) else "before it in this run"
                assert f"Putting back target demo ({demo}), written {when}, failed ({demo}/" in str(exc), (n, exc)
                assert f"its journal {demo / JOURNAL} is kept, and the next apply or revert rolls it back first" \
                    in str(exc) and (demo / JOURNAL).is_file()
        r = engine.revert(req)
        assert r.ok, (n, r.as_dict())
        assert _now(demo, gaudi, outside) == clean, (n, exc)
    assert kept > 3


def _cli(builder, demo: Path, gaudi: Path, command: str, fault_at: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)} | ({"FIXPACK_FAULT_AT": str(fault_at)} if fault_at else {})
    env.pop(fsio.IO_FAULT_ENV, None)
    return subprocess.run([sys.executable, "-m", "fixpack.cli", command, "--pack", str(builder.pack), "-p", "p1",
                           "--root", f"demo={demo}", "--root", f"vllm-gaudi={gaudi}"], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_run_killed_at_any_write_point_leaves_both_targets_or_neither(builder, two, command):
    """SIGKILL at each write point of a two-target run in turn (the first target written, the second not yet, or
    committed with its journals still there): status shows both fixes in one state, the next revert reverts both
    or neither, and the targets end as they were before; for apply the kills met both the half-written window
    (its first target's journal kept, uncommitted: rolled back) and the committed one (removed, the files kept).
    Before this, a kill between the two left the first target written and recorded, and the second not."""
    req, demo, gaudi, outside, clean, applied = two
    start = clean if command == "apply" else applied
    seen = set()
    for at in range(1, 100):
        if command == "revert":
            assert engine.apply(req).ok
        assert _now(demo, gaudi, outside) == start
        run = _cli(builder, demo, gaudi, command, at)
        if run.returncode == 0:
            break
        assert run.returncode == 137, run.stderr
        first_written = ("four" in (demo / "demo_pkg/mod.py").read_text()) == (command == "apply")
        second_written = ("seven" in (gaudi / GAUDI_RUNNER).read_text()) == (command == "apply")
        journals = [(r / JOURNAL).is_file() for r in (demo, gaudi)]
        if first_written and not second_written:
            seen.add("half")
        if (demo / JOURNAL).is_file() and json.loads((demo / JOURNAL).read_text()).get("group", {}).get("committed"):
            seen.add("committed")
        st = engine.status(req)
        states = {f.id: (f.state, f.action) for f in st.fixes}
        assert states["core"] == states["plugin"], (at, states, journals)
        r = engine.revert(req)
        assert r.ok, (at, r.as_dict())
        actions = {f.id: f.action for f in r.fixes}  # (none listed when the rollback left nothing to revert)
        assert actions.get("core") == actions.get("plugin"), (at, actions)
        assert _now(demo, gaudi, outside) == clean, at
        assert not any((root / ".fixpack").exists() for root in (demo, gaudi)), at
    else:
        raise AssertionError("the run never ran to its end")
    assert run.returncode == 0 and _now(demo, gaudi, outside) == (applied if command == "apply" else clean)
    assert seen == {"half", "committed"}, seen


def _killed_after_the_commit(builder, req, demo: Path, gaudi: Path) -> None:
    """An apply killed right after its commit: both targets written, both journals there, the first's committed."""
    for at in range(1, 100):
        assert engine.revert(req).ok
        assert _cli(builder, demo, gaudi, "apply", at).returncode == 137
        first = demo / JOURNAL
        if first.is_file() and json.loads(first.read_text())["group"]["committed"] and (gaudi / JOURNAL).is_file():
            return
    raise AssertionError("no write point is right after the commit")


def test_a_committed_runs_first_journal_goes_last_and_never_alone(builder, two):
    """Killed once committed, both journals still there: a run over the first target alone would remove its
    journal (the run's commit) and leave the second's to be rolled back, half of the run undone; it is refused,
    exit 3 (the targets' state, not I/O), naming the second root, nothing written. Over the second alone, or over both, the journals are removed
    and the files kept; status says so beforehand."""
    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    written = _now(demo, gaudi, outside)
    st = engine.status(req)
    assert all(f.state is State.APPLIED and f.action is Action.NONE for f in st.fixes), st.as_dict()
    assert "left its journal once its writes were complete (it was killed, or could not remove it): the next apply " \
        "or revert over every target of that run removes it" in " ".join(st.targets[0].notes)
    only = {"demo": {"only_targets": ("demo",)}, "vllm-gaudi": {"only_targets": ("vllm-gaudi",)}}
    for command in (engine.apply, engine.revert):
        with pytest.raises(MismatchError) as exc:
            command(engine.Request(pack_root=req.pack_root, profile="p1", roots=req.roots, **only["demo"]))
        assert exc.value.exit_code == 3 and f"and {gaudi} still holds that run's journal" in str(exc.value) and "Nothing was written" in \
            str(exc.value) and f"a --root for each of {demo}, {gaudi}" in str(exc.value)
        assert _now(demo, gaudi, outside) == written
    r = engine.apply(engine.Request(pack_root=req.pack_root, profile="p1", roots=req.roots, **only["vllm-gaudi"]))
    assert r.ok and not (gaudi / JOURNAL).exists() and (demo / JOURNAL).exists(), r.as_dict()
    assert "removed the journal of a run over several targets" in " ".join(r.targets[-1].notes)
    r = engine.apply(engine.Request(pack_root=req.pack_root, profile="p1", roots=req.roots, **only["demo"]))
    assert r.ok and not (demo / ".fixpack/journal").exists() and _now(demo, gaudi, outside) == applied, r.as_dict()
    _killed_after_the_commit(builder, req, demo, gaudi)  # both at once: the second's first, then the first's
    r = engine.apply(req)
    assert r.ok and _now(demo, gaudi, outside) == applied, r.as_dict()
    assert all("removed the journal of a run over several targets" in " ".join(t.notes) for t in r.targets)


@pytest.mark.parametrize("change", [{"index": 1, "committed": True}, {"id": "not hex"}, {"roots": ["relative", "/x"]},
                                    {"extra": 1}, {"id": "0" * 32 + "\n"}])
def test_a_damaged_group_in_a_journal_is_damaged_state(builder, two, change):
    """The journal's record of its run over several targets is untrusted input like the rest: only the first
    target's journal may say committed; an id of 32 hex digits, absolute roots. Exit 3, nothing written."""
    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    data = json.loads((gaudi / JOURNAL).read_text())
    data["group"].update(change)
    (gaudi / JOURNAL).write_text(json.dumps(data))
    before = _now(demo, gaudi, outside)
    with pytest.raises(FixpackError, match="'group' is not a run over several targets") as exc:
        engine.apply(req)
    assert exc.value.exit_code == 3 and _now(demo, gaudi, outside) == before


def test_a_journal_whose_group_names_another_root_as_its_own_is_damaged_state(builder, two, tmp_path):
    """A fresh user: a journal whose 'group' named other roots (planted, or a tree copied or moved while it held a
    run's journal), index 0 and committed, was obeyed: the next run removed it as that of a complete run, with no
    rollback. Its own place in the group must be this root: exit 3, nothing written."""
    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    data = json.loads((demo / JOURNAL).read_text())
    data["group"]["roots"] = [str(tmp_path / "x"), str(tmp_path / "y")]
    (demo / JOURNAL).write_text(json.dumps(data))
    before = _now(demo, gaudi, outside)
    with pytest.raises(FixpackError, match=f"'group' names {tmp_path / 'x'} as this target, not {demo}") as exc:
        engine.apply(req)
    assert exc.value.exit_code == 3 and _now(demo, gaudi, outside) == before
    out = tmp_path / "image.cdx.json"  # sbom said the next apply rolls it back, which that apply refuses
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "sbom", "--pack", str(req.pack_root), "-p", "p1",
                        "--root", f"demo={demo}", "--root", f"vllm-gaudi={gaudi}", "--out", str(out)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 3 and f"'group' names {tmp_path / 'x'} as this target" in " ".join(r.stderr.split()), \
        r.stderr
    assert not out.exists() and _now(demo, gaudi, outside) == before


def test_a_journal_read_through_a_bind_mount_of_its_root_is_its_own(builder, two, tmp_path):
    """A fresh user: a run killed with --root demo=BIND (a bind mount of the tree), then run again with the tree's own
    path, was refused as a tree copied or moved. The group's root is this folder under another path: it is its own."""
    req, demo, gaudi, outside, clean, applied = two
    bind = tmp_path / "bind"
    bind.mkdir()
    if subprocess.run(["mount", "--bind", str(demo), str(bind)], capture_output=True).returncode != 0:
        pytest.skip("no bind mount here (needs root and mount rights)")
    try:
        via = engine.Request(pack_root=req.pack_root, profile="p1", roots={**req.roots, "demo": bind})
        _killed_after_the_commit(builder, via, bind, gaudi)
        r = engine.apply(req)  # the tree's own path now
        assert r.ok and _now(demo, gaudi, outside) == applied, r.as_dict()
    finally:
        subprocess.run(["umount", str(bind)], check=True)


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_ctrl_c_or_sigterm_once_the_first_target_is_written_rolls_it_back(two, monkeypatch, signal_name):
    """A Ctrl-C (or SIGTERM, raised as Ctrl-C is: fixpack.interrupts) that lands as the first target's real
    transaction returns, before the second is begun: the first is put back, exit 5 (143 for SIGTERM), nothing
    written. Before this, the first stayed written and recorded, and the interrupt went up as a traceback."""
    from fixpack import writeall
    from fixpack.interrupts import Term

    req, demo, gaudi, outside, clean, applied = two
    real = writeall.write_transaction

    def signal_once_the_first_is_written(root, *args, **kwargs):  # type: ignore[no-untyped-def]
        note = real(root, *args, **kwargs)
        if root == demo:
            raise Term() if signal_name == "SIGTERM" else KeyboardInterrupt
        return note
    monkeypatch.setattr(writeall, "write_transaction", signal_once_the_first_is_written)
    try:
        engine.apply(req)
        got: BaseException | None = None
    except BaseException as exc:  # (a KeyboardInterrupt that went up would end pytest itself)
        got = exc
    assert _now(demo, gaudi, outside) == clean
    assert isinstance(got, FixpackError), repr(got)
    how = "terminated (SIGTERM)" if signal_name == "SIGTERM" else "interrupted (Ctrl-C, SIGINT)"
    assert str(got) == (f"{how} while writing the run's targets. Target demo ({demo}), written in this run, was "
                        f"rolled back: nothing was written")
    assert got.exit_code == (143 if signal_name == "SIGTERM" else 5)


def _only(req, name: str, **roots: Path) -> engine.Request:
    return engine.Request(pack_root=req.pack_root, profile="p1", roots={**req.roots, **roots}, only_targets=(name,))


def _step(said: str, start: str) -> str:
    """The command of a refusal's step that begins with ``start`` (up to the ';' that ends that step)."""
    return said[said.index(start) + len(start):].split("; ", 1)[0]


@pytest.mark.parametrize("how", ["moved", "removed", "damaged"])
def test_a_committed_run_whose_first_journal_cannot_be_read_is_neither_undone_nor_removed(builder, two, tmp_path,
                                                                                            how):
    """Killed once committed, both journals there; then the first tree is moved away, removed, or its journal
    damaged. A run over the second target read its journal, found no first journal to say the run was complete,
    and rolled the second back: half of a complete run undone. Whether that run was complete cannot be told, so
    apply, revert and status over the second refuse (exit 3, nothing written), naming both roots and the steps;
    the first tree put back, a run over both removes the journals, the files as they are; with no tree to put back,
    the step for a run known complete leaves the second as written."""
    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    moved = tmp_path / "moved"
    demo.rename(moved)
    if how == "removed":
        moved = tmp_path / "gone"  # (nothing there: only the second target and the file beside it are compared)
    elif how == "damaged":
        moved.rename(demo)
        (demo / JOURNAL).write_text("{not json")
        moved = demo
    before = _now(moved, gaudi, outside) if how != "removed" else _all(gaudi) + [outside.read_bytes()]

    def now() -> list:
        return _now(moved, gaudi, outside) if how != "removed" else _all(gaudi) + [outside.read_bytes()]
    for command in (engine.apply, engine.revert, engine.status):
        with pytest.raises(FixpackError) as exc:
            command(_only(req, "vllm-gaudi"))
        said = " ".join(str(exc.value).split())
        assert exc.value.exit_code == 3 and now() == before, said
        assert f"the state in {gaudi / JOURNAL} is damaged: whether the run over several targets that left it was " \
               f"complete cannot be told" in said, said
        assert f"target 2 of a run over several targets ({demo}, {gaudi})" in said and f"{demo / JOURNAL}" in said
        assert "(nothing was written)" in said and "unfinished run's journal" not in said, said
        assert f"a --root for each of {demo}, {gaudi}" in said, said
    if how == "moved":  # put back where it was, a run over both: the journals removed, the files as they are
        moved.rename(demo)
        r = engine.apply(req)
        assert r.ok and _now(demo, gaudi, outside) == applied, r.as_dict()
    elif how == "removed":  # the user knows the run was complete: the step's command, then a run over the second
        subprocess.run(["bash", "-c", _step(said, "remove this journal, the files as they are: ")], check=True)
        r = engine.apply(_only(req, "vllm-gaudi"))
        assert r.ok and _all(gaudi) == applied[1:2] and not (gaudi / ".fixpack/journal").exists(), r.as_dict()
    else:  # a fresh user: the step for a run known complete left the first's damaged journal, which a run over both
        # then called an unfinished run's and advised putting that target back: half of the run undone. It removes
        # both journals now, the first's last, and a run over both finds the files as they are
        assert "remove this journal and the first target's, the files as they are: " in said, said
        subprocess.run(["bash", "-c", _step(said, "remove this journal and the first target's, the files as they "
                                                  "are: ")], check=True)
        r = engine.apply(req)
        assert r.ok and _now(demo, gaudi, outside) == applied, r.as_dict()


def test_a_run_never_committed_is_rolled_back_target_by_target(builder, two):
    """Killed before the commit, both journals there: a run over the first target alone rolls it back (its journal
    goes); a run over the second then finds the first tree there with no journal of that run, which can only be
    one that was not complete (a committed first journal goes only after every other), and rolls it back too.
    (So it was before: this keeps it so.)"""
    req, demo, gaudi, outside, clean, applied = two
    for at in range(1, 100):
        assert engine.revert(req).ok
        assert _cli(builder, demo, gaudi, "apply", at).returncode == 137
        first = demo / JOURNAL
        if (gaudi / JOURNAL).is_file() and not json.loads(first.read_text())["group"]["committed"]:
            break
    else:
        raise AssertionError("no write point with both journals uncommitted")
    assert engine.revert(_only(req, "demo")).ok and not (demo / ".fixpack").exists()
    assert (gaudi / JOURNAL).is_file()
    r = engine.revert(_only(req, "vllm-gaudi"))
    assert r.ok and _now(demo, gaudi, outside) == clean, r.as_dict()


def test_a_first_journal_this_user_may_not_read_is_exit_5_saying_what_to_do(builder, two, monkeypatch):
    """Killed once committed; the first target's journal cannot be read (EACCES): the second's run cannot tell
    whether to roll back or remove its journal. Exit 5 (the environment: a permission, as for any file this user
    may not read), naming the file, the errno, both roots, that nothing was written and what to do; before this it
    said only "cannot read (Permission denied); run as a user who may read every target of the run"."""
    import errno

    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    before = _now(demo, gaudi, outside)
    real_open, denied = os.open, str(demo / JOURNAL)

    def no_read(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path) == denied:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, "open", no_read)
    for command in (engine.apply, engine.revert):
        with pytest.raises(EnvironmentProblem) as exc:
            command(_only(req, "vllm-gaudi"))
        said = str(exc.value)
        assert exc.value.exit_code == 5 and _now(demo, gaudi, outside) == before, said
        assert said.startswith(f"{demo / JOURNAL}: cannot be read: Permission denied (EACCES). It is the first "
                               f"target of the run over several targets ({demo}, {gaudi}) whose journal is in "
                               f"{gaudi / JOURNAL}"), said
        assert "Nothing was written. Run as a user who may read" in said and said.endswith("and run again"), said
    monkeypatch.undo()
    r = engine.apply(req)
    assert r.ok and _now(demo, gaudi, outside) == applied, r.as_dict()


def test_a_moved_committed_first_journals_steps_say_its_run_was_complete(builder, two, tmp_path):
    """Killed once committed, then the first tree moved and given by its new path: the journal is refused as a
    moved tree's (exit 3). Its steps said "an unfinished run's journal ... may be half-written" and to put the
    target back to its clean release, though its record says the run was complete. Now they say so, and their
    by-hand command (the other target's journal first) leaves both targets as written."""
    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    moved = tmp_path / "moved"
    demo.rename(moved)
    before = _now(moved, gaudi, outside)
    with pytest.raises(FixpackError) as exc:
        engine.apply(_only(req, "demo", demo=moved))
    said = " ".join(str(exc.value).split())
    assert exc.value.exit_code == 3 and _now(moved, gaudi, outside) == before, said
    assert f"'group' names {demo} as this target, not {moved}" in said, said
    assert "unfinished run's journal" not in said and "half-written" not in said, said
    assert f"its record says it is one of a run over several targets ({demo}, {gaudi}) that was complete " \
           f"(committed: {demo / JOURNAL} says so), so {moved} holds that run's result" in said, said
    by_hand = _step(said, "remove them by hand, the other targets first: ")
    assert by_hand.index(str(gaudi)) < by_hand.index(str(moved)), by_hand
    subprocess.run(["bash", "-c", by_hand], check=True)
    r = engine.apply(engine.Request(pack_root=req.pack_root, profile="p1", roots={**req.roots, "demo": moved}))
    assert r.ok and _now(moved, gaudi, outside) == applied, r.as_dict()
    assert not (moved / ".fixpack/journal.json").exists() and not (gaudi / ".fixpack/journal.json").exists()


def test_a_damaged_committed_first_journal_is_refused_before_any_other_is_touched(builder, two):
    """Killed once committed; the first target's journal then damaged (an entry's sha256 no longer its backup's),
    its record still saying committed. A run over both removed the second's journal (its run complete, said the
    first's record), then refused the first's: a refusal that wrote. Every journal is now checked before any is
    obeyed (exit 3, every byte of both as it was), and the steps say what the record says: that run complete."""
    req, demo, gaudi, outside, clean, applied = two
    _killed_after_the_commit(builder, req, demo, gaudi)
    data = json.loads((demo / JOURNAL).read_text())
    data["entries"][0]["sha256"] = "0" * 64
    (demo / JOURNAL).write_text(json.dumps(data))
    before = _now(demo, gaudi, outside)
    with pytest.raises(FixpackError) as exc:
        engine.apply(req)
    said = " ".join(str(exc.value).split())
    assert exc.value.exit_code == 3 and _now(demo, gaudi, outside) == before, said
    assert "does not match its sha256" in said and "unfinished run's journal" not in said, said
    assert f"that was complete (committed: {demo / JOURNAL} says so), so {demo} holds that run's result" in said
