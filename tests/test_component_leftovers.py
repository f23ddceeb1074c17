"""What is left of a component, removed by a printed step so that the root is as before the install, byte for
byte. A run killed while it installed one, then its journal damaged: the steps name the component's files and
its ``.dist-info`` too, so that apply installs it again and revert gives the release back (they named only the
fixes' files; apply then refused: the ``.dist-info`` "is there already (installed by pip?)"). A tampered
component's step removes its bytecode whatever Python wrote it and whenever (it named the ``.pyc`` files there
when it was printed: bytecode written since, by the image's Python, kept its ``__pycache__`` folders)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, snapshot
from test_components import _next_step, component_table, plugin_wheel, setup_pack  # noqa: F401 (a fixture)

from fixpack import engine

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _site(builder, wheel: Path) -> tuple[list[str], Path]:
    """A pack whose profile fetches its release from git, one fix and the component; a site-packages image."""
    release, source = builder.git_release({"demo_pkg/a.py": "x = 1\n"})
    builder.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    prof = builder.profile(["one"], extra_targets=source)
    shutil.copy(wheel, builder.pack / wheel.name)
    prof.write_text(prof.read_text() + component_table(wheel.name))
    builder.lock(release)
    site = builder.tree("site", {"demo_pkg/a.py": "x = 1\n", "demo_pkg-1.0.dist-info/METADATA": "Name: demo_pkg\n"})
    return ["--pack", str(builder.pack), "-p", "p1", "--root", f"demo={site}"], site


def _cli(*args: str, fault_at: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**ENV, "FIXPACK_FAULT_AT": str(fault_at)} if fault_at else {k: v for k, v in ENV.items()
                                                                         if k != "FIXPACK_FAULT_AT"}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("fault_at", [6, 11])
def test_a_damaged_journal_of_a_killed_component_install_names_its_files(builder, plugin_wheel, tmp_path,  # noqa: F811
                                                                         fault_at):
    args, site = _site(builder, plugin_wheel)
    before = snapshot(site)
    assert _cli("apply", *args, "tiny-plug", fault_at=fault_at).returncode == 137
    assert list(site.glob("tiny_plug*")), "killed before any file of the component was written"
    (site / ".fixpack/journal.json").write_text('{"entries": [')  # damaged: cut short
    (site / "tiny_plug").mkdir(exist_ok=True)
    (site / "tiny_plug/.__init__.py.fixpack-tmp").write_text("half\n")  # killed mid-write: its steps remove it
    said = _cli("apply", *args, "tiny-plug")
    message = " ".join(said.stderr.split())
    assert said.returncode == 3 and "is damaged" in message, said.stderr
    written = [p.relative_to(site).as_posix() for p in site.glob("tiny_plug/**/*.py")]
    assert written or fault_at == 6, "the package files were not reached"
    assert "tiny_plug-0.3.0.dist-info" in message and all(p in message for p in written), message
    one = message.split("In this order: 1. ", 1)[1].split("; 2. ", 1)[0].split(": ", 1)[1]
    two = message.split("; 2. ", 1)[1].split("; 3. ", 1)[0].split(": ", 1)[1].split(" (a manifest stays", 1)[0]
    for step in (one, two):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", step], cwd=tmp_path, env=ENV, capture_output=True,
                              text=True)
        assert done.returncode == 0, (step, done.stderr)
    assert not (site / "tiny_plug").exists(), "the steps left the component's folder"
    again = _cli("apply", *args, "tiny-plug")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (site / "tiny_plug/sub/kern.py").read_text() == "SCALE = 2\n"
    assert _cli("revert", *args).returncode == 0
    assert snapshot(site) == before and not (site / ".fixpack").exists()


def test_a_tampered_component_s_step_removes_bytecode_written_after_it_was_printed(builder, plugin_wheel,  # noqa: F811
                                                                                  tmp_path):
    _pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    (site / "tiny_plug/sub/kern.py").write_text("SCALE = 3\n")
    st = engine.status(builder.request(site))
    assert st.fix("tiny-plug").state.value == "tampered"
    step = _next_step(st, "tiny-plug")
    command = step.split(": (", 1)[1].rsplit("); then run", 1)[0]
    # the image's Python imports the plugin, another one compiled it: after the step was printed
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "tiny_plug")], check=True)
    (site / "tiny_plug/sub/__pycache__/kern.cpython-399.opt-1.pyc").write_bytes(b"other python")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    assert not (site / "tiny_plug").exists(), sorted(str(p) for p in (site / "tiny_plug").rglob("*"))
    assert engine.revert(builder.request(site)).ok
    assert snapshot(site) == before and sorted(p.name for p in site.iterdir()) == ["demo_pkg", "demo_pkg-1.0.dist-info"]


def test_a_damaged_journal_s_steps_leave_a_pip_installed_copy_alone(builder, plugin_wheel):  # noqa: F811
    """The same package installed by pip (its INSTALLER says so) is not ours: the steps do not remove it."""
    args, site = _site(builder, plugin_wheel)
    (site / "tiny_plug").mkdir()
    (site / "tiny_plug/__init__.py").write_text("def register():\n    return 'tiny'\n")
    (site / "tiny_plug-0.3.0.dist-info").mkdir()
    (site / "tiny_plug-0.3.0.dist-info/INSTALLER").write_text("pip\n")
    assert _cli("apply", *args, fault_at=3).returncode == 137
    (site / ".fixpack/journal.json").write_text('{"entries": [')
    said = _cli("status", *args)
    assert said.returncode == 3 and "In this order: 1. " in said.stderr, said.stderr
    assert "tiny_plug" not in said.stderr and "components" not in said.stderr, said.stderr


@pytest.mark.parametrize("command", ["apply", "status", "revert"])
def test_a_planted_journal_never_removes_a_pip_installed_component_s_file(builder, plugin_wheel, command):  # noqa: F811
    """The component's package installed by pip (its INSTALLER says so), and a journal saying its
    ``__init__.py`` did not exist before a run: the rollback deleted pip's file and revert said "nothing to do",
    exit 0. apply refuses to install over such a copy, so no run of this profile wrote that file: damaged
    state, exit 3, every byte kept."""
    args, site = _site(builder, plugin_wheel)
    (site / "tiny_plug").mkdir()
    (site / "tiny_plug/__init__.py").write_text("def register():\n    return 'tiny'\n")
    (site / "tiny_plug-0.3.0.dist-info").mkdir()
    (site / "tiny_plug-0.3.0.dist-info/INSTALLER").write_text("pip\n")
    (site / ".fixpack/journal").mkdir(parents=True)
    (site / ".fixpack/journal.json").write_text(
        '{"dirs": [], "entries": [{"backup": 0, "existed": false, "mode": null, "owner": null, '
        '"path": "tiny_plug/__init__.py", "sha256": null}]}')
    before = snapshot(site)
    said = _cli(command, *args)
    assert said.returncode == 3 and "is damaged" in said.stderr, said.stderr
    assert "tiny_plug/__init__.py" in said.stderr and snapshot(site) == before


def test_a_component_fixpack_installed_whose_manifest_is_gone_names_its_removal(builder, plugin_wheel):  # noqa: F811
    """A component fixpack installed, its manifest removed by hand: apply said the copy was "installed by pip or
    another tool?" (its INSTALLER says fixpack) and gave no way out. It now says fixpack installed it and no
    manifest records it, with the command that removes it; run as printed, apply installs it again and revert
    gives the site back byte for byte."""
    args, site = _site(builder, plugin_wheel)
    before = snapshot(site)
    assert _cli("apply", *args, "tiny-plug").returncode == 0
    (site / ".fixpack/demo.manifest.json").unlink()
    said = _cli("apply", *args, "tiny-plug")
    message = " ".join(said.stderr.split())
    assert said.returncode == 3 and "installed by fixpack, but no manifest" in message, said.stderr
    step = message.split("remove it: ", 1)[1].rsplit(", then apply", 1)[0]
    assert subprocess.run(["bash", "-c", step]).returncode == 0
    assert _cli("apply", *args, "tiny-plug").returncode == 0
    assert _cli("revert", *args).returncode == 0
    assert snapshot(site) == before
