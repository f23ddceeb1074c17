"""Every git call runs in the folder it names, and nowhere else: found by a fresh user, whose pack at a path holding
``$HOME`` had its edit's ``git init``, ``git add --all --force`` and commit made in the repository the shell stood in
(GitPython expanded ``$HOME`` in its working folder, found no such folder, and ran git in the process's own)."""

from __future__ import annotations

import pytest
from conftest import git, numbered
from test_release import bare_repo

from fixpack.errors import GitError
from fixpack.gitutil import clone_at, init_repo, run


@pytest.fixture
def bystander(tmp_path, monkeypatch):
    """A git repository the process stands in, with one commit, that no call may touch."""
    here = tmp_path / "bystander"
    here.mkdir()
    (here / "file.txt").write_text(numbered(3))
    git(here, "init", "-q")
    git(here, "add", "-A")
    git(here, "commit", "-qm", "mine")
    monkeypatch.chdir(here)
    return here, git(here, "rev-parse", "HEAD"), sorted(p.name for p in (here / ".git").iterdir())


def _untouched(bystander) -> None:
    here, head, listing = bystander
    assert git(here, "rev-parse", "HEAD") == head and git(here, "tag") == ""
    assert git(here, "status", "--porcelain") == "" and sorted(p.name for p in (here / ".git").iterdir()) == listing


@pytest.mark.parametrize("name", ["p$HOME", "p${HOME}", "~", "q$NOSUCHVAR"])
def test_a_folder_whose_name_holds_a_variable_or_tilde_is_the_one_git_runs_in(tmp_path, bystander, name):
    folder = tmp_path / name
    init_repo(folder)
    (folder / "a.txt").write_text("a\n")
    run(folder, "add", "--all", "--force")
    run(folder, "commit", "-qm", "one")
    assert (folder / ".git").is_dir() and run(folder, "log", "--format=%s").strip() == "one"
    _untouched(bystander)


def test_a_folder_that_is_not_there_is_a_git_error_not_the_working_folder(tmp_path, bystander):
    with pytest.raises(GitError) as caught:
        run(tmp_path / "nowhere", "add", "--all", "--force")
    assert "nowhere" in str(caught.value)
    _untouched(bystander)


def test_clone_at_clones_into_the_folder_named(tmp_path, bystander):
    bare, first, _second = bare_repo(tmp_path)
    dest = tmp_path / "c$HOME"
    assert clone_at(str(bare), dest, first) == first
    assert (dest / ".git").is_dir()
    _untouched(bystander)
