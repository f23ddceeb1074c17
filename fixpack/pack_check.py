"""The pack lint (``fixpack check``): what a maintainer's edit can leave inconsistent, found by file
and line before CI or an image build trips on it.

- every fix of ``fixes/series`` is listed by some profile, or marked ``retired = "why"`` in its
  ``fix.toml`` (a fix in no profile is otherwise never applied, without a word); a retired fix is in
  no profile;
- every fix a profile lists is in the series, every ``fix.toml`` validates and every patch parses (its mail header
  too, as ``format`` reads it)
  (the loader's own checks, each problem with its file and line);
- every fix that is not retired has a proof, ``fixes/<id>/test_*.py``;
- a profile lists its fixes in series order (a run applies them in series order whatever the profile says, so
  another order there reads as a choice that has no effect);
- in each profile, no opt-in fix comes before a default fix in ``fixes/series`` when both change a file: the
  default fix's patch is then written on the opt-in's post-image, and every image without that opt-in drifts
  (``apply --strict`` refuses it);
- every profile's lock matches the pack: the changes, versions, components and pins it was made for
  (what every apply checks; no release copy needed), each component's package files too (its wheel built
  offline, once a run); with ``fresh``, it is also regenerated from the
  clean release copies and compared (what ``fixpack lock --check`` does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .documents import key_line, read_toml, text_for_lines
from .errors import Collector, EnvironmentProblem, FixpackError, PackError, Problem, StaleLockError
from .loader import load_pack, load_profile
from .model import Pack, Profile
from .records import Lock
from .safepath import not_a_pack_file
from .structs import dataclass, replace

if TYPE_CHECKING:
    from .patchmail import Mail

# the release copies of a profile's targets with fixes (target name -> root), fetched or cached
Copies = Callable[[Pack, Profile], dict[str, Path]]


@dataclass(frozen=True)
class Finding:
    """One problem of the pack: the file (relative to the pack when inside it), its line (None when the
    whole file is meant), what is wrong and what to do."""

    file: str
    line: int | None
    message: str
    hint: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}" + (f" ({self.hint})" if self.hint else "")

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "message": self.message, "hint": self.hint}


def check_pack(root: Path, fresh: Copies | None = None) -> tuple[list[Finding], list[str]]:
    """Every finding of the pack at ``root`` (in file order) and the profiles checked. ``fresh``: also
    compare each lock with one generated now on the release copies it gives."""
    root = root.resolve()
    killed = _killed_write(root) or _killed_rebase(root)
    if killed:  # what else is found follows from the half write (a stale lock, a fix in no profile): not said
        return killed, []
    try:
        pack = load_pack(root)
    except PackError as exc:
        return [_finding(root, p) for p in exc.problems or [Problem(str(exc))]], []
    profiles: list[Profile] = []
    said: dict[Finding, list[str]] = {}  # a profile's finding -> the profiles that gave it
    for name in sorted(pack.profiles):
        try:
            profiles.append(load_profile(pack, name))
        except PackError as exc:
            for p in exc.problems or [Problem(str(exc), pack.profiles[name])]:
                said.setdefault(_finding(root, p), []).append(name)
    # a finding in a fix.toml that several profiles meet is said once, with the profiles it concerns
    findings = [f if f.file.startswith("profiles/") else replace(f, message=f"{f.message}; profile{'s' * (len(n) > 1)} "
                                                                            f"{', '.join(n)}") for f, n in said.items()]
    listed = [_listed(pack.profiles[n]) for n in {n for names in said.values() for n in names}]
    findings += _orphans(pack, profiles, listed) + _orphan_locks(pack) + _proofs(pack) + _strays(pack) + _mails(pack)
    findings += _order(pack, profiles) + _opt_in_order(pack, profiles)
    for profile in profiles:  # a component carried by several profiles is built once (wheels.component_layout)
        findings += _lock(pack, profile, fresh)
    return sorted(findings, key=lambda f: (f.file, f.line or 0)), [p.name for p in profiles]


def _killed_write(root: Path) -> list[Finding]:
    """A refresh or import killed while writing the pack leaves its journal in ``<pack>/.fixpack/`` and the
    pack half written: say that first (the other findings, a stale lock, follow from it)."""
    from .pack_journal import killed_mid_write
    from .safepath import STATE_DIR

    if not killed_mid_write(root):
        return []
    from .errors import DamagedJournalError
    from .run import half_written_way  # only when a message names it

    try:
        way = half_written_way(root)
    except DamagedJournalError as exc:  # planted or torn: its steps, by hand
        return [Finding(STATE_DIR, None, str(exc).removesuffix(" (nothing was written)"), "")]
    return [Finding(STATE_DIR, None, "a refresh or import was killed while writing the pack, which may be half "
                                     "written", way)]


def _killed_rebase(root: Path) -> list[Finding]:
    """A rebase stopped while it wrote the pack (SIGKILL: its state still says ``writing``) leaves the new profile's
    files, variants and lock half written: said first, with the ``--continue`` that finishes the write and the
    ``--abort`` that puts the pack back (a stray variant folder alone was named, "never used", with no word of it)."""
    from .errors import FixpackError
    from .rebase_registry import entry_path, live_entries, started_state, way_on

    try:
        rebases = live_entries(root)
    except (FixpackError, OSError):  # .rebase a link or no folder: the rebase commands say so
        return []
    out = []
    for name, work, given in rebases:
        state = started_state(work / "state.json") or {}
        if state.get("phase") != "writing":
            continue
        finish, drop = way_on(root, name, work if given else None, state)
        out.append(Finding(_rel(root, entry_path(root, name)), None, f"a rebase to {name} was stopped while writing "
                           f"the pack, which may be half written (the new profile, its lock and the fixes' {name} "
                           f"variants)", f"finish it with `{finish}`, or put the pack back with `{drop}`"))
    return out


def _rel(root: Path, path: Path | None) -> str:
    if path is None or path == root:  # (the pack itself: named, not ".")
        return str(root)
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _finding(root: Path, p: Problem) -> Finding:
    return Finding(_rel(root, p.path), p.line, p.message, p.hint)


def _series_line(pack: Pack, fid: str) -> int | None:
    lines = text_for_lines(pack.root / "fixes" / "series").splitlines()
    return next((n for n, ln in enumerate(lines, 1) if ln.split("#", 1)[0].strip() == fid), None)


def _listed(path: Path) -> tuple[str, list[str]]:
    """A profile that did not load: its name and the fixes its ``[fixes]`` lists, as far as they can be read
    (its own findings are reported; its fixes are not "in no profile" for them)."""
    loaded = read_toml(path, Collector())  # (a FIFO is not read: it would wait for a writer for ever)
    fixes = loaded[0].get("fixes", {}) if loaded is not None else {}
    ids = [*fixes.get("default", []), *fixes.get("opt_in", [])] if isinstance(fixes, dict) else []
    return path.stem, [i for i in ids if isinstance(i, str)]


def _orphans(pack: Pack, profiles: list[Profile], unloaded: list[tuple[str, list[str]]]) -> list[Finding]:
    listed: dict[str, list[str]] = {}
    for name, ids in [(p.name, list(p.default + p.opt_in)) for p in profiles] + unloaded:
        for fid in ids:
            listed.setdefault(fid, []).append(name)
    out = []
    for fid in pack.series:
        fix = pack.fixes[fid]
        if fix.retired and fid in listed:
            out.append(Finding(_rel(pack.root, fix.folder / "fix.toml"), None,
                               f"fix {fid} is retired ({fix.retired}) but profile(s) {', '.join(listed[fid])} list it",
                               "drop it from those profiles, or remove 'retired' from its fix.toml"))
        elif not fix.retired and fid not in listed:
            out.append(Finding("fixes/series", _series_line(pack, fid), f"fix {fid} is in no profile: it is never "
                               f"applied", f"add it to a profile's [fixes] default or opt_in, or set "
                               f"retired = \"why\" in fixes/{fid}/fix.toml"))
    return out


def _order(pack: Pack, profiles: list[Profile]) -> list[Finding]:
    """A profile's ``default`` or ``opt_in`` listed in another order than ``fixes/series``: runs apply the
    series' order (loader.chosen_fixes), so the profile's order has no effect; named at the key's line."""
    rank = {fid: n for n, fid in enumerate(pack.series)}
    out = []
    for p in profiles:
        text = text_for_lines(p.path)
        for key, ids in (("default", p.default), ("opt_in", p.opt_in)):
            ordered = sorted(ids, key=lambda fid: rank.get(fid, len(rank)))
            if list(ids) != ordered:
                out.append(Finding(_rel(pack.root, p.path), key_line(text, key, "fixes"),
                                   f"[fixes] {key} lists its fixes in another order than fixes/series; runs apply "
                                   f"them in series order, so this order has no effect",
                                   f"list them in series order: {key} = {json.dumps(ordered)}, or move them in "
                                   f"fixes/series if the order matters"))
    return out


