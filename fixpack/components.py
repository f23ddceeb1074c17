"""Components on a target: what the manifest records of them against the files (status), their files
laid into the run's tree (apply), their files removed (revert). Treated like fixes: states applied /
absent / tampered, actions applied / reverted, written by the same journalled transaction.

A component installs into its target's root, which must be a ``site-packages`` folder (the target's
own ``<distribution>-<version>.dist-info`` lies there): a source tree is refused (exit 3).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import BadInputError, DamagedStateError, MismatchError
from .lock_hints import Redo
from .lockfile import check_component_files
from .model import Component, Profile
from .profile_components import built_version_problem, pip_normal
from .records import Lock, LockComponent, Manifest, ManifestComponent, package_files
from .report import FixReport
from .states import Action, State
from .targets import FoundTarget
from .tree import Tree, decode, file_hashes


def site_packages_problem(ft: FoundTarget) -> str | None:
    """Why the target's root is no site-packages folder a component can be installed into."""
    dist = pip_normal(ft.spec.distribution)
    if any(pip_normal(p.name.partition("-")[0]) == dist for p in ft.root.glob("*.dist-info")):
        return None
    return (f"components install into site-packages, and target {ft.spec.name} at {ft.root} is not an installed "
            f"package there (no {ft.spec.distribution}-*.dist-info beside {ft.spec.package}/: a source tree?); "
            f"point --root {ft.spec.name}=... at the image's site-packages, or do not select components")


def unselected(ft: FoundTarget) -> str:
    """What status says of a component of ``ft``'s target that the run does not select: name it to install it, or,
    where the root is no site-packages folder, why it cannot be installed there (a run naming it is refused)."""
    why = site_packages_problem(ft)
    return f"component, not selected in this run; it cannot be installed here: {why}" if why else \
        "component, not selected in this run: name it to install it (--all-opt-in selects fixes only)"


def evaluate(profile: Profile, ft: FoundTarget, tree: Tree, manifest: Manifest | None, selected: tuple[str, ...],
             build: dict[str, object] | None, dry: bool, lock: Lock | None = None,
             redo: Redo | None = None) -> tuple[list[FixReport], list[ManifestComponent], bool]:
    """Each component of ``ft``'s target, recorded or selected, with its state; selected absent ones are
    written into ``tree`` when ``build`` (a per-run cache of layouts) is given (status passes None). ``redo``:
    the run's lock command, named when a component's files are not the ones ``lock`` records."""
    reports: list[FixReport] = []
    entries: list[ManifestComponent] = []
    reached = True
    for comp in profile.components:
        if comp.target != ft.spec.name:
            continue
        rec = manifest.component(comp.id) if manifest else None
        changed = changed_files(tree, rec) if rec is not None else {}
        gone = rec is not None and all_gone(rec, changed)
        if rec is not None and not (gone and comp.id in selected):
            fr = _recorded(comp, rec, tree, changed, comp.id in selected)
            reached = reached and fr.state in (State.APPLIED, State.ABSENT)
            entries.append(rec)
        elif comp.id in selected:
            fr = FixReport(comp.id, comp.version, comp.target, comp.opt_in, True, State.ABSENT,
                           Action.WOULD_APPLY if dry else Action.APPLIED, kind="component")
            if gone:
                fr.messages.append(f"{GONE}: {'apply installs it again' if dry else 'installed again'}")
            problem = site_packages_problem(ft)
            if problem:  # status too: it says what apply would do (apply refuses here)
                raise MismatchError(f"cannot install component {comp.id}: {problem}")
            if build is not None:
                entry, notes = _lay_out(profile, comp, ft, tree, build, lock, redo)
                entries.append(entry)
                fr.messages += notes
        else:
            continue
        reports.append(fr)
    return reports, entries, reached


GONE = "every file the manifest records of it is gone (uninstalled?)"


def check_records(profile: Profile, lock: Lock, manifest: Manifest, path: Path) -> None:
    """A manifest's component records claim only what a component can have installed: never a file in a
    target's package folder, and, where the lock knows the component at the recorded version, only its
    package files and its own ``.dist-info`` (the record says what revert removes: an entry added by hand
    must not make it delete vLLM's files); a component of the profile (or the lock), whose ``.dist-info`` is its own
    (a record naming vLLM's made revert delete vLLM's metadata), and, at a version the lock does not know, files
    in its own folders only (a made-up component's ``numpy/`` was removed). Raises DamagedStateError naming ``path``
    (exit 3)."""
    packages = tuple(t.package + "/" for t in profile.targets)
    for rec in manifest.components:
        locked = lock.component(rec.id)
        at = locked if locked is not None and locked.version == rec.version else None
        name = pip_normal(rec.id)  # the wheel's name for its .dist-info and (these components') import package
        own = at.dist_info if at is not None and at.dist_info else f"{name}-{rec.version}.dist-info"
        tops = {p.split("/", 1)[0] for p, _h in locked.files} if locked is not None else {name}
        if locked is None and rec.id not in {c.id for c in profile.components}:
            what = f"component {rec.id} is no component of profile {profile.name} (what revert would remove)"
        elif not rec.files:  # (an install records its files and .dist-info: revert said reverted and left them)
            what = f"component {rec.id} {rec.version} records no file"
        elif rec.dist_info.lower() != own.lower():
            what = f"component {rec.id} {rec.version} records the .dist-info {rec.dist_info}, not its own {own}"
        else:
            what = next((_stray(rec, p, packages, at, tops) for p in sorted(rec.files)
                         if _stray(rec, p, packages, at, tops)), "")
        if what:
            raise DamagedStateError(path, f"not a valid fixpack manifest: {what} (an entry added by hand?)")


