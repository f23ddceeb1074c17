"""What a run says to do next, where its states alone leave the user guessing: a stale manifest (said in the
same words by apply, status and revert), and the next step for a fix that is ``tampered`` or in
``conflict`` (``partial``) on a found target.

The steps name commands that exist and run as written: ``git -C ROOT checkout HEAD -- FILE ...`` for a git
checkout (HEAD: a staged edit is put back too; the target's HEAD is its pin), ``cp --remove-destination
--parents`` of those files (a link or FIFO there is taken away, never written through) from the clean release
copy that ``fixpack fetch`` prints for any other tree, a site-packages install included.
They lead back to a state the engine handles: files that are the clean release under a stale manifest (replaced
by apply, removed by revert), or a file that is the release's again, where the fix applies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import DamagedJournalError, DamagedStateError, FixpackError
from .fsio import exists, temp_path
from .records import Manifest, ManifestFix, Recorded
from .report import FixReport, rejects_held
from .run import Context, behind_files, created_there, name_too, named_too, opt_ins_behind, refusing_files
from .safepath import file_on_the_way, link_on_the_way
from .state import journal_named, manifest_path, read_manifest, restore_first
from .states import State
from .targets import FoundTarget

if TYPE_CHECKING:
    from .model import Fix

_STALE_NEXT = {("apply", False): "this run replaces it",
               ("apply", True): "apply replaces it (a dry run writes nothing)",
               ("revert", False): "nothing to revert: this run removes it",
               ("revert", True): "nothing to revert: revert removes it (a dry run writes nothing)",
               ("status", True): "apply replaces it, revert removes it"}


def note_stale(ctx: Context, ft: FoundTarget) -> None:
    """Say, in the same words for apply, status and revert, that the manifest describes files that are no
    longer there (every file it lists is the clean release: the target was reinstalled), and what each does."""
    cmd = (ctx.report.command, ctx.report.dry_run)
    ctx.report.target(ft.spec.name).note(
        f"the files it lists are the clean release's: the manifest at {manifest_path(ft.root, ft.spec.name)} is stale "
        f"(the target was reinstalled?); {_STALE_NEXT[cmd]}")


def stale_entry(ctx: Context, ft: FoundTarget, entry: ManifestFix) -> FixReport:
    """A fix a stale manifest records, for revert: not in the files (they are the clean release), not reverted."""
    if entry.state is not Recorded.APPLIED:
        return FixReport(entry.id, entry.version, ft.spec.name, entry.id in ctx.profile.opt_in, True, State.UPSTREAMED,
                         messages=["upstreamed: not ours to revert"])
    return FixReport(entry.id, entry.version, ft.spec.name, entry.id in ctx.profile.opt_in, True, State.ABSENT,
                     messages=["not in the files (they are the clean release): nothing to revert"])


def restore_how(ctx: Context, ft: FoundTarget, paths: list[str], maybe: list[str] | None = None,
                settle: list[str] | None = None, removed: list[str] | None = None) -> str:
    """How ``paths`` (relative to the target's root) go back to the clean release, as a command to run: git
    for a checkout, else a copy of just those files from the clean release copy that ``fixpack fetch`` prints.
    ``maybe``: files nothing here can say the release has (a damaged journal names them, the lock does not
    know them): each is put back when the release has it, decided as the step runs, else left as it is and
    named on stderr for the user to check; never removed (it may be a file of the image the release copy
    lacks, a build's ``.so``). ``settle``: files a fix recorded that the lock does not know and no patch of
    the pack says the release has: each is put back when the release has it, decided as the step runs, else
    removed (a fix created it: the release copy, from which a lock is made, lacks it). ``removed``: the files
    removed before this step, and ``settle``'s: once done, the bytecode of each module of them that is gone, and
    each folder above them (below the root) that this leaves empty and the release lacks, as a revert leaves
    none of the folders a fix created (:func:`_emptied`).

    Never a package reinstall for a site-packages install: an image's vLLM is often built for its device
    (Gaudi images build it from source), and a reinstall from an index would replace that build."""
    import shlex  # only when there is something to put right

    files = " ".join(shlex.quote(p) for p in paths)
    root = shlex.quote(str(ft.root))
    left = 'else echo "left $p as it is: the release lacks it and the lock does not know it; check it" >&2; fi; done'
    check = " ".join(shlex.quote(p) for p in maybe or [])
    either = " ".join(shlex.quote(p) for p in settle or [])
    if any(e.startswith("git HEAD of ") for e in ft.evidence):
        steps = [f"git -C {root} checkout HEAD -- {files}"] if paths else []
        steps += [f'(cd {root} && for p in {check}; do if git cat-file -e HEAD:./"$p" 2>/dev/null; then '
                  f'git checkout HEAD -- "$p"; {left})'] if maybe else []
        steps += [f'(cd {root} && for p in {either}; do if git cat-file -e HEAD:./"$p" 2>/dev/null; then '
                  f'git checkout HEAD -- "$p"; else rm -f -- "$p"; fi; done)'] if settle else []
        steps += _emptied(ft, [*(removed or []), *(settle or [])], 'git cat-file -e HEAD:./"$d" 2>/dev/null')
        return " && ".join(steps)
    from .progname import command

    fetch = command("fetch", "--profile", ctx.profile.name, "--pack", str(ctx.pack.root), "--target", ft.spec.name)
    pick = shlex.quote(f"s/^{ft.spec.name}=//p")
    cp = "cp --remove-destination --parents"  # a link or FIFO at a file is taken away, never written through
    steps = [f"{cp} {files} {root}"] if paths else []
    steps += [f'for p in {check}; do if [ -e "$p" ]; then {cp} -- "$p" {root}; {left}'] if maybe else []
    steps += [f'for p in {either}; do if [ -e "$p" ]; then {cp} -- "$p" {root}; else rm -f -- {root}/"$p"; '
              f'fi; done'] if settle else []
    steps += _emptied(ft, [*(removed or []), *(settle or [])], '[ -e "$d" ] || [ -L "$d" ]')
    if not steps:
        return ""
    return f'(src=$({fetch} | sed -n {pick}) && [ -n "$src" ] && cd "$src" && {" && ".join(steps)})'


def _emptied(ft: FoundTarget, removed: list[str], release_has_it: str) -> list[str]:
    """The steps, run last, that leave no trace of the files in ``removed`` (relative to ``ft``'s root) that are
    gone then: the bytecode of each such module (``__pycache__/<module>.*.pyc``), then, deepest first, each folder
    above them below the root (never the root itself or above it) that holds nothing else now, once it is empty and
    if the release lacks it (``release_has_it``: a shell test of ``$d``, run where the release is), as a revert
    removes the folders a fix created. One not empty then, that the release has, or holding anything else stays."""
    import shlex

    files = [p for p in removed if p and not p.startswith("/") and ".." not in p.split("/")]
    modules = [Path(p) for p in files if p.endswith(".py")]
    cache = {m: (m.parent / "__pycache__").as_posix() for m in modules}  # its bytecode, never through a link:
    pycs = {m: [] if link_on_the_way(ft.root, c) else [*ft.root.glob(f"{c}/{m.stem}.*.pyc")] for m, c in cache.items()}
    steps = [f"{{ [ -e {shlex.quote(str(ft.root / m))} ] || rm -f -- "
             f"{shlex.quote(str(ft.root / m.parent / '__pycache__' / m.stem))}.*.pyc; }}" for m in modules if pycs[m]]
    above = {Path(p).parents[i].as_posix() for p in files for i in range(len(Path(p).parts) - 1)}
    above |= {(m.parent / "__pycache__").as_posix() for m in modules}
    mine = set(files) | {(m.parent / "__pycache__" / n.name).as_posix() for m in modules for n in pycs[m]}
    folders = []
    for d in sorted(above, key=lambda d: (-d.count("/"), d)):  # deepest first: a folder's own folders are known
        try:
            if not (ft.root / d).is_symlink() and all(f"{d}/{n}" in mine for n in os.listdir(ft.root / d)):
                folders.append(d)
                mine.add(d)
        except OSError:  # gone, not a folder, unreadable: not named
            continue
    if not folders:
        return steps
    root = shlex.quote(str(ft.root))
    return steps + [f'for d in {" ".join(shlex.quote(d) for d in folders)}; do if [ -d {root}/"$d" ] && '
                    f'[ ! -L {root}/"$d" ] && ! {{ {release_has_it}; }}; then rmdir --ignore-fail-on-non-empty -- '
                    f'{root}/"$d"; fi; done']


@contextmanager
def journal_steps(ctx: Context) -> Iterator[None]:
    """Around a run's look at its targets: a damaged journal's first step (put the files back to the clean
    release) becomes a command for the target it was found in (:func:`journal_restore`)."""
    try:
        yield
    except DamagedJournalError as exc:
        ft = next((f for f in ctx.found.values() if f.root == exc.root), None)
        how = journal_restore(ctx, ft, exc.raw) if ft is not None else None
        if how is None:
            raise
        raise DamagedStateError(exc.path, exc.what, restore_first(exc.root, exc.raw, *how)) from None


def journal_restore(ctx: Context, ft: FoundTarget, raw: bytes) -> tuple[str, str] | None:
    """The command that puts back to the clean release every file a killed run may have written on ``ft``: the
    files its journal (``raw``) names and every file the lock knows on that target (so that a manifest left
    from before lists only release files: stale, replaced by apply, removed by revert). A file the release
    does not have (by the lock: a fix creates it) is removed; a file only the journal names is put back when the
    release has it, never removed (:func:`restore_how`). The killed run's temp files (``.NAME.fixpack-tmp``) next
    to any of them go first. What is there of each component the lock knows on
    that target is removed too (:func:`component_leftovers`: an install killed half way; a manifest that
    records it then finds it gone).
    Returns (the step's words, the command); None when no file can be named."""
    comps = component_leftovers(ctx, ft)
    mine = {p for _there, files, _dist in comps for p in files} | {dist for _there, _files, dist in comps}
    clean: dict[str, bool | None] = dict(release_has(ctx, ft))
    for path in journal_named(raw):  # what the journal says existed is never trusted: the lock's word, or none
        if path not in mine and path.split("/", 1)[0] not in mine:
            clean.setdefault(path, None)
    # the killed run's temp files next to them (a component's keeps its folder from going)
    every = {*clean, *(p for _there, files, _dist in comps for p in files), *mine}
    every |= {manifest_path(ft.root, ft.spec.name).relative_to(ft.root).as_posix()}
    import shlex
    tmps = sorted(shlex.quote(str(t)) for p in every if p and exists(t := temp_path(ft.root / p))
                  and (t.is_symlink() or not t.is_dir()))  # (a folder there is the journal's refusal: moved away)
    steps = [f"rm -f -- {' '.join(tmps)}"] if tmps else []
    steps += [to_release(ctx, ft, sorted(clean), clean)] if clean else []
    steps += [_remove_components(ft, comps)] if comps else []
    if not steps:
        return None
    words = "put the files the fixes touch back to the clean release"
    return (words + (" and remove what is there of the components" if comps else ""), " && ".join(steps))


class RunWrites:
    """What a run of this profile could have written on ``root`` (a journal found there is checked against it,
    :func:`fixpack.state.load_journal`): called with a path (relative to ``root``), whether such a run could have
    written it; :meth:`creates`, whether it could have created it (a journal entry that says the file did not
    exist before the run, so that a rollback removes it). Worked out on the first call only (most runs find no
    journal)."""

    said = ("no file this profile writes on the target (a fix's, a component's or the manifest): not a journal this "
            "profile's run left")
    file_bits = 0  # any mode a file of the target has
    empties_folders = True  # a revert removing a file a fix added may empty its folder

    def __init__(self, ctx: Context, root: Path) -> None:
        self._ctx, self._root = ctx, root
        self._known: list[set[str]] = []

    def _sets(self) -> list[set[str]]:
        if not self._known:
            self._known.extend(_run_files(self._ctx, self._root))
        return self._known

    def __call__(self, path: str) -> bool:
        """A file a fix of a found target on ``root`` touches (the lock's files, the pack's patches), a file the
        lock or the manifest has of a component of such a target (not one another installer put there), a file
        in its ``.dist-info`` folder, the bytecode of any of those modules (a run removes it when it changes the
        module), and those targets' manifests."""
        files, dists, _new, _comp = self._sets()
        return path in files or _in_dist(path, dists) or _bytecode_of(path, files)

    def creates(self, path: str) -> bool:
        """A file such a run may find missing and write: one a fix adds or deletes (its revert puts it back), or a
        rename's either side (the lock's entries with no pre- or post-image, the patches' added and deleted
        files), a component's file, its ``.dist-info`` files and their bytecode, a manifest. Never a file the
        release has that no fix adds or removes: a journal saying that one did not exist would have its rollback
        delete a file of the release."""
        files, dists, new, comp = self._sets()
        return path in new or path in comp or _in_dist(path, dists) or _bytecode_of(path, comp)


def run_writes(ctx: Context, root: Path) -> RunWrites:
    """:class:`RunWrites` of ``ctx``'s run on ``root``."""
    return RunWrites(ctx, root)


def _in_dist(path: str, dists: set[str]) -> bool:
    top = path.split("/", 1)[0]
    return "/" in path and top.endswith(".dist-info") and (top in dists or "*" in dists)


def _bytecode_of(path: str, files: set[str]) -> bool:
    folder, _, name = path.rpartition("/")
    if folder.rpartition("/")[2] == "__pycache__" and name.endswith(".pyc"):
        module = folder.rpartition("/")[0]
        return f"{module}/{name.split('.', 1)[0]}.py".lstrip("/") in files
    return False


def _run_files(ctx: Context, root: Path) -> tuple[set[str], set[str], set[str], set[str]]:
    """The files, the ``.dist-info`` folders (``*``: a lock or manifest from before they were named), the files a
    run may create besides components' (manifests, fixes' added, deleted and renamed files) and the components'
    files that :class:`RunWrites` allows. A component another installer put there (its ``.dist-info`` on
    ``root`` has an ``INSTALLER`` other than fixpack's: pip's) is not the run's: apply refuses to install over
    it, so a journal naming its files was not left by a run."""
    names = {ft.spec.name for ft in ctx.found.values() if ft.root == root}
    if ctx.skipped is not None:  # a killed run that named more targets on this root wrote theirs too
        names |= {n for n, ft in ctx.skipped().items() if _same_folder(ft.root, root)}
    files = {p for name in names for p in ctx.lock.release_files(name)}
    files |= {p for fix in ctx.pack.fixes.values() if fix.target in names for p in fix.touched_paths()}
    new = {manifest_path(root, n).relative_to(root).as_posix() for n in names}
    new |= {f.path for lf in ctx.lock.fixes if lf.target in names for f in lf.files if f.pre is None or f.post is None}
    new |= {p for fix in ctx.pack.fixes.values() if fix.target in names
            for fp in fix.file_patches() if fp.kind != "modify" for p in fp.paths()}
    files |= new
    comp: set[str] = set()
    dists: set[str] = set()
    for c in ctx.profile.components:
        locked = ctx.lock.component(c.id) if c.target in names else None
        if locked is not None and not _foreign(root, locked.dist_info):
            comp |= {p for p, _h in locked.files}
            dists.add(locked.dist_info or "*")
    for name in names:
        try:
            manifest = read_manifest(root, name)
        except FixpackError:  # said where the manifest is read
            manifest = None
        for mc in manifest.components if manifest is not None else ():
            if not _foreign(root, mc.dist_info):
                comp |= set(mc.files)
                dists.add(mc.dist_info or "*")
    return files | comp, dists, new, comp


def _foreign(root: Path, dist_info: str) -> bool:
    """Whether another installer put the distribution of ``dist_info`` (``name-version.dist-info``) on ``root``:
    a ``name-*.dist-info/INSTALLER`` there (any version) that is not fixpack's."""
    from .wheels import INSTALLER_NAME, installed_by

    name = dist_info.removesuffix(".dist-info").rpartition("-")[0] if dist_info else ""
    return bool(name) and any(installed_by(f) not in (None, INSTALLER_NAME) for f in root.glob(f"{name}-*.dist-info"))


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a == b or a.resolve() == b.resolve()
    except OSError:
        return False


def component_leftovers(ctx: Context, ft: FoundTarget) -> list[tuple[list[str], list[str], str]]:
    """Each component of ``ft``'s target that the lock knows and that has files on ``ft`` now: (its package
    files there, all its package files, its ``.dist-info`` folder if there). One whose ``.dist-info`` another
    installer wrote (its ``INSTALLER`` is not ``fixpack``: pip's) is not ours and left alone."""
    from .wheels import INSTALLER_NAME, installed_by

    out = []
    for comp in ctx.profile.components:
        locked = ctx.lock.component(comp.id) if comp.target == ft.spec.name else None
        if locked is None:
            continue
        dist = locked.dist_info
        if dist and installed_by(ft.root / dist) not in (None, INSTALLER_NAME):  # pip's, say: not ours
            continue
        files = [p for p, _h in locked.files]
        there = [p for p in files if (ft.root / p).is_file() or (ft.root / p).is_symlink()]
        folder = dist if dist and (ft.root / dist).is_dir() and not (ft.root / dist).is_symlink() else ""
        if there or folder:
            out.append((there, files, folder))
    return out


def _remove_components(ft: FoundTarget, comps: list[tuple[list[str], list[str], str]]) -> str:
    """The command that removes ``comps`` (:func:`component_leftovers`) from ``ft``'s root: their files, the
    bytecode of their modules, their ``.dist-info`` folders, then the folders that leaves empty."""
    from .components import removal

    there = sorted(p for fs, _all, _d in comps for p in fs)
    files = sorted(p for _fs, every, _d in comps for p in every)
    return removal(ft.root, there, files, tuple(sorted(d for _fs, _all, d in comps if d)))


def release_has(ctx: Context, ft: FoundTarget) -> dict[str, bool]:
    """Each file the run's lock knows on ``ft``'s target -> whether the clean release has it (the first
    pre-image along the profile's chain); empty without a lock."""
    return {p: pre is not None for p, pre in ctx.lock.release_files(ft.spec.name).items()}


def to_release(ctx: Context, ft: FoundTarget, paths: list[str], has: Mapping[str, bool | None],
               settle: frozenset[str] = frozenset()) -> str:
    """The command that puts ``paths`` back as the clean release has them: removed only where ``has`` says the
    release lacks the file (False: the lock knows a fix creates it), put back when the release has it where
    ``has`` cannot tell (None: a damaged journal names it), restored (:func:`restore_how`) otherwise. A path in
    ``settle`` that ``has`` does not name is put back when the release has it, else removed, decided as the
    command runs (:func:`recorded_has`)."""
    import shlex

    removed = [p for p in paths if has.get(p) is False]  # a file where a folder on the way was goes itself:
    gone = list(dict.fromkeys(shlex.quote(str(ft.root / (file_on_the_way(ft.root, p) or p))) for p in removed))
    either = [p for p in paths if p not in has and p in settle]
    back = [p for p in paths if has.get(p, True) and p not in either]
    maybe = [p for p in paths if p in has and has[p] is None]
    steps = ([f"rm -f -- {' '.join(gone)}"] if gone else []) + ([restore_how(ctx, ft, back, maybe, either, removed)]
                                                                  if back or maybe or either or removed else [])
    return " && ".join(s for s in steps if s)


def recorded_has(ctx: Context, ft: FoundTarget,
                 recorded: list[str]) -> tuple[dict[str, bool], frozenset[str], list[str]]:
    """For :func:`to_release` of the files a manifest on ``ft`` lists (``recorded``): whether the clean release has
    each, the files nothing here can tell, and the files the lock does not know (``recorded`` order). The lock says
    it of the files it knows (:func:`release_has`); it may know none of them (missing, or stale: revert goes on
    without it) or not all (the fix was applied with another patch than the pack's). Of each other file, the pack's
    patches of the target, first along the series, say the release has it when one changes, deletes or renames it
    (True: put back; a release copy without it fails the command, before anything after it runs); any other (a patch
    creates it, or none touches it) is put back when the release copy has it, else removed: a fix created it, since
    a lock is made from the release copy and a fix only changes a file the copy has."""
    has = release_has(ctx, ft)
    unknown = [p for p in recorded if p not in has]
    if not unknown:
        return has, frozenset(), []
    existed: dict[str, bool] = {}
    from .patchfiles import parse_fixes

    ours = [f.id for f in ctx.pack.ordered(ctx.profile.default + ctx.profile.opt_in) if f.target == ft.spec.name]
    try:
        parse_fixes(ctx.pack, ctx.profile, ours)
    except FixpackError:  # a malformed patch says nothing: each file is then left to the release copy
        ours = []
    for fid in ours:
        for fp in ctx.pack.fixes[fid].file_patches():
            if fp.old_path:
                existed.setdefault(fp.old_path, True)
            if fp.new_path:
                existed.setdefault(fp.new_path, False)
    has = {**has, **{p: True for p in unknown if existed.get(p)}}
    return has, frozenset(p for p in unknown if not existed.get(p)), unknown


def _every_file_back(ctx: Context, ft: FoundTarget, manifest: Manifest) -> tuple[str, str, bool]:
    """The command that puts every file ``manifest`` lists back to the clean release (:func:`to_release`), what the
    next run makes of the manifest then, and whether that is "stale": so when the lock knows each of those files
    (apply replaces it, revert removes it). A run without such a lock (missing, stale: revert goes on without it;
    one that does not know a file the applied patch created) cannot tell the manifest is stale, and would refuse it
    again: the command removes it too (with ``.fixpack/`` when that leaves it empty, as revert does), unless it
    records components (their record is kept: the next step is then a lock that knows the files)."""
    import shlex

    recorded = sorted(manifest.files)
    has, settle, unknown = recorded_has(ctx, ft, recorded)
    how = to_release(ctx, ft, recorded, has, settle)
    if not unknown:
        return how, "the manifest is then stale: apply replaces it, revert removes it", True
    from .lock_hints import regenerate_hint
    from .lockfile import unused_lock_said

    unused = "" if ctx.lock.profile else unused_lock_said(ctx.pack, ctx.profile)  # (no lock: revert went on without)
    said = f"{unused}, so no lock says whether the release has {', '.join(unknown)}" if unused else \
        f"the lock does not know {', '.join(unknown)}"
    relock = "; then " + regenerate_hint(ctx.profile, ctx.relock, ctx.pack).replace("it", "the lock", 1) \
        if unused else ""
    if settle:
        said += (f" (of {', '.join(sorted(settle))}, nothing here says whether the release has it: the command puts "
                 f"each back where the release copy has it, else removes it, as a file the fix created)")
    if manifest.components:
        return how, (f"{said}, so no run can tell the manifest is stale until a lock that knows them is made; the "
                     f"manifest stays, since it records components{relock}"), False
    mpath = manifest_path(ft.root, ft.spec.name)
    folder = shlex.quote(str(mpath.parent))
    how += f" && rm -f -- {shlex.quote(str(mpath))} && {{ rmdir -- {folder} 2>/dev/null || true; }}"
    return how, f"{said}, so no run could tell the manifest is stale: the command removes it too{relock}", False


def add_next_steps(ctx: Context, manifests: dict[str, Manifest | None]) -> None:
    """One next step on each fix that is tampered, in conflict, partial or ambiguous (``manifests``: what each target's
    manifest records, None when it has none). Components keep their own words."""
    for fr in ctx.report.fixes:
        ft = ctx.found.get(fr.target)
        if fr.kind != "fix" or ft is None:
            continue
        manifest = manifests.get(fr.target)
        if manifest is not None and (fr.state is State.TAMPERED or
                                     (ctx.report.command == "revert" and fr.state is State.CONFLICT)):
            fr.messages.append(_back_to_release(ctx, ft, manifest))
        elif fr.state in (State.CONFLICT, State.PARTIAL, State.AMBIGUOUS):  # (ambiguous on a pinned release: a block
            # copied there since, as the lock placed every hunk once on the release)
            fr.messages.append(_changed_file(ctx, ft, fr, manifest.applied_ids() if manifest else set()))


def _back_to_release(ctx: Context, ft: FoundTarget, manifest: Manifest) -> str:
    """A recorded fix whose files changed: undo the change, or put every file the manifest lists back to the
    release, so that the manifest is stale (apply replaces it, revert removes it), or gone with them where no
    run could tell it is stale (:func:`_every_file_back`)."""
    how, then, stale = _every_file_back(ctx, ft, manifest)
    if not stale:
        return (f"next: undo that change, or put every file the manifest lists back to the clean release: {how}; "
                f"then run {ctx.report.command} again ({then})")
    again = "revert again: it then removes the stale manifest" if ctx.report.command == "revert" else \
        "apply again: it then replaces the stale manifest and applies the fixes afresh"
    return (f"next: undo that change, or put every file the manifest lists back to the clean release: "
            f"{how}; then run {again}")


def other_patch(ctx: Context, ft: FoundTarget, manifest: Manifest, entry: ManifestFix, fix: Fix) -> str:
    """A fix the manifest on ``ft`` records as applied with another patch than the pack has (``entry``): what it
    is, and the ways out, each a command (the one that applied it may be gone): revert with the pack that applied
    it, or put every file the manifest lists back to the clean release (:func:`to_release`), which makes the
    manifest stale (apply replaces it, revert removes it). At the same version it says where to bump it (true
    whichever way the two patches came to share it: a patch changed without a bump, a lock removed to get past
    ``lock``'s refusal of that, another pack)."""
    same = ""
    if entry.version == fix.version:
        from .lockfile import version_at  # only for this message

        same = (f" (the same version: its patch differs from the one applied under that version; if the pack's "
                f"change is not meant, put the pack's patch back as it was and run again; if it is, bump the version "
                f"in {version_at(fix, ctx.profile)} too, and take the image back as follows)")
    how, then, _stale = _every_file_back(ctx, ft, manifest)
    return (f"the manifest at {manifest_path(ft.root, ft.spec.name)} records {fix.id} v{entry.version} on target "
            f"{ft.spec.name}, applied with another patch than this pack's v{fix.version}{same}, so this pack cannot "
            f"place or take out its hunks. Revert with the pack that applied it, then apply with this one; or, "
            f"without that pack, put every file the manifest lists back to the clean release: "
            f"{how}; then run {ctx.report.command} again ({then})")


def found_whole(ctx: Context, target: str, recorded: set[str]) -> list[str]:
    """``target``'s fixes found whole with no record (not in ``recorded``): applied, or laid on drifted files."""
    laid = {f.id for _fr, _ft, f, *_rest, in_already in ctx.drift if in_already}
    return [f.id for f in ctx.report.fixes if f.kind == "fix" and f.target == target and f.id not in recorded
            and (f.state is State.APPLIED or f.id in laid)]


def _changed_file(ctx: Context, ft: FoundTarget, fr: FixReport, recorded: set[str]) -> str:
    """A fix that does not apply on a pinned release: a file it touches was changed after the release, or is
    not there, or the lock placed it on top of opt-ins this run does not apply (:func:`opt_ins_behind`: name them
    too), or a file it creates is there already. Names, and puts back, only the files that refused it (a missing
    file refuses without a hunk); every file the fix touches only when none can be told."""
    assert ctx.rerun is not None
    fix = ctx.pack.fixes[fr.id]
    gone, files = refusing_files(ft, fix, fr)
    behind, said = opt_ins_behind(ctx, fix, behind_files(ctx, fix, files), recorded)
    made = created_there(ft, fix)
    if made:
        import shlex  # only for this message

        def aside(p: str) -> str:  # a name not in use (an older backup is never overwritten, nor one made since)
            n, dest = 0, f"{ft.root / p}.orig"
            while Path(dest).exists() or Path(dest).is_symlink():
                n, dest = n + 1, f"{ft.root / p}.orig{n + 1}"
            return f"[ ! -e {shlex.quote(dest)} ] && mv -- {shlex.quote(str(ft.root / p))} {shlex.quote(dest)}"

        names, also = named_too(ctx, behind, ctx.behind_of.get(fix.id, behind))
        too = (f" (it names {', '.join(behind)} too, which the lock placed {fix.id} on top of"
               f"{'; ' + also[2:-1] if also else ''})" if behind else also)
        inside = "" if set(made) <= {fp.new_path for fp in fix.file_patches()} else " (or a file in it)"
        return (f"next: {', '.join(made)} is there, though the release lacks it and the fix creates it{inside}: "
                f"move it aside ({' && '.join(aside(p) for p in made)}), then run "
                f"{ctx.rerun(ctx.report.command, ctx.report.strict, names)}{too}")
    if behind:
        return f"next: {said}; {name_too(ctx, behind, own=ctx.behind_of.get(fix.id, behind))}"
    one = len(files) == 1
    what = f"{', '.join(files)} {'differs' if one else 'differ'} from the release" if not gone else \
        f"{', '.join(files)} {'is' if one else 'are'} missing or {'differs' if one else 'differ'} from the release"
    again = ctx.rerun(ctx.report.command, ctx.report.strict, ctx.behind)
    back = ctx.pack.with_sharers(found_whole(ctx, fr.target, recorded), set(files))  # a fix found whole: all of it
    rej = f" ({rejects_held(ctx.rejects)})" if fr.refused else ""  # (without --reject: how to have them)
    return (f"next: {what} where the fix goes; if it was changed after the release, put it back: "
            f"{restore_how(ctx, ft, back)}; then run {again}{rej}")


__all__ = ["add_next_steps", "journal_restore", "journal_steps", "note_stale",
           "restore_how", "RunWrites", "run_writes", "stale_entry"]