def _opt_in_order(pack: Pack, profiles: list[Profile]) -> list[Finding]:
    """An opt-in fix the series puts before a default fix of the same profile and target (the rule ``new`` keeps:
    :meth:`Profile.opt_ins_before_defaults`) when both change a file: named at the opt-in's entry in the profile,
    with both fixes' lines in fixes/series and the files they share."""
    out = []
    for p in profiles:
        view, text = pack.for_profile(p.name), text_for_lines(p.path)
        for o, d in p.opt_ins_before_defaults(pack.series):
            first, then = view.fixes[o], view.fixes[d]
            mine = set(first.touched_paths()) if first.target == then.target else set()
            shared = [f for f in then.touched_paths() if f in mine]
            if not shared:
                continue
            out.append(Finding(_rel(pack.root, p.path), _entry_line(text, "opt_in", o),
                               f"opt-in fix {o} (fixes/series:{_series_line(pack, o)}) comes before default fix {d} "
                               f"(fixes/series:{_series_line(pack, d)}) and both change {', '.join(shared)}: {d}'s "
                               f"patches are written and locked on top of {o}'s, so every image of profile {p.name} "
                               f"applied without {o} finds {d} drifted (apply --strict refuses it: image mismatch)",
                               f"move {o} after {d} in fixes/series (opt-in fixes follow the default ones), or make "
                               f"{o} a default fix of profile {p.name}, or rebase {d} onto the release without {o}"))
    return out


