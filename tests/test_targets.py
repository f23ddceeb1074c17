"""Finding targets: a source tree, a git checkout, site-packages, an editable install; reading
version and commit from git HEAD, the version module and the distribution metadata."""

import json
import subprocess
import sys

import pytest
from conftest import GAUDI_RUNNER, REPO, gaudi_tree, git, numbered, snapshot, two_target_pack

from fixpack import engine
from fixpack.errors import BadInputError, MismatchError
from fixpack.model import Pin, Source, TargetSpec
from fixpack.targets import FoundTarget, check_pin, commit_matches, locate, read_facts, resolve_root

GAUDI = TargetSpec("vllm-gaudi", "vllm_gaudi", "vllm-gaudi", Pin("", "058f107"), Source())



def test_git_checkout_commit(tmp_path):
    root = gaudi_tree(tmp_path / "gaudi")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "x")
    head = git(root, "rev-parse", "HEAD").strip()
    v, c, ev = read_facts(GAUDI, root)
    assert c == head and "git HEAD" in ev[0]


def test_site_packages_with_direct_url(tmp_path):
    sp = tmp_path / "site-packages"
    gaudi_tree(sp)
    info = sp / "vllm_gaudi-0.30.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: vllm-gaudi\nVersion: 0.30.0\n")
    (info / "direct_url.json").write_text(json.dumps({"url": "https://example.invalid/vllm-gaudi.git",
                                                      "vcs_info": {"vcs": "git", "commit_id": "058f107aa" + "0" * 31}}))
    v, c, ev = read_facts(GAUDI, sp)
    assert v == "0.30.0" and c.startswith("058f107") and commit_matches(c, "058f107")
    assert resolve_root(GAUDI, sp / "vllm_gaudi") == sp.resolve()


def test_a_direct_url_commit_that_differs_from_the_checkouts_is_said_in_the_evidence(tmp_path):
    """A fresh user: pip's direct_url.json naming another commit than the one taken (git HEAD, or the version
    module's) was dropped without a word; the evidence now says so, and the commit taken is still the tree's."""
    sp = tmp_path / "site-packages"
    root = gaudi_tree(sp)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "x")
    head = git(root, "rev-parse", "HEAD").strip()
    info = sp / "vllm_gaudi-0.30.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: vllm-gaudi\nVersion: 0.30.0\n")
    other = ("0" if head[0] != "0" else "1") * 40
    (info / "direct_url.json").write_text(json.dumps({"url": "https://example.invalid/vllm-gaudi.git",
                                                      "vcs_info": {"vcs": "git", "commit_id": other}}))
    v, c, ev = read_facts(GAUDI, sp)
    assert c == head and any(f"direct_url.json commit {other}, not {head}" in e for e in ev), ev
    (info / "direct_url.json").write_text(json.dumps({"vcs_info": {"vcs": "git", "commit_id": head}}))
    assert not any("direct_url.json commit" in e for e in read_facts(GAUDI, sp)[2])


def test_root_without_package_is_bad_input(tmp_path):
    with pytest.raises(BadInputError, match="holds no vllm_gaudi/"):
        resolve_root(GAUDI, tmp_path)


def test_not_installed_is_none():
    assert locate(GAUDI, None, None) is None


def test_env_root(tmp_path):
    gaudi_tree(tmp_path / "copies" / "vllm-gaudi")
    found = locate(GAUDI, None, tmp_path / "copies")
    assert found is not None and found.how == "GAUDI_FIXES_ROOT"


def test_commit_forms():
    assert commit_matches("gced6857af", "ced6857a")
    assert not commit_matches("gced6857af", "ced6858a")
    assert not commit_matches("", "ced6857a")