def _stray(rec: ManifestComponent, p: str, packages: tuple[str, ...], at: LockComponent | None, tops: set[str]) -> str:
    """Why ``rec`` cannot have installed ``p`` ("" when it can): a target's package folder; a file the lock does not
    list for that version, outside its .dist-info; or, with no lock entry at that version, one outside the folders
    its files are in (the lock's for any version, else its own import package)."""
    top = p.split("/", 1)[0]
    if p.startswith(packages):
        return f"component {rec.id} records {p}, inside a target's package folder ({top}/)"
    if top == rec.dist_info:
        return ""
    if at is not None and p not in {q for q, _h in at.files}:
        return f"component {rec.id} {rec.version} records {p}, which the lock does not list for that version"
    if at is None and top not in tops:
        return f"component {rec.id} {rec.version} records {p}, outside its own folders ({', '.join(sorted(tops))})"
    return ""


def all_gone(rec: ManifestComponent, changed: dict[str, str | None]) -> bool:
    """Whether every recorded file of ``rec`` is gone (``changed``: :func:`changed_files`): a ``pip uninstall``
    or a reinstall of the image took it, so there is nothing of it to keep or remove."""
    return bool(rec.files) and len(changed) == len(rec.files) and all(h is None for h in changed.values())


def _recorded(comp: Component, rec: ManifestComponent, tree: Tree, changed: dict[str, str | None],
              selected: bool) -> FixReport:
    if rec.version != comp.version:
        raise BadInputError(f"the image holds component {comp.id} {rec.version}, the profile names {comp.version}: "
                            f"revert with the pack that installed it, then apply with this one")
    fr = FixReport(comp.id, comp.version, comp.target, comp.opt_in, selected, State.APPLIED, kind="component")
    if all_gone(rec, changed):  # not selected in this run: kept on record until it is named again or reverted
        fr.state = State.ABSENT
        fr.messages.append(f"{GONE}: name it to install it again; revert drops the record")
    elif changed:
        fr.state = State.TAMPERED
        fr.messages += _changed_messages(changed)
        fr.messages.append(remove_rest(tree, rec, changed, "apply again: it installs it afresh"))
    else:
        fr.messages.append("already applied" if selected else "not selected in this run; kept (revert removes it)")
    return fr


def _changed_messages(changed: dict[str, str | None]) -> list[str]:
    return [f"{p}: {'missing' if now is None else 'differs from the manifest sha256'} (changed since it was "
            f"installed)" for p, now in changed.items()]


def changed_files(tree: Tree, rec: ManifestComponent) -> dict[str, str | None]:
    """The recorded files whose bytes are not the recorded ones now: path -> sha256 now (None: gone)."""
    now = file_hashes(tree, sorted(rec.files))
    return {p: h for p, h in now.items() if h != rec.files[p]}


def _lay_out(profile: Profile, comp: Component, ft: FoundTarget, tree: Tree,
             cache: dict[str, object], lock: Lock | None = None,
             redo: Redo | None = None) -> tuple[ManifestComponent, list[str]]:
    from .wheels import Layout, component_layout

    problem = site_packages_problem(ft)
    if problem:
        raise MismatchError(f"cannot install component {comp.id}: {problem}")
    layout = cache.get(comp.id)
    if not isinstance(layout, Layout):
        layout = component_layout(comp, ft.root)
        cache[comp.id] = layout
    problem = built_version_problem(comp, layout.version, profile.path)
    if problem:
        raise BadInputError(problem)
    locked = lock.component(comp.id) if lock is not None else None
    if locked is not None:
        check_component_files(profile, comp, locked, package_files(layout.hashes()), redo, layout.dist_info)
    _check_free(profile, comp, ft, tree, set(layout.files), layout.name)
    for path, (data, mode) in sorted(layout.files.items()):
        tree.write(path, decode(data), mode)
    return ManifestComponent(comp.id, comp.version, layout.dist_info, layout.hashes()), list(layout.skipped)


