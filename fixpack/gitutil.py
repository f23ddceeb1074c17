"""The one wrapper every git call goes through (GitPython underneath, for the maintainer's tools).

Errors become :class:`fixpack.errors.GitError` with the command, its exit code and its output.
A fixed identity and no user or system configuration keep results repeatable and the home folder
untouched. :func:`head_commit` reads a checkout's HEAD from its files: an image needs neither git nor
GitPython to find a target's commit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import GitError, says_disk_full

IDENTITY = {
    "GIT_AUTHOR_NAME": "fixpack", "GIT_AUTHOR_EMAIL": "fixpack@invalid",
    "GIT_COMMITTER_NAME": "fixpack", "GIT_COMMITTER_EMAIL": "fixpack@invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
}


def run(repo: Path, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    """Run ``git args...`` in ``repo`` and return stdout. Raises GitError on another exit code, and when ``repo``
    is no folder (git says it cannot change to it).

    git is told the folder with ``-C``, never by GitPython's working folder: GitPython expands ``$VAR`` and ``~`` in
    that path and, when what it gets is no folder, runs git in the process's own working folder instead (a pack at
    ``/tmp/p$HOME`` had its edit's ``git init``, ``add --all`` and commit made in the repository the user stood in).
    GitPython runs in ``/``, which always exists, so a removed working folder does not stop it either."""
    import git

    g = git.Git(os.sep)
    try:
        status, out, err = g.execute(["git", "-C", os.path.abspath(repo), *args], env={**os.environ, **IDENTITY},
                                     with_extended_output=True, with_exceptions=False,
                                     strip_newline_in_stdout=False)
    except git.GitCommandNotFound as exc:  # pragma: no cover - git missing from PATH
        raise GitError(f"git is not installed: {exc}") from exc
    if status not in ok_codes:
        said = (err or out).strip()
        full = says_disk_full(said)
        raise GitError(f"`git {' '.join(args)}` in {repo} exited {status}:\n{said}"
                       + (f"\nFree space on the file system of {repo} (set TMPDIR to a folder with room where it is a "
                          f"temporary one) and run again" if full else ""))
    return str(out)


def head_commit(path: Path) -> str | None:
    """The commit checked out in ``path`` if ``path`` is the top of a git work tree, else None.

    Read from the files git keeps (``.git/HEAD``, the ref it names, ``packed-refs``; a ``.git`` file
    of a linked work tree points at its git folder), as git itself resolves a symbolic HEAD.
    """
    try:  # each of git's files read as a regular file, without blocking, no further than a cap: a FIFO at .git/HEAD
        gitdir = _git_dir(path)  # hung the run
        if gitdir is None:
            return None
        head = _text(gitdir / "HEAD").strip()
        if _SHA.fullmatch(head):
            return head
        if not head.startswith("ref: "):
            return None
        return _resolve_ref(gitdir, head[5:].strip())
    except (OSError, ValueError):  # unreadable, not a regular file, too large, not UTF-8: no commit said here
        return None


def _text(path: Path, limit: int = 4096) -> str:
    from .safepath import read_regular

    return read_regular(path, limit).decode("utf-8")


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _git_dir(path: Path) -> Path | None:
    dot = path / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        text = _text(dot).strip()
        if text.startswith("gitdir: "):
            target = Path(text[8:].strip())
            return target if target.is_absolute() else (path / target).resolve()
    return None


def _resolve_ref(gitdir: Path, ref: str) -> str | None:
    common = gitdir
    if (gitdir / "commondir").is_file():  # a linked work tree keeps its refs in the main git folder
        common = (gitdir / _text(gitdir / "commondir").strip()).resolve()
    for folder in (gitdir, common):
        loose = folder / ref
        if loose.is_file():
            value = _text(loose).strip()
            return value if _SHA.fullmatch(value) else None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in _text(packed, 256 << 20).splitlines():
            sha, _sp, name = line.partition(" ")
            if name == ref and _SHA.fullmatch(sha):
                return sha
    return None


def head_file(path: Path, limit: int) -> str | None:
    """The text of ``path`` as committed in HEAD of the git checkout that holds it (``git cat-file``: no index
    refresh, nothing written), or None: not in a git checkout, not committed there, larger than ``limit``
    bytes, or no git (or GitPython) at hand."""
    spec = f"HEAD:./{path.name}"  # (./: relative to the folder git runs in)
    try:
        if int(run(path.parent, "cat-file", "-s", spec).strip()) > limit:
            return None
        return run(path.parent, "cat-file", "blob", spec)
    except (GitError, ImportError, OSError, ValueError):
        return None


def clone_at(url: str, dest: Path, commit: str, ref: str = "") -> str:
    """Clone ``url`` into ``dest`` and check out ``commit`` (detached). Returns the full commit id."""
    dest = Path(os.path.abspath(dest))
    try:  # (through run: GitPython's clone_from expands $VAR and ~ in the folder it clones into)
        run(dest.parent, "clone", "--quiet", "--no-checkout", "--", url, str(dest))
    except GitError as exc:
        raise GitError(f"{exc}\nCheck the URL and the network, or give the target's release copy with --root "
                       f"NAME=PATH") from exc
    if ref:
        run(dest, "fetch", "--quiet", "origin", ref)
    run(dest, "checkout", "--quiet", "--detach", commit)
    return run(dest, "rev-parse", "HEAD").strip()


def init_repo(path: Path) -> None:
    """Create a repository with a fixed identity (for rebase work folders and tests)."""
    path.mkdir(parents=True, exist_ok=True)
    run(path, "init", "--quiet", "-b", "main")
    run(path, "config", "user.name", "fixpack")
    run(path, "config", "user.email", "fixpack@invalid")
    run(path, "config", "core.autocrlf", "false")
