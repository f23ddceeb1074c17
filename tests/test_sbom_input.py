"""``verify --sbom FILE`` with a file that is no CycloneDX 1.6 document: exit 2 with one short line per
schema error (at most three, the JSON path of each), never the schema. Found by a fresh user: ``{}`` printed
17,067 lines (1.8 MB: the whole CycloneDX schema) on stderr, and ``--json``'s ``error`` carried the same.
And ``sbom``'s document is the same for the same image (its timestamp was the run's time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO
from test_components import plugin_wheel  # noqa: F401  (a fixture, used by name)


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


def test_the_same_image_gives_the_same_document(builder, plugin_wheel, tmp_path):  # noqa: F811
    """`sbom` to stdout twice gave two documents (``metadata.timestamp`` was the time of the run, unless
    $SOURCE_DATE_EPOCH was set), though the README promises the same document for an unchanged image: the
    timestamp is when the image reached its state (its manifest's time); a clean image's document has none."""
    from datetime import datetime, timezone

    from test_sbom import applied_image

    pack, site = applied_image(builder, plugin_wheel)
    args = ("sbom", "--pack", str(pack), "-p", "p1", "--root", f"demo={site}")
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    first, second = (subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env={**env, "PYTHONPATH": str(REPO)},
                                    capture_output=True, text=True) for _ in range(2))
    assert first.returncode == second.returncode == 0 and first.stdout == second.stdout, first.stderr
    stamp = json.loads(first.stdout)["metadata"]["timestamp"]
    manifest = site / ".fixpack/demo.manifest.json"
    when = datetime.fromtimestamp(manifest.stat().st_mtime_ns // 1000 / 1e6, tz=timezone.utc)
    assert datetime.fromisoformat(stamp.replace("Z", "+00:00")) == when, stamp
    fixed = subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True,
                           env={**env, "PYTHONPATH": str(REPO), "SOURCE_DATE_EPOCH": "1700000000"})
    assert json.loads(fixed.stdout)["metadata"]["timestamp"].startswith("2023-11-14T22:13:20")
    from fixpack import engine

    assert engine.revert(builder.request(site)).ok
    clean = [subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env={**env, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True).stdout for _ in range(2)]
    assert clean[0] == clean[1] and "timestamp" not in json.loads(clean[0])["metadata"]


def test_a_fifo_for_the_sbom_is_refused_unread(tmp_path):
    """`verify --sbom FIFO` waited for ever for a writer (found by a fresh user): it is named, never opened."""
    fifo = tmp_path / "sbom.json"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "verify", "--sbom", str(fifo), "-p", "v0.30.0",
                        "--target", "vllm", "--root", f"vllm={tmp_path}"], env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr == f"fixpack: error: the SBOM {fifo} is a FIFO (named pipe), not a regular file; " \
        "give the SBOM file itself\n", r.stderr


@pytest.mark.parametrize("case", ["missing", "not utf-8"])
def test_an_sbom_that_is_not_there_or_not_text_is_said_in_words(tmp_path, case):
    """Found by a fresh user: `verify --sbom MISSING` said Python's "[Errno 2] No such file or directory: '...'"."""
    path = tmp_path / "sbom.json"
    if case == "not utf-8":
        path.write_bytes(b'{"bomFormat": "\xff"}')
    r = cli("verify", "--sbom", str(path), "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={tmp_path}")
    assert r.returncode == 2 and "[Errno" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"fixpack: error: the SBOM {path} does not exist; give the file `fixpack sbom --out`"
                               if case == "missing" else
                               f"fixpack: error: the SBOM {path} is not UTF-8 text (invalid start byte at byte 15)"), \
        r.stderr
