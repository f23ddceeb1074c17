"""Maintainer helpers over the pack's files: write every patch in its deterministic form.

A patch's header is derived from its fix: the subject and description stay as written in the patch,
the DEP-3 / Yocto fields (``Upstream-Status``, ``Forwarded``, ``Fix-Id``) come from ``fix.toml``.
The diff part loses churn (``index`` lines, the ``-- `` version signature). Running it twice gives
the same bytes, so CI can fail on a patch that was not written this way.
"""

from __future__ import annotations

from pathlib import Path

from .errors import BadInputError, Problem, write_failed
from .model import Pack, Profile
from .nofollow import atomic_write
from .patchfiles import patch_again
from .patchtext import normalized, swapped_problems, swapped_refusal
from .progname import command
from .tree import Tree


def stale_patches(pack: Pack) -> list[Path]:
    """Patch files whose bytes differ from their deterministic form."""
    return list(_stale(pack))


def _stale(pack: Pack) -> dict[Path, bytes]:
    """Each stale patch file with its deterministic bytes, each read once, as the pack's load read it
    (:func:`fixpack.patchfiles.patch_again`: one changed since is refused, named, before anything is written).
    BadInputError, before anything is written, for a patch whose Fix-Id trailer names another fix of the pack
    (:func:`fixpack.patchtext.swapped_problems`: format would rewrite it as churn; a Fix-Id
    naming no fix of the pack, a fix renamed, is rewritten: the trailer is the tool's)."""
    out = {}
    foreign: list[Problem] = []
    for fix in pack.fixes.values():
        for p, variant in fix.all_patches():
            raw = patch_again(p, then=f"run `{command('format')}` again; no patch was written")
            foreign += swapped_problems(fix.id, variant, p.path, raw, pack.fixes)
            text = normalized(fix, p, raw)
            if raw.decode("utf-8", "surrogateescape") != text:
                out[p.path] = text.encode("utf-8", "surrogateescape")
    if foreign:
        raise swapped_refusal(foreign, "format writes a patch's Fix-Id", "no patch was written")
    return out


def rewrite_patches(pack: Pack) -> list[Path]:
    """Rewrite every stale patch in place, each whole or not at all; returns the files rewritten. EnvironmentProblem
    (exit 5) for a write that fails (a full disk), naming the file and those rewritten before it."""
    changed = _stale(pack)
    done: list[Path] = []
    for path, data in changed.items():
        _write(path, data, f"; {len(done)} rewritten before it: {', '.join(map(str, done))}" if done else
               "; no other patch was rewritten")
        done.append(path)
    return done


def _write(path: Path, data: bytes, kept: str = "") -> None:
    """``data`` written to the pack file ``path``, whole or not at all; a failed write is :func:`write_failed`'s error
    (exit 5), saying ``kept`` (what else the command wrote before it)."""
    try:
        atomic_write(path, data, 0o644)
    except OSError as exc:
        raise write_failed(exc, path, data, kept) from exc


def _refuse_not_release(profile: Profile, target: str, tree: Tree, root: Path) -> None:
    """MismatchError when a file the profile's fixes touch is not the release's on ``root`` (the lock's first
    pre-image; no usable lock: not checked): a copy with a fix patched in by hand, its markers removed, had the patch
    refreshed at that tree's lines (exit 0), where lock refuses the same copy."""
    from .errors import FixpackError, MismatchError
    from .lockfile import read_lock
    from .tree import file_hashes

    try:
        release = read_lock(profile).release_files(target)
    except FixpackError:
        return
    differ = sorted(p for p, h in file_hashes(tree, list(release)).items() if h != release[p])
    if differ:
        raise MismatchError(f"--root {target}={root} is not the clean release: {', '.join(differ[:3])}"
                            f"{' ...' if len(differ) > 3 else ''} differ from the release the lock records (a fix "
                            f"applied there, or an edit); a patch is refreshed on the clean release copy, so nothing "
                            f"was written: give --root the copy `fixpack fetch` prints")


def refresh(pack_root: Path, profile_name: str, fix_id: str, root: Path) -> Path:
    """Regenerate one fix's (single) patch against the profile's chain on a clean release copy, like
    ``quilt refresh``: the fixes before it in the series are applied in memory, then this fix (exact
    or with an offset), and the patch is rewritten from the result, its version (fix.toml's, or its variant's) one up
    when the patch's diff changed (as the lock fingerprints it: :func:`fixpack.editstate.change_digest`). Returns the
    patch path.

    Raises ConflictError when the fix does not apply to its chain, MismatchError when ``root`` is not the profile's
    pinned release (another release, fixes applied there, a copy fetch unpacked that was changed since): the patch
    would be rewritten at that tree's lines (it was, exit 0, from 0.31.0's copy for profile v0.30.0).
    """
    import tempfile

    from .errors import ConflictError
    from .evaluate import decide
    from .gitwork import git_diffs, snap
    from .loader import load_pack, load_profile
    from .patchtext import write_patches
    from .states import State

    pack = load_pack(pack_root)
    profile = load_profile(pack, profile_name)
    pack = pack.for_profile(profile.name)
    fix = pack.fixes.get(fix_id)
    if fix is None or len(fix.patches) != 1:
        raise BadInputError(f"{fix_id}: refresh needs a fix of the pack with exactly one patch")
    from .editwork import clean_copy
    from .release import refuse_changed_copy

    found = clean_copy(profile, fix.target, root)  # the pin's release (MismatchError), no fix applied there
    refuse_changed_copy(found, profile.name, pack.root, "refresh on target", "a patch is refreshed")
    tree = Tree(root)
    _refuse_not_release(profile, fix.target, tree, root)
    for other in pack.ordered(profile.default + profile.opt_in):
        if other.target != fix.target:
            continue
        ev = decide(other, tree, None, False)
        if other.id == fix_id:
            if ev.state not in (State.ABSENT, State.DRIFTED):
                raise ConflictError(f"{fix_id} is {ev.state.value} on its chain: {'; '.join(ev.messages)}")
            paths = fix.touched_paths()
            path = fix.patches[0].path
            with tempfile.TemporaryDirectory(prefix="fixpack-refresh-") as tmp:
                body = git_diffs(Path(tmp) / "repo", [snap(tree, paths), snap(ev.forward.tree, paths)],
                                  [path.name])[0]
            data = write_patches(fix, [body], pack.fixes)[path.name]
            from .editstate import change_digest
            from .packupdate import REFRESH_AGAIN, bumped

            was = patch_again(fix.patches[0], then=REFRESH_AGAIN)
            toml = bumped(fix) if change_digest([was]) != change_digest([data]) else None  # another patch: next version
            _write(path, data)
            if toml is not None:
                _write(toml[0], toml[1])
            return path
        if ev.state in (State.ABSENT, State.DRIFTED):
            tree.adopt(ev.forward.tree)
    raise BadInputError(f"{fix_id} is not in profile {profile_name}")
