"""The SBOM of an image (CycloneDX 1.6, validated against its schema) and ``verify`` against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, snapshot
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from test_components import plugin_wheel, setup_pack  # noqa: F401  (a fixture, used by name)

from fixpack import engine
from fixpack.run import Request
from fixpack.sbom import sbom


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env=env, capture_output=True, text=True)


def applied_image(builder, wheel, upstream: str = "backport") -> tuple[Path, Path]:
    pack, site = setup_pack(builder, wheel)
    toml = pack / "fixes/one/fix.toml"
    toml.write_text(toml.read_text() + f'[upstream]\nstatus = "{upstream}"\nlink = "https://example.invalid/pr/1"\n')
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    return pack, site


def test_sbom_validates_and_describes_the_image(builder, plugin_wheel, tmp_path):  # noqa: F811
    pack, site = applied_image(builder, plugin_wheel)
    out = tmp_path / "image.cdx.json"
    r = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["specVersion"] == "1.6" and doc["bomFormat"] == "CycloneDX"
    comps = {c["name"]: c for c in doc["components"]}
    target = comps["demo_pkg"]
    assert target["version"] == "1.0" and target["purl"] == "pkg:pypi/demo-pkg@1.0"
    assert target["pedigree"]["commits"] == [{"uid": "abcdef1234"}]
    (patch,) = target["pedigree"]["patches"]
    assert patch["type"] == "backport" and "+x = 2" in patch["diff"]["text"]["content"]
    assert patch["resolves"][0]["id"] == "one" and patch["resolves"][0]["references"] == ["https://example.invalid/pr/1"]
    props = {p["name"]: p["value"] for p in target["properties"]}
    assert props["fixpack:file:demo:demo_pkg/a.py"] == __import__("hashlib").sha256(b"x = 2\n").hexdigest()
    plug = comps["tiny_plug"]
    assert plug["version"] == "0.3.0" and plug["purl"] == "pkg:pypi/tiny-plug@0.3.0"
    assert any(p["name"] == "fixpack:file:demo:tiny_plug/sub/kern.py" for p in plug["properties"])
    # a second run finds the same facts and writes nothing
    mtime = out.stat().st_mtime_ns
    again = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out))
    assert again.returncode == 0 and "unchanged" in again.stderr and out.stat().st_mtime_ns == mtime


def test_an_unofficial_fix_and_what_is_on_disk_not_the_profile(builder, plugin_wheel):  # noqa: F811
    pack, site = applied_image(builder, plugin_wheel, upstream="pending")
    doc = json.loads(sbom(Request(pack_root=pack, profile="p1", roots={"demo": site}), None).text)
    assert doc["components"][0]["pedigree"]["patches"][0]["type"] == "unofficial"
    assert engine.revert(builder.request(site)).ok
    doc = json.loads(sbom(Request(pack_root=pack, profile="p1", roots={"demo": site}), None).text)
    (target,) = doc["components"]  # no component installed, no patch applied: none in the SBOM
    assert "patches" not in target.get("pedigree", {})


def test_verify_passes_then_names_each_difference(builder, plugin_wheel, tmp_path):  # noqa: F811
    pack, site = applied_image(builder, plugin_wheel)
    out = tmp_path / "image.cdx.json"
    assert cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out)).returncode == 0
    ok = cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}")
    assert ok.returncode == 0 and "OK:" in ok.stdout, ok.stdout + ok.stderr
    patched = site / "demo_pkg/a.py"
    patched.write_bytes(patched.read_bytes().replace(b"2", b"3"))
    bad = cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}")
    assert bad.returncode == 3, bad.stdout + bad.stderr
    assert "file demo:demo_pkg/a.py: changed" in bad.stdout and "2 difference" in bad.stdout
    assert "status does not vouch for the image as it is (status exit 3): one: tampered" in bad.stdout
    patched.write_text("x = 2\n")
    (site / "tiny_plug/sub/kern.py").unlink()
    gone = cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}", "--json")
    assert gone.returncode == 3
    doc = json.loads(gone.stdout)
    import jsonschema
    from conftest import REPO
    jsonschema.Draft202012Validator(json.loads((REPO / "schemas/verify.schema.json").read_text())).validate(doc)
    assert doc["ok"] is False and doc["exit_code"] == 3
    said, diff = doc["differences"]  # status first: the component is tampered (a file of it gone)
    assert said.startswith("status does not vouch for the image as it is (status exit 3): "), said
    assert diff.startswith("file demo:tiny_plug/sub/kern.py: in the SBOM (") and diff.endswith("missing in the image")


def test_verify_names_a_missing_fix_and_another_version(builder, plugin_wheel, tmp_path):  # noqa: F811
    pack, site = applied_image(builder, plugin_wheel)
    out = tmp_path / "image.cdx.json"
    assert cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out)).returncode == 0
    assert engine.revert(builder.request(site)).ok
    r = cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}")
    assert r.returncode == 3 and "fix one: in the SBOM (applied v1), missing in the image" in r.stdout
    assert "component tiny-plug" in r.stdout
    # found by a fresh user: the reverted fix's file, there unpatched, was said "missing in the image"
    (line,) = [ln for ln in r.stdout.splitlines() if "file demo:demo_pkg/a.py: " in ln]
    assert "not a patched file of the image" in line and "missing" not in line, line
    doc = json.loads(out.read_text())
    doc["components"][0]["version"] = "1.1"
    out.write_text(json.dumps(doc))
    assert engine.apply(builder.request(site, opt_ins=("tiny-plug",))).ok
    r = cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}")
    assert r.returncode == 3 and "target demo version: 1.1 in the SBOM, 1.0 in the image" in r.stdout
    out.write_text("{}")
    assert cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}").returncode == 2


def test_apply_writes_the_sbom(builder, plugin_wheel, tmp_path):  # noqa: F811
    pack, site = setup_pack(builder, plugin_wheel)
    out = tmp_path / "sbom.json"
    r = cli("apply", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "tiny-plug", "--sbom", str(out))
    assert r.returncode == 0 and "SBOM written" in r.stderr, r.stderr
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(out.read_text()) is None
    r = cli("apply", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "tiny-plug", "--sbom", str(out))
    assert r.returncode == 0 and "SBOM unchanged" in r.stderr
    assert cli("verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}").returncode == 0
    # an SBOM inside the image it describes is refused before anything is written (revert would leave it)
    inside = site / "sbom.json"
    r = cli("revert", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}")
    assert r.returncode == 0
    before = snapshot(site)
    r = cli("apply", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "tiny-plug", "--sbom", str(inside))
    assert r.returncode == 2 and "inside the target" in r.stderr and snapshot(site) == before
    r = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(inside))
    assert r.returncode == 2 and "inside the target" in r.stderr and not inside.exists()


def test_sbom_with_another_profile_is_refused(builder, plugin_wheel, tmp_path):  # noqa: F811
    """Found by a fresh user: ``sbom --profile v0.31.0`` of an image patched with v0.30.0 wrote a document naming
    v0.31.0's image, with no patches, and ``verify`` against it found no difference; status said mismatch."""
    pack, site = applied_image(builder, plugin_wheel)
    p1 = (pack / "profiles/p1.toml").read_text()
    (pack / "profiles/p2.toml").write_text(p1.replace('name = "p1"', 'name = "p2"').replace('version = "1.0"',
                                                                                         'version = "2.0"'))
    (pack / "profiles/p3.toml").write_text(p1.replace('name = "p1"', 'name = "p3"'))  # the same pin, not applied
    before = snapshot(site)
    for name, said in (("p2", "Profile p1 or p3 pins this release: --profile p1."), ("p3", "patched with profile 'p1', not 'p3'")):
        out = tmp_path / f"{name}.json"
        r = cli("sbom", "--pack", str(pack), "-p", name, "--root", f"demo={site}", "--out", str(out))
        assert r.returncode == 3 and said in r.stderr and not out.exists(), (name, r.stderr)
    assert "--profile p1" in r.stderr and snapshot(site) == before


