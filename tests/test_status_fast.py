"""status's fast path (fixpack.status_fast): when the files hold what the lock says the recorded chain leaves
there, the report is the full evaluation's, byte for byte, without a hunk placed; whenever they do not, the
full evaluation runs."""

import pytest
from conftest import numbered

from fixpack import engine, evaluate

MOD = "demo_pkg/mod.py"
OTHER = "demo_pkg/other.py"


@pytest.fixture
def pack(builder):
    """a (default) and mid (opt-in) and z (default) on one file, mid between them; o (opt-in) on another."""
    base = numbered(40)
    clean = builder.tree("clean", {MOD: base, OTHER: numbered(10)})
    a = base.replace("line 3\n", "three\n")
    builder.add_fix("a", {MOD: base}, {MOD: a})
    m = a.replace("line 20\n", "twenty\n")
    builder.add_fix("mid", {MOD: a}, {MOD: m}, opt_in=True)
    builder.add_fix("z", {MOD: m}, {MOD: m.replace("line 37\n", "thirty-seven\n")})
    builder.add_fix("o", {OTHER: numbered(10)}, {OTHER: numbered(10).replace("line 5\n", "five\n")}, opt_in=True)
    builder.profile(["a", "z"], ["mid", "o"])
    builder.lock(clean)
    return builder, builder.tree("image", {MOD: base, OTHER: numbered(10)})


def both(monkeypatch, b, target):
    """status through the fast path where it applies, and through the full evaluation."""
    fast = engine.status(b.request(target)).as_dict()
    with monkeypatch.context() as m:
        m.setattr(engine, "locked_files", lambda *a: None)
        full = engine.status(b.request(target)).as_dict()
    return fast, full


def no_evaluation(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a hunk was placed")
    monkeypatch.setattr(evaluate, "run_pass", refuse)
    monkeypatch.setattr(evaluate, "decide", refuse)


def test_a_fully_applied_target_needs_no_evaluation(monkeypatch, pack):
    b, target = pack
    assert engine.apply(b.request(target, all_opt_in=True)).ok
    fast, full = both(monkeypatch, b, target)
    assert fast == full and fast["ok"] and {f["state"] for f in fast["fixes"]} == {"applied"}
    no_evaluation(monkeypatch)
    assert engine.status(b.request(target)).as_dict() == full


@pytest.mark.parametrize("opt_ins", [(), ("o",), ("mid",)])
def test_part_of_the_chain_and_a_hand_edit_get_the_full_evaluation(monkeypatch, pack, opt_ins):
    """Without mid, z's post-image is not the lock's (mid sits before it): the full evaluation; without o,
    the chain status selects is not what is recorded; a hand edit is tampering either way."""
    b, target = pack
    assert engine.apply(b.request(target, opt_ins=opt_ins)).ok
    fast, full = both(monkeypatch, b, target)
    assert fast == full and fast["ok"]
    (target / MOD).write_text((target / MOD).read_text().replace("line 30\n", "edited\n"))
    fast, full = both(monkeypatch, b, target)
    assert fast == full and "tampered" in {f["state"] for f in fast["fixes"]}


def test_a_manifest_that_does_not_match_the_lock_gets_the_full_evaluation(monkeypatch, pack):
    b, target = pack
    assert engine.apply(b.request(target, all_opt_in=True)).ok
    mpath = target / ".fixpack/demo.manifest.json"
    mpath.write_text(mpath.read_text().replace('"state": "applied"', '"state": "upstreamed"', 1))
    fast, full = both(monkeypatch, b, target)
    assert fast == full
