"""Components in a profile: a tiny plugin package (pyproject.toml + setuptools, built without a network)
installed into a site-packages-shaped target beside a fix: apply, re-apply, status, tampering, revert
byte for byte, a source tree refused, and a kill at every write point through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, snapshot

from fixpack import engine
from fixpack.errors import FixpackError, MismatchError
from fixpack.records import Manifest
from fixpack.rollback import recover

PLUGIN_TOML = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-plug"
version = "0.3.0"
dependencies = []

[project.entry-points."vllm.general_plugins"]
tiny = "tiny_plug:register"

[tool.setuptools.packages.find]
include = ["tiny_plug", "tiny_plug.*"]
"""


def make_plugin(folder: Path) -> Path:
    (folder / "tiny_plug" / "sub").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PLUGIN_TOML)
    (folder / "tiny_plug" / "__init__.py").write_text("def register():\n    return 'tiny'\n")
    (folder / "tiny_plug" / "sub" / "__init__.py").write_text("")
    (folder / "tiny_plug" / "sub" / "kern.py").write_text("SCALE = 2\n")
    return folder


@pytest.fixture(scope="module")
def plugin_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixpack.wheels import build_wheel

    work = tmp_path_factory.mktemp("wheel")
    return build_wheel(make_plugin(work / "plug"), work)


def component_table(path: str, opt_in: bool = True, requires: tuple[str, ...] = ("one",)) -> str:
    return (f'\n[components.tiny-plug]\npath = "{path}"\nversion = "0.3.0"\ntarget = "demo"\n'
            f'requires = {json.dumps(list(requires))}\nopt_in = {"true" if opt_in else "false"}\n')


def setup_pack(builder, wheel: Path | None) -> tuple[Path, Path]:
    b = builder
    b.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    b.profile(["one"])
    if wheel is not None:
        shutil.copy(wheel, b.pack / wheel.name)
        src = wheel.name
    else:
        make_plugin(b.pack / "plug")
        src = "plug"
    prof = b.pack / "profiles" / "p1.toml"
    prof.write_text(prof.read_text() + component_table(src))
    clean = b.tree("clean", {"demo_pkg/a.py": "x = 1\n"})
    b.lock(clean)
    site = b.tree("site", {"demo_pkg/a.py": "x = 1\n", "demo_pkg-1.0.dist-info/METADATA": "Name: demo_pkg\n"})
    return b.pack, site


def test_apply_reapply_status_revert_byte_identical(builder, plugin_wheel):
    _pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    r = engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert r.ok, r.as_dict()
    comp = r.fix("tiny-plug")
    assert (comp.kind, comp.state.value, comp.action.value, comp.version) == ("component", "absent", "applied", "0.3.0")
    assert (site / "tiny_plug/sub/kern.py").read_text() == "SCALE = 2\n"
    dist = site / "tiny_plug-0.3.0.dist-info"
    assert "tiny = tiny_plug:register" in (dist / "entry_points.txt").read_text()
    assert (dist / "INSTALLER").read_bytes() == b"fixpack\n"
    manifest = Manifest.from_json((site / ".fixpack/demo.manifest.json").read_bytes(), site)
    rec = manifest.component("tiny-plug")
    assert rec is not None and rec.dist_info == dist.name and "tiny_plug/sub/kern.py" in rec.files
    assert all(p in rec.files for p in ("tiny_plug/__init__.py", f"{dist.name}/RECORD", f"{dist.name}/METADATA"))
    record = (dist / "RECORD").read_text()
    assert "tiny_plug/sub/kern.py,sha256=" in record and f"{dist.name}/RECORD,," in record

    applied = snapshot(site)
    again = engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert again.ok and again.fix("tiny-plug").action.value == "none" and snapshot(site) == applied

    st = engine.status(builder.request(site))
    assert [(f.id, f.state.value) for f in st.fixes] == [("one", "applied"), ("tiny-plug", "applied")]

    rv = engine.revert(builder.request(site))
    assert rv.ok and rv.fix("tiny-plug").action.value == "reverted"
    assert snapshot(site) == before
    assert sorted(p.name for p in site.iterdir()) == sorted(["demo_pkg", "demo_pkg-1.0.dist-info"])


