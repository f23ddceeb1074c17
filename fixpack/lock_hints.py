"""What a lock error tells to do: the ``fixpack lock`` command that regenerates a profile's lock (the pack
that holds it, the run's ``--target`` names and copies, or every target a lock of a profile of several
covers), how to clear what is no lock file where one goes, and, when the running Python lacks the
maintainer's libraries (an image's lean install), where ``lock`` runs instead; and, for a run on an applied image,
what to do when a fix's patch the image was applied from no longer parses (:func:`applied_from`).

Each is rendered only when a lock error is raised (:data:`Redo`): the command names the program as
:func:`fixpack.progname.program` finds it on PATH, and a run whose lock is fine should not pay for that.
Reading and checking the lock is :mod:`fixpack.lockfile`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import FixpackError, PackError, StaleLockError
from .model import Fix, Pack, Profile
from .records import Lock

if TYPE_CHECKING:
    from .tree import Tree


def relock_command(profile: Profile, targets: tuple[str, ...] = (), roots: dict[str, Path] | None = None,
                   copies: Path | None = None, pack: Pack | None = None, expand: bool = True) -> str:
    """The ``fixpack lock`` command that regenerates ``profile``'s lock, runnable as written (the program as
    :func:`fixpack.progname.program` names it): the pack is the
    one that holds the profile (``--pack``, whatever the default would be where it is run), with the run's
    ``--target`` names and, for ``lock --check``, the clean copies it was given (``--root``, ``--copies``). A
    profile of more than one target names, instead of the run's, every target the lock covers
    (:func:`lock_targets`; ``pack`` is the profile's, loaded here when not given): a lock made for fewer lacks
    the others' fixes and components, and stays stale. ``expand`` False: the run's ``--target`` names as given
    (a lock of those keeps the other targets' entries of the lock on disk, :mod:`fixpack.lock_scope`, when they
    match the pack: its caller has seen that they do)."""
    from .progname import command, run_words  # only when there is a lock to regenerate

    if expand and len(profile.targets) > 1:
        targets = lock_targets(profile, pack)
    return command("lock", "--profile", profile.name, "--pack", str(profile.path.parent.parent),
                   *run_words(targets, roots, copies))


def lock_targets(profile: Profile, pack: Pack | None = None) -> tuple[str, ...]:
    """The profile's targets its lock covers, in the profile's order: those with a fix it lists or a
    component (``pack``: the profile's pack, loaded when not given; a fix it cannot load is left out)."""
    if pack is None:
        from .loader import load_pack  # only when a lock command is rendered

        try:
            pack = load_pack(profile.path.parent.parent, profile=profile.name)
        except FixpackError:
            pack = None
    fixes = pack.fixes if pack is not None else {}
    covered = {fixes[f].target for f in profile.default + profile.opt_in if f in fixes}
    covered |= {c.target for c in profile.components}
    return tuple(t.name for t in profile.targets if t.name in covered)


Redo = Callable[[], str]
"""How a lock error renders its regenerate command: called only when the error is raised (rendering it looks
up the program on PATH, and a run whose lock is fine should not pay for that)."""


def regenerate_hint(profile: Profile, redo: Redo | None = None, pack: Pack | None = None) -> str:
    """What to do about a stale or broken lock: regenerate it, with the command (``redo``, else
    :func:`relock_command` for the profile's pack alone, ``pack`` when it is loaded)."""
    given = redo() if redo is not None else relock_command(profile, pack=pack)
    fetched = "" if " --root " in given or " --copies " in given else " (it fetches them; --root NAME=PATH gives one)"
    return f"regenerate it from clean release copies: {given}{fetched}{where_lock_runs()}"


def stale_lock_error(profile: Profile, lock: Lock, redo: Redo | None, found: list[tuple[tuple[str, str], str]],
                     blocked: str = "") -> StaleLockError:
    """The StaleLockError for what ``found`` says makes the lock stale ((key, what), as
    :func:`fixpack.lockfile.stale_entries` gives them), each at its line in the lock, with the command that regenerates
    it (``redo``); ``blocked``: why a lock made now on the copies at hand would stop, said before that command."""
    from .lock_where import stale_at

    stale = [f"{what} (at {path_at(*stale_at(profile, lock, key))})" for key, what in found]
    first = (f"and a lock made now stops on the copy as the pack is ({blocked}): make the fix apply there "
             f"first, then ") if blocked else ""
    return StaleLockError(f"{profile.lock_path} is stale: {'; '.join(sorted(stale))}; "
                          f"{first}{regenerate_hint(profile, redo)}")


def path_at(path: Path, line: int | None) -> str:
    """``PATH:LINE``, or ``PATH`` where the line is not known."""
    return f"{path}:{line}" if line else str(path)


# setup.cfg's maintainer extra that lock uses: import name -> distribution
MAINTAINER_MODULES = {"git": "GitPython", "pypi_simple": "pypi-simple", "tomlkit": "tomlkit", "packaging": "packaging"}


def where_lock_runs() -> str:
    """Where ``lock`` can run, when the running Python lacks the maintainer's libraries (an image's lean install:
    the command as rendered would stop there for want of them). Looked up only when a lock error is raised."""
    from importlib.util import find_spec

    lacking = [dist for m, dist in MAINTAINER_MODULES.items() if find_spec(m) is None]
    if not lacking:
        return ""
    return (f"; lock is a maintainer's command and this Python ({sys.executable}) lacks its libraries "
            f"({', '.join(lacking)}): run it in a checkout of the pack after `pip install -e '.[maintainer]'` there, "
            f"then bring the new lock here")


def remove_hint(path: Path, what: str) -> str:
    """How to clear ``path`` (something that is no regular file: :func:`~fixpack.safepath.not_a_file` says
    ``what``) for a lock to be written there: ``rm`` (``rm -r`` for a folder)."""
    import shlex

    return f"remove it ({'rm -r' if what == 'a folder' else 'rm'} -- {shlex.quote(str(path))})"


def found_at(fix: Fix, tree: Tree) -> str:
    """Where ``fix``'s hunks are on ``tree`` (a file its patch was not written on), found by search: "PATH: hunk #N is
    at line L (+K lines)" for each one off its stated line, or why the search places it nowhere."""
    from .evaluate import NO_EVIDENCE, run_pass  # (only for this message)

    loose = run_pass(fix, tree, reverse=False, evidence=NO_EVIDENCE)
    return ("; ".join(f"{h.path}: hunk #{h.hunk} is at line {h.line} ({h.offset:+d} lines)" for h in loose.hunks
                      if h.offset) if loose.ok else "; ".join(loose.explain()))


def flipped(now: list[str], was: list[str]) -> list[tuple[str, str]]:
    """The pairs (a, b) of the ids in both orders that ``now`` has a before b and ``was`` has b before a (a reordered
    series against the lock made from it as it was), in ``now``'s order."""
    at = {f: n for n, f in enumerate(was)}
    both = [f for f in now if f in at]
    return [(a, b) for i, a in enumerate(both) for b in both[i + 1:] if at[a] > at[b]]


def order_changes(ours: list[str], lock: Lock) -> list[tuple[tuple[str, str], str]]:
    """A reordered series: a fix of ``ours`` (fix ids the lock has, in fixes/series' order now) put before one that
    ``lock``, made from the series as it was, has first (key ``("order", id)``); a pair that shares a file first,
    since each patch is written on the fixes above it: a new lock may stop on either (``edit`` lays a patch at its
    stated lines only), or on neither (lines the other fix does not move)."""
    pairs = flipped(ours, [f.id for f in lock.fixes])
    if not pairs:
        return []
    files = {f.id: {x.path for x in f.files} for f in lock.fixes}
    shared = [(a, b, sorted(files[a] & files[b])) for a, b in pairs if files[a] & files[b]]
    a, b, paths = shared[0] if shared else (*pairs[0], [])
    what = f"{a}: fixes/series now puts it before {b}, the lock after it (made from the series as it was)"
    return [(("order", a), f"{what}; they share {', '.join(paths)}, and each patch is written on the fixes above it: "
                           f"where the new lock stops on a patch of them, put the order back, or make that patch again "
                           f"on the fixes the new order puts before it"
             if paths else f"{what}; they share no file, so a new lock is all the new order needs")]


def reordered_around(pack: Pack, chain: tuple[Fix, ...], was: list[str], fix: Fix) -> str:
    """"" or why a fix that does not apply on a release copy was written on another order: fixes that change one of
    its files and that fixes/series (``chain``'s order) now puts before it where the lock on disk (its fixes' order
    ``was``) has them after it, or after it where the lock has them before (a reordered series)."""
    mine = set(fix.touched_paths())
    pairs = [(a, b) for a, b in flipped([f.id for f in chain], was)
             if fix.id in (a, b) and mine & set(pack.fixes[b if a == fix.id else a].touched_paths())]
    up = [a for a, b in pairs if b == fix.id]  # now before it: written without them
    down = [b for a, b in pairs if a == fix.id]  # now after it: written on them
    if not pairs:
        return ""
    said = [f"puts {', '.join(up)} before it, which the lock on disk has after it (the patch was written without "
            f"{'it' if len(up) == 1 else 'them'})"] * bool(up) + \
           [f"puts {', '.join(down)} after it, which the lock on disk has before it (the patch was written on "
            f"{'it' if len(down) == 1 else 'them'})"] * bool(down)
    return (f"; fixes/series was reordered since the lock: it now {', and '.join(said)}. Put the order back, or "
            f"make {fix.id}'s patch again on the fixes now before it")


def left_out_before(pack: Pack, profile: Profile, chain: tuple[Fix, ...], fix: Fix) -> str:
    """"" or why a fix that does not apply on a release copy may have been written on top of fixes the profile leaves
    out: those earlier in the series that change one of its files and are not in ``chain`` (a profile that drops one
    moved the lines the patch's numbers assume; the lock said only to fix the @@ lines, or to rebase)."""
    mine, chained = set(fix.touched_paths()), {f.id for f in chain}
    earlier = pack.series[:pack.series.index(fix.id)] if fix.id in pack.series else ()
    behind = [i for i in earlier if i not in chained and i in pack.fixes and pack.fixes[i].target == fix.target
              and mine & set(pack.fixes[i].touched_paths())]
    if not behind:
        return ""
    return (f"; it may have been written on top of {', '.join(behind)} (earlier in the series, changing its files), "
            f"which profile {profile.name} leaves out: add {'it' if len(behind) == 1 else 'them'} to the profile, or "
            f"list {'it' if len(behind) == 1 else 'them'} in {fix.id}'s requires")


def twin_warnings(lock: Lock, fixes: Callable[[], Mapping[str, Fix]] | None = None,
                  root: Path | None = None) -> list[str]:
    """One line per hunk of ``lock`` whose pre-image (or post-image) occurs more than once in the file it was locked
    on (:attr:`~fixpack.records.LockHunk.pre_count`: the release with the fixes before it): at the lock's
    pre-image a hunk is placed at its stated line, but in a file that differs from it (a drifted image, the next
    release) it is searched whole and refused as ambiguous (exit 4), as revert and status refuse a post-image
    twin. The fix still applies where the lock's pre-image is: a warning for the maintainer, not a failure.
    ``fixes`` (the pack's, for the lock's profile; called only when a hunk occurs twice): each such hunk is named
    at its ``@@`` line in its patch file too (relative to ``root``), as a fix of two patches on one file has a hunk
    #1 in each."""
    out = []
    twice = any((h.pre_count or 0) > 1 or (h.post_count or 0) > 1 for f in lock.fixes for h in f.hunks)
    pack = fixes() if twice and fixes is not None else {}
    for fix in lock.fixes:
        pf = pack.get(fix.id)
        at = [(p.path, h.diff_line) for p in pf.patches for fp in p.files for h in fp.hunks] if pf else []
        for n, h in enumerate(fix.hunks):
            sides = [f"its {side}-image occurs {count} times" for side, count in (("pre", h.pre_count),
                                                                                  ("post", h.post_count))
                     if count is not None and count > 1]
            if not sides:
                continue
            where = ""
            if n < len(at) and len(at) == len(fix.hunks):
                path, line = at[n]
                where = f" ({path.relative_to(root) if root and path.is_relative_to(root) else path}:{line})"
            out.append(f"fix {fix.id}: {h.file} hunk #{h.hunk}{where}: {' and '.join(sides)} in the file it is "
                       f"locked on: on an image whose file differs from the lock's (a drift) it is refused as "
                       f"ambiguous; give the hunk more context lines, so that it occurs once")
    return out


def applied_from(exc: PackError, fix: Fix | None, manifest: Path, command: str) -> PackError:
    """``exc`` (a patch of ``fix`` that does not parse, found by ``command`` reading the manifest at ``manifest``,
    ``ROOT/.fixpack/TARGET.manifest.json``) with what to do: the image was applied from the patch as it was then, whose
    bytes the manifest records, so the pack as it was then (not a regenerated patch) lets the run go on; the problems
    as they were (their lines)."""
    if fix is None:
        return exc
    from shlex import quote

    folder = fix.folder.relative_to(fix.folder.parent.parent)
    restore = f"git -C {quote(str(fix.folder.parent.parent))} checkout HEAD -- {quote(str(folder))}"  # (staged too)
    return PackError(f"{exc.args[0]}; the image at {manifest.parent.parent} was applied from fix {fix.id}'s patches as "
                     f"they were then (their sha256 is in {manifest}), not from these: put {folder}/ back as it was "
                     f"when the image was applied (in a git checkout of the pack: {restore}, or the commit it was "
                     f"applied from) and run {command} again; nothing was written", exc.problems)
