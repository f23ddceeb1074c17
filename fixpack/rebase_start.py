"""The checks a rebase's start makes before it writes anything (``fixpack rebase`` without ``--continue`` or
``--abort``): each refuses with an error that names what to change, and nothing is fetched, made or written
after one does.

Before any release copy is fetched (:func:`refuse_early`): a ``--to`` release older than the old profile's pin
of the same target (unless ``--allow-older``), a bad new profile name (``--name``, else ``v<--to>``), a rebase
to that name in progress (in its work folder, or anywhere else the pack knows of: :mod:`fixpack.rebase_registry`),
a work folder that is not a new one (:func:`fixpack.rebase_state.check_new_work`), a profile of that name that
exists (unless ``--replace``), a patch it carries whose ``Fix-Id:`` trailer names another fix of the pack
(:func:`refuse_swapped_ids`), and a pack whose ``fixes/`` or ``profiles/`` differ from git HEAD (unless
``--allow-dirty``; when a rebase that stopped half way left them so, that rebase is named
first). Once the release copies are found (:func:`checked_new_profile`), the same with the versions read from
them. Versions compare as PEP 440 (``packaging``). ``--continue`` makes the check of an existing profile again
(:func:`refuse_appeared`): one may have appeared since the start.
"""

from __future__ import annotations

import os
from pathlib import Path
from shlex import quote
from typing import Any

from packaging.version import InvalidVersion, Version

from .errors import BadInputError
from .loader import load_pack, load_profile
from .model import Pack, Profile
from .patchfiles import patch_again
from .patchtext import swapped_problems, swapped_refusal, variant_of
from .rebase_registry import live_entries, refuse_in_progress, refuse_started
from .rebase_result import TargetPair
from .rebase_session import RebaseRequest, Session, check_clean, continue_flags, resume_command, way_on
from .rebase_state import check_new_work, checked_name, default_work, is_marked, work_root
from .rebase_targets import primary_version, wanted_targets
from .safepath import link_on_the_way, link_to, name_problem


def refuse_early(req: RebaseRequest, pack: Pack, old: Profile) -> None:
    """The start's checks on the request alone, before any release copy is fetched (``old``: the profile to
    rebase, in ``pack``): those of the new profile's name only when ``--name`` or ``--to`` gives it."""
    _refuse_older(old, {t.name: req.to_version for t in old.targets if t.source.pypi and req.to_version}, req)
    early = checked_name(req.name) if req.name else checked_name(
        f"v{req.to_version}", "new profile name (v<--to>; set another with --name)") if req.to_version else ""
    work_root(pack.root)  # a linked <pack>/.rebase is refused whatever --work is (keep_undo writes there)
    if early:  # before fetching anything
        refuse_in_progress((req.work or default_work(pack.root, early)).resolve(), early, pack.root, req.work)
        refuse_started(pack.root, early)  # and anywhere else the pack knows of (rebase_registry)
        check_new_work((req.work or default_work(pack.root, early)).resolve(), req.work is not None, pack.root,
                       req.work)
        _refuse_existing(pack.root, early, req.replace)
        refuse_linked_variants(pack.root, early)
    refuse_swapped_ids(req, pack, old)
    if not req.allow_dirty:
        try:
            check_clean(pack.root)
        except BadInputError:
            busy = sorted(work_root(pack.root).glob("*/state.json"))
            if busy:  # the pack is dirty because a rebase stopped half way: say that first
                # a folder there holding the start's marker was given with --work (the default one has none):
                # --continue and --abort find it by that --work, never by --name (<pack>/.rebase/<name>)
                folder = busy[0].parent
                refuse_in_progress(folder, folder.name, pack.root, folder if is_marked(folder) else None)
            for name, work, given in live_entries(pack.root):  # a --work folder elsewhere, its entry names
                refuse_in_progress(work, name, pack.root, work if given else None)
            raise


def refuse_swapped_ids(req: RebaseRequest, pack: Pack, old: Profile) -> None:
    """Refuse (BadInputError, exit 2, before anything is fetched or written) every patch the rebase carries (the
    fixes of ``old`` on the targets it rebases, each as ``old`` uses it: its variant's patches, if one) whose
    ``Fix-Id:`` trailer names another fix of the pack, as ``format`` refuses it and ``check`` names it
    (:func:`fixpack.patchtext.swapped_problems`): a carried patch is written with fix.toml's Fix-Id, which would hide a
    patch swapped with, or copied from, that fix; one left byte for byte would carry it on. A Fix-Id that names no fix
    of the pack (a fix renamed) is written from fix.toml, as ``format`` writes it."""
    _refuse_swapped(pack, old, wanted_targets(req, pack, old), "run the rebase again; nothing was fetched or written",
                    "nothing was fetched or written")


