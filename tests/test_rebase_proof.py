"""Proofs inside a rebase: a carried fix is proven on a stand-in image of the new release, reported
broken when its proof fails there whatever its text did, and upstreamed when the proof passes without
it. The stand-in here is this interpreter with the new release copy first on its path."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git, numbered, snapshot
from test_rebase import commit_pack, new_release, outcomes, pack_files

from fixpack import rebase
from fixpack.errors import BadInputError
from fixpack.prove import run_proof

MOD = "demo_pkg/mod.py"
BASE = numbered(10, "# line") + "VALUE = 1\n" + numbered(10, "# tail")
PROOF = "import demo_pkg.mod as m\n\n\ndef test_value_is_two():\n    assert m.VALUE == 2\n"


def make_pack(b):
    old = b.tree("old", {MOD: BASE})
    folder = b.add_fix("value", {MOD: BASE}, {MOD: BASE.replace("VALUE = 1", "VALUE = 2")})
    (folder / "test_value.py").write_text(PROOF)
    b.profile(["value"])
    b.lock(old)
    commit_pack(b)
    return old


def start(b, old, new, **kw):
    return rebase.start(rebase.RebaseRequest(pack_root=b.pack, profile="p1", roots={"demo": new},
                                             old_roots={"demo": old}, python=sys.executable, proof_site=new, **kw))


def test_a_carried_fix_is_proven_on_the_new_release(builder):
    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: "# moved\n" + BASE})
    r = start(b, old, new)
    assert r.status == "done" and outcomes(r) == {"value": "exact"}
    assert r.fixes[0].proof == "proven"
    assert "| value | exact | proven |" in r.markdown
    assert any("fails on the clean 2.0" in e and "passes with the fix" in e for e in r.fixes[0].evidence)
    assert (b.pack / "profiles/v2.0.toml").is_file()


def test_a_clean_text_carry_whose_proof_fails_is_broken_and_stops(builder):
    b = builder
    old = make_pack(b)
    before = pack_files(b)
    # upstream now scales VALUE after it is set: the fix's line still carries exactly, its effect does not
    new = new_release(b, {MOD: BASE + "VALUE = VALUE * 10\n"})
    r = start(b, old, new)
    assert r.status == "conflicts" and r.exit_code == 4
    o = r.fixes[0]
    assert o.outcome == "broken" and o.proof == "fails with the fix"
    assert any("its text carried (exact), but its proof fails on 2.0" in e and "assert 20 == 2" in e
               for e in o.evidence)
    assert pack_files(b) == before and not (b.pack / "profiles/v2.0.toml").exists()
    # the maintainer repairs the change on branch rebased, then --continue proves it again
    repo = b.pack / ".rebase/v2.0/value"
    (repo / MOD).write_text(BASE.replace("VALUE = 1", "VALUE = 2") + "VALUE = VALUE * 10 // 10\n")
    git(repo, "commit", "-qam", "value: keep VALUE at 2 after upstream's scaling")
    assert r.continue_flags == ("--python", sys.executable)  # the printed --continue gives the start's --python
    assert any(f"then `fixpack rebase --continue --python {sys.executable}`, which runs the proof again" in e
               for e in o.evidence), o.evidence
    work = snapshot(b.pack)
    with pytest.raises(BadInputError) as err:  # never the state's interpreter on its word: give it again
        rebase.resume(rebase.RebaseRequest(pack_root=b.pack))
    assert f"was started with a --python (this state file names {sys.executable})" in str(err.value) and \
        str(err.value).endswith("--name v2.0 --python PATH`; nothing was run or written")
    assert snapshot(b.pack) == work
    done = rebase.resume(rebase.RebaseRequest(pack_root=b.pack, python=sys.executable, proof_site=new))
    assert done.status == "done" and outcomes(done) == {"value": "resolved"} and done.fixes[0].proof == "proven"


def test_a_proof_that_passes_without_the_fix_proposes_dropping_it(builder):
    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: BASE + "VALUE = 2  # upstream's own fix\n"})
    r = start(b, old, new)
    o = r.fixes[0]
    assert r.status == "done" and o.outcome == "upstreamed" and o.proof == "passes without the fix"
    assert any("proposed for dropping" in f for f in o.flags)
    text = (b.pack / "profiles/v2.0.toml").read_text()
    assert '"value", # upstreamed in this release: proposed for dropping' in text  # kept listed, not dropped


def test_continue_without_a_proof_needs_an_explicit_flag(builder):
    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: BASE.replace("VALUE = 1", "VALUE = 3")})  # the fix's line changed: a conflict
    r = rebase.start(rebase.RebaseRequest(pack_root=b.pack, profile="p1", roots={"demo": new},
                                          old_roots={"demo": old}))
    assert outcomes(r) == {"value": "conflict"}
    try:
        rebase.resume(rebase.RebaseRequest(pack_root=b.pack))
    except BadInputError as exc:
        assert "--allow-unproven" in str(exc)
    else:
        raise AssertionError("a --continue without a proof went on")
    cli = subprocess.run([sys.executable, "-m", "fixpack.cli", "rebase", "--continue", "--pack", str(b.pack)],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "--allow-unproven" in cli.stderr


def test_a_missing_python_is_refused_before_anything_is_written(builder, tmp_path):
    """`--python` naming no interpreter: exit 2 naming it and how to build one, no `.rebase/` state left
    (it was an internal error, exit 1, and the state.json it left made the next run 'in progress')."""
    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: "# moved\n" + BASE})
    missing = tmp_path / "nowhere/bin/python"
    for _ in range(2):  # the second run is refused for the same reason, not as a rebase in progress
        cli = subprocess.run([sys.executable, "-m", "fixpack.cli", "rebase", "--profile", "p1", "--root",
                              f"demo={new}", "--old-root", f"demo={old}", "--python", str(missing), "--pack",
                              str(b.pack)], capture_output=True, text=True)
        assert cli.returncode == 2, cli.stderr
        assert f"--python {missing}: no such file" in cli.stderr and "tools/image-venv.sh" in cli.stderr
        assert not (b.pack / ".rebase").exists()


def test_an_empty_python_is_refused_not_taken_as_none(builder):
    """`--python "$PY"` with PY unset gave `--python ''`, the option's default: the rebase ran without proofs
    and wrote its work folder and reports. It is a usage error now (exit 2), nothing written."""
    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: "# moved\n" + BASE})
    before = snapshot(b.pack)
    cli = subprocess.run([sys.executable, "-m", "fixpack.cli", "rebase", "--profile", "p1", "--root", f"demo={new}",
                          "--old-root", f"demo={old}", "--python", "", "--pack", str(b.pack)],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "--python is empty" in cli.stderr, cli.stderr
    assert snapshot(b.pack) == before


def test_an_interpreter_gone_before_continue_is_bad_input(builder, tmp_path):
    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: BASE + "VALUE = VALUE * 10\n"})
    python = tmp_path / "python"
    python.symlink_to(sys.executable)
    r = rebase.start(rebase.RebaseRequest(
        pack_root=b.pack, profile="p1", roots={"demo": new}, old_roots={"demo": old}, python=str(python),
        proof_site=new))
    assert outcomes(r) == {"value": "broken"}
    repo = b.pack / ".rebase/v2.0/value"
    (repo / MOD).write_text(BASE.replace("VALUE = 1", "VALUE = 2") + "VALUE = VALUE * 10 // 10\n")
    git(repo, "commit", "-qam", "value: repaired")
    python.unlink()  # the stand-in image was removed between the start and --continue
    state = (b.pack / ".rebase/v2.0/state.json").read_bytes()
    try:
        rebase.resume(rebase.RebaseRequest(pack_root=b.pack, python=str(python)))  # the start's, given again
    except BadInputError as exc:
        assert f"--python {python}: no such file" in str(exc)
    else:
        raise AssertionError("a --continue with a removed interpreter went on")
    assert (b.pack / ".rebase/v2.0/state.json").read_bytes() == state
    with pytest.raises(BadInputError, match="tools/image-venv.sh"):  # and inside a proof run, never exit 1
        run_proof(str(python), b.pack / "fixes/value", b.pack, {})


def test_a_relative_python_is_printed_absolute_in_the_continue_command(builder, tmp_path):
    """Found by a fresh maintainer: the --continue a stopped rebase prints gave `--python` as it was typed
    (`.venv-vllm-0.31.0/bin/python`), beside absolute paths for the pack: it ran only from the same folder."""
    import shutil
    import sysconfig

    b = builder
    old = make_pack(b)
    new = new_release(b, {MOD: BASE + "VALUE = VALUE * 10\n"})  # the proof fails with the fix: a stop
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(tmp_path / "image")],
                   check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(tmp_path / "image")}))
    shutil.copytree(new / "demo_pkg", site / "demo_pkg")  # the stand-in image of the new release
    cli = subprocess.run([sys.executable, "-m", "fixpack.cli", "rebase", "--profile", "p1", "--root", f"demo={new}",
                          "--old-root", f"demo={old}", "--python", "image/bin/python", "--pack", str(b.pack)],
                         capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    said = cli.stdout + cli.stderr
    assert cli.returncode == 4, said
    assert f"--continue --python {tmp_path / 'image/bin/python'}" in said and " --python image/" not in said, said