def test_a_run_without_the_component_keeps_it_and_status_shows_it_absent(builder, plugin_wheel):
    _pack, site = setup_pack(builder, plugin_wheel)
    st = engine.status(builder.request(site))
    assert st.fix("tiny-plug").state.value == "skipped" and not st.fix("tiny-plug").selected
    # --all-opt-in selects fixes, not components: the hint must not send the user there (a new user followed it)
    assert st.fix("tiny-plug").messages == ["component, not selected in this run: name it to install it "
                                            "(--all-opt-in selects fixes only)"]
    st = engine.status(builder.request(site, opt_ins=("tiny-plug",)))
    assert st.fix("tiny-plug").state.value == "absent" and st.fix("tiny-plug").action.value == "would-apply"
    assert engine.apply(builder.request(site)).ok
    assert not (site / "tiny_plug").exists()
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    kept = engine.apply(builder.request(site))
    assert kept.ok and "kept" in " ".join(kept.fix("tiny-plug").messages)
    assert (site / "tiny_plug/__init__.py").is_file()


def test_tampered_component_file(builder, plugin_wheel):
    _pack, site = setup_pack(builder, plugin_wheel)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    kern = site / "tiny_plug/sub/kern.py"
    kern.write_bytes(kern.read_bytes().replace(b"2", b"3"))
    st = engine.status(builder.request(site))
    assert st.fix("tiny-plug").state.value == "tampered" and st.exit_code == 3
    assert "tiny_plug/sub/kern.py" in " ".join(st.fix("tiny-plug").messages)
    assert st.fix("one").state.value == "applied"
    tampered = snapshot(site)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).exit_code == 3
    rv = engine.revert(builder.request(site))
    assert rv.exit_code == 3 and snapshot(site) == tampered


def _next_step(report, comp_id: str) -> str:
    said = [m for m in report.fix(comp_id).messages if m.startswith("next: ")]
    assert len(said) == 1, report.fix(comp_id).messages
    return said[0]


@pytest.mark.parametrize("then", ["revert", "apply"])
def test_a_tampered_component_s_next_step_runs_as_written_and_leads_out(builder, plugin_wheel, then):
    """A changed component file was a dead end: every run said tampered (exit 3) for ever. Its next step removes
    what is left of the component; then revert drops the record, or apply installs it afresh."""
    _pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    # its bytecode, as an import or an image's compileall makes it: the step removes that too
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site / "tiny_plug")], check=True)
    assert list(site.glob("tiny_plug/**/__pycache__/*.pyc"))
    kern = site / "tiny_plug/sub/kern.py"
    kern.write_text("SCALE = 3\n")
    run = engine.revert if then == "revert" else engine.apply
    r = run(builder.request(site, opt_ins=("tiny-plug",)) if then == "apply" else builder.request(site))
    assert r.exit_code == 3 and r.fix("tiny-plug").state.value == "tampered"
    step = _next_step(r, "tiny-plug")
    assert step.endswith(f"then run {then} again: " + ("it drops the record" if then == "revert" else
                                                          "it installs it afresh")), step
    command = step.split(": (", 1)[1].rsplit("); then run", 1)[0]
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr
    assert not (site / "tiny_plug").exists() and not list(site.glob("tiny_plug-*.dist-info"))
    again = run(builder.request(site, opt_ins=("tiny-plug",)) if then == "apply" else builder.request(site))
    assert again.ok, again.as_dict()
    if then == "apply":
        assert kern.read_text() == "SCALE = 2\n" and again.fix("tiny-plug").action.value == "applied"
        assert engine.revert(builder.request(site)).ok
    assert snapshot(site) == before


def test_an_uninstalled_component_is_gone_not_tampered(builder, plugin_wheel):
    """``pip uninstall`` took every file of a recorded component: status says it is gone (not tampered), apply
    naming it installs it again, and revert drops the record; it was exit 3 for every run."""
    _pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    installed = snapshot(site)

    def uninstall() -> None:
        shutil.rmtree(site / "tiny_plug")
        for d in site.glob("tiny_plug-*.dist-info"):
            shutil.rmtree(d)

    uninstall()
    st = engine.status(builder.request(site))
    assert st.exit_code == 0 and st.fix("tiny-plug").state.value == "absent", st.as_dict()
    assert "gone (uninstalled?)" in " ".join(st.fix("tiny-plug").messages)
    r = engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert r.ok and r.fix("tiny-plug").action.value == "applied" and snapshot(site) == installed
    uninstall()
    rv = engine.revert(builder.request(site))
    assert rv.ok and rv.fix("tiny-plug").state.value == "absent", rv.as_dict()
    assert snapshot(site) == before and not (site / ".fixpack").exists()


