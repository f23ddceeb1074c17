"""``fixpack refresh FIX`` from an edit's work tree: the commits ``fixpack-base..HEAD`` become the fix's
patch files, one a commit, in order; ``fix.toml``'s ``patches`` follow; a new fix is added to the series
and to its profile; the locks are regenerated and every later fix is checked on top
(:func:`fixpack.packupdate.update`: all or nothing).

A commit keeps the patch's ``From:`` and ``Date:`` as written when its author and date are still the
patch's (an amend keeps them); the message gives the subject, the description and the trailers, the
tool's own DEP-3 fields being written from ``fix.toml`` whatever the message says.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from pathlib import Path

import tomlkit

from .diff import parse_patch
from .documents import pack_text
from .editstate import (
    BASE_TAG,
    FIX_TAG,
    EditState,
    base_digests,
    change_digest,
    check_state,
    check_work_tree,
    find,
    migrated,
    state_path,
)
from .editwork import clean_copy
from .errors import BadInputError, ConflictError, FixpackError, of_code
from .gitutil import run
from .gitwork import Commit, commits_since, diff_paths, uncommitted, under_way
from .loader import load_pack, load_profile
from .model import Fix, Pack, Upstream, Variant
from .nofollow import atomic_write
from .packupdate import REFRESH_AGAIN, Outcome, recovered_first, update
from .patchfiles import outside_package, patch_again, symlink_change
from .patchmail import Mail, parse_message, render
from .patchtext import patch_mail, rewritten_fields
from .progress import QUIET, Progress
from .runlock import pack_lock
from .structs import dataclass, field, replace
from .tree import decode


@dataclass
class Refreshed:
    """What a refresh from a work tree did: the fix, its patch files (pack-relative, in order) and the
    pack update (files written, locks, the later fixes' states)."""

    fix: str
    profile: str
    patches: list[str]
    outcome: Outcome = field(default_factory=Outcome)


def refresh_from_work(pack_root: Path, fix_id: str, progress: Progress = QUIET) -> Refreshed | None:
    """Refresh ``fix_id`` from its edit's work tree; None when no edit of it is in progress.

    Raises BadInputError for uncommitted edits, no commits or a commit that changes nothing; GitError
    when the history is not a line of commits on ``fixpack-base``; ConflictError when a later fix no
    longer applies exactly (nothing is written then).
    """
    pack_root = pack_root.resolve()  # the pack's files are named relative to it (a relative --pack too)
    if find(pack_root, fix_id) is None:
        return None
    # a refresh killed while writing: rolled back before the pack is read (a new fix's series line written without
    # its fix.toml reads as an error)
    with pack_lock(pack_root, progress), recovered_first(pack_root, progress):
        return _refresh(pack_root, fix_id, progress)


def _refresh(pack_root: Path, fix_id: str, progress: Progress) -> Refreshed | None:
    state = find(pack_root, fix_id)
    if state is None:
        return None
    pack = load_pack(pack_root)
    check_state(pack_root, pack, state)  # before git reads the work tree (git status rewrites its index)
    work = Path(state.work)
    check_work_tree(pack_root, fix_id, work)  # (git in a folder without a repository reads the pack's own)
    stopped = under_way(work)
    if stopped:  # HEAD holds the commits done so far: the rest would be dropped from the fix, unsaid
        raise BadInputError(f"{work}: {stopped[0]} is under way there (stopped half way): finish it ({stopped[1]}), "
                            f"then refresh; nothing was written")
    dirty = uncommitted(work)
    if dirty:
        listed = ", ".join(line[3:] for line in dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise BadInputError(f"{work} has uncommitted edits ({listed}): commit them (git commit -a; git add a new "
                            f"file first) or put them away (git stash); refresh turns commits into patches")
    commits = commits_since(work, BASE_TAG)
    if not commits:
        raise BadInputError(f"{work}: no commit on top of {BASE_TAG}: commit the change first")
    for c in commits:
        _check_message(work, c)
        _refuse_nul(work, c)
        if not c.diff.strip():
            raise BadInputError(f"{work}: commit {c.sha[:12]} ({c.message.splitlines()[0]!r}) changes nothing; "
                                f"drop it (git rebase -i {BASE_TAG})")
    view = pack.for_profile(state.profile)
    had = view.fixes.get(fix_id)  # an edit begun by an older fixpack: its digests in today's form
    migrated(state, (lambda: [patch_again(pf, then=REFRESH_AGAIN) for pf in had.patches]) if had else None)
    fix = had or _new_fix(pack_root, state, commits[0])
    folder = _patch_folder(pack, fix, state)
    names, sources = _names(fix, commits, folder == fix.folder,
                            pack.fixes[fix_id].variants if fix_id in pack.fixes else ())
    changes: dict[str, bytes | None] = {}
    spec = load_profile(pack, state.profile).target(state.target)
    for name, c, j in zip(names, commits, sources):
        old = fix.patches[j] if j is not None else None
        was = decode(patch_again(old, then=REFRESH_AGAIN)) if old else ""
        text = render(_mail(fix, c, was), _fields(pack, fix, c, work), c.diff, f"{work} commit {c.sha[:12]}")
        parsed = parse_patch(text.encode("utf-8", "surrogateescape"), f"{work} commit {c.sha[:12]}")
        for fp in parsed.files:  # named at the commit, as the load would name it only in the patch not yet written
            if symlink_change(fp):
                raise BadInputError(f"{work} commit {c.sha[:12]}:{fp.diff_line}: symlink change to {fp.path!r} is not "
                                    f"supported: ship the link target as a regular file (amend the commit); nothing "
                                    f"was written")
            if fp.binary and fp.path not in dict(fix.binary):  # (the load named a patch file not written yet)
                raise BadInputError(_undeclared_binary(work, c, fp.path, fix.id in pack.fixes))
            out = [(q, why) for q in fp.paths() if (why := outside_package(q, spec.package, spec.version_module))]
            if out:  # (the load named the pack's patch file at a line of the text not yet written)
                q, what = out[0]
                raise BadInputError(f"{work} commit {c.sha[:12]} ({c.message.splitlines()[0]!r}) changes {q!r}, "
                                    f"{what}: take that file out of the commit (`git rebase -i {BASE_TAG}`, mark it "
                                    f"edit, restore or remove the file, amend); nothing was written")
        changes[_rel(pack_root, folder / name)] = text.encode("utf-8", "surrogateescape")
    for pf in fix.patches:  # (a squash leaves the last ones; a reorder, each under its commit's new number)
        if _rel(pack_root, pf.path) not in changes:
            changes[_rel(pack_root, pf.path)] = None
    change = change_digest([v for v in changes.values() if v is not None])  # the change this refresh writes
    state.version, state.change = _since_edit(pack_root, view, state, change, lambda: _base_changed(pack, state))
    version = _version(state, change)
    changes.update(metadata(pack_root, pack, fix, state, names, folder == fix.folder, version))
    roots = {state.profile: release_roots(pack, state, progress)}
    for other in _sharing(pack, fix_id, state.profile, folder):
        try:
            roots[other] = release_roots(pack, EditState(fix_id, other, fix.target, False, "", False, "", ""),
                                         progress)
        except FixpackError as exc:  # (said as what it is: this profile's release copy is another's need)
            from .progname import command, pack_words  # only when a message names it

            words = pack_words(pack_root)
            raise of_code(exc.exit_code)(
                f"profile {other} reads {fix_id}'s patch files too ({_rel(pack_root, folder)}), so this refresh "
                f"regenerates its lock, on its clean release copies, which could not be had: {exc}; nothing was "
                f"written (fetch them where the index can be reached: `{command('fetch', '--profile', other, *words)}`"
                f", then refresh again here: the cache holds them)") from exc
    kept = state_path(pack_root, fix_id).read_bytes()  # (find() read it, capped, a moment ago)
    new = state.new
    # the state first: killed between the two writes, the next refresh finds what this one meant to write (and a
    # pack update a kill left half done is rolled back before then); any failure puts the state back as it was
    state.new, state.wrote_version, state.wrote_change = False, version, change
    state.save(pack_root)
    try:
        outcome = update(pack_root, changes, fix_id, roots, progress)
    except BaseException as exc:
        atomic_write(state_path(pack_root, fix_id), kept)
        state.new = new
        moved = _base_changed(pack, state) if isinstance(exc, ConflictError) else []
        if moved:
            steps = _carry(pack_root, state, fix_id in pack.fixes)
            exc.args = (f"{exc}\nThe fixes before {fix_id} changed since `fixpack edit` made {work} "
                        f"({', '.join(moved)}): its commits are on the old ones. {steps}",)
        raise
    return Refreshed(fix_id, state.profile, [_rel(pack_root, folder / n) for n in names], outcome)


def _refuse_nul(work: Path, c: Commit) -> None:
    """A NUL byte in a commit's diff: a binary file that git diffs as text, as it looks for a NUL in a file's first
    8000 bytes only. No patch carries it as text: refuse it, naming the file as git names it (its section's place
    in the diff: a ``diff --git`` line cannot tell where a path with a space ends), with the ways on (git told it
    is binary, its data goes in the patch as a ``GIT binary patch``; or the NUL byte taken out)."""
    at = c.diff.find("\0")
    if at < 0:
        return
    section = c.diff.count("\ndiff --git ", 0, at)  # (0: the diff's first section)
    paths = diff_paths(work, f"{c.sha}^", c.sha)
    name = paths[section] if section < len(paths) else c.diff[:at].rsplit("\ndiff --git ", 1)[-1].split("\n")[0]
    raise BadInputError(
        f"{work} commit {c.sha[:12]}: file {name!r} holds a NUL byte: it is a binary file, which git diffs as text "
        f"(it looks for a NUL in a file's first 8000 bytes only), and a patch carries no NUL byte. A binary file: "
        f"tell git so (printf '%s\\n' {shlex.quote(_binary_attribute(name))} >> "
        f"{shlex.quote(str(work / '.git/info/attributes'))}), declare it in fix.toml ([binary] "
        f"{json.dumps(name, ensure_ascii=False)} = \"patch\") and refresh again; a NUL byte put there by mistake: take "
        f"it out and amend the commit (git commit -a --amend). Nothing was written")


def _undeclared_binary(work: Path, c: Commit, path: str, in_pack: bool) -> str:
    """The refusal of commit ``c``'s binary change to ``path`` that fix.toml does not declare: what to declare, where;
    a new fix (not ``in_pack``) has no fix.toml until its first refresh writes one."""
    line = f'[binary] {json.dumps(path, ensure_ascii=False)} = "patch"'
    how = (f"declare it in fix.toml ({line}) and refresh again" if in_pack else
           f"a new fix has no fix.toml until its first refresh: take the file out of the commit (git rebase -i "
           f"{BASE_TAG}, mark it edit, git rm --cached it, amend), refresh, declare it in the fix.toml that refresh "
           f"writes ({line}), then commit it again and refresh")
    return (f"{work} commit {c.sha[:12]} ({c.message.splitlines()[0]!r}): binary change to {path!r} is not declared "
            f"(binary files are changed only where fix.toml says so): {how}. Nothing was written")


def _binary_attribute(path: str) -> str:
    """The gitattributes line that marks ``path`` (of the repository's root) binary, read by git as that very path:
    its wildcard characters escaped, and the pattern quoted C-style when it holds a space, a quote or a control
    character (a pattern ends at whitespace; gitattributes(5))."""
    pattern = "/" + re.sub(r"([\\*?\[\]])", r"\\\1", path)
    if re.search(r'[\s"\x00-\x1f\x7f]', pattern):
        pattern = '"' + "".join(f"\\{ord(ch):03o}" if ch < " " or ch == "\x7f" else "\\" + ch if ch in '"\\' else ch
                                for ch in pattern) + '"'
    return f"{pattern} binary"


_PATCH_BREAK = re.compile(r"^(?:---(?:\s*$| \S)|diff -|Index: )")


def _check_message(work: Path, c: Commit) -> None:
    """A message line where ``git am`` (and a patch file's reader) ends the message and starts the diff
    would cut the description and the trailers off the patch: refuse it."""
    for n, line in enumerate(c.message.splitlines(), 1):
        if _PATCH_BREAK.match(line):
            raise BadInputError(f"{work}: commit {c.sha[:12]} ({c.message.splitlines()[0]!r}), line {n} of its message "
                                f"is {line!r}: a patch mail's message ends at such a line (git am starts the diff "
                                f"there), so what follows it would be lost; reword it (git commit --amend, or git "
                                f"rebase -i {BASE_TAG} with 'reword')")


def _base_changed(pack: Pack, state: EditState) -> list[str]:
    """The fixes before the edited one that changed (or came or went) since the edit started."""
    if not state.base:
        return []
    now = base_digests(pack, state)
    return sorted(fid for fid in set(now) | set(state.base) if now.get(fid) != state.base.get(fid))


def _version(state: EditState, change: str) -> int:
    """The fix's version after the refresh: the edit's starting version (or its last refresh's, once committed:
    :func:`_since_edit`), plus one when the change itself (its removed and added lines) differs from the one
    there; 1 for a new fix not yet committed."""
    if state.new or not state.version:
        return 1
    return state.version + (change != state.change)


def _since_edit(pack_root: Path, view: Pack, state: EditState, change: str,
                base_changed: Callable[[], list[str]]) -> tuple[int, str]:
    """The (version, change digest) a refresh counts from: the fix as the edit started from it (or from a refresh
    of it since committed), or as this edit's last refresh wrote it once the lock committed in git HEAD records
    that (a version committed names that change for good: a later change is the next version). Raises
    ConflictError (exit 4, nothing written) when the fix in the pack is neither: a change came into the pack
    under the edit (another maintainer's, a pull), which the refresh would write over and whose version it
    would give to another change. ``change``: the change this refresh writes (a pack that holds it already
    loses nothing: a refresh killed before it saved the edit's state wrote it). ``base_changed``: the fixes before it
    that changed since the edit began (a refresh of one regenerates the fixes after it that moved, this one too)."""
    start = (state.version, state.change)
    fix = view.fixes.get(state.fix)
    if fix is None:
        return start
    now = (fix.version, change_digest([patch_again(pf, then=AGAIN) for pf in fix.patches]))
    wrote = (state.wrote_version, state.wrote_change)
    if state.wrote_change and now == wrote:
        return wrote if _committed(view, state.profile, fix) else start
    if now[1] == change:  # the pack holds this very change (a pull, or this edit's refresh killed before it
        return now        # saved the state): its version stands, never one below it
    if not state.new and now == start:
        return start
    was = f"version {state.version}" if not state.new else "not in the pack when `fixpack new` made it"
    if state.wrote_change:
        was += f"; version {state.wrote_version} as its last refresh wrote it"
    moved = base_changed()
    if moved:  # (their refresh regenerated this one where it moved, with the next version)
        raise ConflictError(f"fix {state.fix} changed in the pack since the edit began ({was}; the pack holds version "
                            f"{fix.version}): the fixes before {state.fix} changed since `fixpack edit` made "
                            f"{state.work} ({', '.join(moved)}): its commits are on the old ones, and a refresh of "
                            f"those moves the fixes after them; nothing was written. "
                            f"{_carry(pack_root, state, True)}")
    raise ConflictError(f"fix {state.fix} changed in the pack since the edit began: {state.work} is on the fix as it "
                        f"was ({was}); the pack holds version {fix.version} with another change (a maintainer's "
                        f"refresh or a pull), which this refresh would write over; nothing was written. "
                        f"{_carry(pack_root, state, True)}")


CARRY_TAG = "fixpack-carry"  # the edit's change as one commit on FIX_TAG, carried onto the fix as the pack has it


def _carry(pack_root: Path, state: EditState, in_pack: bool) -> str:
    """The steps that carry an edit's commits onto the fix as the pack holds it now (``in_pack``: the pack has the
    fix, which the edit is started on again; else a new one), each a command. A fix the pack has gets the edit's
    change as one 3-way merge (git cherry-pick of the work tree's HEAD against the fix as the edit began, its
    :data:`FIX_TAG`, from a bare clone kept beside the work tree): its commits replayed by ``git am -3`` conflicted
    on every line the pack's fix changed too, the fix's own commits among them, and the new work tree lacks the old
    blobs a 3-way ``am`` needs. A new fix's commits are carried one by one (``format-patch``, ``am``)."""
    from .progname import command  # only when a message names it

    words = ["--pack", str(pack_root)]  # (the steps remove the work tree a shell may be in: no default pack then)
    saved = shlex.quote(str(pack_root / ".edit" / f".{state.fix}.commits"))  # (no fix id starts with '.')
    work = shlex.quote(state.work)
    again = (command("edit", state.fix, "--profile", state.profile, *words) if in_pack
             else command("new", state.fix, "--profile", state.profile, "--target", state.target, *words))
    if in_pack and run(Path(state.work), "tag", "--list", FIX_TAG).strip():  # (an edit made before the tag: below)
        saved = shlex.quote(str(pack_root / ".edit" / f".{state.fix}.carry.git"))
        return (f"Keep your change (the work tree against the fix as the edit began, one commit): `git -C {work} tag "
                f"-f {CARRY_TAG} $(git -C {work} commit-tree 'HEAD^{{tree}}' -p {FIX_TAG} -m '{state.fix}: the "
                f"edit') && rm -rf {saved} && git clone -q --bare {work} {saved}`; drop the edit: "
                f"`{command('edit', '--abort', state.fix, *words)}`; start it again: `{again}`; merge your change "
                f"onto the pack's fix (3-way): `git -C {work} fetch -q {saved} tag {CARRY_TAG} && git -C {work} "
                f"cherry-pick {CARRY_TAG}` (a conflict: resolve it, `git -C {work} add FILE`, `git -C {work} "
                f"cherry-pick --continue`); fold it into the commit of the patch it changes: `git -C {work} rebase -i "
                f"{BASE_TAG}` (fixup); then `{command('refresh', state.fix, *words)}` and `rm -rf {saved}`")
    return (f"Keep your commits: `rm -rf {saved} && git -C {work} format-patch -o {saved} {BASE_TAG}`; drop the edit: "
            f"`{command('edit', '--abort', state.fix, *words)}`; start it again: `{again}`; apply them on the "
            f"pack's fix: `git -C {work} am -3 {saved}/*.patch` (a conflict: resolve it, `git -C {work} add FILE`, "
            f"`git -C {work} am --continue`); fold each into the commit of the patch it changes: `git -C {work} "
            f"rebase -i {BASE_TAG}` (fixup); then `{command('refresh', state.fix, *words)}` and `rm -r {saved}`")


def _committed(view: Pack, profile: str, fix: Fix) -> bool:
    """The lock committed in git HEAD of the pack records ``fix`` at its version and change."""
    from .lock_head import committed_lock  # only when an edit's earlier refresh is in the pack

    head = committed_lock(load_profile(view, profile))[0]
    entry = head.fix(fix.id) if head is not None else None
    return entry is not None and entry.version == fix.version and fix.recorded_as(entry.patch_sha256)


def _new_fix(pack_root: Path, state: EditState, first: Commit) -> Fix:
    said = parse_message(first.message)
    subject, description = said.subject, said.description
    return Fix(state.fix, 1, subject, description or subject, state.target, (), (), state.opt_in, Upstream(), (),
               pack_root / "fixes" / state.fix)


def _patch_folder(pack: Pack, fix: Fix, state: EditState) -> Path:
    """Where the profile reads the fix's patches from: its variant folder, if it has one."""
    base = pack.fixes.get(fix.id)
    if base is not None and any(v.profile == state.profile for v in base.variants):
        return fix.folder / state.profile
    return fix.folder


def _names(fix: Fix, commits: list[Commit], own: bool, variants_of: tuple[Variant, ...] = ()
           ) -> tuple[list[str], list[int | None]]:
    """The patch file names, and for each the index of the fix's patch it was (None: a new one): the fix's own for
    the commits it had, ``NNNN-<subject>.patch`` for more. Where the commits are the fix's patches reordered (each
    name's subject part a commit's subject, ``git rebase -i``), every file is numbered again in the new order, so
    that a name stays with its commit (by position, 0001-a.patch held b's change). The fix's variants
    (``variants_of``) read the same names: their number cannot change here."""
    old = [pf.path.name for pf in fix.patches]
    variants = [v.profile for v in variants_of]
    if own and variants and fix.patches and len(commits) != len(old):
        raise BadInputError(f"{fix.id}: its variant(s) for {', '.join(variants)} read fix.toml's {len(old)} patch "
                            f"name(s), one file each in fixes/{fix.id}/<profile>/; the work tree has {len(commits)} "
                            f"commit(s) on {BASE_TAG}: squash or split them to {len(old)} (git rebase -i {BASE_TAG})")
    if not own and len(commits) != len(old):
        raise BadInputError(f"{fix.id}: its variant for this profile keeps fix.toml's {len(old)} patch(es); the work "
                            f"tree has {len(commits)} commit(s) on {BASE_TAG}: squash or split them to {len(old)}")
    slugs = [re.sub(r"[^a-z0-9]+", "-", parse_message(c.message).subject.lower()).strip("-")[:52].strip("-")
             or "change" for c in commits]
    moved = _reordered([re.sub(r"^\d{4}-", "", n).removesuffix(".patch") for n in old], slugs)
    if moved is not None and not variants:
        return [f"{i:04d}-{slug}.patch" for i, slug in enumerate(slugs, 1)], list(moved)
    names = old[:len(commits)]
    for i, slug in enumerate(slugs[len(old):], len(old) + 1):
        name = f"{i:04d}-{slug}.patch"
        while name in names:
            name = name.removesuffix(".patch") + "-1.patch"
        names.append(name)
    return names, [i if i < len(old) else None for i in range(len(commits))]


def _reordered(old: list[str], slugs: list[str]) -> list[int] | None:
    """Where the commits' subjects (``slugs``) are the old names' (``old``, less number and suffix) in another order:
    for each commit, the index of its old patch; else None."""
    if len(old) != len(slugs) or old == slugs or sorted(old) != sorted(slugs):
        return None
    left = list(range(len(old)))
    out = []
    for slug in slugs:
        j = next(j for j in left if old[j] == slug)
        left.remove(j)
        out.append(j)
    return out


def _fields(pack: Pack, fix: Fix, c: Commit, work: Path) -> list[tuple[str, str]]:
    """fix.toml's fields for the patch made of commit ``c`` of the work tree ``work``; a Fix-Id trailer in its message
    that names another fix of the pack (a commit taken from that fix's edit) is refused, named at its line."""
    how = f"git rebase -i {BASE_TAG}"
    where = f"{work} commit {c.sha[:12]} message"
    return rewritten_fields(fix, parse_message(c.message), c.message, where, pack.fixes,
                            listed=f"it is a commit of the edit of fix {fix.id!r}",
                            hint=lambda other: f"a commit taken from fix {other}? drop it ({how}); if it is "
                                               f"{fix.id}'s after all, reword its trailer as Fix-Id: {fix.id} ({how}, "
                                               f"'reword'), then refresh again")


def _mail(fix: Fix, c: Commit, old_text: str) -> Mail:
    author, date = c.author, c.date
    if old_text:
        old = patch_mail(fix, old_text)
        if _same_ident(old, c):
            author, date = old.author, old.date
    return replace(parse_message(c.message), author=author, date=date)


def _same_ident(old: Mail, c: Commit) -> bool:
    """The commit's author and date are still the patch's (as ``edit`` made it; an amend keeps them)."""
    if " ".join(old.author.split()) != " ".join(c.author.split()):
        return False
    if not old.date or not c.date:
        return old.date == c.date
    try:
        return parsedate_to_datetime(old.date) == parsedate_to_datetime(c.date)
    except (TypeError, ValueError):
        return False


AGAIN = "run the command again; nothing was written"  # a pack file changed since the load


def metadata(pack_root: Path, pack: Pack, fix: Fix, state: EditState, names: list[str], own: bool,
             version: int = 1) -> dict[str, bytes | None]:
    """fix.toml's ``patches`` and ``version`` (a variant's ``variant.toml`` version), when they changed; for a
    new fix its fix.toml, its place in the series (after the fix the edit was started after) and in its
    profile's default or opt-in list."""
    toml_path = fix.folder / "fix.toml" if own else fix.folder / state.profile / "variant.toml"
    if fix.id in pack.fixes:
        doc = tomlkit.parse(pack_text(toml_path, AGAIN))
        if (not own or list(doc.get("patches", [])) == names) and doc.get("version") == version:
            return {}
        if own:
            doc["patches"] = names
        doc["version"] = version
        return {_rel(pack_root, toml_path): tomlkit.dumps(doc).encode()}
    return {_rel(pack_root, toml_path): _fix_toml(fix, names).encode(),
            "fixes/series": _series(pack_root, fix.id, state.after).encode(),
            _rel(pack_root, load_profile(pack, state.profile).path): _profile(pack, fix, state).encode()}


def _fix_toml(fix: Fix, names: list[str]) -> str:
    doc = tomlkit.document()
    doc.add("id", fix.id)
    doc.add("version", 1)
    doc.add("summary", fix.summary)
    doc.add("why", tomlkit.string(fix.why.strip() + "\n", multiline=True))
    doc.add("target", fix.target)
    doc.add("requires", [])
    doc.add("conflicts", [])
    doc.add("opt_in", fix.opt_in)
    doc.add("patches", names)
    doc.add(tomlkit.nl())
    up = tomlkit.table()
    for key in ("status", "link", "fixed_in", "reason", "origin", "bug", "last_update"):
        value = getattr(fix.upstream, key)
        if value or key in ("status", "link", "fixed_in"):
            up.add(key, value)
    doc.add("upstream", up)
    return tomlkit.dumps(doc)


def _series(pack_root: Path, fix_id: str, after: str) -> str:
    lines = pack_text(pack_root / "fixes" / "series", AGAIN).splitlines(keepends=True)
    at = next((i + 1 for i, ln in enumerate(lines) if ln.split("#", 1)[0].strip() == after), 0) if after else \
        next((i for i, ln in enumerate(lines) if ln.split("#", 1)[0].strip()), len(lines))
    return "".join(lines[:at] + [f"{fix_id}\n"] + lines[at:])


def _profile(pack: Pack, fix: Fix, state: EditState) -> str:
    prof = load_profile(pack, state.profile)
    doc = tomlkit.parse(pack_text(prof.path, AGAIN))
    key = "opt_in" if fix.opt_in else "default"
    listed = doc["fixes"][key]
    order = list(pack.series)
    cut = order.index(state.after) if state.after else -1
    at = sum(1 for fid in listed if fid in order and order.index(fid) <= cut)
    listed.insert(at, fix.id)
    return tomlkit.dumps(doc)


def _sharing(pack: Pack, fix_id: str, profile: str, folder: Path) -> list[str]:
    """The other profiles that read the fix's patches from ``folder`` (their locks change too)."""
    out = []
    for name in sorted(pack.profiles):
        prof = load_profile(pack, name)
        if name == profile or fix_id not in prof.default + prof.opt_in:
            continue
        fix = pack.fixes[fix_id]
        if not any(v.profile == name for v in fix.variants) and folder == fix.folder:
            out.append(name)
    return out


def release_roots(pack: Pack, state: EditState, progress: Progress) -> dict[str, Path]:
    """The clean release copies of the profile's targets with fixes: the edit's own, else fetched (or
    from the cache)."""
    prof = load_profile(pack, state.profile)
    targets = {pack.fixes[f].target for f in prof.default + prof.opt_in if f in pack.fixes} | {state.target}
    out = {}
    for name in sorted(targets):
        root = Path(state.release) if state.release and name == state.target else None
        out[name] = clean_copy(prof, name, root, progress=progress).root
    return out


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()
