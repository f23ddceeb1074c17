"""Two JSON or TOML documents well-formed in syntax that the parsers cannot read: one nested deeper than they
follow (``'[' * 100000``) and one with an integer longer than Python converts (``sys.get_int_max_str_digits()``,
4300 digits). Each is one more malformed document, refused with its file's own error and exit code: 3 with the
recovery steps for the state (manifest, journal), 2 naming file:line for the pack (profile, fix.toml, lock), an
SBOM and ``apply_all.py``; ``--json`` carries the same code; nothing is written. Found by fresh users: each was
``internal error: RecursionError`` or ``ValueError('Exceeds the limit (4300 digits) ...')`` (please report it),
exit 1. (A rebase's ``state.json``: tests/test_rebase_trust.py.)"""

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
LONG = "1" + "0" * 5000
# kind: (a JSON state file, a TOML value, a JSON lock or SBOM, what the error says)
KINDS = {"deep": ({"demo.manifest.json": DEEP, "journal.json": '{"a":' * 50000}, DEEP + "]" * 100000, DEEP,
                  "nested too deeply"),
         "long": ({"demo.manifest.json": '{"schema": ' + LONG + "}", "journal.json": '{"schema": ' + LONG + "}"},
                  LONG, '{"bomFormat": "CycloneDX", "version": ' + LONG + "}", "an integer of more than 4300 digits")}
STATES = [(kind, name) for kind in KINDS for name in ("demo.manifest.json", "journal.json")]
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


def test_the_readers_say_a_long_integer_is_malformed_with_the_line():
    said = KINDS["long"][3]
    with pytest.raises(json.JSONDecodeError, match=said) as exc:
        loads_json('{"a": "12345",\n"b": ' + LONG + "}")
    assert exc.value.lineno == 2
    with pytest.raises(ValueError, match=rf"{said} \(at line 2, column 5\)"):
        loads_toml('a = "1234"\nx = ' + LONG + "\n")
    with pytest.raises(json.JSONDecodeError, match="Expecting"):  # other faults keep their own words
        loads_json('{"a": 1')
    assert loads_json("[" + "9" * 4300 + "]") == [int("9" * 4300)]


@pytest.mark.parametrize("kind, name", STATES)
def test_an_unreadable_state_file_is_damaged_state(applied, kind, name):
    b, image = applied
    (image / ".fixpack" / name).write_text(KINDS[kind][0][name])
    before = snapshot(b.base)
    for command, call in COMMANDS.items():
        code, said = outcome(lambda: call(b.request(image)))
        assert code == 3, (command, said)
        assert f"the state in {image / '.fixpack' / name} is damaged: not valid JSON (line 1: {KINDS[kind][3]}" \
            in said and "nothing was written" in said, (command, said)
        if name == "journal.json":  # the steps of any damaged journal: put the files back, then remove it
            assert "1. put the" in said and "2. remove the journal" in said, said
        assert snapshot(b.base) == before
    r = cli("status", "--json", "--profile", "p1", "--pack", str(b.pack), "--root", f"demo={image}")
    assert r.returncode == 3 and json.loads(r.stdout)["exit_code"] == 3, r.stdout[-500:]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("where", ["profiles/p1.toml", "fixes/one/fix.toml"])
def test_an_unreadable_toml_in_the_pack_is_bad_input_at_its_line(applied, where, kind):
    b, image = applied
    path = b.pack / where
    lines = path.read_text().count("\n")
    with path.open("a") as f:
        f.write(f"x = {KINDS[kind][1]}\n")
    said = f"{lines + 1}: malformed TOML: {KINDS[kind][3]}"
    before = snapshot(b.base)
    for command, call in COMMANDS.items():
        code, told = outcome(lambda: call(b.request(image)))
        assert code == 2 and f"{path}:{said}" in told, (command, told)
        assert snapshot(b.base) == before
    r = cli("status", "--json", "--profile", "p1", "--pack", str(b.pack), "--root", f"demo={image}")
    assert r.returncode == 2 and json.loads(r.stdout)["exit_code"] == 2, r.stdout[-500:]
    r = cli("check", "--pack", str(b.pack))
    assert r.returncode == 2 and f"{where}:{said}" in r.stdout + r.stderr, (r.stdout + r.stderr)[-800:]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_unreadable_lock_is_a_lock_that_does_not_read(applied, kind):
    b, image = applied
    lock = b.pack / "profiles/p1.lock"
    lock.write_text(KINDS[kind][2].replace('"bomFormat": "CycloneDX", "version"', '"fixes"'))
    before = snapshot(b.base)
    for command in ("status", "apply"):
        code, said = outcome(lambda: COMMANDS[command](b.request(image)))
        assert code == 2 and f"{lock}:1: the lock is not valid JSON ({KINDS[kind][3]}" in said, (command, said)
        assert "lock --profile p1" in said and snapshot(b.base) == before


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_unreadable_sbom_is_no_cyclonedx_document(tmp_path, kind):
    path = tmp_path / "x.json"
    path.write_text(KINDS[kind][2])
    r = cli("verify", "--sbom", str(path), "-p", "v0.30.0", "--target", "vllm", "--root", f"vllm={tmp_path}")
    assert r.returncode == 2 and r.stderr.startswith(f"fixpack: error: {path} is not a CycloneDX 1.6 JSON document: ")
    assert KINDS[kind][3] in r.stderr and r.stderr.count("\n") == 1, r.stderr[-800:]


def test_apply_all_says_a_long_integer_in_the_profile(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    subprocess.run(["cp", "-a", *(str(REPO / n) for n in ("fixpack", "apply_all.py", "profiles", "fixes")), str(pack)],
                   check=True)
    prof = pack / "profiles/v0.30.0.toml"
    prof.write_text(prof.read_text().replace('version = "0.30.0"', f"version = {LONG}", 1))
    r = subprocess.run([sys.executable, str(pack / "apply_all.py"), "--profile", "v0.30.0"], capture_output=True,
                       text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    assert r.returncode == 2 and f"malformed TOML: {KINDS['long'][3]}" in r.stderr, r.stderr[-800:]
