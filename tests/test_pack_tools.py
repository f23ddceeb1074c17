"""Maintainer helpers: refresh (regenerate a patch against its chain) and deterministic patches."""

from conftest import numbered
from fixpack import engine
from fixpack.evaluate import State, decide
from fixpack.loader import load_pack
from fixpack.pack_tools import refresh, stale_patches
from fixpack.tree import Tree

MOD = "demo_pkg/mod.py"


def test_refresh_turns_drift_into_exact_and_is_idempotent(builder):
    base = numbered(60)
    clean = builder.tree("clean", {MOD: base})
    first = base.replace("line 10\n", "line 10\nnew a\nnew b\nnew c\n")
    builder.add_fix("first", {MOD: base}, {MOD: first})
    # written against the clean file, not against "first": applies with an offset of +3
    builder.add_fix("second", {MOD: base}, {MOD: base.replace("line 40\n", "forty\n")})
    builder.profile(["first", "second"])
    pack = load_pack(builder.pack)
    tree = Tree(clean)
    tree.adopt(decide(pack.fixes["first"], tree, None, False).forward.tree)
    ev = decide(pack.fixes["second"], tree, None, False)
    assert ev.state is State.DRIFTED and ev.offsets[0].offset == 3
    path = refresh(builder.pack, "p1", "second", clean)
    once = path.read_bytes()
    assert "@@ -40,7 +40,7 @@" in once.decode() or "@@ -40," in once.decode()
    builder.lock(clean)
    r = engine.apply(builder.request(clean, dry_run=True, strict=True))
    assert r.ok and r.fix("second").state == "absent"
    refresh(builder.pack, "p1", "second", clean)
    assert path.read_bytes() == once
    assert stale_patches(load_pack(builder.pack)) == [path.parent.parent / "first" / "0001-change.patch"]