def test_source_tree_is_refused_and_preinstalled_copy_too(builder, plugin_wheel):
    _pack, site = setup_pack(builder, plugin_wheel)
    shutil.rmtree(site / "demo_pkg-1.0.dist-info")
    before = snapshot(site)
    with pytest.raises(MismatchError, match="not an installed package there"):
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert snapshot(site) == before
    # status says so of the component it lists unselected (a fresh user was told to name it, then refused)
    said = engine.status(builder.request(site)).fix("tiny-plug").messages
    assert said[0].startswith("component, not selected in this run; it cannot be installed here: components install "
                              "into site-packages") and "name it to install it" not in said[0], said
    (site / "demo_pkg-1.0.dist-info").mkdir()
    (site / "demo_pkg-1.0.dist-info/METADATA").write_text("Name: demo_pkg\n")
    (site / "tiny_plug-0.2.0-py3.11.egg-info").mkdir()  # setup.py install's metadata (a fresh user found it missed)
    (site / "tiny_plug-0.2.0-py3.11.egg-info/PKG-INFO").write_text("Name: tiny-plug\n")
    before = snapshot(site)
    with pytest.raises(MismatchError, match="tiny_plug-0.2.0-py3.11.egg-info is there already"):
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert snapshot(site) == before
    shutil.rmtree(site / "tiny_plug-0.2.0-py3.11.egg-info")
    (site / "tiny_plug-0.2.0.dist-info").mkdir()
    (site / "tiny_plug-0.2.0.dist-info/METADATA").write_text("Name: tiny-plug\n")
    before = snapshot(site)
    with pytest.raises(MismatchError, match="there already"):
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert snapshot(site) == before


def test_component_requires_its_fix(builder, plugin_wheel):
    from fixpack.errors import PackError

    _pack, site = setup_pack(builder, plugin_wheel)
    prof = builder.pack / "profiles/p1.toml"
    prof.write_text(prof.read_text().replace('default = ["one"]', 'default = []').replace(
        'opt_in = []', 'opt_in = ["one"]'))
    with pytest.raises(PackError, match="requires 'one'"):
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))


