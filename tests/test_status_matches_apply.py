"""`status` reports what `apply` would do with the same arguments: for each argument combination and
image, status --json and apply --dry-run --json agree on every fix's state, action and selection and
on the exit code; the opt-ins a run does not name are listed by status as skipped (not selected)."""

import json

import pytest
from click.testing import CliRunner
from conftest import numbered

from fixpack import engine
from fixpack.cli import main

MOD = "demo_pkg/mod.py"


@pytest.fixture
def setup(builder):
    base = numbered(40)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("first", {MOD: base}, {MOD: base.replace("line 5\n", "five\n")})
    builder.add_fix("extra", {"demo_pkg/x.py": None}, {"demo_pkg/x.py": "x = 1\n"}, opt_in=True)
    builder.add_fix("later", {MOD: base}, {MOD: base.replace("line 30\n", "thirty\n")}, opt_in=True)
    builder.profile(["first"], ["extra", "later"])
    builder.lock(clean)
    return builder, base


def _json(b, root, command, args):
    extra = ["--dry-run"] if command == "apply" else []
    r = CliRunner().invoke(main, [command, "--pack", str(b.pack), "--profile", "p1", "--root", f"demo={root}",
                                  "--json", *extra, *args])
    doc = json.loads(r.stdout)
    return r.exit_code, {f["id"]: (f["state"], f["action"], f["selected"]) for f in doc["fixes"]}


IMAGES = {
    "clean": lambda b, root: None,
    "applied": lambda b, root: engine.apply(b.request(root)),
    "applied-with-extra": lambda b, root: engine.apply(b.request(root, opt_ins=("extra",))),
    "drifted": lambda b, root: (root / MOD).write_text("header\n" + (root / MOD).read_text()),
}
ARGS = [[], ["extra"], ["later"], ["extra", "later"], ["--all-opt-in"], ["--strict"], ["--strict", "extra"]]


@pytest.mark.parametrize("image", sorted(IMAGES))
def test_status_agrees_with_apply_dry_run(setup, image):
    b, base = setup
    root = b.tree(f"image-{image}", {MOD: base})
    IMAGES[image](b, root)
    for args in ARGS:
        code_a, apply_fixes = _json(b, root, "apply", args)
        code_s, status_fixes = _json(b, root, "status", args)
        assert code_s == code_a, (image, args)
        for fid, seen in apply_fixes.items():
            assert status_fixes[fid] == seen, (image, args, fid)
        for fid in set(status_fixes) - set(apply_fixes):
            assert status_fixes[fid] == ("skipped", "none", False), (image, args, fid)
        named = {a for a in args if not a.startswith("-")} | ({"extra", "later"} if "--all-opt-in" in args else set())
        assert {f for f, (_s, _a, sel) in status_fixes.items() if sel} == {"first"} | named, (image, args)


def test_a_component_on_a_source_tree_status_refuses_as_apply_does(builder):
    # status said "would-apply", exit 0, where apply --dry-run exits 3: a component needs site-packages
    from test_components import setup_pack

    setup_pack(builder, None)
    clean = builder.base / "clean"
    code_a, _ = _exit(builder, clean, "apply", ["tiny-plug"])
    code_s, said = _exit(builder, clean, "status", ["tiny-plug"])
    assert code_a == code_s == 3 and "cannot install component tiny-plug" in said


def _exit(b, root, command, args):
    extra = ["--dry-run"] if command == "apply" else []
    r = CliRunner().invoke(main, [command, "--pack", str(b.pack), "--profile", "p1", "--root", f"demo={root}",
                                  "--json", *extra, *args])
    return r.exit_code, json.loads(r.stdout)["error"]
