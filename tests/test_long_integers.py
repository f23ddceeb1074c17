"""A JSON or TOML integer longer than Python converts (``sys.get_int_max_str_digits()``, 4300 digits) is one
more malformed document, refused with its file's own error and exit code, as a document nested too deeply is
(tests/test_deep_documents.py): 3 for the state (manifest, journal), 2 naming file:line for the pack (profile,
fix.toml, lock), an SBOM and ``apply_all.py``; nothing is written. Found by a fresh user: each was ``internal
error: ValueError('Exceeds the limit (4300 digits) for integer string conversion ...')``, exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, one_fix_pack, snapshot
from test_deep_documents import COMMANDS, cli, outcome

from fixpack.documents import loads_json, loads_toml

LONG = "1" + "0" * 5000
SAID = "an integer of more than 4300 digits"


@pytest.fixture
def applied(builder):
    from fixpack import engine

    image = one_fix_pack(builder)
    assert engine.apply(builder.request(image)).ok
    return builder, image


def test_the_readers_say_a_long_integer_is_malformed_with_the_line():
    with pytest.raises(json.JSONDecodeError, match=SAID) as exc:
        loads_json('{"a": "12345",\n"b": ' + LONG + "}")
    assert exc.value.lineno == 2
    with pytest.raises(ValueError, match=rf"{SAID} \(at line 2, column 5\)"):
        loads_toml('a = "1234"\nx = ' + LONG + "\n")
    with pytest.raises(json.JSONDecodeError, match="Expecting"):  # other faults keep their own words
        loads_json('{"a": 1')
    assert loads_json("[" + "9" * 4300 + "]") == [int("9" * 4300)]


@pytest.mark.parametrize("name", ["demo.manifest.json", "journal.json"])
def test_a_long_integer_in_a_state_file_is_damaged_state(applied, name):
    b, image = applied
    (image / ".fixpack" / name).write_text('{"schema": ' + LONG + "}")
    before = snapshot(b.base)
    for command, call in COMMANDS.items():
        code, said = outcome(lambda: call(b.request(image)))
        assert code == 3, (command, said)
        assert f"the state in {image / '.fixpack' / name} is damaged: not valid JSON (line 1: {SAID}" in said, said
        assert snapshot(b.base) == before
    r = cli("status", "--json", "--profile", "p1", "--pack", str(b.pack), "--root", f"demo={image}")
    assert r.returncode == 3 and json.loads(r.stdout)["exit_code"] == 3, r.stdout[-500:]


@pytest.mark.parametrize("where", ["profiles/p1.toml", "fixes/one/fix.toml"])
def test_a_long_integer_in_a_pack_toml_is_bad_input_at_its_line(applied, where):
    b, image = applied
    path = b.pack / where
    lines = path.read_text().count("\n")
    with path.open("a") as f:
        f.write(f"x = {LONG}\n")
    before = snapshot(b.base)
    for command, call in COMMANDS.items():
        code, said = outcome(lambda: call(b.request(image)))
        assert code == 2 and f"{path}:{lines + 1}: malformed TOML: {SAID}" in said, (command, said)
        assert snapshot(b.base) == before
    r = cli("check", "--pack", str(b.pack))
    assert r.returncode == 2 and f"{where}:{lines + 1}: malformed TOML: {SAID}" in r.stdout + r.stderr


def test_a_long_integer_in_the_lock_is_a_lock_that_does_not_read(applied):
    b, image = applied
    lock = b.pack / "profiles/p1.lock"
    lock.write_text('{"fixes": ' + LONG + "}")
    before = snapshot(b.base)
    for command in ("status", "apply"):
        code, said = outcome(lambda: COMMANDS[command](b.request(image)))
        assert code == 2 and f"{lock}:1: the lock is not valid JSON ({SAID}" in said, (command, said)
        assert snapshot(b.base) == before


def test_apply_all_says_a_long_integer_in_the_profile(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    subprocess.run(["cp", "-a", *(str(REPO / n) for n in ("fixpack", "apply_all.py", "profiles", "fixes")), str(pack)],
                   check=True)
    prof = pack / "profiles/v0.30.0.toml"
    prof.write_text(prof.read_text().replace('version = "0.30.0"', f"version = {LONG}", 1))
    r = subprocess.run([sys.executable, str(pack / "apply_all.py"), "--profile", "v0.30.0"], capture_output=True,
                       text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    assert r.returncode == 2 and f"malformed TOML: {SAID}" in r.stderr, r.stderr[-800:]


def test_a_long_integer_in_an_sbom_is_no_cyclonedx_document(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"bomFormat": "CycloneDX", "version": ' + LONG + "}")
    r = cli("verify", "--sbom", str(path), "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={tmp_path}")
    assert r.returncode == 2 and r.stderr.startswith(f"fixpack: error: {path} is not a CycloneDX 1.6 JSON document: ")
    assert SAID in r.stderr and r.stderr.count("\n") == 1, r.stderr[-800:]