def _entry_line(text: str, key: str, fid: str) -> int | None:
    """The line of ``fid``'s entry in a profile's ``[fixes] key`` list, comments passed over, up to the list's end
    (the key's line when it cannot be told)."""
    start = key_line(text, key, "fixes")
    if start is None:
        return None
    for n, line in enumerate(text.splitlines()[start - 1:], start):
        code = _uncommented(line)
        if json.dumps(fid) in code or f"'{fid}'" in code:
            return n
        if "]" in (code.split("=", 1)[-1] if n == start else code):  # the list ends here
            break
    return start


def _uncommented(line: str) -> str:
    """A TOML line without its comment (a ``#`` outside a quoted string)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote and (quote == "'" or line[i - 1] != "\\") else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _orphan_locks(pack: Pack) -> list[Finding]:
    """A ``profiles/<name>.lock`` with no ``profiles/<name>.toml`` beside it (a profile renamed or removed
    without its lock): no run reads it, and a profile of that name made later would find it stale."""
    import shlex

    folder = pack.root / "profiles"
    locks = sorted(folder.glob("*.lock")) if folder.is_dir() else []
    return [Finding(_rel(pack.root, lock), None, f"a lock with no profile: there is no profiles/{lock.stem}.toml",
                    f"remove it (rm -- {shlex.quote(str(lock))}), or put back the profile it was made for")
            for lock in locks if lock.stem not in pack.profiles]


def _mails(pack: Pack) -> list[Finding]:
    """Each patch's mail header as ``format``, ``edit`` and ``refresh`` read it (its author, its encoded words): one
    they refuse (a From: whose encoded word holds a line break, an unknown charset) is named at its patch file; and
    its ``Fix-Id:`` trailer, where it has one, names the fix it is listed under (:func:`_fix_id`). A variant's
    patches too."""
    from .errors import BadInputError
    from .patchfiles import patch_again
    from .patchtext import patch_mail
    from .tree import decode

    out = []
    for fix in (pack.fixes[f] for f in pack.series):
        for pf, variant in fix.all_patches():
            rel = _rel(pack.root, pf.path)
            text = decode(patch_again(pf))
            try:
                mail = patch_mail(fix, text, rel)
            except BadInputError as exc:
                out.append(Finding(rel, None, str(exc).removeprefix(f"{rel}: ")))
                continue
            out += _fix_id(pack, fix.id, variant, rel, text, mail)
    return out


def _fix_id(pack: Pack, fid: str, variant: str | None, rel: str, text: str, mail: Mail) -> list[Finding]:
    """A patch (``rel``, its ``text``) of fix ``fid`` (its variant for profile ``variant``, if one) whose ``Fix-Id:``
    trailer names another fix: two fixes' patches swapped (then relocked with their versions bumped, the lock and
    every run take them), or a patch copied from another fix (``format`` refuses both); or a fix renamed (an id no fix
    of the pack has: ``format`` writes it from fix.toml). Named at the trailer's line (the trailer's, not a copy in
    the notes after ``---``), with both ids. A patch without the trailer is left alone (``format`` writes it)."""
    from .patchtext import fix_id_hint, fix_id_said, foreign_fix_ids
    from .progname import command, pack_words

    out = []
    for line, other in foreign_fix_ids(fid, text, rel, mail):
        known = other in pack.fixes
        out.append(Finding(rel, line, fix_id_said(fid, variant, other, known),
                           fix_id_hint(fid, known, command("format", *pack_words(pack.root)))))
    return out


def _proofs(pack: Pack) -> list[Finding]:
    """A fix that is not retired and has no ``test_*.py`` beside its ``fix.toml``: named at the fix.toml's
    ``id`` line (where the fix is declared; a proof is a file of its folder, not a key)."""
    fixes = [pack.fixes[f] for f in pack.series]
    return [Finding(_rel(pack.root, fix.folder / "fix.toml"), _id_line(fix.folder / "fix.toml"),
                    f"fix {fix.id} has no proof: no test_*.py beside this fix.toml",
                    f"add fixes/{fix.id}/test_<name>.py, a test that fails on the clean release and passes once the "
                    f"fix is applied")
            for fix in fixes if not fix.retired and not any(fix.folder.glob("test_*.py"))]


def _strays(pack: Pack) -> list[Finding]:
    """Files of a fix's folder no run reads: a ``*.patch`` its fix.toml's ``patches`` does not list (in the
    fix's folder or a variant's), a variant folder (``<name>/variant.toml``) for a profile the pack lacks."""
    out = []
    for fid in pack.series:
        fix = pack.fixes[fid]
        listed = {p.path.name for p in fix.patches}
        folders = [fix.folder] + [fix.folder / v.profile for v in fix.variants]
        for folder in folders:
            for patch in sorted(folder.glob("*.patch")):
                if patch.name not in listed:
                    out.append(Finding(_rel(pack.root, patch), None, f"a patch file fix {fid}'s fix.toml does not "
                                       f"list: it is never applied", "list it in fix.toml's patches (in its place "
                                                                     "in the order), or remove it"))
        for v in fix.variants:
            if v.profile not in pack.profiles:
                out.append(Finding(_rel(pack.root, fix.folder / v.profile / "variant.toml"), None,
                                   f"a variant of fix {fid} for profile {v.profile}, which the pack does not have "
                                   f"(no profiles/{v.profile}.toml): it is never used",
                                   "name its folder after the profile it is for, or remove it"))
    return out


def _id_line(toml: Path) -> int:
    """The line of ``id = ...`` in a fix.toml the loader accepted (it requires the key), else 1."""
    return key_line(text_for_lines(toml), "id") or 1


def _lock(pack: Pack, profile: Profile, fresh: Copies | None) -> list[Finding]:
    """The profile's lock against the pack (its components' files too), then (``fresh``) against one
    generated now. Each finding at its line: a stale entry at its ``"id"`` in the lock (a fix or component the
    lock lacks: where the profile lists it; a pin: its target's table in the profile), a missing lock at the
    profile's ``name``, an unreadable one where it can be told."""
    from . import lockfile
    from .lock_hints import regenerate_hint, remove_hint

    where = _rel(pack.root, profile.lock_path)
    redo = regenerate_hint(profile, pack=pack)
    what = not_a_pack_file(profile.lock_path)
    if what is not None:  # a FIFO would block the read; a link could lead to any file
        return [Finding(where, None, f"is {what}, not a lock file",
                        f"{remove_hint(profile.lock_path, what)}, then {redo}")]
    if not profile.lock_path.is_file():
        return [Finding(_rel(pack.root, profile.path), key_line(text_for_lines(profile.path), "name") or 1,
                        f"profile {profile.name} has no lock ({where})", redo)]
    try:
        lock = lockfile.read_lock(profile)
    except StaleLockError as exc:  # a lock that does not load: where it says (a hand edit: its digest's line)
        return [Finding(where, exc.line, exc.what, exc.hint)]
    stale = lockfile.stale_entries(pack.for_profile(profile.name), profile, lock, vouch=False)  # (parsed here)
    if stale:
        return [Finding(*_stale_at(pack, profile, lock, key), f"the lock is stale: {what}", redo)
                for key, what in stale]
    found = _no_dist_info(pack, profile, lock) + _components(pack, profile, lock)
    try:
        if fresh is not None:
            _check_fresh(pack, profile, fresh)
    except EnvironmentProblem:  # the cache or the network, not the pack: exit 5, as fetch says it
        raise
    except FixpackError as exc:
        found.append(Finding(where, None, str(exc)))
    return found


def _stale_at(pack: Pack, profile: Profile, lock: Lock, key: tuple[str, str]) -> tuple[str, int | None]:
    """Where a stale entry of the lock is named (:func:`fixpack.lock_where.stale_at`), relative to the pack."""
    from .lock_where import stale_at

    path, line = stale_at(profile, lock, key)
    return _rel(pack.root, path), line


def _no_dist_info(pack: Pack, profile: Profile, lock: Lock) -> list[Finding]:
    """A component entry of the lock without ``dist_info`` (a lock made before fixpack recorded the
    component's ``.dist-info`` folder): apply cannot tell a build that names another folder, and a damaged
    journal's steps cannot name the folder to remove. Named at the component's ``"id"`` line in the lock, with
    the ``fixpack lock`` command that renews it (offline: the entry alone says it)."""
    from .lock_hints import regenerate_hint
    from .lock_where import lock_line

    listed = {comp.id for comp in profile.components}
    return [Finding(_rel(pack.root, profile.lock_path),
                    lock_line(profile.lock_path, '"components"', f'"id": {json.dumps(c.id)}'),
                    f"the lock is stale: component {c.id} has no \"dist_info\" (the name of its .dist-info folder; "
                    f"a lock made before fixpack recorded it)", regenerate_hint(profile, pack=pack))
            for c in lock.components if not c.dist_info and c.id in listed]


def _components(pack: Pack, profile: Profile, lock: Lock) -> list[Finding]:
    """Each component the lock records, its wheel built now (offline: ``pip wheel --no-index``, as apply
    does) and its package files compared with the lock's: a changed source without a new lock is named at
    the component's ``"id"`` line in the lock (what apply, ``lock --check`` and ``check --fresh`` refuse)."""
    from .lock_where import lock_line
    from .lockfile import check_component_files
    from .profile_components import built_version_problem
    from .records import package_files
    from .wheels import component_layout

    out = []
    for comp in profile.components:
        locked = lock.component(comp.id)
        if locked is None or locked.version != comp.version:
            continue  # check_lock_matches said so
        try:
            layout = component_layout(comp, pack.root)
            problem = built_version_problem(comp, layout.version)
            if problem:
                text = text_for_lines(profile.path)
                out.append(Finding(_rel(pack.root, profile.path),
                                   key_line(text, "version", f"components.{comp.id}"), problem))
                continue
            check_component_files(profile, comp, locked, package_files(layout.hashes()), None, layout.dist_info)
        except EnvironmentProblem:  # its build could not be made here (a full $TMPDIR): no finding of the pack
            raise
        except FixpackError as exc:
            out.append(Finding(_rel(pack.root, profile.lock_path),
                               lock_line(profile.lock_path, '"components"', f'"id": {json.dumps(comp.id)}'), str(exc)))
    return out


def _check_fresh(pack: Pack, profile: Profile, fresh: Copies) -> None:
    from .engine import fingerprint_chain
    from .lock_bump import check_fresh
    from .lock_hints import relock_command
    from .run import Request

    roots = fresh(pack, profile)
    lock, prof = fingerprint_chain(Request(pack_root=pack.root, profile=profile.name, roots=roots,
                                           only_targets=tuple(sorted(roots))))
    check_fresh(prof, lock, lambda: relock_command(prof, tuple(sorted(roots)), roots, pack=pack))