def test_an_sbom_tells_only_what_status_finds_applied(builder, plugin_wheel, tmp_path):  # noqa: F811
    """Found by a fresh user: the SBOM was built from the manifest alone. A planted manifest on an unpatched image
    (its hashes those of the release's files) gave an SBOM listing every patch, which verify then agreed with; a
    component pip had uninstalled (status: absent) was still listed. What status finds absent is not told: the planted
    manifest's files are the release's, so status calls it stale and its fix absent, and the SBOM tells no patch;
    verify of the image's earlier SBOM names the patched file as a difference (exit 3). An image status does not pass
    (a patched file changed since) gets no SBOM (exit 3, nothing written)."""
    import hashlib

    pack, site = applied_image(builder, plugin_wheel)
    good = tmp_path / "good.json"
    assert cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(good)).returncode == 0
    mpath = site / ".fixpack/demo.manifest.json"
    data, kept = json.loads(mpath.read_text()), json.loads(mpath.read_text())
    patched = site / "demo_pkg/a.py"
    patched.write_text("x = 1\n")  # the release's bytes back, by hand, and the manifest made to agree
    sha = hashlib.sha256(patched.read_bytes()).hexdigest()
    data["files"]["demo_pkg/a.py"] = sha
    for f in data["fixes"]:
        if "demo_pkg/a.py" in f["files"]:
            f["files"]["demo_pkg/a.py"] = sha
    mpath.write_text(json.dumps(data))
    out = tmp_path / "lie.json"  # the files it lists are the release's: status calls the manifest stale, fix one
    r = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out))  # absent
    assert r.returncode == 0, r.stderr
    (demo,) = [c for c in json.loads(out.read_text())["components"] if c["name"] == "demo_pkg"]
    assert "patches" not in demo["pedigree"] and not any("demo_pkg/a.py" in p["name"] for p in demo["properties"])
    v = cli("verify", "--sbom", str(good), "--pack", str(pack), "--root", f"demo={site}")
    assert v.returncode == 3 and "DIFFERS file demo:demo_pkg/a.py: in the SBOM" in v.stdout, v.stdout
    mpath.write_text(json.dumps(kept))  # the manifest as apply wrote it, and a.py neither the fix's nor the release's
    patched.write_text("x = 3\n")
    out = tmp_path / "tampered.json"
    r = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out))
    assert r.returncode == 3 and "the image is not in a state its SBOM can tell truly: " in r.stderr, r.stderr
    assert not out.exists()


