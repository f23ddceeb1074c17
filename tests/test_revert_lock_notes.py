"""Revert without a usable lock says so on every found target (it said so on the first one only), in the
error's own lines: a pack error's list of problems was flattened into one line with '; ', where apply and
status print it a problem a line."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, snapshot

from fixpack import engine


def test_every_target_says_revert_went_on_without_the_lock_in_the_errors_own_lines(builder):
    builder.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    builder.add_fix("two", {"other_pkg/b.py": "y = 1\n"}, {"other_pkg/b.py": "y = 2\n"}, target="other")
    builder.add_fix("three", {"demo_pkg/c.py": "z = 1\n"}, {"demo_pkg/c.py": "z = 2\n"}, opt_in=True)
    other = '[targets.other]\npackage = "other_pkg"\nversion = "1.0"\ncommit = "abcdef12"\n'
    builder.profile(["one", "two"], ["three"], extra_targets=other)

    def roots(name: str) -> dict:
        tree = builder.tree(name, {"demo_pkg/a.py": "x = 1\n", "demo_pkg/c.py": "z = 1\n"})
        (tree / "other_pkg").mkdir()
        (tree / "other_pkg/b.py").write_text("y = 1\n")
        (tree / "other_pkg/_version.py").write_text((tree / "demo_pkg/_version.py").read_text())
        return {"demo": tree, "other": tree}  # one root, as a site-packages holds both

    def request(where: dict, **kw: object) -> engine.Request:
        return engine.Request(pack_root=builder.pack, profile="p1", roots=where, **kw)  # type: ignore[arg-type]

    engine.write_lock(request(roots("clean")))
    image = roots("image")
    before = snapshot(image["demo"])
    assert engine.apply(request(image)).ok
    patch = builder.pack / "fixes/three/0001-change.patch"  # an opt-in not applied: only the lock check reads it
    patch.write_text(patch.read_text().replace("@@ -1 +1 @@", "@@ -1,3 +1 @@"))
    args = ["--pack", str(builder.pack), "-p", "p1", "--root", f"demo={image['demo']}", "--root",
            f"other={image['other']}", "--color", "never"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    said = subprocess.run([sys.executable, "-m", "fixpack.cli", "revert", *args], env=env, capture_output=True,
                          text=True)
    assert said.returncode == 0 and snapshot(image["demo"]) == before, said.stdout + said.stderr
    lines = said.stdout.splitlines()
    head = ("  - revert went on without the lock (it places every hunk by search): the pack could not be "
            "checked against it: the pack at ")
    for name in ("demo", "other"):
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"target {name}: found"))
        assert lines[at + 1].startswith(head) and lines[at + 1].endswith(" is invalid: 1 problem"), lines
        assert lines[at + 2].startswith(f"      - {patch}:14: the hunk that starts at line 12 ends early"), lines