def test_built_from_its_folder_as_pip_lays_it_out(builder, tmp_path):
    """The folder form (pip wheel, then installer): the same files as ``pip install --no-deps --target``."""
    _pack, site = setup_pack(builder, None)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    assert not (builder.pack / "plug" / "build").exists()  # built from a copy
    pip_site = tmp_path / "pip-site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                    "--disable-pip-version-check", "--no-compile", "--target", str(pip_site), str(builder.pack / "plug")],
                   check=True, capture_output=True)
    ours = {k: v[0] for k, v in snapshot(site).items() if k.startswith("tiny_plug")}
    pips = {k: v[0] for k, v in snapshot(pip_site).items()}
    dist = "tiny_plug-0.3.0.dist-info/"
    varying = {dist + n for n in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    assert {k: v for k, v in ours.items() if k not in varying} == {k: v for k, v in pips.items() if k not in varying}


def test_a_source_is_built_once_per_process_until_a_byte_or_mode_changes(tmp_path, monkeypatch):
    """check and lock look at every profile that carries a component: the same source is built once; a
    changed byte, a mode, a new file or a link's target is built again (the layout follows the bytes)."""
    from fixpack import wheels
    from fixpack.model import Component

    builds: list[Path] = []
    real = wheels.build_wheel
    monkeypatch.setattr(wheels, "build_wheel", lambda src, work: builds.append(src) or real(src, work))
    src = make_plugin(tmp_path / "plug")
    comp = Component("tiny-plug", src, "0.3.0", "demo")
    site = tmp_path / "site"

    def kern() -> bytes:
        return wheels.component_layout(comp, site).files["tiny_plug/sub/kern.py"][0]

    assert kern() == b"SCALE = 2\n" and kern() == b"SCALE = 2\n" and len(builds) == 1
    (src / "tiny_plug" / "sub" / "kern.py").write_text("SCALE = 3\n")
    assert kern() == b"SCALE = 3\n" and len(builds) == 2
    (src / "build").mkdir()  # what the copy leaves out does not count
    (src / "build" / "junk.py").write_text("x = 1\n")
    kern()
    assert len(builds) == 2
    (src / "tiny_plug" / "sub" / "kern.py").chmod(0o755)
    kern()
    assert len(builds) == 3  # (setuptools drops the bit here; a build backend may keep it)
    (src / "tiny_plug" / "link.py").symlink_to("__init__.py")
    assert "tiny_plug/link.py" in wheels.component_layout(comp, site).files and len(builds) == 4
    (src / "tiny_plug" / "link.py").unlink()
    (src / "tiny_plug" / "link.py").symlink_to("sub/kern.py")
    assert wheels.component_layout(comp, site).files["tiny_plug/link.py"][0] == b"SCALE = 3\n"
    assert len(builds) == 5


@pytest.mark.parametrize("last", ["error: invalid command 'bdist_wheel'", "error: something else broke"])
def test_a_failed_wheel_build_says_its_last_lines_whole_and_what_the_python_needs(tmp_path, last):
    """pip's output was cut at 1500 characters from the end, mid-word, and the advice named pip and setuptools
    even when both were there: setuptools older than 70.1 builds no wheel without the wheel package."""
    from fixpack.errors import EnvironmentProblem
    from fixpack.wheels import build_wheel

    src = tmp_path / "broken"
    src.mkdir()
    (src / "setup.py").write_text("import sys\n" + "".join(f"print('line {i} ' + 'x' * 90)\n" for i in range(40))
                                  + f"sys.exit({last!r})\n")
    with pytest.raises(EnvironmentProblem) as got:
        build_wheel(src, tmp_path / "work")
    said = str(got.value)
    assert last in said and "line 39 " + "x" * 90 in said and "line 0 " not in said
    assert all(not ln.startswith("x") for ln in said.splitlines()), "a line of pip's output cut mid-word"
    want = "install wheel, or setuptools>=70.1" if "bdist_wheel" in last else "setuptools (70.1 or newer"
    assert want in said and sys.executable in said and said.endswith("nothing was written")


@pytest.mark.parametrize("where", ["copy", "pip"])
def test_a_wheel_build_in_a_full_tmpdir_is_exit_5_naming_it_in_check_and_apply(builder, monkeypatch, tmp_path, where):
    """found by filling $TMPDIR: the build's copy of the source raised shutil.Error there (check, lock --check and
    apply: an internal error, exit 1), and pip's own ENOSPC was said to need pip and setuptools. Now exit 5 naming
    the file and the errno and saying to free space or set TMPDIR; check raises it rather than calling it a finding
    of the pack; nothing is written."""
    import tempfile

    from fixpack import wheels
    from fixpack.errors import EnvironmentProblem
    from fixpack.pack_check import check_pack

    _pack, site = setup_pack(builder, None)
    wheels._BUILT.clear()
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    if where == "copy":
        def copytree(src, dst, **kw):  # type: ignore[no-untyped-def]
            raise shutil.Error([(f"{src}/tiny_plug/__init__.py", f"{dst}/tiny_plug/__init__.py",
                                 f"[Errno 28] No space left on device: '{src}/tiny_plug/__init__.py' -> "
                                 f"'{dst}/tiny_plug/__init__.py'")])
        monkeypatch.setattr(wheels.shutil, "copytree", copytree)
        said_where = f"{tmp}/fixpack-wheel-"
    else:
        (builder.pack / "plug" / "setup.py").write_text(
            "raise OSError(28, 'No space left on device', '/tmp/pip-build/x.o')\n")
        said_where = "free space in the temporary folder " + str(tmp)
    before = snapshot(site), snapshot(builder.pack)
    with pytest.raises(EnvironmentProblem) as got:
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    said = str(got.value)
    assert got.value.exit_code == 5 and said_where in said, said
    assert "No space left on device" in said and "TMPDIR" in said and "setuptools (70.1" not in said, said
    if where == "copy":
        assert "No space left on device (ENOSPC) while building the wheel of" in said, said
    with pytest.raises(EnvironmentProblem):
        check_pack(builder.pack)
    assert (snapshot(site), snapshot(builder.pack)) == before
    assert list(tmp.iterdir()) == []


def _cli(args: list[str], fault_at: int | None = None) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("FIXPACK_FAULT_AT", None)
    if fault_at:
        env["FIXPACK_FAULT_AT"] = str(fault_at)
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env=env, capture_output=True,
                          text=True).returncode


def _restore(target: Path, files: dict[str, tuple[bytes, int]]) -> None:
    shutil.rmtree(target)
    for rel, (data, mode) in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(data)
        (target / rel).chmod(mode)