def _check_free(profile: Profile, comp: Component, ft: FoundTarget, tree: Tree, paths: set[str], name: str) -> None:
    """Nothing of the component may be there already (pip installed it?), nor lie in a target's package."""
    packages = tuple(t.package + "/" for t in profile.targets)
    inside = sorted(p for p in paths if p.startswith(packages))
    if inside:
        raise BadInputError(f"component {comp.id} would write {inside[0]}, inside a target's package folder")
    others = [p.name for p in ft.root.glob("*.dist-info") if pip_normal(p.name.partition("-")[0]) == pip_normal(name)]
    eggs = [p.name for p in ft.root.glob("*.egg-info") if pip_normal(p.name.partition("-")[0]) == pip_normal(name)]
    there = sorted(p for p in paths if tree.read(p) is not None) or eggs  # (setup.py install's metadata: an egg's)
    if others or there:
        what = others[0] if others else there[0]
        from .wheels import INSTALLER_NAME, installed_by

        if others and all(installed_by(ft.root / d) == INSTALLER_NAME for d in others):  # ours, but unrecorded
            pkg = sorted(q for q in paths if not q.partition("/")[0].endswith(".dist-info"))
            rm = removal(ft.root, [q for q in there if q in pkg], pkg, tuple(others))
            raise MismatchError(f"cannot install component {comp.id}: {Path(ft.root) / what} is there already, "
                                f"installed by fixpack, but no manifest on this target records it (the manifest "
                                f"was removed or replaced?), so fixpack cannot tell it from a copy it did not "
                                f"write; remove it: {rm}, then apply")
        raise MismatchError(f"cannot install component {comp.id}: {Path(ft.root) / what} is there already (installed "
                            f"by pip or another tool?); uninstall {name} first, then apply (fixpack installs and "
                            f"removes only what it records)")


def revert(profile: Profile, manifest: Manifest, tree: Tree, dry: bool) -> list[FixReport]:
    """Remove every recorded component's files from ``tree`` (refused per component when tampered)."""
    out = []
    for rec in reversed(manifest.components):
        comp = profile.component(rec.id)
        fr = FixReport(rec.id, rec.version, manifest.target, comp.opt_in if comp else False, True, State.APPLIED,
                       kind="component")
        changed = changed_files(tree, rec)
        if all_gone(rec, changed):
            fr.state = State.ABSENT
            fr.messages.append(f"{GONE}: nothing of it to remove; its record goes with the manifest")
        elif changed:
            fr.state = State.TAMPERED
            fr.messages += _changed_messages(changed)
            fr.messages.append(remove_rest(tree, rec, changed, "revert again: it drops the record"))
        else:
            for path in rec.files:
                tree.write(path, None)
            fr.action = Action.WOULD_REVERT if dry else Action.REVERTED
        out.append(fr)
    return out


def remove_rest(tree: Tree, rec: ManifestComponent, changed: dict[str, str | None], then: str) -> str:
    """The next step for a component whose files changed: put them back as installed, or remove what is left
    of it (the recorded files still there, then their folders once empty), after which it is gone."""
    there = [p for p in sorted(rec.files) if changed.get(p, "") is not None]
    return (f"next: put those files back as they were installed, or remove what is left of {rec.id}: "
            f"{removal(tree.root, there, sorted(rec.files))}; then run {then}")


def removal(root: Path, there: list[str], files: list[str], dists: tuple[str, ...] = ()) -> str:
    """The command that removes a component's files from ``root``: ``there`` (those on disk now), the
    bytecode of every module of ``files`` (all it has or had), whatever Python wrote it and whenever (the
    ``__pycache__`` of a folder that holds only the component's files goes whole; elsewhere, as in the
    site-packages folder itself, only ``<module>.*.pyc``), the ``.dist-info`` folders ``dists`` whole, then
    every folder of ``files`` that this leaves empty, deepest first."""
    import shlex  # only when there is something to put right

    folders = sorted({str(Path(p).parents[i]) for p in files for i in range(len(Path(p).parts) - 1)},
                     key=lambda d: (-d.count("/"), d))
    folders = [d for d in folders if (root / d).is_dir() and not (root / d).is_symlink()]
    mine = set(files) | set(folders) | {f"{d}/__pycache__" for d in folders}
    own = [d for d in folders if all(f"{d}/{n}" in mine for n in os.listdir(root / d))]
    shared = [p for p in files if p.endswith(".py") and str(Path(p).parent) not in own]
    gone = [shlex.quote(p) for p in there]
    gone += [f"{shlex.quote(str(Path(p).parent / '__pycache__' / Path(p).stem))}.*.pyc" for p in shared]  # a glob
    modules = {str(Path(p).parent) for p in files if p.endswith(".py")}
    whole = [shlex.quote(p) for p in (*dists, *(f"{d}/__pycache__" for d in own if d in modules))]
    steps = [f"cd {shlex.quote(str(root))}"] + (["rm -f -- " + " ".join(gone)] if gone else [])
    steps += ["rm -rf -- " + " ".join(whole)] if whole else []
    empty = [d for d in folders if d not in own and (root / d / "__pycache__").is_dir()]
    empty = sorted({*folders, *(f"{d}/__pycache__" for d in empty)}, key=lambda d: (-d.count("/"), d))
    steps += ["rmdir --ignore-fail-on-non-empty -- " + " ".join(shlex.quote(d) for d in empty)] if empty else []
    return f"({' && '.join(steps)})"
