"""Two rebases to one --name (found by a fresh user): a start with --work and another without, both to `dup`,
both ran; each --continue wrote profiles/dup.toml, its lock and the fixes/*/dup/ variants (the second over the
first, without --replace) and .rebase/dup.undo.json (the second over the first's), and `--undo --name dup` then
said "rebase undone; 0 pack file(s) restored or removed" (exit 0) with every file left. Now (a) a start to a name
is refused (exit 2) while a rebase to it is in progress anywhere the pack knows of (the default work folder, or
the --work folder the pack's .rebase/.<name>.started entry names), naming that rebase's --continue and --abort,
which run as printed; (b) --continue refuses (exit 2, nothing written) a profiles/<name>.toml that appeared after
a start without --replace; (c) --undo whose record does not match the pack says so (exit 3), naming the files."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, git
from test_rebase import BASE, MOD, OTHER, OTHER_BASE, commit_pack, conflicting, new_release, pack, req  # noqa: F401
from test_rebase_trust import run, world

from fixpack import rebase


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI of the fixpack under test in a child process (its printed commands name it so)."""
    env = {**os.environ, "PYTHONPATH": str(Path(rebase.__file__).resolve().parent.parent)}
    return subprocess.run([sys.executable, "-m", "fixpack.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or Path(os.environ["HOME"]).parent)


def printed(said: str) -> dict[str, str]:
    """The `--continue` and `--abort` commands a refusal names, in its order."""
    cmds = " ".join(said.split()).split("`")[1::2]
    return {a: next(c for c in cmds if f" rebase --{a} " in c) for a in ("continue", "abort")}


def shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, capture_output=True, text=True)


def pack_status(root: Path) -> str:
    return git(root, "status", "--porcelain", "--untracked-files=all", "--", "fixes", "profiles")


# --- the user's scenario, on this repository's pack and the cached vllm release copies ---------------------------

@pytest.fixture
def real(tmp_path: Path) -> tuple[Path, Path]:
    """This repository's pack (fixes, profiles, the components' folders), copied into a git checkout of its own,
    and the release copy cache (FIXPACK_TEST_CACHE: vllm 0.30.0 and 0.31.0, read only)."""
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache or not (Path(cache) / "vllm-0.31.0").is_dir():
        pytest.skip("set FIXPACK_TEST_CACHE (tools/test.sh does) to the cache holding vllm 0.30.0 and 0.31.0")
    out = tmp_path / "pack"
    for name in ("fixes", "profiles", "ports", "kernels"):
        shutil.copytree(REPO / name, out / name, ignore=shutil.ignore_patterns("__pycache__", ".*_cache"))
    (out / ".gitignore").write_text("/.rebase/\n/reports/\n__pycache__/\n")
    git(out, "init", "-q", "-b", "main")
    git(out, "add", "-A")
    git(out, "commit", "-qm", "pack")
    return out, Path(cache)


START = ("rebase", "--profile", "v0.30.0", "--to", "0.31.0", "--target", "vllm", "--name", "dup")


def resolve(work: Path) -> None:
    """Resolve the conflict the rebase to 0.31.0 leaves (vllm-long-prefill-share), by hand: the fix's side."""
    repo = work / "vllm-long-prefill-share"
    conflicted = git(repo, "diff", "--name-only", "--diff-filter=U").split()
    assert conflicted, git(repo, "status")
    git(repo, "checkout", "--theirs", "--", *conflicted)
    git(repo, "add", "--", *conflicted)


@pytest.mark.parametrize("then", ["continue", "abort"])
def test_a_second_rebase_to_the_same_name_is_refused_naming_the_first(real, tmp_path, then):
    """The user's commands: `--work "w s3"` to dup, then dup again without --work. The second is refused (it was
    accepted, and both --continue wrote dup); the --continue or --abort it names runs as printed, and --undo
    then puts back every file the rebase wrote."""
    pack_root, cache = real
    work = tmp_path / "w s3"
    work.mkdir()
    first = cli(*START, "--work", str(work), "--pack", str(pack_root), "--cache", str(cache))
    assert first.returncode == 4, first.stdout + first.stderr
    before = world(pack_root)
    second = cli(*START, "--pack", str(pack_root), "--cache", str(cache))
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"a rebase to dup is in progress ({work / 'state.json'})" in second.stderr, second.stderr
    assert world(pack_root) == before and not (pack_root / ".rebase/dup").exists()
    cmds = printed(second.stderr)
    assert f"--{then} --pack {pack_root} --work '{work}'" in cmds[then], cmds
    if then == "continue":
        assert cmds[then].endswith("--allow-unproven"), cmds  # started without --python: as it must run
        resolve(work)
    done = shell(cmds[then])
    assert done.returncode == 0, (cmds[then], done.stdout, done.stderr)
    assert not (work / "state.json").exists() and not (pack_root / ".rebase/.dup.started").exists()
    if then == "abort":  # dropped: a rebase to dup may start again (its record is gone)
        again = cli(*START, "--pack", str(pack_root), "--cache", str(cache))
        assert again.returncode == 4, again.stdout + again.stderr
        assert (pack_root / ".rebase/dup/state.json").is_file()
        return
    assert (pack_root / "profiles/dup.toml").is_file() and pack_status(pack_root) != ""
    undone = cli("rebase", "--undo", "--name", "dup", "--pack", str(pack_root))
    assert undone.returncode == 0 and "rebase undone" in undone.stdout, undone.stdout + undone.stderr
    assert pack_status(pack_root) == ""  # every file the rebase wrote is gone


def test_a_rebase_with_work_is_refused_while_the_default_one_is_in_progress(real, tmp_path):
    """The other order: dup without --work first, then `--work "w s3"` to dup."""
    pack_root, cache = real
    assert cli(*START, "--pack", str(pack_root), "--cache", str(cache)).returncode == 4
    work = tmp_path / "w s3"
    work.mkdir()
    before = world(pack_root), world(work)
    second = cli(*START, "--work", str(work), "--pack", str(pack_root), "--cache", str(cache))
    assert second.returncode == 2 and "a rebase to dup is in progress" in second.stderr, second.stderr
    assert (world(pack_root), world(work)) == before
    cmds = printed(second.stderr)
    assert f"--continue --pack {pack_root} --name dup --allow-unproven" in cmds["continue"], cmds
    resolve(pack_root / ".rebase/dup")
    done = shell(cmds["continue"])
    assert done.returncode == 0, (cmds["continue"], done.stdout, done.stderr)
    assert (pack_root / "profiles/dup.toml").is_file()


# --- (a) on a small pack: every form, and entries that are stale, garbage or planted ------------------------------

def resolve_first(repo: Path) -> None:
    (repo / MOD).write_text(BASE.replace("line 5\n", "five (upstream wording kept)\n"))
    git(repo, "add", MOD)


@pytest.mark.parametrize("second", ["the default folder", "another --work"])
def test_a_work_rebase_in_progress_refuses_a_second_start_to_its_name(conflicting, second):  # noqa: F811
    b, old, new = conflicting
    work = b.base / "w s3"
    assert rebase.start(req(b, old, new, work=work)).status == "conflicts"
    other = b.base / "other"
    before = world(b.base)
    code, out = run(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}",
                    *(["--work", str(other)] if second == "another --work" else []))
    assert code == 2 and f"a rebase to v2.0 is in progress ({work / 'state.json'})" in out, out
    assert f"--continue --pack {b.pack} --work '{work}' --allow-unproven" in " ".join(out.split()), out
    assert world(b.base) == before and not other.exists()