def test_kill_at_every_write_point_through_the_cli(builder, plugin_wheel, tmp_path):
    pack, site = setup_pack(builder, plugin_wheel)
    apply_args = ["apply", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "tiny-plug"]
    original = snapshot(site)
    assert _cli(apply_args) == 0
    patched = {k: v for k, v in snapshot(site).items() if not k.startswith(".fixpack/")}
    full = snapshot(site)
    points = 0
    for n in range(1, 40):
        _restore(site, original)
        rc = _cli(apply_args, fault_at=n)
        if rc == 0:
            break
        assert rc == 137, f"write point {n}: exit {rc}"
        points += 1
        recover(site)  # what the next run does first: the killed run's journal rolled back
        now = snapshot(site)
        assert now in (original, full), f"killed at write point {n}: neither the image before nor fully applied"
        assert _cli(apply_args) == 0
        assert {k: v for k, v in snapshot(site).items() if not k.startswith(".fixpack/")} == patched
        assert _cli(["revert", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}"]) == 0
        assert snapshot(site) == original, f"kill at {n}, apply, revert: not the original bytes"
    # backups, journal, the fix's file, 8 component files, the manifest, the journal's removal
    assert points >= 12, points


def test_revert_removes_the_bytecode_of_an_imported_component(builder, plugin_wheel):
    import compileall

    _pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    assert compileall.compile_dir(str(site / "tiny_plug"), quiet=1)  # the plugin was imported in the image
    assert list((site / "tiny_plug/sub/__pycache__").glob("kern.*.pyc"))
    assert engine.revert(builder.request(site)).ok
    assert snapshot(site) == before and not (site / "tiny_plug").exists()


@pytest.mark.parametrize("entry, why", [
    ({"id": "tiny-plug", "version": "0.3.0", "dist_info": "x.dist-info", "files": {"../evil.py": "0" * 64}}, "'..'"),
    ({"id": "tiny-plug", "version": "0.3.0", "dist_info": "../x.dist-info", "files": {}}, "dist_info"),
    ({"id": "tiny-plug", "version": "0.3.0", "dist_info": "x.dist-info", "files": {"demo_pkg/a.py": "0" * 64}},
     "recorded twice"),
    ({"id": "tiny-plug", "version": "0.3.0", "dist_info": "x.dist-info", "files": {"t/x.py": None}}, "no sha256"),
    ({"id": "tiny-plug", "version": "0.3.0"}, "not an object with id"),
    # found by a fresh user: revert said "reverted", removed .fixpack and left the package installed
    ({"id": "tiny-plug", "version": "0.3.0", "dist_info": "tiny_plug-0.3.0.dist-info", "files": {}}, "records no file"),
])
def test_a_planted_component_record_is_damaged_state(builder, plugin_wheel, entry, why):
    from fixpack.errors import DamagedStateError

    _pack, site = setup_pack(builder, plugin_wheel)
    assert engine.apply(builder.request(site)).ok
    mpath = site / ".fixpack/demo.manifest.json"
    data = json.loads(mpath.read_text())
    data["components"] = [entry]
    mpath.write_text(json.dumps(data))
    before = snapshot(site)
    with pytest.raises(DamagedStateError, match=why):
        engine.revert(builder.request(site))
    assert snapshot(site) == before


def applied_then_reinstalled(builder, plugin_wheel):
    """A site with the component applied, then its target's files put back to the clean release (a
    reinstall): the manifest is stale. Returns the site and its snapshot from before the apply."""
    _pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    (site / "demo_pkg/a.py").write_text("x = 1\n")  # vLLM reinstalled: its files are the clean release again
    return site, before


def test_a_reinstalled_target_keeps_the_component_record(builder, plugin_wheel):
    site, before = applied_then_reinstalled(builder, plugin_wheel)
    r = engine.apply(builder.request(site))
    assert r.ok and "stale" in r.targets[0].message and r.fix("tiny-plug").state.value == "applied"
    assert engine.revert(builder.request(site)).ok
    assert snapshot(site) == before and not (site / "tiny_plug").exists()


def test_revert_on_a_reinstalled_target_removes_the_component_and_the_stale_manifest(builder, plugin_wheel):
    """Revert sees the stale manifest as apply does (it called the fixes tampered): nothing of the release to
    undo, the recorded component's files and the manifest removed."""
    site, before = applied_then_reinstalled(builder, plugin_wheel)
    r = engine.revert(builder.request(site))
    assert r.ok and "stale" in r.targets[0].message and r.fix("tiny-plug").action.value == "reverted"
    assert snapshot(site) == before and not (site / "tiny_plug").exists()


def test_the_lock_covers_a_components_files(builder):
    """The lock records each package file a component installs; a source changed without a new version
    (and a new lock) is a stale lock: bad input, nothing written."""
    from fixpack.errors import StaleLockError
    from fixpack.loader import load_pack, load_profile
    from fixpack.lockfile import read_lock

    pack, site = setup_pack(builder, None)
    locked = read_lock(load_profile(load_pack(pack), "p1")).component("tiny-plug")
    assert locked is not None and locked.version == "0.3.0"
    assert dict(locked.files)["tiny_plug/sub/kern.py"] and not any(".dist-info" in p for p, _h in locked.files)
    (pack / "plug" / "tiny_plug" / "sub" / "kern.py").write_text("SCALE = 3\n")
    before = snapshot(site)
    with pytest.raises(StaleLockError, match="tiny_plug/sub/kern.py"):
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert snapshot(site) == before
    from fixpack.progname import program
    with pytest.raises(StaleLockError) as exc:  # the lock command names the run's --target, as a fix's does
        engine.apply(builder.request(site, opt_ins=("tiny-plug",), only_targets=("demo",)))
    assert str(exc.value).endswith(f"regenerate the lock ({program()} lock --profile p1 --pack {pack} --target demo)")
    for path in (pack / "plug" / "pyproject.toml", pack / "profiles" / "p1.toml"):  # as the message says:
        path.write_text(path.read_text().replace('version = "0.3.0"', 'version = "0.3.1"'))  # a new version
    builder.lock(builder.base / "clean")  # and a new lock: it applies again
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok


def test_every_profile_the_port_supports_carries_both_components():
    """A profile pinned to a vLLM release the port's build gate accepts (its SUPPORTED_VLLM, README "vLLM
    releases") names the port and the kernels' package as v0.30.0 does, and no other profile names them:
    v0.31.0 to v0.33.0 came from a rebase that did not carry components yet, and 0.33.0 users could not
    install the port (unknown name)."""
    import ast

    from fixpack.loader import load_pack, load_profile

    source = ast.parse((REPO / "ports/muse-spark-open/muse_spark_open/upstream.py").read_text())
    (gate,) = [ast.literal_eval(node.value) for node in source.body if isinstance(node, ast.Assign)
               and [getattr(t, "id", None) for t in node.targets] == ["SUPPORTED_VLLM"]]

    pack = load_pack(REPO)
    profiles = {name: load_profile(pack, name) for name in sorted(pack.profiles)}

    def carried(name: str) -> list[tuple[object, ...]]:
        return [(c.id, c.version, c.path, c.target, c.requires, c.opt_in, c.summary) for c in profiles[name].components]

    assert [c[0] for c in carried("v0.30.0")] == ["muse-spark-open", "mxfp4-moe"]
    supported = {n for n, p in profiles.items() if p.target("vllm").pin.version in gate}
    assert supported == {"v0.30.0", "v0.31.0", "v0.32.0", "v0.33.0"}
    assert {n: carried(n) for n in profiles} == {n: carried("v0.30.0") if n in supported else [] for n in profiles}


@pytest.mark.parametrize("planted, why", [
    ("demo_pkg/a.py", "inside a target's package folder (demo_pkg/)"),
    ("demo_pkg-1.0.dist-info/METADATA", "another distribution's .dist-info folder"),
    ("other_pkg/__init__.py", "which the lock does not list for that version"),
])
def test_a_component_record_that_claims_files_not_its_own_is_damaged_state(builder, plugin_wheel, planted, why):
    """A manifest edited to list another package's file (with its right sha256) under a component: status,
    apply and revert refuse it as damaged state (exit 3) and delete nothing; revert used to remove the file."""
    import hashlib

    _pack, site = setup_pack(builder, plugin_wheel)
    (site / "other_pkg").mkdir()
    (site / "other_pkg" / "__init__.py").write_text("OTHER = 1\n")
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    mpath = site / ".fixpack" / "demo.manifest.json"
    data = json.loads(mpath.read_text())
    data["components"][0]["files"][planted] = hashlib.sha256((site / planted).read_bytes()).hexdigest()
    if planted.startswith("demo_pkg/"):  # a fix's file: the fix's record gives it up
        data["fixes"][0]["state"] = "upstreamed"
        data["files"] = {}
    mpath.write_text(json.dumps(data))
    before = snapshot(site)
    for run in (engine.status, engine.apply, engine.revert):
        with pytest.raises(MismatchError, match="damaged") as exc:
            run(builder.request(site, opt_ins=("tiny-plug",)) if run is not engine.revert else builder.request(site))
        assert why in str(exc.value) and str(mpath) in str(exc.value)
        assert snapshot(site) == before


def test_each_committed_component_says_the_version_it_builds_as():
    """A component's package ``__version__`` (what its code logs and reports at run time) is the version its
    pyproject.toml builds and every profile names (mxfp4-moe's went 0.4.0 -> 0.5.0 in its pyproject alone)."""
    import ast

    import tomllib

    from fixpack.loader import load_pack, load_profile

    pack = load_pack(REPO)
    seen: dict[Path, str] = {}
    for name in pack.profiles:
        for comp in load_profile(pack, name).components:
            built = tomllib.loads((comp.path / "pyproject.toml").read_text())["project"]["version"]
            assert comp.version == built, (name, comp.id)
            seen[comp.path] = built
    assert len(seen) == 2, seen  # the Muse port and the kernels' package
    for path, built in seen.items():
        said = {}
        for init in path.glob("*/__init__.py"):
            for node in ast.parse(init.read_text()).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__version__" for t in node.targets):
                    said[init] = ast.literal_eval(node.value)
        assert said and set(said.values()) == {built}, (path, said, built)


def test_the_apply_after_a_strict_revert_names_the_opt_in_component_it_took_out(builder, plugin_wheel):
    """A drifted opt-in under --strict whose file an applied fix touches: revert first, put back, apply again. The
    revert takes out the opt-in component too, and the apply after it did not name it (it was dropped without a
    word): it does now, and the three steps, run as printed (the put-back by hand: a demo release has no copy to
    fetch), leave the component installed."""
    b = builder
    _pack, site = setup_pack(b, plugin_wheel)
    b.add_fix("four", {"demo_pkg/a.py": "x = 2\n"}, {"demo_pkg/a.py": "x = 2\ny = 4\n"}, opt_in=True)
    prof = b.pack / "profiles" / "p1.toml"
    prof.write_text(prof.read_text().replace('opt_in = []', 'opt_in = ["four"]'))
    b.lock(b.base / "clean")
    (site / "demo_pkg/a.py").write_text("# by hand\nx = 1\n")
    assert engine.apply(b.request(site, opt_ins=("tiny-plug",))).ok  # one drifted, applied; the component
    r = engine.status(b.request(site, strict=True, opt_ins=("four",)))
    said = " ".join(m for m in r.fix("four").messages if m.startswith("--strict: "))
    assert "revert first (" in said, r.as_dict()
    revert = said.split("revert first (", 1)[1].split(": it takes out", 1)[0]
    again = said.split("), then apply again: ", 1)[1].split(". If the image", 1)[0]
    assert again.endswith(" --strict four tiny-plug"), again
    for step in (revert, "PUT BACK", again):
        if step == "PUT BACK":
            (site / "demo_pkg/a.py").write_text("x = 1\n")
            continue
        done = subprocess.run(step, shell=True, capture_output=True, text=True)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
    assert (site / "demo_pkg/a.py").read_text() == "x = 2\ny = 4\n" and (site / "tiny_plug/sub/kern.py").is_file()


@pytest.mark.parametrize("where", ["tiny_plug/sub/kern.py", "demo_pkg/a.py"])
def test_a_folder_where_a_fix_or_a_component_writes_a_file_is_said_so(builder, plugin_wheel, where):
    """A folder where a component installs a file (or a fix changes one): exit 3 naming it and what to do, nothing
    written; it was said 'a fix changes files only. Fix the image', of a component's file too (found by a fresh
    user)."""
    _pack, site = setup_pack(builder, plugin_wheel)
    if (site / where).exists():
        (site / where).unlink()
    (site / where).mkdir(parents=True)
    before = snapshot(site)
    with pytest.raises(MismatchError) as exc:
        engine.apply(builder.request(site, opt_ins=("tiny-plug",)))
    assert str(exc.value) == (f"{site / where} is a folder, not a regular file: the run reads and writes this path as "
                              f"a file (of a fix or a component of the profile). Move it away, or put the release's "
                              f"file back there, then run again")
    assert snapshot(site) == before and (site / where).is_dir()


def test_sigterm_while_a_wheel_builds_leaves_no_temporary_folder(tmp_path, monkeypatch):
    """Found by a fresh user: SIGTERM (a CI timeout) during the build ended the process there, leaving
    $TMPDIR/fixpack-wheel-* and pip's own temporary folders. It unwinds as Ctrl-C does: pip is stopped, the folder
    goes (pip's temporary folders are inside it: pip runs with TMPDIR there), exit 143 with nothing written."""
    import signal
    import tempfile
    import time

    from fixpack import wheels
    from fixpack.errors import Terminated
    from fixpack.model import Component

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    seen: dict[str, str] = {}

    def run(cmd, **kw):  # type: ignore[no-untyped-def]
        seen.update(kw["env"])
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # (the signal lands here)
        pytest.fail("SIGTERM did not stop the build")

    monkeypatch.setattr(wheels.subprocess, "run", run)
    comp = Component("tiny-plug", make_plugin(tmp_path / "plug"), "0.3.0", "demo")
    with pytest.raises(Terminated, match=r"terminated \(SIGTERM\) while building the wheel of .*nothing was written"):
        wheels.component_layout(comp, tmp_path / "site")
    assert seen["TMPDIR"].startswith(str(temp / "fixpack-wheel-")) and list(temp.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@pytest.mark.parametrize("how", ["a made-up component", "another distribution's .dist-info as its own"])
def test_a_component_record_that_is_not_this_profile_s_component_is_damaged_state(builder, plugin_wheel, how):
    """Found by a fresh user: a made-up component (`evil-lib`, its files another package's, sha256 right) was
    reverted, deleting that package (exit 0); a real component's record given vLLM's .dist-info as its own made
    revert delete vLLM's metadata. Both are damaged state (exit 3) to status, apply and revert; nothing goes."""
    import hashlib

    _pack, site = setup_pack(builder, plugin_wheel)
    (site / "other_pkg").mkdir()
    (site / "other_pkg" / "__init__.py").write_text("OTHER = 1\n")
    assert (site / "demo_pkg-1.0.dist-info" / "METADATA").is_file()  # (the target's own, as vLLM's)
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    mpath = site / ".fixpack" / "demo.manifest.json"
    data = json.loads(mpath.read_text())
    sha = {p: hashlib.sha256((site / p).read_bytes()).hexdigest()
           for p in ("other_pkg/__init__.py", "demo_pkg-1.0.dist-info/METADATA")}
    if how == "a made-up component":
        data["components"].append({"id": "evil-lib", "version": "6.6.6", "dist_info": "evil_lib-6.6.6.dist-info",
                                   "files": {"other_pkg/__init__.py": sha["other_pkg/__init__.py"]}})
        why = "component evil-lib is no component of profile p1"
    else:
        comp = data["components"][0]
        comp["files"] = {p: h for p, h in comp["files"].items() if ".dist-info/" not in p}
        comp["dist_info"] = "demo_pkg-1.0.dist-info"
        comp["files"]["demo_pkg-1.0.dist-info/METADATA"] = sha["demo_pkg-1.0.dist-info/METADATA"]
        why = "records the .dist-info demo_pkg-1.0.dist-info, not its own tiny_plug-0.3.0.dist-info"
    mpath.write_text(json.dumps(data))
    before = snapshot(site)
    for run in (engine.status, engine.apply, engine.revert):
        with pytest.raises(MismatchError, match="damaged") as exc:
            run(builder.request(site, opt_ins=("tiny-plug",)) if run is not engine.revert else builder.request(site))
        assert why in str(exc.value), str(exc.value)
        assert snapshot(site) == before


def test_a_component_id_that_ends_in_a_newline_is_refused(builder):
    """The id was checked with re.match and "$", which a newline may end: ``[components."tiny-plug\\n"]`` was taken
    as an id (its path then said wrong). The whole id is checked: exit 2, the id said wrong."""
    b = builder
    b.add_fix("one", {"demo_pkg/a.py": "x = 1\n"}, {"demo_pkg/a.py": "x = 2\n"})
    prof = b.profile(["one"])
    make_plugin(b.pack / "plug")
    prof.write_text(prof.read_text() + component_table("plug").replace("[components.tiny-plug]",
                                                                       '[components."tiny-plug\\n"]'))
    with pytest.raises(FixpackError) as exc:
        engine.status(b.request(b.tree("site", {"demo_pkg/a.py": "x = 1\n"})))
    assert exc.value.exit_code == 2 and "the id must be lower-case letters" in str(exc.value), str(exc.value)
