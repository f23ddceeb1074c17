"""``verify --sbom FILE`` with a file that is no CycloneDX 1.6 document: exit 2 with one short line per
schema error (at most three, the JSON path of each), never the schema. Found by a fresh user: ``{}`` printed
17,067 lines (1.8 MB: the whole CycloneDX schema) on stderr, and ``--json``'s ``error`` carried the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env=env, capture_output=True, text=True,
                          cwd=REPO)


BAD = {
    "empty": ("{}", ["at $: 'bomFormat' is a required property", "at $: 'specVersion' is a required property"]),
    "not an object": ("[1]", ["at $: [1] is not of type 'object'"]),
    "many": (json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "extra": 1,
                         "components": [{"type": "nope", "name": "a"}, {"type": "nope", "name": "b"},
                                        {"type": "nope", "name": "c"}]}),
             ["at $: Additional properties are not allowed ('extra' was unexpected)",
              "at $.components[0].type: 'nope' is not one of ['application', ", "; and 1 more"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_an_invalid_sbom_is_said_in_a_few_short_lines(tmp_path, case):
    text, said = BAD[case]
    path = tmp_path / "x.json"
    path.write_text(text)
    r = cli("verify", "--sbom", str(path), "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={tmp_path}")
    assert r.returncode == 2 and r.stdout == "", r.stderr[:2000]
    assert len(r.stderr) < 1200 and r.stderr.count("\n") == 1, r.stderr[:2000]
    assert r.stderr.startswith(f"fixpack: error: {path} is not a valid CycloneDX 1.6 document: "), r.stderr[:300]
    for part in said:
        assert part in r.stderr, (part, r.stderr)
    j = cli("verify", "--sbom", str(path), "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={tmp_path}", "--json")
    doc = json.loads(j.stdout)
    assert j.returncode == 2 and doc["exit_code"] == 2 and len(doc["error"]) < 1200
    assert all(part in doc["error"] for part in said), doc["error"]
