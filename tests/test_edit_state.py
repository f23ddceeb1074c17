"""A damaged ``.edit/<fix>.json`` (the state ``edit`` keeps beside its work tree) is damaged state: exit 3
naming the file and the key, with the command that drops the edit, no Python internals, nothing written.
Found by a fresh user: it was exit 2, saying ``EditState.__init__() got an unexpected keyword argument
'schema'``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, one_fix_pack, snapshot
from test_authoring import pack3  # noqa: F401 (a fixture)

from fixpack.editwork import start
from fixpack.errors import BadInputError


def _state(builder, **over):
    data = {"fix": "one", "profile": "p1", "target": "demo", "new": False, "after": "", "opt_in": False,
            "release": str(builder.base / "clean"), "work": str(builder.pack / ".edit/one"), "version": 1,
            "change": "", "base": {}}
    data.update(over)
    return json.dumps({k: v for k, v in data.items() if v is not None}).encode()


CASES = {
    "an unknown key": (lambda b: _state(b, schema=1), "key 'schema' is not one an edit state has"),
    "no JSON": (lambda b: b"{not json\n", "not valid JSON (line 1: Expecting property name"),
    "not UTF-8": (lambda b: b'{"fix": "\xff"}', "bytes that are not UTF-8 at byte offset 9"),
    "a list": (lambda b: b"[]", "a JSON list, not an object"),
    "a key missing": (lambda b: _state(b, work=None), "key 'work' is missing"),
    "a string for a bool": (lambda b: _state(b, new="yes"), "key 'new' is \"yes\", not true or false"),
    "a negative version": (lambda b: _state(b, version=-1), "key 'version' is -1, not a fix version"),
    "a huge version": (lambda b: _state(b, version=10**20), "key 'version' is 100000000000000000000, not a fix"),
    "a base of numbers": (lambda b: _state(b, base={"x": 1}), "key 'base' is {\"x\": 1}, not an object of fix"),
    "a target the profile lacks": (lambda b: _state(b, target="nope"), "key 'target' is \"nope\", not a target "
                                                                         "of profile p1 (demo)"),
    "a profile that is a path": (lambda b: _state(b, profile="../../x"), "key 'profile' is \"../../x\", not a "
                                                                         "profile name"),
    "version 0 for a fix in the pack": (lambda b: _state(b, version=0, change="a" * 64),
                                        "key 'version' is 0 (a new fix's), but the edit started from fix one"),
    "a change that is no sha256": (lambda b: _state(b, change="xyz"), "key 'change' is \"xyz\", not the sha256 of a "
                                                                     "change"),
    "a refresh's change that is no sha256": (lambda b: _state(b, wrote_version=2, wrote_change="0" * 63),
                                             "key 'wrote_change' is \"000"),
    "a refresh's version that is a string": (lambda b: _state(b, wrote_version="2"), "key 'wrote_version' is \"2\", "
                                                                                      "not a fix version"),
    "an after that is a path": (lambda b: _state(b, after="../z"), "key 'after' is \"../z\", not a fix id"),
    "a base keyed by a path": (lambda b: _state(b, base={"../a": "0" * 64}), "key 'base' has {\"../a\": \"000"),
    "a base digest not sha256": (lambda b: _state(b, base={"a": "xyz"}), "key 'base' has {\"a\": \"xyz\"}, not"),
    "a new fix after no fix": (lambda b: _state(b, new=True, after="zz"), "key 'after' is \"zz\", not a fix in "
                                                                         "fixes/series"),
    "another work tree": (lambda b: _state(b, work="/elsewhere"), "not an edit state this tool wrote (it names "
                                                                  "fix 'one' in /elsewhere"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_edit_state_is_damaged_state(builder, case):
    one_fix_pack(builder)
    make, said = CASES[case]
    path = builder.pack / ".edit/one.json"
    path.parent.mkdir()
    path.write_bytes(make(builder))
    before = snapshot(builder.base)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", "one", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 3, r.stderr
    assert f"the state in {path} is damaged: {said}" in r.stderr, r.stderr
    assert "drop the edit with `" in r.stderr and "edit --abort one --pack" in r.stderr, r.stderr
    assert "EditState" not in r.stderr and "__init__" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert snapshot(builder.base) == before


def test_an_edit_state_as_edit_writes_it_is_read(builder):
    from fixpack.editstate import find

    one_fix_pack(builder)
    path = builder.pack / ".edit/one.json"
    path.parent.mkdir()
    path.write_bytes(_state(builder))
    assert find(builder.pack, "one").version == 1
    path.write_bytes(_state(builder, version=None, change=None, base=None))  # an edit an earlier fixpack started
    assert find(builder.pack, "one").version == 0


def test_an_edit_state_too_large_is_damaged_state_unread(builder):
    """.edit/<fix>.json was read whole whatever its size: past the state's cap (documents.MAX_STATE_BYTES) it
    is damaged state, exit 3 naming it, as the manifest and the journal are."""
    from fixpack.documents import MAX_STATE_BYTES

    one_fix_pack(builder)
    path = builder.pack / ".edit/one.json"
    path.parent.mkdir()
    with path.open("wb") as f:  # (sparse: only its size is big)
        f.truncate(MAX_STATE_BYTES + 1)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "refresh", "one", "--pack", str(builder.pack)],
                       capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 3, r.stderr
    assert f"the state in {path} is damaged: {MAX_STATE_BYTES + 1} bytes, more than any state" in r.stderr, r.stderr
    assert "edit --abort one --pack" in r.stderr and os.path.getsize(path) == MAX_STATE_BYTES + 1


def test_edit_over_a_stray_folder_says_what_it_is(pack3):  # noqa: F811
    """Found by a fresh maintainer: `edit b` over a stray .edit/b (no state beside it) said "an edit of b is in
    progress", with refresh and --abort (which refuses it, exit 3) as the ways on."""
    builder, clean = pack3
    (builder.pack / ".edit" / "b").mkdir(parents=True)
    with pytest.raises(BadInputError, match=r"\.edit/b is there, but no edit made it \(no .*\.edit/b\.json beside it\): "
                                            r"move it out of"):
        start(builder.pack, "p1", "b", roots={"demo": clean})
    work = start(builder.pack, "p1", "c", roots={"demo": clean}).work
    with pytest.raises(BadInputError, match=r"an edit of c is in progress in "):
        start(builder.pack, "p1", "c", roots={"demo": clean})
    assert os.path.isdir(work)
