"""The one wrapper every git call goes through (GitPython underneath).

Errors become :class:`fixpack.errors.GitError` with the command, its exit code and its output.
A fixed identity and no user or system configuration keep results repeatable and the home folder
untouched.
"""

from __future__ import annotations

import os
from pathlib import Path

import git

from .errors import GitError

IDENTITY = {
    "GIT_AUTHOR_NAME": "fixpack", "GIT_AUTHOR_EMAIL": "fixpack@invalid",
    "GIT_COMMITTER_NAME": "fixpack", "GIT_COMMITTER_EMAIL": "fixpack@invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
}


def run(repo: Path, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    """Run ``git args...`` in ``repo`` and return stdout. Raises GitError on another exit code."""
    g = git.Git(str(repo))
    try:
        status, out, err = g.execute(["git", *args], env={**os.environ, **IDENTITY}, with_extended_output=True,
                                     with_exceptions=False, strip_newline_in_stdout=False)
    except git.GitCommandNotFound as exc:  # pragma: no cover - git missing from PATH
        raise GitError(f"git is not installed: {exc}") from exc
    if status not in ok_codes:
        raise GitError(f"`git {' '.join(args)}` in {repo} exited {status}:\n{(err or out).strip()}")
    return str(out)


def head_commit(path: Path) -> str | None:
    """The commit checked out in ``path`` if ``path`` is the top of a git work tree, else None."""
    if not (path / ".git").exists():
        return None
    try:
        repo = git.Repo(str(path))
        return str(repo.head.commit.hexsha)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None


def clone_at(url: str, dest: Path, commit: str, ref: str = "") -> str:
    """Clone ``url`` into ``dest`` and check out ``commit`` (detached). Returns the full commit id."""
    try:
        repo = git.Repo.clone_from(url, str(dest), env={**os.environ, **IDENTITY}, no_checkout=True)
    except git.GitCommandError as exc:
        raise GitError(f"`git clone {url}` exited {exc.status}:\n{exc.stderr.strip()}") from exc
    if ref:
        run(dest, "fetch", "--quiet", "origin", ref)
    run(dest, "checkout", "--quiet", "--detach", commit)
    return str(repo.head.commit.hexsha)


def init_repo(path: Path) -> None:
    """Create a repository with a fixed identity (for rebase work folders and tests)."""
    path.mkdir(parents=True, exist_ok=True)
    run(path, "init", "--quiet", "-b", "main")
    run(path, "config", "user.name", "fixpack")
    run(path, "config", "user.email", "fixpack@invalid")
    run(path, "config", "core.autocrlf", "false")


def commit_all(path: Path, message: str) -> str:
    run(path, "add", "--all")
    run(path, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", message)
    return run(path, "rev-parse", "HEAD").strip()
