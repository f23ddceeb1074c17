"""A profile's lock (``profiles/<name>.lock``): reading it, checking it against the pack, and making it
from clean release copies.

The lock fingerprints the whole chain (defaults and every opt-in, in series order): per fix the hash
of its change (:attr:`fixpack.model.Fix.patch_sha256`: the diff, not the mail header), each touched
file's pre-image and post-image sha256 along the chain, and per hunk the sha256 of its two sides and
how often each occurs in its file (:mod:`fixpack.records`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from .documents import MAX_PACK_TEXT_BYTES, TooLargeError, check_reachable, read_capped, short, text_for_lines
from .errors import (
    BadInputError,
    ConflictError,
    FixpackError,
    MismatchError,
    StaleLockError,
    UnreadableError,
    raise_unreadable,
)
from .lock_head import committed_lock
from .lock_hints import (
    Redo,
    found_at,
    left_out_before,
    order_changes,
    path_at,
    regenerate_hint,
    relock_command,
    remove_hint,
    reordered_around,
    stale_lock_error,
)
from .lock_seal import chain_broken, change_said, patch_hunks, record_edited, seal_broken
from .lock_where import lock_line
from .model import Component, Fix, Pack, Profile
from .nofollow import atomic_write
from .profile_components import built_version_problem
from .records import Lock, LockComponent, LockFile, LockFix, LockHunk, dumps, package_files
from .safepath import not_a_file, not_a_pack_file, read_regular
from .state import read_manifest
from .states import State
from .targets import FoundTarget, commit_matches, normalize_commit
from .tree import Tree, file_hashes

if TYPE_CHECKING:  # the evaluation loads when a lock is made, not when it is read
    from .evaluate import HunkNote


def read_lock(profile: Profile, redo: Redo | None = None) -> Lock:
    """The profile's lock, well formed and sealed. Raises StaleLockError (exit 2) naming what to do: ``redo``
    renders the command to regenerate it (:func:`~fixpack.lock_hints.relock_command`; by default for the
    profile's pack alone)."""
    path = profile.lock_path
    check_reachable(path)  # (a profiles/ folder this user may not search is no missing lock)
    what = not_a_pack_file(path)
    if what is not None:  # a FIFO would block the read; a link could lead to any file
        raise StaleLockError(f"{path}: is {what}, not a lock file; {remove_hint(path, what)}, then "
                             f"{regenerate_hint(profile, redo)}")
    if not path.is_file():
        raise StaleLockError(f"{path}: no lock for profile {profile.name!r}; {regenerate_hint(profile, redo)}")
    try:
        raw = read_regular(path, MAX_PACK_TEXT_BYTES, follow=False)  # (a link put there since: ELOOP)
    except TooLargeError as exc:  # read no further than the cap (a pack's text files' own: a lock is a few KB)
        what, hint = exc.said("a pack's lock file") + " (a lock is a few KB)", regenerate_hint(profile, redo)
        raise StaleLockError(f"{path}: {what}; {hint}", None, what, hint) from None
    except OSError as exc:
        raise_unreadable(path, exc)
        raise StaleLockError(f"{path}: cannot be read ({exc.strerror}); {regenerate_hint(profile, redo)}") from None
    try:
        lock = Lock.from_json(raw, path, profile.name, lambda: regenerate_hint(profile, redo))
    except StaleLockError as exc:  # edited by hand: where it is not what the pack says, at its lines
        raise seal_broken(exc, raw, path, profile, version_at) from None
    if lock.profile != profile.name:  # another profile's lock copied here: its fixes and pins are not this one's
        line = next((n for n, ln in enumerate(raw.decode("utf-8").splitlines(), 1)
                     if ln.strip().startswith('"profile": ')), None)
        what = (f"is the lock of profile {short(lock.profile)!r}, not {profile.name!r} (copied from another "
                f"profile's lock?)")
        hint = regenerate_hint(profile, redo)
        raise StaleLockError(f"{path_at(path, line)}: {what}; {hint}", line, what, hint)
    return lock


def unused_lock_said(pack: Pack, profile: Profile) -> str:
    """Why a run went on without the profile's lock (revert does, when it does not serve): there is none, it
    does not read, or it is stale, naming what no longer matches. "" when it reads and matches the pack."""
    path = profile.lock_path
    try:
        lock = read_lock(profile, lambda: "")
    except StaleLockError as exc:
        if not path.is_file() and not path.is_symlink():
            return f"there is no lock at {path}: revert went on without one"
        return f"the lock at {path} does not read ({exc.what}): revert went on without it"
    names = sorted({f"{kind} {name}" if kind != "order" else "the series order"
                    for (kind, name), _ in stale_entries(pack, profile, lock)})
    return (f"the lock at {path} is stale (it no longer matches the pack: {', '.join(names)}): revert went on "
            f"without it") if names else ""


def previous_locks(profile: Profile) -> tuple[list[tuple[Lock, str]], list[str]]:
    """The locks a new one is compared with, each with where it is said to be: the one on disk (when readable)
    and the one committed in git HEAD of the pack's checkout (read with ``git cat-file``; left out when it is
    the one on disk byte for byte), so that neither removing the lock file nor moving a version back past a
    lock on disk gets past a refusal. Second: why a lock committed in HEAD could not be compared with (it does
    not read as this profile's lock), one line each, for a warning."""
    found: list[tuple[Lock, str]] = []
    try:
        found.append((read_lock(profile), str(profile.lock_path)))
    except UnreadableError:  # one this user may not read is not replaced unseen (its owner's file; exit 5)
        raise
    except FixpackError:
        pass
    head, raw, why = committed_lock(profile)
    if not raw:
        return found, []
    if found:
        try:
            if read_capped(profile.lock_path) == raw:
                return found, []
        except (OSError, ValueError):
            pass
    where = f"{profile.lock_path} as committed in git HEAD"
    if head is not None:
        return [*found, (head, where)], []
    return found, [f"{where} could not be compared with ({why}): a fix whose patch changed under a version it "
                   f"records there is not refused for it"]


def check_lock_matches(pack: Pack, profile: Profile, lock: Lock, redo: Redo | None = None, blocked: str = "",
                       keep: Callable[[tuple[str, str]], bool] | None = None, vouch: bool = True,
                       hold: Collection[str] = ()) -> None:
    """Raise StaleLockError when a fix's version or patch bytes differ from what the lock recorded
    (``redo``: as for :func:`read_lock`). ``blocked``: why a lock made now on the copies at hand would stop
    (``lock --check`` met a conflict there), said before the command that regenerates it. ``keep``: which
    stale entries count (``lock --check --target``: the named targets', :func:`fixpack.lock_scope.named`); ``vouch``
    False: each fix's change worked out from its patches, ``hold``: the fixes whose record is held to them
    (:func:`stale_entries`)."""
    found = [(key, what) for key, what in stale_entries(pack, profile, lock, vouch, hold, keep)
             if keep is None or keep(key)]
    if found:
        raise stale_lock_error(profile, lock, redo, found, blocked)


def stale_entries(pack: Pack, profile: Profile, lock: Lock, vouch: bool = True, hold: Collection[str] = (),
                  keep: Callable[[tuple[str, str]], bool] | None = None) -> list[tuple[tuple[str, str], str]]:
    """What makes ``lock`` stale for ``profile``, each as ((kind, name), what): kind ``fix``, ``component`` or
    ``target`` (a pin edited without a new lock: name ``<target>.version`` or ``<target>.commit``, the key
    that changed); [] when it matches the pack. A fix whose patch bytes are the ones the lock fingerprinted is
    vouched for on the way (its patches are not parsed), unless ``vouch`` is False (``check``: a lock whose change
    fingerprint was edited and sealed again is then held to the patches, even one vouched for before, and so is
    every fix's record of files and hunks) or its
    patches are parsed already (a run's: its change is then theirs). A fix's target is held to its fix.toml's always;
    its record's files and hunks (:func:`~fixpack.lock_seal.record_edited`) in ``check`` and for the fixes ``hold``
    names (parsed): those a run lays, or whose record it met where it is used (a manifest's files). A fix a run
    does not lay again (applied already) is taken on the lock's word there, in status, a dry run and apply alike.
    ``keep``: the fixes to look at (their key, ("fix", id)); the others are not parsed or read. The lock's own chain
    (each fix's pre-image of a file the post-image the fix before it records: :func:`~fixpack.lock_seal.chain_broken`)
    is held in every run: it needs no parse, and a lock sealed again with it broken is refused on an applied image as
    on a clean one."""
    recorded = {f.id: f for f in lock.fixes}
    listed = profile.default + profile.opt_in
    stale: list[tuple[tuple[str, str], str]] = []
    for fid in listed:
        if keep is not None and not keep(("fix", fid)):
            continue
        fix, entry = pack.fixes[fid], recorded.get(fid)
        if entry is None:
            stale.append((("fix", fid), f"{fid}: not in the lock"))
            continue
        held = not vouch or fix.parsed()  # (parsed anyway: held to its patches, not to the lock's word)
        if not held and entry.patch_bytes_sha256 and entry.patch_bytes_sha256 == fix.bytes_sha256:
            fix.vouch_change(entry.patch_sha256)  # the bytes the lock fingerprinted: no parse
        if entry.patch_sha256 != (fix.parsed_change() if held else fix.patch_sha256) or entry.version != fix.version:
            stale.append((("fix", fid), f"{fid}: {change_said(fix, entry, profile, version_at)}"
                                        f"{bump_note(fix, profile, entry)}"))
        else:  # its change as the lock records it: its target, files and hunks are the pack's too, unless edited
            stale += [(("fix", fid), f"{fid}: {what}") for what in record_edited(profile.lock_path, entry, fix,
                                                                                 not vouch or fid in hold)]
    stale += [(("fix", fid), f"{fid}: in the lock but not in the profile") for fid in set(recorded) - set(listed)]
    stale += [(("fix", fid), f"{fid}: {what}") for fid, what in chain_broken(profile.lock_path, lock)]  # (no parse)
    for comp in profile.components:
        locked = lock.component(comp.id)
        if locked is None:
            stale.append((("component", comp.id), f"component {comp.id}: not in the lock"))
        elif locked.version != comp.version:
            stale.append((("component", comp.id), f"component {comp.id}: version {comp.version} in the profile, "
                                                  f"{locked.version} in the lock"))
    ours = [f.id for f in pack.ordered(tuple(f for f in listed if f in recorded))]
    return stale + order_changes(ours, lock) + _pin_changes(profile, lock)


def check_component_files(profile: Profile, comp: Component, locked: LockComponent, files: dict[str, str],
                          redo: Redo | None = None, dist_info: str = "") -> None:
    """Raise StaleLockError when ``files`` (path -> sha256 of each package file the component's wheel installs,
    built now) are not the ones the lock recorded for it, or its ``.dist-info`` folder (``dist_info``, built
    now) is not the one the lock names: its source changed without a new version and lock (``redo``: as for
    :func:`read_lock`)."""
    if dict(locked.files) == files and not (locked.dist_info and dist_info and locked.dist_info != dist_info):
        return
    import json

    what = _differ(locked.files, files) if dict(locked.files) != files else f"{dist_info}, not {locked.dist_info}"
    at = path_at(profile.lock_path, lock_line(profile.lock_path, '"components"', f'"id": {json.dumps(comp.id)}'))
    raise StaleLockError(f"component {comp.id} at {comp.path} installs other files than {at} records "
                         f"({what}): its source changed; bump its "
                         f"version and regenerate the lock ({redo() if redo is not None else relock_command(profile)})")


def _pin_changes(profile: Profile, lock: Lock) -> list[tuple[tuple[str, str], str]]:
    """The targets whose pin in the profile is not the release the lock was made from (a pin edited
    without a new lock: the pack disagrees with itself, whatever the image holds)."""
    out = []
    for spec in profile.targets:
        locked = lock.targets.get(spec.name) or {}
        if not locked and all(f.target != spec.name for f in lock.fixes):  # (with fixes locked there: none recorded)
            continue
        version, commit = str(locked.get("version", "")), str(locked.get("commit", ""))
        back = "; if the pin is a mistake (a new lock stops on a release that does not carry it), put it back to "
        none = "the lock records none (`lock` records the release's, which it holds to the pin): it was edited by hand"
        if spec.pin.version and version != spec.pin.version:
            out.append((("target", f"{spec.name}.version"), f"target {spec.name}: pinned to version "
                        f"{spec.pin.version}, " + (f"the lock was made for {version}{back}version = \"{version}\""
                                                   if version else none)))
        elif spec.pin.commit and not commit_matches(commit, spec.pin.commit):
            out.append((("target", f"{spec.name}.commit"), f"target {spec.name}: pinned to commit {spec.pin.commit}, "
                        + (f"the lock was made for {commit}{back}commit = \"{normalize_commit(commit)}\"" if commit
                           else none)))
    return out


def fingerprint(pack: Pack, profile: Profile, chain: tuple[Fix, ...], found: dict[str, FoundTarget],
                upstreamed: tuple[str, ...] = ()) -> Lock:
    """The lock of ``chain`` on the clean release copies ``found`` (target name -> copy). ``upstreamed``: the
    fixes a rebase found the release holds already (kept listed, proposed for dropping), locked as found.

    Raises MismatchError when a copy holds a manifest (it is not clean) or a fix's post-image without its
    pre-image that nothing declares upstreamed (:func:`_post_only`), ConflictError when a fix does not apply at
    its stated lines there (rebase it first, or add the fixes it was written on top of)."""
    fixes: list[LockFix] = []
    try:  # the lock on disk, read once: what a copy's files and the series' order are compared with
        have: Lock | None = read_lock(profile)
    except FixpackError:
        have = None
    behind = partial(left_out_before, pack, profile, chain)
    moved = partial(reordered_around, pack, chain, [f.id for f in have.fixes] if have is not None else [])
    for name, ft in found.items():
        if read_manifest(ft.root, name) is not None:
            raise MismatchError(f"{ft.root} holds a fixpack manifest: fingerprints come from a clean release copy")
        tree = Tree(ft.root)
        _refuse_changed_copy(profile, chain, name, ft, tree, have)
        post_only = partial(_post_only, profile, ft=ft, tree=tree, upstreamed=upstreamed)
        fixes += [_fix_entry(fix, tree, ft, post_only, profile, behind, moved) for fix in chain if fix.target == name]
    with_fixes = {f.target for f in chain}
    targets = {name: {"version": ft.version, "commit": ft.commit} for name, ft in sorted(found.items())
               if name in with_fixes}
    order = {f.id: i for i, f in enumerate(chain)}
    comps = tuple(_component_entry(c, found[c.target].root) for c in profile.components if c.target in found)
    return Lock(profile.name, targets, tuple(sorted(fixes, key=lambda f: order[f.id])), components=comps)


def _refuse_changed_copy(profile: Profile, chain: tuple[Fix, ...], name: str, ft: FoundTarget, tree: Tree,
                         have: Lock | None) -> None:
    """Raise MismatchError (nothing written) when a file the chain touches on the copy ``ft`` is not the
    release's bytes that the profile's lock on disk (``have``) records for the same pin but a fix's post-image it
    records: a patched tree (its manifest removed) would otherwise be fingerprinted as if every fix were
    upstreamed. No readable lock (None), or one made for another pin: nothing to compare with."""
    if have is None or dict(have.targets.get(name) or {}) != {"version": ft.version, "commit": ft.commit}:
        return
    release = have.release_files(name)
    posts = {(f.id, lf.path): lf.post for f in have.fixes if f.target == name for lf in f.files if lf.pre != lf.post}
    for fix in (f for f in chain if f.target == name):
        for path in fix.touched_paths():
            if path not in release:
                continue
            now = file_hashes(tree, (path,))[path]
            if now == release[path]:
                continue
            applied = [fid for (fid, p), post in posts.items() if p == path and post == now]
            if not applied:  # other bytes: a hand edit, or a lock made from another copy (then it is stale)
                continue
            from .progname import command  # only when a copy is refused

            fetch = command("fetch", "--profile", profile.name, "--target", name, "--pack",
                            str(profile.path.parent.parent))
            raise MismatchError(f"{ft.root / path}: not the clean release copy of {name} {ft.version} (fix "
                                f"{applied[-1]} is already applied there, as {profile.lock_path} records it); give "
                                f"a clean copy (`{fetch}` prints it), or revert that tree first")


def _post_only(profile: Profile, fix: Fix, ft: FoundTarget, tree: Tree, upstreamed: tuple[str, ...]) -> None:
    """Raise MismatchError (exit 3, nothing written) for a fix whose every hunk is on the copy as its post-image,
    none as its pre-image, unless it is declared upstreamed: a rebase found the release holds it (``upstreamed``),
    its ``fixed_in`` is this release or older, or the lock on disk for this pin records it as found (pre = post,
    these bytes). Otherwise the copy is a patched tree (its ``.fixpack`` removed), which would be locked as if
    upstream held every fix, or a release that took the fix, which a rebase reports as upstreamed."""
    if fix.id in upstreamed or fixed_by(fix.upstream.fixed_in, ft.version):
        return
    now = file_hashes(tree, fix.touched_paths())
    try:
        have = read_lock(profile)
    except FixpackError:
        have = None
    entry = have.fix(fix.id) if have is not None else None
    if (have is not None and entry is not None and dict(have.targets.get(fix.target) or {}) ==
            {"version": ft.version, "commit": ft.commit} and {f.path: f.post for f in entry.files} == now
            and all(f.pre == f.post for f in entry.files)):
        return
    from .progname import command  # only when a copy is refused

    pack = str(profile.path.parent.parent)
    fetch = command("fetch", "--profile", profile.name, "--target", fix.target, "--pack", pack)
    older = _profile_before(profile, fix.target, ft.version)
    rebase = ""
    if older is not None:
        words = ["--profile", older, "--to", ft.version, "--target", fix.target, "--pack", pack]
        rebase = f" (`{command('rebase', *words, '--name', f'{profile.name}-rebased')}`: a new profile beside it)"
    files = ", ".join(str(ft.root / p) for p in now)
    raise MismatchError(
        f"{files}: hold{'s' if len(now) == 1 else ''} fix {fix.id}'s post-image, not its pre-image (every hunk of it "
        f"is there as the fix leaves it), so it cannot be locked against this copy of {fix.target} {ft.version}. "
        f"If the copy was patched (a tree the fixes were applied to, its .fixpack removed): give the clean release "
        f"(`{fetch}` prints it) or revert that tree first. If release {ft.version} took the fix upstream: a rebase "
        f"onto it{rebase} reports the fix as upstreamed, proposed for dropping; drop {fix.id} from "
        f"{profile.path}, or keep it listed as upstreamed with fixed_in = \"{ft.version}\" under [upstream] in "
        f"{fix.folder / 'fix.toml'}; nothing was written")


def _profile_before(profile: Profile, target: str, version: str) -> str | None:
    """The pack's profile pinned to the newest release of ``target`` older than ``version`` (a rebase starts
    there), or None."""
    from .loader import pinned_versions

    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return None
    older = []
    for name, pinned in pinned_versions(profile.path.parent, target).items():
        try:
            if Version(pinned.lstrip("v")) < Version(version.lstrip("v")):
                older.append((Version(pinned.lstrip("v")), name))
        except InvalidVersion:
            continue
    return max(older)[1] if older else None


def fixed_by(fixed_in: str, version: str) -> bool:
    """``fixed_in`` (a fix.toml's: the first release that makes it unnecessary) is ``version`` or older."""
    if not fixed_in or not version:
        return False
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # lock runs where the maintainer's libraries are; without them, equal names only
        return fixed_in.lstrip("v") == version.lstrip("v")
    try:
        return Version(fixed_in.lstrip("v")) <= Version(version.lstrip("v"))
    except InvalidVersion:
        return False


def _component_entry(comp: Component, root: Path) -> LockComponent:
    """A component's fingerprints: the sha256 of each package file its wheel installs (built now)."""
    from .wheels import component_layout

    layout = component_layout(comp, root)
    problem = built_version_problem(comp, layout.version)
    if problem:
        raise BadInputError(problem)
    return LockComponent(comp.id, comp.version, tuple(sorted(package_files(layout.hashes()).items())), layout.dist_info)


def _differ(locked: tuple[tuple[str, str], ...], files: dict[str, str]) -> str:
    """The paths whose sha256 differs between a lock's component entry and ``files`` (or that only one has),
    the first five."""
    differ = sorted({p for p, _h in set(locked) ^ set(files.items())})
    return f"{', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''}"


def _reused_versions(profile: Profile, lock: Lock, previous: list[tuple[Lock, str]] | None = None) -> list[str]:
    """The components of ``lock`` (one being written) whose version the lock on disk records with other
    files: a source changed without a new version (an image that has that version would keep the old
    files and call them applied). Nothing when there is no previous lock (``previous``, else
    :func:`previous_locks`)."""
    out = []
    for have, where in previous if previous is not None else previous_locks(profile)[0]:
        for comp in lock.components:
            old = have.component(comp.id)
            if old is not None and old.version == comp.version and dict(old.files) != dict(comp.files):
                out.append(f"component {comp.id} {comp.version} installs other files than {where} records "
                           f"for that version ({_differ(old.files, dict(comp.files))})")
    return out


def bump_note(fix: Fix, profile: Profile, entry: LockFix) -> str:
    """Said of a lock entry that differs from ``fix``: where the version is to be bumped when the entry records
    another change under the version the fix has (``lock`` refuses to record that), else "" (also for patch files
    that are the very bytes the entry records: those did not change, the entry's change fingerprint was edited)."""
    if entry.version != fix.version or fix.recorded_as(entry.patch_sha256) or entry.patch_bytes_sha256 == \
            fix.bytes_sha256:
        return ""
    return (f" (its patch changed under the same version {fix.version}: if the change is meant, bump version in "
            f"{version_at(fix, profile)} before locking; if not, put the patch back as it was locked)")


def version_at(fix: Fix, profile: Profile) -> str:
    """Where ``fix``'s version for ``profile`` is set, ``FILE:LINE``: its variant's ``variant.toml`` when it has
    one for the profile, else its ``fix.toml``."""
    from .documents import key_line  # only when a message names it

    variant = fix.folder / profile.name / "variant.toml"
    toml = variant if variant.is_file() else fix.folder / "fix.toml"
    return path_at(toml, key_line(text_for_lines(toml), "version"))


def _fix_entry(fix: Fix, tree: Tree, ft: FoundTarget, post_only: Callable[[Fix], None], profile: Profile,
               behind: Callable[[Fix], str], moved: Callable[[Fix], str]) -> LockFix:
    """One fix's fingerprints on ``tree`` (the release with the fixes before it), adopted; one whose post-image is
    there, not its pre-image, goes to ``post_only`` (raising if refused); ``behind``, ``moved``: :mod:`~.lock_hints`."""
    from .evaluate import NO_EVIDENCE, TRUSTED, decide, pre_inside_post, run_pass  # loaded when a lock is made
    from .hunk_said import misplaced_marker
    ev = decide(fix, tree, TRUSTED, False)
    held = ev.state is State.UPSTREAMED
    if ev.state is State.ABSENT and ev.reverse.ok:  # a hunk that only adds lines after its context finds it again
        held = pre_inside_post(fix, ev.forward, ev.reverse, TRUSTED)  # once applied: it was locked as the pre-image
    elif ev.state is State.CONFLICT and not ev.forward.present:  # placed at its stated lines only, as the release's:
        held = run_pass(fix, tree, reverse=True, evidence=NO_EVIDENCE).ok  # a line added above it is no conflict
    if held:
        post_only(fix)
        # the release holds it already (a rebase keeps it listed, proposed for dropping): as found
        found = file_hashes(tree, fix.touched_paths())
        return _entry(fix, found, found, {})
    if ev.state is not State.ABSENT:
        reorder = moved(fix)
        if reorder:  # the file is not what the patch was written on: placed by search, not said a wrong @@ line
            raise ConflictError(f"fix {fix.id} does not apply at its stated lines on the release copy {ft.root} with "
                                f"the fixes the series now puts before it: {found_at(fix, tree)}{reorder}; nothing was "
                                f"written")
        said = f"fix {fix.id} is {ev.state.value} on the release copy {ft.root}: " \
               f"{'; '.join(ev.messages) or 'see status'}{_in_the_patch(fix, ev.refused)}{behind(fix)}"
        if ev.refused and all(n.header_wrong() for n in ev.refused):
            raise ConflictError(f"{said}. Fix those @@ lines' numbers before locking (each hunk's pre-image is in "
                                f"the file, at the lines said)")
        if ev.refused and all(misplaced_marker(n) for n in ev.refused):
            raise ConflictError(f"{said}. Move or remove the misplaced marker before locking: the patch is wrong "
                                f"there, not the release copy")
        from .progname import command, pack_words  # only for this message

        fetch = command("fetch", "--profile", profile.name, "--target", ft.spec.name,
                        *pack_words(profile.path.parent.parent))
        raise ConflictError(f"{said}. Rebase it before locking (or, if that copy is not the clean release, give one: "
                            f"{fetch} prints it)")
    pre = file_hashes(tree, fix.touched_paths())
    counted = run_pass(fix, tree, reverse=False, evidence=TRUSTED, count=True)
    tree.adopt(counted.tree)
    return _entry(fix, pre, file_hashes(tree, fix.touched_paths()), counted.counts)


def _in_the_patch(fix: Fix, refused: list[HunkNote]) -> str:
    """Where each refused hunk is in the pack: its patch file and the line of its ``@@`` header there (the
    messages name the target's file and the hunk's number in it, not the patch to change)."""
    flat = [(p.path, fp.path, i + 1, h.diff_line)
            for p in fix.patches for fp in p.files for i, h in enumerate(fp.hunks)]
    said = [flat[n.flat] for n in refused if n.flat < len(flat)]
    return "".join(f"; {target} hunk #{hunk} is {patch}:{line}" for patch, target, hunk, line in said)


def _entry(fix: Fix, pre: dict[str, str | None], post: dict[str, str | None],
           counts: dict[int, tuple[int, int]]) -> LockFix:
    """``counts`` (per hunk, in order) are its pre-image's occurrences in the file before it and its
    post-image's after it: the evidence that lets a drifted file refuse a twin."""
    hunks = tuple(LockHunk(*sides, *(counts.get(n) or (None, None))) for n, sides in enumerate(patch_hunks(fix)))
    files = tuple(LockFile(p, pre[p], post[p]) for p in fix.touched_paths())
    return LockFix(fix.id, fix.version, fix.target, fix.patch_sha256, files, hunks, fix.bytes_sha256)


def refuse_a_folder(lock_path: Path) -> None:
    """Raise BadInputError when a folder is where a profile's lock goes (``Profile.lock_path``): the write's
    rename cannot replace it (a FIFO or a link it can). ``lock`` calls this first, before the fingerprinting."""
    if not_a_file(lock_path) == "a folder":
        raise BadInputError(f"{lock_path}: is a folder, not a lock file; "
                            f"{remove_hint(lock_path, 'a folder')}, then lock again; nothing was written")


def unchanged(profile: Profile, lock: Lock) -> bool:
    """Whether the profile's lock on disk is a regular file holding exactly ``lock``'s bytes (a write would
    change nothing but its inode and time)."""
    path = profile.lock_path
    want = dumps(lock.to_json())
    try:  # (read no more than the new lock's size: a larger file differs)
        return not path.is_symlink() and path.is_file() and read_capped(path, len(want)) == want
    except (OSError, TooLargeError):
        return False


def write(profile: Profile, lock: Lock, previous: list[tuple[Lock, str]] | None = None,
          before: Callable[[bytes], None] | None = None) -> Path:
    """Write ``lock`` to the profile's lock path, whole or not at all; a lock on disk that holds it already is
    left alone (:func:`unchanged`). Raises BadInputError (nothing written) when a component's source changed
    under a version a previous lock records (``previous``: :func:`previous_locks`' first, when the caller has
    them already; else looked up), or a folder is where the lock goes. ``before``: called with the bytes just before
    they are written."""
    refuse_a_folder(profile.lock_path)
    if unchanged(profile, lock):
        return profile.lock_path
    reused = _reused_versions(profile, lock, previous)
    if reused:
        raise BadInputError(f"{'; '.join(reused)}: its source changed; bump its version (its pyproject.toml and "
                            f"the profile {profile.path}) and lock again; nothing was written")
    data = dumps(lock.to_json())
    if before is not None:
        before(data)
    atomic_write(profile.lock_path, data, 0o644)  # whole or not at all, never half a lock
    return profile.lock_path
