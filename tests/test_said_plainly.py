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
                    f"{builder.commit}; {root}/demo_pkg/_version.py: __version__ = '1.0')"], said

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