def refuse_on_continue(session: Session) -> None:
    """What ``--continue`` refuses in the pack as it is now, before anything is carried or written: a variant folder
    of the new profile that is a link (:func:`refuse_linked_variants`), and :func:`refuse_swapped_ids` (a trailer
    swapped and committed since the start would otherwise be carried into the new profile byte for byte)."""
    refuse_linked_variants(session.pack_root, session.new_name)
    pack = load_pack(session.pack_root)
    again = way_on(session, "continue")
    _refuse_swapped(pack, load_profile(pack, session.old_name), tuple(session.pairs),
                    f"run `{again}` again; nothing was written",
                    f"nothing was written; put the trailer right, commit, then run `{again}`")


def _refuse_swapped(pack: Pack, old: Profile, wanted: tuple[str, ...], then: str, nothing: str) -> None:
    view = pack.for_profile(old.name)
    problems = [p for fix in view.ordered(old.default + old.opt_in) if fix.target in wanted for pf in fix.patches
                for p in swapped_problems(fix.id, variant_of(fix, pf), pf.path, patch_again(pf, then=then), pack.fixes)]
    if problems:
        raise swapped_refusal(problems, "a rebase writes each carried patch's Fix-Id", nothing)


def checked_new_profile(req: RebaseRequest, pack: Pack, old: Profile,
                        pairs: dict[str, TargetPair]) -> tuple[str, str, Path]:
    """The new release's version (``--to``, else the rebased targets' first), the new profile's name (``--name``,
    else ``v<version>``) and the rebase's work folder (resolved: ``--work``, else ``<pack>/.rebase/<name>``), once
    the release copies are found (``pairs``), with the checks of :func:`refuse_early` on them."""
    _refuse_older(old, {n: p.new.version for n, p in pairs.items() if p.new is not None}, req)
    to_version = req.to_version or primary_version(pairs)
    new_name = req.name or f"v{to_version}"
    if name_problem(new_name) or new_name == old.name:
        raise BadInputError(f"bad new profile name {new_name!r}: it must be a new name, not {old.name}; "
                            f"{name_problem(new_name) or 'set another with --name'}")
    _refuse_existing(pack.root, new_name, req.replace)
    refuse_linked_variants(pack.root, new_name)
    work = (req.work or default_work(pack.root, new_name)).resolve()
    refuse_in_progress(work, new_name, pack.root, req.work)
    refuse_started(pack.root, new_name)
    check_new_work(work, req.work is not None, pack.root, req.work)
    return to_version, new_name, work


def _refuse_older(old: Profile, new_versions: dict[str, str], req: RebaseRequest) -> None:
    """Refuse (BadInputError, before anything is written) a new release older than the profile's pin of the
    same target, unless ``req.allow_older``: a downgrade is rarely what ``--to`` meant. Versions compare as
    PEP 440 (``packaging``); one that does not parse is not compared."""
    if req.allow_older:
        return
    for spec in old.targets:
        new = new_versions.get(spec.name, "")
        pinned = spec.pin.version
        try:
            older = bool(new and pinned) and Version(new.lstrip("v")) < Version(pinned.lstrip("v"))
        except InvalidVersion:
            continue
        if older:
            raise BadInputError(f"target {spec.name}: the new release {new} is older than {spec.pin.version}, the pin "
                                f"of profile {old.name}; rebase onto a later release, or pass --allow-older to carry "
                                f"the fixes back to {new}")


def _refuse_existing(pack_root: Path, name: str, replace: bool) -> None:
    """Refuse a new profile ``name`` whose ``profiles/<name>.toml`` exists, unless ``replace`` (``--replace``)."""
    path = pack_root / "profiles" / f"{name}.toml"
    if path.exists() and not replace:
        raise BadInputError(f"profile {name} exists ({path}): a rebase onto it would replace it, its lock and every "
                            f"fixes/<id>/{name}/ variant, hand-made changes too. Pass --replace to do that "
                            f"(fixpack rebase --undo puts them back), or --name NAME for a new profile")