def test_a_component_pip_uninstalled_is_not_told(builder, plugin_wheel, tmp_path):  # noqa: F811
    import shutil

    pack, site = applied_image(builder, plugin_wheel)
    for p in list(site.glob("tiny_plug*")):
        shutil.rmtree(p)
    st = engine.status(builder.request(site))
    assert st.ok and st.fix("tiny-plug").state == "absent", st.fixes
    doc = json.loads(sbom(Request(pack_root=pack, profile="p1", roots={"demo": site}), None).text)
    assert [c["name"] for c in doc["components"]] == ["demo_pkg"], doc["components"]


def test_an_out_file_with_the_serial_number_but_other_contents_is_written_over(builder, plugin_wheel, tmp_path):  # noqa: F811
    """Found by a fresh user: a file holding only the right serialNumber (not even CycloneDX) was left as it was,
    and the run said "SBOM unchanged"."""
    pack, site = applied_image(builder, plugin_wheel)
    out = tmp_path / "image.cdx.json"
    assert cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out)).returncode == 0
    real = out.read_text()
    out.write_text(json.dumps({"serialNumber": json.loads(real)["serialNumber"], "lie": True}))
    r = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out))
    assert r.returncode == 0 and "written to" in r.stderr and out.read_text() == real, r.stderr


def test_apply_sbom_checks_its_library_and_source_date_epoch_before_writing(builder, plugin_wheel, tmp_path,  # noqa: F811
                                                                            monkeypatch):
    """Found by a fresh user: without cyclonedx-python-lib, apply --sbom patched the image and then said "nothing
    was written" (exit 5); a SOURCE_DATE_EPOCH past year 9999 (or '²') was an internal error after the apply."""
    from click.testing import CliRunner

    from fixpack import cli as cli_mod

    pack, site = setup_pack(builder, plugin_wheel)
    before = snapshot(site)
    args = ["apply", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--sbom", str(tmp_path / "s.json")]
    for epoch in ("99999999999999999", "²", "1e9"):
        r = CliRunner().invoke(cli_mod.main, args, env={"SOURCE_DATE_EPOCH": epoch})
        assert r.exit_code == 2 and "$SOURCE_DATE_EPOCH=" in r.output and snapshot(site) == before, r.output
    for gone in ("cyclonedx.output.json", "packageurl"):  # (any module the SBOM's imports need: a fresh user's
        monkeypatch.delitem(sys.modules, "fixpack.sbom", raising=False)  # lean venv lacked typing_extensions)
        monkeypatch.setitem(sys.modules, gone, None)  # (None: an import of it fails, ModuleNotFoundError)
        r = CliRunner().invoke(cli_mod.main, args)
        assert r.exit_code == 5 and f"the Python package {gone!r} is not installed" in r.output, r.output
        assert "apply --sbom, sbom and verify need" in r.output and snapshot(site) == before, r.output
        monkeypatch.undo()


def test_verify_without_the_schema_check_s_libraries_says_what_to_install(builder, plugin_wheel, tmp_path,  # noqa: F811
                                                                          monkeypatch):
    """Found by a fresh user: cyclonedx-python-lib without its json-validation extra made verify an internal
    error (exit 1, MissingOptionalDependencyException)."""
    from click.testing import CliRunner
    from cyclonedx.exception import MissingOptionalDependencyException
    from cyclonedx.validation.json import JsonStrictValidator

    from fixpack import cli as cli_mod

    pack, site = applied_image(builder, plugin_wheel)
    out = tmp_path / "image.cdx.json"
    assert cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out)).returncode == 0

    def missing(self, *a, **kw):  # type: ignore[no-untyped-def]
        raise MissingOptionalDependencyException("No module named 'jsonschema'")

    monkeypatch.setattr(JsonStrictValidator, "validate_str", missing)
    r = CliRunner().invoke(cli_mod.main, ["verify", "--sbom", str(out), "--pack", str(pack), "--root", f"demo={site}"])
    assert r.exit_code == 5 and "cyclonedx-python-lib[json-validation]" in r.output, r.output


