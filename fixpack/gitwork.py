"""Git work repositories for the maintainer's tools: snapshots of files put into small repositories,
``git diff`` between them, 3-way merges by cherry-pick, and the checks on a hand resolution.

Used by the rebase and by refresh. Every git call goes through :func:`fixpack.gitutil.run`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .errors import BadInputError, GitError
from .gitutil import init_repo
from .gitutil import run as git
from .structs import dataclass
from .tree import Tree, decode, encode

Snap = dict[str, tuple[str | None, int | None]]  # path -> (text or None when absent, mode)


def snap(tree: Tree, paths: tuple[str, ...] | list[str]) -> Snap:
    out: Snap = {}
    for p in paths:
        text = tree.read(p)
        out[p] = (text, tree.mode(p) if text is not None else None)
    return out


def put(repo: Path, snap: Snap) -> None:
    for path, (text, mode) in snap.items():
        dest = repo / path
        if text is None:
            if dest.exists():
                dest.unlink()
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(encode(text))
        os.chmod(dest, mode if mode is not None else 0o644)


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", message)


def unmerged(repo: Path) -> list[str]:
    return [p for p in git(repo, "diff", "--name-only", "--diff-filter=U").splitlines() if p]


def diff(repo: Path, a: str, b: str, *extra: str) -> str:
    """``git diff a b`` with every option that shapes it given (a path that is not ASCII written as it is,
    not quoted as ``"na\\303\\257ve.py"``)."""
    return git(repo, "-c", "core.quotePath=false", "diff", "--no-color", "--no-ext-diff", "--find-renames",
               "--src-prefix=a/", "--dst-prefix=b/", "--unified=3", *extra, a, b)


def diff_paths(repo: Path, a: str, b: str) -> list[str]:
    """The file of each section of :func:`diff` ``a b`` in its order (a rename's new name), as git names it: never
    quoted, a space or a tab in it kept (``-z``), where the ``diff --git`` line cannot tell where a path ends."""
    out = git(repo, "diff", "--no-ext-diff", "--find-renames", "--name-only", "-z", a, b)
    return [p for p in out.split("\0") if p]


def commit_bodies(repo: Path, names: list[str], fix_id: str) -> list[str]:
    """One diff per patch file: each cherry-picked commit against its parent (found by its subject). A
    fix of one patch takes everything on the branch (``upstream..HEAD``), so that commits a maintainer
    adds on top of the picked one count too."""
    if len(names) == 1:
        return [diff(repo, "upstream", "HEAD")]
    log = git(repo, "log", "--format=%H %s", "upstream..HEAD")
    by_subject: dict[str, str] = {}
    for line in log.splitlines():
        sha, _sp, subject = line.partition(" ")
        by_subject.setdefault(subject, sha)
    bodies = []
    for name in names:
        commit = by_subject.get(f"{fix_id}: {name}", "")
        bodies.append(diff(repo, f"{commit}^", commit) if commit else "")
    return bodies


def git_diffs(repo: Path, steps: list[Snap], names: list[str]) -> list[str]:
    """``git diff`` between consecutive snapshots of the same files (one body per patch file)."""
    shutil.rmtree(repo, ignore_errors=True)
    init_repo(repo)
    put(repo, steps[0])
    commit(repo, "pre-image")
    bodies = []
    for name, step in zip(names, steps[1:]):
        put(repo, step)
        commit(repo, name)
        bodies.append(diff(repo, "HEAD~1", "HEAD"))
    return bodies


@dataclass
class Merge:
    bodies: list[str]
    conflicts: list[str]


def merge(repo: Path, old_steps: list[Snap], upstream: Snap, names: list[str], fix_id: str,
           target: str, old_v: str, new_v: str) -> Merge:
    """A 3-way merge of one fix in ``repo``: branch ``base`` the touched files before the fix (old
    release), ``fix`` one commit per patch file, ``upstream`` the same files on the new release, and
    ``rebased`` = upstream with the fix's commits cherry-picked. Conflicts are left in git's state."""
    shutil.rmtree(repo, ignore_errors=True)
    init_repo(repo)
    git(repo, "config", "merge.conflictStyle", "diff3")
    git(repo, "config", "rerere.enabled", "false")
    put(repo, old_steps[0])
    commit(repo, f"base: the touched files on {target} {old_v} (with the earlier fixes)")
    git(repo, "branch", "-m", "base")
    git(repo, "checkout", "-q", "-b", "fix")
    for name, step in zip(names, old_steps[1:]):
        put(repo, step)
        commit(repo, f"{fix_id}: {name}")
    git(repo, "checkout", "-q", "-b", "upstream", "base")
    put(repo, {**dict.fromkeys(old_steps[0], (None, None)), **upstream})
    commit(repo, f"upstream: the same files on {target} {new_v} (with the earlier fixes carried)")
    git(repo, "checkout", "-q", "-b", "rebased")
    out = git(repo, "cherry-pick", "--keep-redundant-commits", "base..fix", ok_codes=(0, 1))
    stuck = unmerged(repo)
    if stuck:
        kinds = [line.strip() for line in out.splitlines() if line.startswith("CONFLICT")]
        return Merge([], kinds or [f"conflict in {p}" for p in stuck])
    if (repo / ".git" / "CHERRY_PICK_HEAD").exists() or (repo / ".git" / "sequencer").exists():
        raise GitError(f"`git cherry-pick base..fix` in {repo} stopped without a conflict:\n{out.strip()}")
    return Merge(commit_bodies(repo, names, fix_id), [])


def finish_resolution(repo: Path, n_patches: int, release_has: Callable[[str], bool] = lambda p: False) -> str:
    """Commit the maintainer's resolution and let the cherry-pick go on; '' when it is done. ``release_has``: whether
    the new release holds a path (one the resolution adds that it has: the work repository holds only the files the
    fix touches, so the patch would create a file that is there)."""
    stuck = unmerged(repo)
    if stuck:
        return f"unmerged paths: {', '.join(stuck)} (edit them, then `git add` them)"
    git(repo, "add", "--all")
    marked = [p for p in git(repo, "diff", "--cached", "--name-only", "upstream").splitlines()
              if p and has_markers(repo / p)]
    if marked:
        return f"conflict markers left in: {', '.join(marked)}"
    if (repo / ".git" / "CHERRY_PICK_HEAD").exists():
        git(repo, "commit", "--quiet", "--allow-empty", "--no-edit", "--no-verify")
    if (repo / ".git" / "sequencer").exists():
        out = git(repo, "-c", "core.editor=true", "cherry-pick", "--continue", ok_codes=(0, 1))
        if unmerged(repo):
            kinds = [line.strip() for line in out.splitlines() if line.startswith("CONFLICT")]
            return "the next patch conflicts too: " + ("; ".join(kinds) or ", ".join(unmerged(repo)))
    if git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() != "rebased":
        return "the work repository is not on branch 'rebased' any more (check it out again)"
    if int(git(repo, "rev-list", "--count", "upstream..HEAD").strip()) < n_patches:
        return ("branch 'rebased' lacks some of the fix's commits (was the cherry-pick aborted?): run "
                "`git cherry-pick base..fix` there again, or `git reset --hard upstream` and re-apply them")
    added = [p for p in git(repo, "diff", "--name-only", "--diff-filter=A", "upstream", "HEAD").splitlines()
             if p and release_has(p)]
    if added:
        return (f"the resolution adds {', '.join(added)}, which the new release has: this repository holds only "
                f"the files the fix touched, so its patch would create a file that is there. Leave "
                f"{'it' if len(added) == 1 else 'them'} out (`git rm`, then `git commit --amend`), finish the rebase, "
                f"then "
                f"change {'it' if len(added) == 1 else 'them'} with `fixpack edit`")
    return ""


def has_markers(path: Path) -> bool:
    if not path.is_file():
        return False
    for line in decode(path.read_bytes()).splitlines():
        if line.startswith(("<<<<<<< ", ">>>>>>> ", "||||||| ")) or line == "=======":
            return True
    return False


def inputs_digest(old_steps: list[Snap], upstream: Snap) -> str:
    h = hashlib.sha256()
    for snap in [*old_steps, upstream]:
        for path in sorted(snap):
            text, mode = snap[path]
            h.update(f"{path}\0{mode}\0".encode())
            h.update(encode(text) if text is not None else b"\0absent\0")
        h.update(b"\0step\0")
    return h.hexdigest()


# --- a maintainer's work tree (fixpack edit / new / refresh) -------------------------------------

NO_DATE = "2000-01-01T00:00:00+0000"  # a commit made from a patch without a Date: line carries this date


@dataclass(frozen=True)
class Commit:
    """A commit of a work tree: its id, author (``Name <address>``), author date (RFC 2822, as
    ``git format-patch`` writes it; ``""`` for :data:`NO_DATE`), message, and its diff to its parent."""

    sha: str
    author: str
    date: str
    message: str
    diff: str


def init_work(repo: Path) -> None:
    """A work repository for a maintainer: no identity of ours in its config (their commits are theirs)."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "--quiet", "-b", "main")
    git(repo, "config", "core.autocrlf", "false")
    git(repo, "config", "commit.gpgsign", "false")


def commit_all(repo: Path, message: str, label: str = "") -> str:
    """Commit every file of the work tree as fixpack (the release copy), tag it ``label``; returns the
    commit id. Files the release's own ``.gitignore`` names (vLLM's ``vllm/_version.py``) are committed
    too (``--force``): untracked, an edit to them would be invisible to git and lost by refresh."""
    git(repo, "add", "--all", "--force")
    git(repo, "commit", "--quiet", "--no-verify", "--allow-empty", "-m", message)
    if label:
        git(repo, "tag", label)
    return git(repo, "rev-parse", "HEAD").strip()


def tag(repo: Path, name: str) -> None:
    git(repo, "tag", name)


def commit_paths(repo: Path, paths: list[str], author: str, date: str, message: str) -> None:
    """Commit ``paths`` (changed, added or removed) with ``author`` and ``date`` (none: :data:`NO_DATE`)
    and the message as given (lines starting with ``#`` kept)."""
    git(repo, "add", "--all", "--force", "--", *paths)
    git(repo, "commit", "--quiet", "--no-verify", "--allow-empty", "--cleanup=whitespace", f"--author={author}",
        f"--date={date or NO_DATE}", "-m", message)


def uncommitted(repo: Path) -> list[str]:
    """``git status --porcelain`` lines: changed, staged and untracked files."""
    return [line for line in git(repo, "status", "--porcelain", "--untracked-files=all").splitlines() if line]


_UNDER_WAY = (("rebase-merge", "a rebase", "git rebase --continue (or --abort)"),
              ("rebase-apply", "a rebase or git am", "git rebase --continue or git am --continue (or --abort)"),
              ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue (or --abort)"),
              ("REVERT_HEAD", "a revert", "git revert --continue (or --abort)"),
              ("sequencer", "a cherry-pick or revert of several commits",  # (its head committed, the rest to come)
               "git cherry-pick --continue or git revert --continue (or --quit)"),
              ("MERGE_HEAD", "a merge", "git commit (or git merge --abort)"),
              ("BISECT_LOG", "a bisect", "git bisect reset"))


def under_way(repo: Path) -> tuple[str, str] | None:
    """A git operation stopped half way in ``repo`` (a ``rebase -i`` at an ``edit`` step, an ``am`` or cherry-pick
    at a conflict, ...): (what, how to finish it); None when there is none. Its commits not replayed yet are in no
    branch: HEAD holds only those done."""
    gitdir = Path(git(repo, "rev-parse", "--absolute-git-dir").strip())
    return next(((what, how) for name, what, how in _UNDER_WAY if (gitdir / name).exists()), None)


def commits_since(repo: Path, base: str) -> list[Commit]:
    """The commits ``base..HEAD``, oldest first, each with its diff to its parent (a binary file's with its
    data, ``GIT binary patch``, as a declared binary path needs). Raises BadInputError
    when HEAD does not descend from ``base`` or a merge commit is among them."""
    try:
        git(repo, "merge-base", "--is-ancestor", base, "HEAD")
    except GitError as exc:
        raise BadInputError(f"HEAD of {repo} does not descend from {base} (the fixes before this one): rebase your "
                       f"commits onto it (git rebase {base})") from exc
    merges = git(repo, "rev-list", "--merges", f"{base}..HEAD").split()
    if merges:
        raise BadInputError(f"{repo}: merge commit {merges[0][:12]} on top of {base}; a fix is a line of commits "
                       f"(git rebase {base} flattens it)")
    out = []
    for sha in git(repo, "rev-list", "--reverse", f"{base}..HEAD").split():
        fmt = "--format=%an <%ae>%x00%aD%x00%aI%x00%B"
        author, date, iso, message = git(repo, "log", "-1", fmt, sha).split("\0", 3)
        none = iso in ("2000-01-01T00:00:00+00:00", "2000-01-01T00:00:00Z")
        body = diff(repo, f"{sha}^", sha, "--binary")
        out.append(Commit(sha, author, "" if none else date, message.rstrip("\n") + "\n", body))
    return out