def test_a_dirty_pack_names_a_work_rebase_elsewhere_by_its_entry(conflicting):  # noqa: F811
    """A start to another name on a pack left dirty names the rebase in progress in a --work folder outside the
    pack (only those under <pack>/.rebase were named), and its --abort runs as printed."""
    b, old, new = conflicting
    work = b.base / "w s3"
    assert rebase.start(req(b, old, new, work=work)).status == "conflicts"
    (b.pack / "fixes" / "notes.txt").write_text("a note of the user's\n")
    r = cli("rebase", "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}", "--name", "v3",
            "--pack", str(b.pack))
    assert r.returncode == 2 and f"a rebase to v2.0 is in progress ({work / 'state.json'})" in r.stderr, r.stderr
    done = shell(printed(r.stderr)["abort"])
    assert done.returncode == 0 and not work.exists(), done.stderr


def test_the_entry_goes_with_the_rebase_and_a_new_start_is_taken(conflicting):  # noqa: F811
    """A finished rebase and an aborted one leave no entry (.rebase as before: only the undo record)."""
    b, old, new = conflicting
    work = b.base / "wk"
    rebase.start(req(b, old, new, work=work))
    entry = b.pack / ".rebase/.v2.0.started"
    assert json.loads(entry.read_text()) == {"given": True, "to": "v2.0", "work": str(work)}
    code, out = run(b, "--abort", "--work", str(work))
    assert code == 0 and not (b.pack / ".rebase").exists(), out
    assert rebase.start(req(b, old, new)).status == "conflicts"  # the default folder, now
    assert json.loads(entry.read_text()) == {"given": False, "to": "v2.0", "work": str(b.pack / ".rebase/v2.0")}
    resolve_first(b.pack / ".rebase/v2.0/first")
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 0 and sorted(p.name for p in (b.pack / ".rebase").iterdir()) == ["v2.0.undo.json"], out


