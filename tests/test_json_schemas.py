"""Every command's ``--json`` document against its JSON Schema (schemas/<kind>.schema.json, draft 2020-12),
with the ``jsonschema`` library: results, failures, and click's usage errors (JSON too under --json)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, git, numbered

from fixpack.cli_plain import envelope
from fixpack.prove import ProofResult, ProofRun

SCHEMAS = REPO / "schemas"
# the machine's release copy cache, read before the tests isolate $HOME and $XDG_CACHE_HOME
CACHE = Path(os.environ.get("FIXPACK_TEST_CACHE") or
             Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fixpack")
MOD = "demo_pkg/mod.py"
KINDS = {"apply": "report", "status": "report", "revert": "report", "lock": "lock", "fetch": "fetch",
         "prove": "prove", "format": "format", "refresh": "refresh", "rebase": "rebase", "check": "check",
         "edit": "edit", "new": "edit", "import": "import", "export": "export"}


def schema(kind):
    return json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


def validate(doc, kind):
    jsonschema.Draft202012Validator(schema(kind)).validate(doc)
    if not doc["ok"]:
        jsonschema.Draft202012Validator(schema("error")).validate(doc)
    return doc


def fixpack(*args, cwd=REPO):
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, cwd=cwd)
    return r, json.loads(r.stdout)


@pytest.fixture
def setup(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    builder.add_fix("opt", {MOD: base}, {MOD: base.replace("line 15\n", "fifteen\n")}, opt_in=True)
    builder.profile(["one"], ["opt"])
    builder.lock(clean)
    return builder, clean, builder.tree("image", {MOD: base})


def test_every_schema_is_a_valid_draft_2020_12_schema():
    kinds = sorted(p.name.split(".")[0] for p in SCHEMAS.glob("*.schema.json"))
    assert set(KINDS.values()) | {"error"} <= set(kinds)
    for kind in kinds:
        jsonschema.Draft202012Validator.check_schema(schema(kind))
        assert schema(kind)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_apply_status_revert_documents(setup):
    b, _clean, image = setup
    common = ["--pack", str(b.pack), "-p", "p1", "--root", f"demo={image}", "--json"]
    for cmd in (["apply", "--dry-run"], ["apply", "opt"], ["status"], ["revert"]):
        r, doc = fixpack(*cmd, *common)
        assert r.returncode == 0, r.stdout
        validate(doc, "report")
    (image / MOD).write_text(numbered(20).replace("line 2\n", "LINE 2\n"))
    r, doc = fixpack("apply", *common)
    assert r.returncode == 4 and validate(doc, "report")["fixes"][0]["refused"]


def test_lock_documents_say_what_was_fingerprinted(setup):
    b, clean, _image = setup
    args = ["--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}", "--json"]
    r, doc = fixpack("lock", "--check", *args)
    assert r.returncode == 0 and validate(doc, "lock")["check"] and not doc["written"]
    assert [f["id"] for f in doc["fixes"]] == ["one", "opt"] and doc["targets"]["demo"]["version"] == "1.0"
    r, doc = fixpack("lock", *args)
    assert r.returncode == 0 and not validate(doc, "lock")["written"]  # unchanged: left alone
    (b.pack / "profiles/p1.lock").write_text("{}")
    r, doc = fixpack("lock", "--check", *args)
    assert r.returncode == 2 and "not a fixpack lock" in validate(doc, "lock")["error"]
    r, doc = fixpack("lock", *args)
    assert r.returncode == 0 and validate(doc, "lock")["written"]


def test_format_and_refresh_documents(setup):
    b, clean, _image = setup
    r, doc = fixpack("format", "--check", "--pack", str(b.pack), "--json")
    validate(doc, "format")
    assert r.returncode == doc["exit_code"] and doc["check"]
    r, doc = fixpack("refresh", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={clean}", "one", "--json")
    assert r.returncode == 0, doc
    assert validate(doc, "refresh")["refreshed"][0].endswith(".patch")


def test_edit_refresh_export_import_documents(setup, tmp_path):
    b, clean, _image = setup
    pack = ("--pack", str(b.pack), "--json")
    r, doc = fixpack("edit", "one", "-p", "p1", "--root", f"demo={clean}", *pack)
    assert r.returncode == 0 and validate(doc, "edit")["work"].endswith(".edit/one"), doc
    r, doc = fixpack("refresh", "one", *pack)
    # the builder's patch is not in the deterministic form yet: refresh writes it so, and the lock with it
    assert r.returncode == 0 and validate(doc, "refresh")["refreshed"] == ["fixes/one/0001-change.patch"], doc
    assert doc["locks"] == ["profiles/p1.lock"] and doc["later"] == [{"id": "opt", "state": "exact", "detail": ""}]
    r, doc = fixpack("edit", "--abort", *pack)
    assert r.returncode == 0 and validate(doc, "edit")["removed"].endswith(".edit/one"), doc
    r, doc = fixpack("new", "two", "-p", "p1", "--target", "nosuch", *pack)
    assert r.returncode == 2 and "not a target of profile p1" in validate(doc, "edit")["error"]
    r, doc = fixpack("export", "-p", "p1", "opt", "--out", str(tmp_path / "series"), *pack)
    assert r.returncode == 0 and validate(doc, "export")["files"][-1] == "series", doc
    r, doc = fixpack("import", str(tmp_path / "series" / "0002-opt-change.patch"), "--as", "opt2", "-p", "p1",
                     "--root", f"demo={clean}", *pack)
    # the same change as opt, placed before it: opt no longer applies on top, so nothing is written
    assert r.returncode == 4 and "later fixes of profile p1" in validate(doc, "import")["error"], doc


def test_check_documents(setup):
    b, _clean, _image = setup
    r, doc = fixpack("check", "--pack", str(b.pack), "--json")  # the built fixes have no proof yet
    assert r.returncode == 2 == validate(doc, "check")["exit_code"]
    assert [(f["file"], f["line"]) for f in doc["findings"]] == [("fixes/one/fix.toml", 1), ("fixes/opt/fix.toml", 1)]
    for fid in ("one", "opt"):
        (b.pack / f"fixes/{fid}/test_{fid}.py").write_text("def test_it():\n    pass\n")
    r, doc = fixpack("check", "--pack", str(b.pack), "--json")
    assert r.returncode == 0 and validate(doc, "check")["findings"] == [] and doc["profiles"] == ["p1"]


@pytest.mark.release
def test_check_fresh_on_the_committed_pack():
    """CI's pack lint with lock freshness: every committed lock regenerated on its release copy (cached)."""
    r, doc = fixpack("check", "--fresh", "--cache", str(CACHE), "--json")
    assert r.returncode == 0 and validate(doc, "check")["fresh"] and doc["findings"] == [], doc


