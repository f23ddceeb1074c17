"""Concurrent storms and kill -9 sweeps through the CLI, as separate processes, on a small target.

Bounded in count (a fixed seed, a few rounds) so CI stays fast; FIXPACK_STRESS=1 runs bigger ones.
tools/stress.py holds the drivers (and runs them on a release copy)."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import REPO, numbered

sys.path.insert(0, str(REPO / "tools"))
import stress

MOD = "demo_pkg/mod.py"
BIG = os.environ.get("FIXPACK_STRESS") == "1"


@pytest.fixture
def small(builder):
    base = numbered(40)
    clean = builder.tree("clean", {MOD: base, "demo_pkg/b.py": base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("two", {MOD: base, "demo_pkg/b.py": base},
                    {MOD: base.replace("line 30\n", "thirty\n"), "demo_pkg/b.py": base.replace("line 9\n", "nine\n"),
                     "demo_pkg/new/c.py": "c\n"})
    builder.profile(["one", "two"])
    builder.lock(clean)
    return stress.Target(builder.pack, "p1", "demo", fork=not BIG), clean


def test_storms_of_concurrent_mixed_runs_are_serialized(small, tmp_path):
    """Every run exits 0 (they wait for one another), every round ends clean or applied with no journal
    or temp file, and the last revert gives back the clean bytes (no .fixpack/ left)."""
    t, clean = small
    rounds, runs = (30, 12) if BIG else (6, 8)
    result = stress.storm(t, clean, rounds, runs, seed=12, work=tmp_path)
    assert result.runs == rounds * runs and result.rounds == rounds
    assert result.anomalies == []
    assert result.exit_codes == {"0": rounds * runs}


def test_a_killed_revert_is_finished_by_the_next_one_with_nothing_left(small, tmp_path):
    """Kill revert at every write point: the next revert ends byte for byte at the clean copy, with no
    state folder, journal or temp file left (apply's kill sweep is in test_safety)."""
    t, clean = small
    combos = stress.KILL_COMBOS if BIG else (("revert", "revert"),)
    result = stress.kill_sweep(t, clean, tmp_path, combos=combos)
    assert result.points >= 6 * len(combos)
    assert result.wrong == []
