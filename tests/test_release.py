"""Release copies: a git-hosted target cloned at its pin (against a local bare repository), and the
vLLM sdist from PyPI (network, cached; marked `release`)."""

import os

import pytest
from conftest import gaudi_tree, git

from fixpack import release
from fixpack.errors import BadInputError, MismatchError
from fixpack.model import Pin, Source, TargetSpec


def bare_repo(tmp_path):
    work = gaudi_tree(tmp_path / "work")
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "first")
    first = git(work, "rev-parse", "HEAD").strip()
    git(work, "checkout", "-q", "-b", "releases/v0.30.0")
    (work / "vllm_gaudi/extra.py").write_text("x = 1\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "second")
    second = git(work, "rev-parse", "HEAD").strip()
    git(tmp_path, "clone", "-q", "--bare", str(work), str(tmp_path / "bare.git"))
    return tmp_path / "bare.git", first, second


def test_git_clone_at_pin(tmp_path):
    bare, first, second = bare_repo(tmp_path)
    spec = TargetSpec("vllm-gaudi", "vllm_gaudi", "vllm-gaudi", Pin("", second[:7], "releases/v0.30.0"),
                      Source(git=str(bare), ref="releases/v0.30.0"))
    found = release.fetch(spec, tmp_path / "cache")
    assert found.commit == second and (found.root / "vllm_gaudi/extra.py").is_file()
    again = release.fetch(spec, tmp_path / "cache")  # cached
    assert again.root == found.root


def test_git_clone_wrong_pin_is_refused(tmp_path):
    bare, first, second = bare_repo(tmp_path)
    spec = TargetSpec("vllm-gaudi", "vllm_gaudi", "vllm-gaudi", Pin("9.9.9", first[:7]), Source(git=str(bare)))
    with pytest.raises(MismatchError, match="version"):
        release.fetch(spec, tmp_path / "cache")
    # the clone is the pinned commit's, named by it: kept (the pin's version is what is wrong), as a release copy is
    (kept,) = (tmp_path / "cache").glob("vllm-gaudi-*")
    assert kept.name == f"vllm-gaudi-{first[:7]}" and git(kept, "rev-parse", "HEAD").strip() == first


def test_a_file_where_the_clone_goes_is_refused(tmp_path):
    """A file where the git copy's folder goes: exit 5 naming it and what to do, the file kept (nothing cloned)."""
    from fixpack.errors import EnvironmentProblem

    bare, _, second = bare_repo(tmp_path)
    spec = TargetSpec("vllm-gaudi", "vllm_gaudi", "vllm-gaudi", Pin("", second[:7], "releases/v0.30.0"),
                      Source(git=str(bare), ref="releases/v0.30.0"))
    place = tmp_path / "cache" / f"vllm-gaudi-{second[:7]}"
    place.parent.mkdir()
    place.write_text("kept\n")
    with pytest.raises(EnvironmentProblem, match=rf"{place}: a file, not a folder.*remove it"):
        release.fetch(spec, tmp_path / "cache")
    assert place.read_text() == "kept\n" and sorted(p.name for p in place.parent.iterdir()) == [place.name]


@pytest.mark.release
def test_vllm_sdist_release_copy():
    """Downloads vLLM 0.30.0's sdist once (about 42 MB) into $FIXPACK_TEST_CACHE, hash-checked."""
    cache = os.environ.get("FIXPACK_TEST_CACHE")
    if not cache:
        pytest.skip("set FIXPACK_TEST_CACHE to a cache folder to fetch the vLLM release copy")
    from pathlib import Path
    spec = TargetSpec("vllm", "vllm", "vllm", Pin("0.30.0", "ced6857a"), Source(pypi="vllm"))
    found = release.fetch(spec, Path(cache))
    assert found.commit == "gced6857af" and (found.root / "vllm/v1/sample/ops/topk_topp_sampler.py").is_file()


def test_two_fetches_into_one_cache_take_turns(tmp_path, monkeypatch):
    """Two fetches at once (two CI jobs sharing a cache): the second waits for the first and takes its copy.

    Without the cache's lock both cloned into the same folder, and the later one's clean start removed the
    copy the earlier one was about to return."""
    import threading
    import time

    bare, _, second = bare_repo(tmp_path)
    spec = TargetSpec("vllm-gaudi", "vllm_gaudi", "vllm-gaudi", Pin("", second[:7], "releases/v0.30.0"),
                      Source(git=str(bare), ref="releases/v0.30.0"))
    real, active, seen, clones = release.clone_at, [0], [], []

    def slow_clone(*args, **kw):
        active[0] += 1
        seen.append(active[0])
        clones.append(args[1])
        time.sleep(0.3)  # long enough for the other thread to arrive while this one clones
        try:
            return real(*args, **kw)
        finally:
            active[0] -= 1

    monkeypatch.setattr(release, "clone_at", slow_clone)
    found, errors = [], []

    def one() -> None:
        try:
            found.append(release.fetch(spec, tmp_path / "cache"))
        except Exception as exc:  # the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert seen == [1] and len(clones) == 1, "the second fetch cloned beside the first"
    assert [f.commit for f in found] == [second, second]
    assert (found[0].root / "vllm_gaudi/extra.py").is_file()


@pytest.mark.parametrize("version", ["../../x", "0.30.0/../..", "0.30.0 ", "banana"])
def test_a_version_that_is_no_release_version_is_refused_before_anything(tmp_path, version):
    """Found by a fresh user: fetch --version '../../x' looked the version up on the index ("no sdist") and left the
    cache folder it made; the version names the folder a copy is unpacked to (<target>-<version>). Refused first,
    exit 2, nothing made."""
    spec = TargetSpec("vllm", "vllm", "vllm", Pin("0.30.0", "ced6857a"), Source(pypi="vllm"))
    cache = tmp_path / "cache"
    with pytest.raises(BadInputError, match="not a release version") as exc:
        release.fetch(spec, cache=cache, version=version)
    assert exc.value.exit_code == 2 and not cache.exists()