STALE = {
    "garbage": lambda b, work: "{not json",
    "a list": lambda b, work: "[]",
    "another name": lambda b, work: json.dumps({"to": "v9", "work": str(work), "given": True}),
    "a relative path": lambda b, work: json.dumps({"to": "v2.0", "work": "wk", "given": True}),
    "a folder gone": lambda b, work: json.dumps({"to": "v2.0", "work": str(b.base / "gone"), "given": True}),
    "a folder without the marker": lambda b, work: json.dumps({"to": "v2.0", "work": str(work), "given": True}),
}


@pytest.mark.parametrize("case", sorted(STALE) + ["a link", "another pack's rebase", "a rebase removed by hand"])
def test_a_stale_or_garbage_entry_is_no_rebase_in_progress(conflicting, case):  # noqa: F811
    """An entry whose folder holds no marked state of a rebase to that name of this pack is stale: ignored (no
    crash, no refusal), written over by the start, and nothing is read or removed through it."""
    b, old, new = conflicting
    work = b.base / "wk"
    entry = b.pack / ".rebase/.v2.0.started"
    if case == "a rebase removed by hand":
        rebase.start(req(b, old, new, work=work))
        shutil.rmtree(work)
    elif case == "another pack's rebase":  # a marked folder whose state is another pack's
        work.mkdir()
        (work / ".fixpack-rebase").write_text("made\n")
        (work / "state.json").write_text(json.dumps({"schema": 1, "pack": str(b.base / "elsewhere"), "to": "v2.0"}))
        entry.parent.mkdir()
        entry.write_text(json.dumps({"to": "v2.0", "work": str(work), "given": True}))
    elif case == "a link":
        target = b.base / "victim.json"
        target.write_text("keep me\n")
        entry.parent.mkdir()
        entry.symlink_to(target)
    else:
        work.mkdir()
        if case != "a folder without the marker":
            (work / ".fixpack-rebase").write_text("made\n")
        (work / "state.json").write_text(json.dumps({"schema": 1, "pack": str(b.pack), "to": "v2.0"}))
        entry.parent.mkdir()
        entry.write_text(STALE[case](b, work))
    assert rebase.start(req(b, old, new)).status == "conflicts"
    assert not entry.is_symlink() and json.loads(entry.read_text())["given"] is False
    if case == "a link":
        assert (b.base / "victim.json").read_text() == "keep me\n"
    if work.exists():
        assert (work / "state.json").is_file()  # nothing removed through the entry


def test_an_entry_that_is_a_folder_is_refused_naming_it(conflicting):  # noqa: F811
    b, old, new = conflicting
    entry = b.pack / ".rebase/.v2.0.started"
    entry.mkdir(parents=True)
    (entry / "keep.txt").write_text("keep me\n")
    before = world(b.base)
    code, out = run(b, "--profile", "p1", "--root", f"demo={new}", "--old-root", f"demo={old}")
    assert code == 3 and f"the state in {entry} is damaged: a folder" in out and "rm -r" in out, out
    assert world(b.base) == before


