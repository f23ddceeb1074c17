"""A suggested command names fixpack so that it runs as written: ``fixpack`` only when the one on PATH is
this install's script, else this interpreter with ``-m fixpack.cli`` (and the checkout on PYTHONPATH)."""

import os
import subprocess
import sys
from pathlib import Path

from fixpack import progname


def _script(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "fixpack").write_text("#!/bin/sh\nexit 0\n")
    (folder / "fixpack").chmod(0o755)


def test_fixpack_on_path_is_named_only_when_it_is_this_installs(tmp_path, monkeypatch):
    _script(tmp_path / "other-venv/bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'other-venv/bin'}{os.pathsep}/usr/bin:/bin")
    assert progname.program().endswith(f"{sys.executable} -m fixpack.cli")  # another install's fixpack
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "other-venv"))
    assert progname.program() == "fixpack"


def test_the_rendered_program_runs_from_another_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FIXPACK_PACK")}
    env["PATH"] = "/usr/bin:/bin"  # no fixpack on it
    r = subprocess.run(["bash", "-c", progname.command("--version")], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0 and "fixpack" in r.stdout, r.stderr