def test_a_pin_longer_than_the_commit_the_tree_names_is_said_so_with_the_pin_to_write(tmp_path):
    """vLLM's _version.py names 9 digits of its commit: a profile pinning the full 40 never matched, and the message
    said to use the image the profile pins (it was that image). It says the pin cannot be checked past 9 digits, and
    the pin to write; a commit that differs within its digits is the plain mismatch it was."""
    full = "ced6857af" + "0123456789abcdef0123456789abcde"
    for pin, said in ((full, 'pin those 9 (commit = "ced6857af" in the profile\'s [targets.vllm-gaudi]).'),
                      ("ced6858a", "Use the image the profile pins, or a profile for this release.")):
        spec = TargetSpec("vllm-gaudi", "vllm_gaudi", "vllm-gaudi", Pin("", pin), Source())
        with pytest.raises(MismatchError) as exc:
            check_pin(FoundTarget(spec, tmp_path, "0.30.0", "gced6857af", ("_version.py",), "--root"))
        assert str(exc.value).endswith(said) and f"commit gced6857af != pinned {pin}" in str(exc.value), exc.value
        assert ("its first 9 digits are the pin's" in str(exc.value)) is (pin == full)
    check_pin(FoundTarget(GAUDI, tmp_path, "0.30.0", "g058f1072a", (), "--root"))  # the pin's 7, found 9: matches


def test_two_targets_one_profile(builder, tmp_path):
    """A profile with vLLM-shaped and vllm-gaudi-shaped targets; each fix applies to its own root."""
    req, _clean, gclean = two_target_pack(builder, tmp_path)
    runner = GAUDI_RUNNER
    before_g = snapshot(gclean)
    r = engine.apply(req)
    assert r.ok and {f.id: f.target for f in r.fixes} == {"core": "demo", "plugin": "vllm-gaudi"}
    assert "seven" in (gclean / runner).read_text()
    assert (gclean / ".fixpack/vllm-gaudi.manifest.json").is_file()
    assert engine.revert(req).ok
    assert snapshot(gclean) == before_g


def test_head_commit_read_from_git_files(tmp_path):
    """HEAD resolved without git or GitPython: a loose ref, a packed ref, a detached HEAD, a linked work tree."""
    from conftest import git

    from fixpack.gitutil import head_commit

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "f").write_text("x\n")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "one")
    want = git(repo, "rev-parse", "HEAD").strip()
    assert head_commit(repo) == want
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git/refs/heads/main").exists() and head_commit(repo) == want
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"), "HEAD")
    assert head_commit(tmp_path / "linked") == want
    git(repo, "checkout", "-q", "--detach")
    assert head_commit(repo) == want
    assert head_commit(tmp_path) is None


def test_a_root_that_is_a_link_to_nothing_is_said_as_the_link(tmp_path):
    """--root NAME=LINK, a link to nothing: the message named where it led (a path the user did not type, a fresh
    user's finding); it names the link given and where it leads. A link to a real folder is taken (resolved)."""
    link = tmp_path / "dangle"
    link.symlink_to(tmp_path / "nope")
    with pytest.raises(BadInputError) as exc:
        resolve_root(GAUDI, link)
    assert str(exc.value).startswith(f"--root {GAUDI.name}={link}: a symbolic link to {tmp_path / 'nope'}, which does "
                                     f"not exist (give a source tree"), str(exc.value)
    with pytest.raises(BadInputError, match=r"=.*/nope: no such folder"):
        resolve_root(GAUDI, tmp_path / "nope")
    (tmp_path / "real" / "vllm_gaudi").mkdir(parents=True)
    good = tmp_path / "good"
    good.symlink_to(tmp_path / "real")
    assert resolve_root(GAUDI, good) == (tmp_path / "real").resolve()