def refuse_appeared(session: Session, replace: bool, work: Path | None) -> None:
    """``--continue``: refuse (BadInputError, nothing written) to finish a rebase that started without
    ``--replace`` (the state's ``replace``) onto ``profiles/<name>.toml`` when that file exists now and the rebase
    did not write it (no backup of it in the state: its own write, stopped half way, is finished), so appeared
    since the start: another rebase's, or one made by hand. ``replace``: ``--replace`` given now, the user's
    choice, as at the start. ``work``: the ``--work`` given, for the printed commands."""
    name, state = session.new_name, session.state
    rel = f"profiles/{name}.toml"
    path = session.pack_root / rel
    if replace or state.get("replace") is True or rel in state["backups"] or not os.path.lexists(path):
        return
    flags = continue_flags(state)
    raise BadInputError(f"profile {name} exists ({path}), but the rebase to {name} started without --replace: the "
                        f"profile appeared since (another rebase's, or made by hand), and finishing would write over "
                        f"it, its lock and every fixes/<id>/{name}/ variant. Keep it and drop this rebase with "
                        f"`{resume_command('abort', session.pack_root, name, work)}`, or replace it (fixpack rebase "
                        f"--undo puts it back) with "
                        f"`{resume_command('continue', session.pack_root, name, work, *flags, '--replace')}`; "
                        f"nothing was written")


def refuse_linked_variants(pack_root: Path, name: str) -> None:
    """Refuse (BadInputError, before anything is written; ``--continue`` too, as one may appear since the start) a
    rebase to ``name`` while a symbolic link lies where it writes or removes a variant: ``fixes``, a
    ``fixes/<fix>``, ``fixes/<fix>/<name>`` or a file in one (``--allow-dirty`` lets a pack hold one): the pack's
    files would be read or written through it, outside the pack. Named, with the link to remove."""
    fixes = pack_root / "fixes"
    rels = ["fixes", *(f"fixes/{d.name}/{name}" for d in (sorted(fixes.iterdir()) if fixes.is_dir() else ()))]
    for rel in rels:
        folder = pack_root / rel
        inside = sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []
        for link in (link_on_the_way(pack_root, r) for r in [rel, *(f"{rel}/{p.name}" for p in inside)]):
            if link:
                path = pack_root / link
                raise BadInputError(f"{path} is a symbolic link (to {link_to(path)}): a rebase to {name} writes "
                                    f"and removes the files of fixes/<fix>/{name}/ in the pack, never through a link; "
                                    f"remove the link (rm {quote(str(path))}: never what it points at) or rebase to "
                                    f"another --name; nothing was written")


def continue_words(state: dict[str, Any]) -> str:
    """``fixpack rebase --continue`` with what it needs to run (:func:`continue_flags`: the start's ``--python``),
    plain (``fixpack``, no pack nor name): for a report's evidence, which the next steps spell out in full."""
    return " ".join(["fixpack", "rebase", "--continue", *map(quote, continue_flags(state))])


def refuse_unsaid_python(session: Session, python: str, work: Path | None) -> None:
    """``--continue`` runs the proofs with the ``--python`` given now, never with the interpreter the state names
    (``state.json`` is a file anyone may edit: run on its word, a planted one would run any program): a rebase
    whose start was given ``--python P`` (the state's ``proof.python``) is refused (BadInputError, before anything
    runs or is written) until a ``--python`` is given again. The refusal names P as what the state says, never as
    a command to run: its ``--continue`` has ``--python PATH`` (a run that was given one prints it, as every
    ``--continue`` it prints has it)."""
    recorded = (session.state.get("proof") or {}).get("python")
    if python or not recorded:
        return
    flags = continue_flags(session.state)
    flags = tuple("PATH" if i and flags[i - 1] == "--python" else f for i, f in enumerate(flags))
    again = resume_command("continue", session.pack_root, session.new_name, work, *flags)
    raise BadInputError(f"{session.state_path}: the rebase to {session.new_name} was started with a --python (this "
                        f"state file names {quote(recorded)}), and --continue runs the proofs only with a --python "
                        f"given to it, never an interpreter on the word of the state file, which whoever can write "
                        f"there may have changed: check that it is the stand-in image's interpreter you gave, then "
                        f"give its path as PATH: `{again}`; nothing was run or written")