def test_fetch_failure_document(setup):
    b, _clean, _image = setup
    r, doc = fixpack("fetch", "--pack", str(b.pack), "-p", "p1", "--target", "nosuch", "--json")
    assert r.returncode == 2 and "unknown target" in validate(doc, "fetch")["error"]


@pytest.mark.release
def test_fetch_document_from_the_cache():
    r, doc = fixpack("fetch", "-p", "v0.30.0", "--target", "vllm", "--json", "--cache", str(CACHE))
    assert r.returncode == 0, doc
    assert validate(doc, "fetch")["targets"][0]["name"] == "vllm"


@pytest.mark.release
def test_status_of_the_real_profile_with_its_components(tmp_path):
    """The pack's own profile lists its components (string versions, kind 'component') beside its fixes."""
    r, doc = fixpack("fetch", "-p", "v0.30.0", "--target", "vllm", "--json", "--cache", str(CACHE))
    copy = tmp_path / "vllm-0.30.0"
    shutil.copytree(doc["targets"][0]["root"], copy, symlinks=True)
    r, doc = fixpack("status", "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={copy}", "--json")
    assert r.returncode == 0, doc
    kinds = {f["id"]: f.get("kind") for f in validate(doc, "report")["fixes"]}
    assert kinds["muse-spark-open"] == "component" and kinds["seeded-sampling"] == "fix"


def test_prove_documents():
    run = ProofRun([ProofResult("a", 1, "1 failed", 0, "1 passed"), ProofResult("b", 0, "1 passed", 0, "1 passed")],
                   True, True)
    validate(envelope("prove", "v0.30.0", run.exit_code, "not every fix is proven", python="py", target="",
                      **run.as_dict()), "prove")
    r, doc = fixpack("prove", "-p", "nosuch", "--python", sys.executable, "--json")
    assert r.returncode == 2 and validate(doc, "prove")["error"]


def test_rebase_documents(builder):
    b = builder
    base = numbered(20)
    old = b.tree("old", {MOD: base})
    b.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    b.profile(["one"])
    b.lock(old)
    git(b.pack, "init", "-q", "-b", "main")
    (b.pack / ".gitignore").write_text("/reports/\n/.rebase/\n")
    git(b.pack, "add", "-A")
    git(b.pack, "commit", "-qm", "pack")
    b.version, b.commit = "2.0", "fedcba9876"
    new = b.tree("new", {MOD: "new first line\n" + base})
    r, doc = fixpack("rebase", "--pack", str(b.pack), "-p", "p1", "--root", f"demo={new}", "--old-root",
                     f"demo={old}", "--json")
    assert r.returncode == 0, doc
    assert validate(doc, "rebase")["fixes"][0]["outcome"] in ("exact", "merged")
    r, doc = fixpack("rebase", "--pack", str(b.pack), "--abort", "--json")
    assert r.returncode == 2 and "no rebase in progress" in validate(doc, "rebase")["error"]


@pytest.mark.parametrize("command", sorted(KINDS))
def test_usage_errors_are_json_under_json(command):
    r, doc = fixpack(command, "--no-such-option", "--json")
    assert r.returncode == 2 and doc["command"] == command and doc["error"].startswith("usage: ")
    validate(doc, KINDS[command])


def test_usage_errors_of_the_group_are_json_too():
    r, doc = fixpack("frobnicate", "--json")
    assert r.returncode == 2 and doc["command"] == "" and "frobnicate" in doc["error"]
    jsonschema.Draft202012Validator(schema("error")).validate(doc)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "--bogus"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and r.stdout == "" and "No such option" in r.stderr
