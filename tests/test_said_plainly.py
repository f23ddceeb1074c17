"""Two lines that said something else than what is true: fetch's line about the copy it printed had no label
("0.30.0 @ g... (...)"), and a fix that created a file, tampered by added lines, said that file "does not match
the content the patch deletes" (the patch deletes nothing: it created the file)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

from fixpack import engine


def test_fetch_labels_the_version_and_commit_it_found(builder):
    _release, source = builder.git_release({"demo_pkg/a.py": "x = 1\n"})
    builder.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    builder.profile(["one"], extra_targets=source)
    done = subprocess.run([sys.executable, "-m", "fixpack.cli", "fetch", "--pack", str(builder.pack), "-p", "p1",
                           "--color", "never"], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout.startswith("demo="), done.stderr
    said = [ln for ln in done.stderr.splitlines() if not ln.startswith("fixpack: ")]
    root = done.stdout.strip().split("=", 1)[1]
    assert said == [f"  demo release copy: version 1.0, commit {builder.commit} (read from: git HEAD of {root}: "
                    f"{builder.commit}; {root}/demo_pkg/_version.py: __version__ = '1.0'; {root}/demo_pkg/_version.py: "
                    f"__commit_id__ = 'gabcdef1234', not git HEAD's (the root is a git repository of its own: its HEAD "
                    f"is taken, as a checkout's version module may be stale))"], said

def test_a_created_file_with_lines_added_says_so(builder):
    builder.add_fix("one", {"demo_pkg/new.py": None}, {"demo_pkg/new.py": "a = 1\nb = 2\n"})
    builder.profile(["one"])
    builder.lock(builder.tree("clean", {}))
    site = builder.tree("site", {})
    assert engine.apply(builder.request(site)).ok
    (site / "demo_pkg/new.py").write_text("a = 1\nb = 2\nc = 3\n")
    for run in (engine.status, engine.revert):
        said = " ".join(run(builder.request(site)).fix("one").messages)
        assert "demo_pkg/new.py: holds more than the file the patch creates (lines added since it was applied)" \
            in said and "deletes" not in said, said


def test_fetch_never_hands_out_a_copy_fixes_were_applied_to(builder):
    """`fixpack apply --root demo=$(fixpack fetch ...)` patched the cached copy: the next fetch clones it again
    (said on stderr), prints the same NAME=ROOT, and that copy is the release again."""
    _release, source = builder.git_release({"demo_pkg/a.py": "x = 1\n"})
    builder.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    builder.profile(["one"], extra_targets=source)
    cmd = [sys.executable, "-m", "fixpack.cli", "fetch", "--pack", str(builder.pack), "-p", "p1", "--color", "never"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.run(cmd, env=env, capture_output=True, text=True)
    root = first.stdout.strip().split("=", 1)[1]
    from pathlib import Path
    builder.lock(Path(root))
    assert engine.apply(builder.request(Path(root))).ok and (Path(root) / ".fixpack").exists()
    again = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
    assert "no longer the release copy" in again.stderr and "cloning it again" in again.stderr, again.stderr
    assert (Path(root) / "demo_pkg/a.py").read_text() == "x = 1\n" and not (Path(root) / ".fixpack").exists()
