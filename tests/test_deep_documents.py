"""A JSON or TOML document nested deeper than the parser can follow (``'[' * 100000``) is one more malformed
document, refused with its file's own error and exit code: 3 with the recovery steps for the state (manifest,
journal), 2 naming file:line for the pack (profile, fix.toml, lock) and an SBOM; ``--json`` carries the same
code; nothing is written. Found by a fresh user: each was ``internal error: RecursionError ... (please report
it)``, exit 1. (A rebase's ``state.json``: tests/test_rebase_trust.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, one_fix_pack, snapshot

from fixpack import engine
from fixpack.documents import loads_json, loads_toml
from fixpack.errors import FixpackError

DEEP = "[" * 100000
COMMANDS = {"status": engine.status, "apply": engine.apply, "revert": engine.revert}


def outcome(call):
    try:
        r = call()
    except FixpackError as exc:
        return exc.exit_code, str(exc)
    return r.exit_code, r.error


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], env=env, capture_output=True, text=True,
                          cwd=REPO)


@pytest.fixture
def applied(builder):
    image = one_fix_pack(builder)
    assert engine.apply(builder.request(image)).ok
    return builder, image


def test_the_readers_say_too_deep_as_malformed_with_the_line():
    with pytest.raises(json.JSONDecodeError, match="nested too deeply") as exc:
        loads_json('{"a": 1,\n"b": ' + DEEP)
    assert exc.value.lineno == 2
    with pytest.raises(ValueError, match=r"nested too deeply to read \(at line 3, column 105\)"):
        loads_toml('a = 1\n# [[[[ a comment\nx = ' + DEEP + "]" * 100000 + "\n")
    assert loads_json("[[1]]") == [[1]] and loads_toml("x = [[1]]") == {"x": [[1]]}


@pytest.mark.parametrize("name, text", [("demo.manifest.json", DEEP), ("journal.json", '{"a":' * 50000)])
def test_a_deep_state_file_is_damaged_state(applied, name, text):
    b, image = applied
    (image / ".fixpack" / name).write_text(text)
    before = snapshot(b.base)
    for command, call in COMMANDS.items():
        code, said = outcome(lambda: call(b.request(image)))
        assert code == 3, (command, said)
        assert f"the state in {image / '.fixpack' / name} is damaged: not valid JSON (line 1: nested too deeply" \
            in said and "nothing was written" in said, (command, said)
        if name == "journal.json":  # the steps of any damaged journal: put the files back, then remove it
            assert "1. put the" in said and "2. remove the journal" in said, said
        assert snapshot(b.base) == before
    r = cli("status", "--json", "--profile", "p1", "--pack", str(b.pack), "--root", f"demo={image}")
    assert r.returncode == 3 and json.loads(r.stdout)["exit_code"] == 3, r.stdout[-500:]


@pytest.mark.parametrize("where", ["profiles/p1.toml", "fixes/one/fix.toml"])
def test_a_deep_toml_in_the_pack_is_bad_input_at_its_line(applied, where):
    b, image = applied
    path = b.pack / where
    lines = path.read_text().count("\n")
    with path.open("a") as f:
        f.write("x = " + DEEP + "]" * 100000 + "\n")
    before = snapshot(b.base)
    for command, call in COMMANDS.items():
        code, said = outcome(lambda: call(b.request(image)))
        assert code == 2 and f"{path}:{lines + 1}: malformed TOML: nested too deeply" in said, (command, said)
        assert snapshot(b.base) == before
    r = cli("status", "--json", "--profile", "p1", "--pack", str(b.pack), "--root", f"demo={image}")
    assert r.returncode == 2 and json.loads(r.stdout)["exit_code"] == 2, r.stdout[-500:]
    r = cli("check", "--pack", str(b.pack))
    assert r.returncode == 2 and f"{where}:{lines + 1}: malformed TOML: nested too deeply" in r.stdout + r.stderr, \
        (r.stdout + r.stderr)[-800:]


def test_a_deep_lock_is_a_lock_that_does_not_read(applied):
    b, image = applied
    lock = b.pack / "profiles/p1.lock"
    lock.write_text(DEEP)
    before = snapshot(b.base)
    for command in ("status", "apply"):
        code, said = outcome(lambda: COMMANDS[command](b.request(image)))
        assert code == 2 and f"{lock}:1: the lock is not valid JSON (nested too deeply" in said, (command, said)
        assert "lock --profile p1" in said and snapshot(b.base) == before


def test_a_deep_sbom_is_no_cyclonedx_document(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(DEEP)
    r = cli("verify", "--sbom", str(path), "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={tmp_path}")
    assert r.returncode == 2 and r.stderr.startswith(f"fixpack: error: {path} is not a CycloneDX 1.6 JSON document: ")
    assert "nested too deeply" in r.stderr and r.stderr.count("\n") == 1, r.stderr[-800:]