def test_two_targets_of_one_package_are_refused_at_their_line(builder):
    """Two targets naming one package (demo and demo2, the same image as their roots): lock and apply took them,
    and apply ran two chains over the same files, the second undoing the first's (exit 0, fixes lost, tampered at
    the next run). The profile is refused now, exit 2, at the second target's package line; nothing written."""
    import subprocess
    import sys

    from conftest import REPO, numbered, snapshot

    base = numbered(20)
    clean = builder.tree("clean", {"demo_pkg/mod.py": base})
    builder.add_fix("one", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    path = builder.profile(["one"], extra_targets='[targets.demo2]\npackage = "demo_pkg"\ncommit = "1234567"\n')
    before = snapshot(clean)
    for words in (["lock", "--root", f"demo={clean}", "--root", f"demo2={clean}"],
                  ["apply", "--root", f"demo={clean}", "--root", f"demo2={clean}"]):
        r = subprocess.run([sys.executable, "-m", "fixpack.cli", *words, "--profile", "p1", "--pack", str(builder.pack)],
                           capture_output=True, text=True, cwd=REPO)
        line = path.read_text().splitlines().index('package = "demo_pkg"', 5) + 1
        assert r.returncode == 2 and f"p1.toml:{line}: [targets.demo2] package = 'demo_pkg': target demo names it " \
            f"too; one target per package" in r.stderr, r.stderr
        assert snapshot(clean) == before and not (builder.pack / "profiles/p1.lock").exists()


def test_a_pre_image_hash_off_by_its_last_digit_is_said_far_enough_to_differ():
    """A lock resealed with one pre-image sha256 changed in its last hex digit: the drift line cut both hashes to 12
    characters and showed them equal ("13ea4359832b differs from the lock's 13ea4359832b"). Each is said up to the
    first character that differs. (On the clean release such a lock is no drift any more: the patch makes the very
    post-image the lock records of the file, so the lock's pre-image is named as edited, tests/test_lock_seal.py; a
    drift line is said of a file that differs from the lock's pre-image, said here as the evaluation says it.)"""
    from fixpack.evaluate import FixEvidence, Pass, _drift

    real = "13ea4359832b" + "5" * 51 + "7"
    edited = real[:-1] + "0"
    ev = FixEvidence(False, (("demo_pkg/mod.py", edited),), (("demo_pkg/mod.py", "9" * 64),))
    said, files = _drift(ev, {"demo_pkg/mod.py": real}, Pass(True, None))  # type: ignore[arg-type]
    assert files == ["demo_pkg/mod.py"] and said == [f"demo_pkg/mod.py: pre-image sha256 {real} differs from the "
                                                     f"lock's {edited}"], said


@pytest.mark.parametrize("found", ["gced6857", "ced6857", "ced6857a-dirty", "gced6857a.d20240101"])
def test_a_commit_shorter_than_the_pin_or_not_hex_does_not_match_it(found):
    """Found by a fresh user: a 7-digit ``__commit_id__`` ("gced6857") passed the 8-digit pin "ced6857a" (a prefix
    either way was taken). The commit found must hold the whole pin (7 to 40 hex digits, setuptools-scm's "g"
    aside); one it only begins, or one that is not hex, is not the pinned commit."""
    assert not commit_matches(found, "ced6857a")
    assert commit_matches("gced6857a", "ced6857a") and commit_matches("CED6857A" + "0" * 32, "ced6857a")


def test_a_version_module_commit_shorter_than_the_pin_is_a_pin_mismatch(builder):
    """The same through apply: a ``_version.py`` naming 7 of the pin's 8 digits is refused as off its pin (exit 3),
    with both commits, and nothing is written."""
    base = numbered(20)
    clean = builder.tree("clean", {"demo_pkg/mod.py": base})
    builder.add_fix("one", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    builder.profile(["one"])  # (pins commit "abcdef12", the builder's first 8 digits)
    builder.lock(clean)
    image = builder.tree("image", {"demo_pkg/mod.py": base})
    (image / "demo_pkg/_version.py").write_text("__version__ = version = '1.0'\n__commit_id__ = commit_id = 'gabcdef1'\n")
    before = snapshot(image)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 3 and "commit gabcdef1 != pinned abcdef12" in r.target("demo").message, r.as_dict()
    assert snapshot(image) == before


@pytest.mark.parametrize("commit", ["\x1b]0;pwned\x07gabcdef1234", " gabcdef1234 ", "gabcdef1234\n", "\tabcdef1234",
                                    "gabcdef1234\u00a0"])
def test_a_version_module_commit_with_control_characters_or_whitespace_is_a_pin_mismatch(builder, commit):
    """A ``__commit_id__`` with a control character or whitespace in it is no commit an installer writes: it was
    stripped and matched the pin (exit 0), and an escape sequence in it reached the terminal raw. Now it is the pin
    mismatch (exit 3), said with its ``repr``, nothing written, and no control character printed."""
    base = numbered(20)
    clean = builder.tree("clean", {"demo_pkg/mod.py": base})
    builder.add_fix("one", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    image = builder.tree("image", {"demo_pkg/mod.py": base})
    (image / "demo_pkg/_version.py").write_text(f"__version__ = version = '1.0'\n__commit_id__ = {commit!r}\n")
    before = snapshot(image)
    r = subprocess.run([sys.executable, "-m", "fixpack.cli", "apply", "--profile", "p1", "--pack", str(builder.pack),
                        "--root", f"demo={image}"], capture_output=True, text=True, cwd=REPO)
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    assert f"commit {commit!r} != pinned abcdef12" in out, out
    assert f"__commit_id__ = {commit!r}" in out and repr(repr(commit)) not in out, out  # the evidence: quoted once
    assert not any(ch in out for ch in "\x1b\x07\t\u00a0"), out
    assert snapshot(image) == before


def _image_with_commit(builder, commit: str):
    base = numbered(20)
    clean = builder.tree("clean", {"demo_pkg/mod.py": base})
    builder.add_fix("one", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 3\n", "three\n")})
    builder.profile(["one"])  # (pins commit "abcdef12"; the lock records the clean copy's "gabcdef1234")
    builder.lock(clean)
    image = builder.tree("image", {"demo_pkg/mod.py": base})
    (image / "demo_pkg/_version.py").write_text(f"__version__ = version = '1.0'\n__commit_id__ = {commit!r}\n")
    return image


@pytest.mark.parametrize("command", ["apply", "dry run", "status"])
def test_a_commit_that_differs_from_the_locks_past_the_pin_is_a_mismatch(builder, command):
    """Found in a closing note: a ``__commit_id__`` that differs from the lock's only past the pin's 8 digits
    (``gabcdef1299`` for the lock's ``gabcdef1234``, pin ``abcdef12``) was taken, though the lock records the full
    commit of the release. Apply, its dry run and status now compare the lock's commit in full: exit 3, naming both
    commits and the lock's line, nothing written."""
    image = _image_with_commit(builder, "gabcdef1299")
    before = snapshot(image)
    run = {"apply": engine.apply, "dry run": engine.apply, "status": engine.status}[command]
    r = run(builder.request(image, dry_run=command == "dry run"))
    said = r.target("demo").message
    lock = builder.pack / "profiles/p1.lock"
    line = next(n for n, ln in enumerate(lock.read_text().splitlines(), 1) if '"commit": "gabcdef1234"' in ln)
    assert r.exit_code == 3 and r.target("demo").status == "mismatch", r.as_dict()
    assert f"commit gabcdef1299 is not the one the lock was made on: {lock}:{line} records gabcdef1234" in said, said
    assert snapshot(image) == before


@pytest.mark.parametrize("commit", ["gabcdef1234", "abcdef1234" + "5" * 30, "gabcdef12"])
def test_a_commit_that_agrees_with_the_locks_as_far_as_both_name_it_is_taken(builder, commit):
    """The full compare goes as far as both name the commit: a git checkout's 40 digits that begin with the lock's,
    and a version module naming only the pin's digits (which the pin check takes), are the release."""
    image = _image_with_commit(builder, commit)
    r = engine.apply(builder.request(image))
    assert r.exit_code == 0, r.as_dict()


def test_commits_agree_as_far_as_the_shorter_goes():
    from fixpack.targets import commits_agree

    assert commits_agree("gced6857af", "ced6857af" + "0" * 31) and commits_agree("ced6857af" + "0" * 31, "gced6857af")
    assert not commits_agree("gced6857ae", "gced6857af") and not commits_agree("gced6857af", "ced6857a-dirty")