# --- (b) --continue onto a profile that appeared since the start ------------------------------------------------

@pytest.mark.parametrize("how", ["made by hand", "committed"])
def test_continue_refuses_a_profile_that_appeared_after_a_start_without_replace(conflicting, how):  # noqa: F811
    b, old, new = conflicting
    assert rebase.start(req(b, old, new)).status == "conflicts"
    resolve_first(b.pack / ".rebase/v2.0/first")
    hand = (b.pack / "profiles/p1.toml").read_text() + "# the maintainer's v2.0\n"
    (b.pack / "profiles/v2.0.toml").write_text(hand)
    if how == "committed":
        commit_pack(b)
    before = world(b.base)
    r = cli("rebase", "--continue", "--allow-unproven", "--pack", str(b.pack))
    assert r.returncode == 2, r.stdout + r.stderr
    said = " ".join(r.stderr.split())
    assert f"profile v2.0 exists ({b.pack / 'profiles/v2.0.toml'}), but the rebase to v2.0 started without " \
           f"--replace" in said and "nothing was written" in said, said
    assert world(b.base) == before
    cmds = printed(r.stderr)
    assert cmds["continue"].endswith("--name v2.0 --allow-unproven --replace"), cmds
    done = shell(cmds["continue"])  # the user's choice, as printed: replace it (--undo puts it back)
    assert done.returncode == 0, (cmds["continue"], done.stdout, done.stderr)
    assert (b.pack / "profiles/v2.0.toml").read_text() != hand
    assert cli("rebase", "--undo", "--pack", str(b.pack)).returncode == 0
    assert (b.pack / "profiles/v2.0.toml").read_text() == hand


def test_continue_after_a_start_with_replace_writes_over_the_profile(conflicting):  # noqa: F811
    b, old, new = conflicting
    (b.pack / "profiles/v2.0.toml").write_text((b.pack / "profiles/p1.toml").read_text() + "# to replace\n")
    commit_pack(b)
    assert rebase.start(req(b, old, new, replace=True)).status == "conflicts"
    resolve_first(b.pack / ".rebase/v2.0/first")
    code, out = run(b, "--continue", "--allow-unproven")
    assert code == 0 and "# to replace" not in (b.pack / "profiles/v2.0.toml").read_text(), out


def test_the_printed_abort_keeps_the_profile_that_appeared(conflicting):  # noqa: F811
    b, old, new = conflicting
    rebase.start(req(b, old, new))
    (b.pack / "profiles/v2.0.toml").write_text("# the maintainer's\n")
    r = cli("rebase", "--continue", "--allow-unproven", "--pack", str(b.pack))
    assert r.returncode == 2, r.stderr
    done = shell(printed(r.stderr)["abort"])
    assert done.returncode == 0, done.stderr
    assert (b.pack / "profiles/v2.0.toml").read_text() == "# the maintainer's\n"
    assert not (b.pack / ".rebase").exists()


# --- (c) --undo whose record does not match the pack --------------------------------------------------------------

def test_undo_never_says_undone_while_leaving_the_files_a_rebase_wrote(pack):  # noqa: F811
    """The user's end state, reached with flags that allow it: a finished rebase to v2.0, then another to v2.0
    over its uncommitted files (--replace --allow-dirty), whose record of the files before it is the first's
    output. --undo put back nothing and said "rebase undone" (exit 0); now it says so (exit 3), names the files,
    writes nothing, and its steps run as printed put the pack back."""
    b, old = pack
    new = new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    assert rebase.start(req(b, old, new, replace=True, allow_dirty=True)).status == "done"
    before = world(b.base)
    r = cli("rebase", "--undo", "--name", "v2.0", "--pack", str(b.pack))
    assert r.returncode == 3, r.stdout + r.stderr
    said = " ".join(r.stderr.split())
    record = b.pack / ".rebase/v2.0.undo.json"
    assert f"the state in {record} is damaged: it does not match the pack: --undo would leave" in said, said
    for rel in ("fixes/first/v2.0/0001-change.patch", "fixes/first/v2.0/variant.toml", "profiles/v2.0.lock",
                "profiles/v2.0.toml"):
        assert rel in said, (rel, said)
    assert "rebase undone" not in r.stdout and world(b.base) == before
    steps = said.split("put fixes/ and profiles/ back with git (", 1)[1].split("), then remove the record (", 1)
    for step in (steps[0], steps[1].split(");", 1)[0]):
        done = shell(step)
        assert done.returncode == 0, (step, done.stderr)
    assert pack_status(b.pack) == "" and not record.exists()