def test_a_component_that_requires_another_depends_on_it_in_the_sbom(tmp_path):
    """Found by a fresh user: mxfp4-moe depended only on vLLM in the SBOM, not on muse-spark-open, which it
    requires."""
    from types import SimpleNamespace

    from fixpack.model import Component
    from fixpack.records import Manifest, ManifestComponent
    from fixpack.sbom import TargetState, build_bom, render
    from fixpack.targets import FoundTarget

    comps = (Component("port", tmp_path, "1.0", "demo"), Component("kern", tmp_path, "2.0", "demo", ("port",)))
    spec = SimpleNamespace(name="demo", distribution="demo-pkg", package="demo_pkg")
    ft = FoundTarget(spec, tmp_path, "1.0", "abcdef12", (), "--root")  # type: ignore[arg-type]
    manifest = Manifest("p1", "demo", {"version": "1.0", "commit": "abcdef12"}, {"version": "1.0", "commit": "x"}, (),
                        {}, components=(ManifestComponent("port", "1.0", "port-1.0.dist-info", {}),
                                        ManifestComponent("kern", "2.0", "kern-2.0.dist-info", {})))
    ctx = SimpleNamespace(profile=SimpleNamespace(name="p1", components=comps), pack=SimpleNamespace(fixes={}))
    doc = json.loads(render(build_bom(ctx, [TargetState(ft, manifest)])))  # type: ignore[arg-type]
    deps = {d["ref"]: set(d.get("dependsOn", [])) for d in doc["dependencies"]}
    assert deps["component:kern"] == {"target:demo", "component:port"} and deps["component:port"] == {"target:demo"}


def test_a_planted_upstreamed_record_is_not_told(builder, plugin_wheel, tmp_path):  # noqa: F811
    """Found by a fresh user: a manifest planted on a clean image with every fix recorded "upstreamed" (files {}): status
    said each fix absent (would apply), but the SBOM listed "upstreamed v1" for each, and verify agreed."""
    pack, site = applied_image(builder, plugin_wheel)
    mpath = site / ".fixpack/demo.manifest.json"
    data = json.loads(mpath.read_text())
    assert engine.revert(builder.request(site)).ok
    for f in data["fixes"]:
        f["state"], f["files"] = "upstreamed", {}
    data["files"], data["components"] = {}, []
    mpath.parent.mkdir(exist_ok=True)
    mpath.write_text(json.dumps(data))
    st = engine.status(builder.request(site))
    assert st.ok and {f.state.value for f in st.fixes if f.kind == "fix"} == {"absent"}, st.fixes
    doc = json.loads(sbom(Request(pack_root=pack, profile="p1", roots={"demo": site}), None).text)
    props = [p["name"] for c in doc["components"] for p in c.get("properties", [])]
    assert not [p for p in props if p.startswith("fixpack:fix:")], props


def test_sbom_of_an_image_a_killed_run_left_says_what_the_run_left(builder, plugin_wheel, tmp_path):  # noqa: F811
    """The sbom of an image with a run's journal or backups in it is refused (exit 3, nothing written) with the words
    status gives of what the run left: it called every leftover an interrupted run's journal, backups no journal names
    (no file half-written) too."""
    pack, site = applied_image(builder, plugin_wheel)
    for left, said in (("journal.json", "an interrupted run left a journal; the next apply or revert rolls it back"),
                       ("journal/0", "that no journal names (it was complete, or killed before it wrote its journal")):
        (site / ".fixpack" / left).parent.mkdir(parents=True, exist_ok=True)
        (site / ".fixpack" / left).write_text('{"entries": []}' if left == "journal.json" else "x")
        before = snapshot(site)
        out = tmp_path / "image.cdx.json"
        r = cli("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}", "--out", str(out))
        said_plain = " ".join(r.stderr.split())
        assert r.returncode == 3 and said in said_plain and "run apply (or revert) first" in said_plain, r.stderr
        assert not out.exists() and snapshot(site) == before
        (site / ".fixpack" / left).unlink()