def test_undo_refuses_a_record_without_the_bytes_from_before_of_a_file_it_wrote(pack):  # noqa: F811
    b, old = pack
    new = new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    record = b.pack / ".rebase/v2.0.undo.json"
    data = json.loads(record.read_text())
    del data["backups"]["profiles/v2.0.toml"]
    record.write_text(json.dumps(data))
    before = world(b.base)
    code, out = run(b, "--undo")
    assert code == 3 and "--undo would leave profiles/v2.0.toml as the rebase to v2.0 wrote" in " ".join(out.split())
    assert world(b.base) == before


def test_undo_of_a_replace_that_rewrote_committed_files_byte_for_byte_is_undone(pack):  # noqa: F811
    """Bytes from before equal to the rebase's own are right when git HEAD holds them: the files were committed."""
    b, old = pack
    new = new_release(b, {MOD: "# new header\n" * 3 + BASE, OTHER: OTHER_BASE})
    assert rebase.start(req(b, old, new)).status == "done"
    commit_pack(b)
    assert rebase.start(req(b, old, new, replace=True)).status == "done"
    code, out = run(b, "--undo")
    assert code == 0 and "rebase undone; 0 pack file(s) restored or removed" in out, out
    assert pack_status(b.pack) == ""


def test_continue_refuses_a_fix_id_swapped_and_committed_after_the_start(conflicting):  # noqa: F811
    """Found by a fresh user: the start holds every carried patch's Fix-Id to format's rule, but a patch swapped and
    committed between the start and `--continue`, one the rebase keeps byte for byte, was written into the new
    profile with the other fix's id (exit 0). `--continue` now holds the pack as it is then to the same rule, before
    anything is carried or written: exit 2, at the trailer's line, and the way on once it is put right."""
    b, old, new = conflicting
    r = rebase.start(req(b, old, new))
    assert r.status == "conflicts" and {o.id: o.outcome for o in r.fixes}["second"] == "exact"
    resolve_first(b.pack / ".rebase/v2.0/first")
    from fixpack.loader import load_pack
    from fixpack.patchtext import normalized

    fix = load_pack(b.pack).fixes["second"]
    patch = fix.patches[0].path
    honest = normalized(fix, fix.patches[0])  # with its Fix-Id trailer, as format writes it
    assert "\nFix-Id: second\n" in honest
    patch.write_text(honest.replace("\nFix-Id: second\n", "\nFix-Id: third\n"))
    commit_pack(b)
    before = world(b.base)
    refused = cli("rebase", "--continue", "--allow-unproven", "--pack", str(b.pack))
    said = " ".join(refused.stderr.split())
    line = patch.read_text().splitlines().index("Fix-Id: third") + 1
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "1 Fix-Id trailer(s) name another fix of the pack than the one that lists the patch: a rebase writes each " \
           "carried patch's Fix-Id" in said, said
    assert f"{patch}:{line}: its Fix-Id trailer says 'third'" in said and "listed under fix 'second'" in said, said
    assert "nothing was written; put the trailer right, commit, then run `" in said and \
           "rebase --continue --pack" in said and "--name v2.0 --allow-unproven`" in said, said
    assert world(b.base) == before
    patch.write_text(honest)
    commit_pack(b)
    done = cli("rebase", "--continue", "--allow-unproven", "--pack", str(b.pack))
    assert done.returncode == 0, done.stdout + done.stderr
    carried = [p.read_text() for p in (b.pack / "fixes/second").rglob("*.patch")]
    assert carried and all("\nFix-Id: second\n" in t and "Fix-Id: third" not in t for t in carried)
