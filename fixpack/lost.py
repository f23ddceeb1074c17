"""A target's fixes that no manifest records, though their changes are in its files (a lost manifest, one that
lost an entry, or one whose entry says upstreamed where the lock says the release lacks the fix): revert has no
record to undo them, so it refuses and says how to get one, rather than report "nothing to do" over a patched
tree, or revert the recorded fixes and leave the others in.

:func:`unrecorded` finds them by the lock's hashes first (a target at the release, or at this chain's
post-images, costs hashes only) and places the patches of the others; :func:`refuse_unrecorded` is revert's
refusal (exit 3, nothing written). The other way round, :func:`not_upstream` holds an "upstreamed" record to the
files as status does: one whose fix is absent (a planted manifest) is not taken at its word.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .advice import recorded_has, to_release
from .errors import MismatchError, PackError, PatchParseError
from .lock_hints import regenerate_hint
from .lockfile import fixed_by
from .model import Fix
from .patchfiles import parse_fixes
from .patchmodel import Hunk
from .records import Lock, Manifest, Recorded
from .states import CONFLICT_STATES, State
from .tree import Tree, file_hashes

if TYPE_CHECKING:
    from .evaluate import Evaluation, FixEvidence
    from .run import Context
    from .targets import FoundTarget


def unrecorded(fixes: list[Fix], tree: Tree, lock: Lock,
               parse: Callable[[list[str]], list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    """Of ``fixes`` (of one target, series order, none of them recorded as applied): the ids whose post-image
    ``tree`` holds, and per fix only some of whose hunks are there (the others neither applicable nor there, or
    applicable), its files. A fix whose files hash to the lock's post-images is held; one whose files are neither
    those nor the release's (the lock's first pre-images), or that the lock does not know (no usable lock), is
    placed both ways (:func:`fixpack.evaluate.decide`): held when its patch reverses there and does not apply
    (another profile's chain, or a hand edit, changed the files too), partial when a hunk's post-image is there and
    its pre-image is not while others are not in. ``parse`` loads the patches of the ids given and returns those it
    could (only those are placed). A fix the lock records as upstreamed (pre == post) is not counted. Files at the
    lock's states along their chain (a later fix changed an earlier one's context: :func:`fixpack.replay.popped`) are
    settled by their hashes: the fixes they hold are held, the others not in."""
    from .evaluate import FixEvidence
    from .replay import popped

    release = lock.release_files()
    held, unsure = [], []
    found, settled = popped(lock, fixes[0].target, tree, None) if fixes else ((), set())
    for fix in fixes:
        entry = lock.fix(fix.id)
        if fix.id in found:  # its files at the lock's states along their chain (popped): held
            held.append(fix.id)
            continue
        if entry is not None and set(entry.post()) <= settled:  # (those files settled so: not in)
            continue
        if entry is None:  # no usable lock: its patch says
            unsure.append(fix)
            continue
        if entry.upstreamed():
            continue
        now = file_hashes(tree, list(entry.post()))  # the lock's paths: no patch is parsed
        if now == entry.post():
            held.append(fix.id)
        elif any(h != release.get(p) for p, h in now.items()):
            unsure.append(fix)
    partial: dict[str, list[str]] = {}
    parsed = set(parse([f.id for f in unsure])) if unsure else set()
    for fix in (f for f in unsure if f.id in parsed):
        ev = _placed(fix, tree, FixEvidence.from_lock(lock.fix(fix.id)))
        if ev is None:
            continue
        if ev.state is State.UPSTREAMED:
            held.append(fix.id)
        elif ev.state is State.PARTIAL or (ev.state in (State.CONFLICT, State.AMBIGUOUS) and _some_in(fix, tree)):
            partial[fix.id] = sorted(fix.touched_paths())  # (ambiguous: its block copied, by hand, or the context)
    return [f.id for f in fixes if f.id in held], partial


def _placed(fix: Fix, tree: Tree, evidence: FixEvidence) -> Evaluation | None:
    """:func:`fixpack.evaluate.decide` of ``fix`` on ``tree`` (forward), or None where its patch cannot be laid on
    that tree as it is written (a CR LF line that a hunk without context adds to a file whose lines end in LF: the
    refusal apply gives it): as :func:`partial_parse`'s, no reason to stop a revert, which writes nothing of it."""
    from .evaluate import decide

    try:
        return decide(fix, tree, evidence, False)
    except PatchParseError:
        return None


def partly_said(paths: list[str]) -> str:
    """The first message of an opt-in that a run does not select and that is partly in ``paths`` (status, apply)."""
    return (f"opt-in, not selected in this run, but part of it is in {', '.join(paths)} (a run cut short, or a hand "
            "edit): put its files back to the release (`revert` prints the command), or name it to see each hunk")


def _some_in(fix: Fix, tree: Tree) -> bool:
    """A hunk of ``fix`` whose pre-image cannot be placed while its post-image is in its file (once, or more: a block
    copied by hand; a copied block leaves the fix ambiguous), or most of it is (:func:`_mostly_there`: a line the fix
    added, edited by hand, leaves it in conflict). Only lines a hunk adds count: its context, which the release has
    too, does not (a hunk that only removes lines leaves nothing to find). Each hunk is placed on its own."""
    from .applier import split_lines
    from .evaluate import both_ways

    for fp in fix.file_patches():
        text = tree.read(fp.new_path) if fp.new_path and not fp.binary else None
        if text is None or not fp.hunks:
            continue
        lines = split_lines(text)  # (as the applier splits a file and compares its lines: line ends kept)
        if any(not f.found and ((r.present and len(h.new_lines) > h.leading_context + h.trailing_context)
                                or _mostly_there(h, lines))
               for (f, r), h in zip(both_ways(fp, text), fp.hunks)):
            return True
    return False


def _mostly_there(h: Hunk, lines: list[str]) -> bool:
    """Whether ``lines`` (a file's) hold ``h``'s post-image with more than half of the lines it adds (not blank, not
    lines of its pre-image) at their places in it, and more than half of all its lines: the hunk is in, a line of it
    edited by hand. An added line the file has elsewhere, or its context alone, is not the hunk."""
    new, old = h.new_lines, set(h.old_lines)
    added = [i for i in range(h.leading_context, len(new) - h.trailing_context) if new[i].strip() and new[i] not in old]
    if not added:
        return False
    where: dict[str, list[int]] = {}
    for n, ln in enumerate(lines):
        where.setdefault(ln, []).append(n)
    for start in sorted({n - i for i in added for n in where.get(new[i], ())}):
        if start < 0 or start + len(new) > len(lines):
            continue
        got = sum(lines[start + i] == new[i] for i in added)
        if 2 * got > len(added) and 2 * sum(lines[start + i] == ln for i, ln in enumerate(new)) > len(new):
            return True
    return False


def partial_parse(ctx: Context) -> Callable[[list[str]], list[str]]:
    """Parse the patches of the fixes named, each on its own; returns those that parse. A malformed patch of a fix
    the record does not hold (a stale lock says its patch changed) is no reason to stop a revert: that fix is not
    looked for."""
    def parse(ids: list[str]) -> list[str]:
        ok = []
        for fid in ids:
            try:
                parse_fixes(ctx.pack, ctx.profile, [fid])
            except PackError:
                continue
            ok.append(fid)
        return ok
    return parse


def refuse_unrecorded(ctx: Context, ft: FoundTarget, tree: Tree, manifest: Manifest | None = None) -> None:
    """Revert's refusal (MismatchError, exit 3) when ``tree`` (the target with ``manifest``'s applied fixes reverted;
    None: it has no manifest) holds fixes of the profile that are not recorded as applied: those whose post-image is
    there are to be recorded by ``apply`` (the command), those only partly there put back to the release with every
    file the manifest lists (the command; a revert then finds the release). Without a usable lock every unrecorded
    fix is placed, but for one whose ``fixed_in`` says the target's release holds it. ``manifest``'s upstreamed
    records are held to ``tree`` first (:func:`not_upstream`)."""
    unsettled = not_upstream(ctx, ft, tree, manifest) if manifest is not None else {}
    recorded = manifest.applied_ids() if manifest else set()
    fixes = [f for f in ctx.pack.ordered(ctx.profile.default + ctx.profile.opt_in)
             if f.target == ft.spec.name and f.id not in recorded
             and (ctx.lock.fixes or not fixed_by(f.upstream.fixed_in, ft.version))]
    held, partial = unrecorded(fixes, tree, ctx.lock, partial_parse(ctx))
    partial = {k: v for k, v in partial.items() if k not in unsettled}  # (named with the record they contradict)
    if not held and not partial and not unsettled:
        return
    which = "no manifest records" if manifest is None else "its manifest does not record"
    applied = "" if manifest is None else " as applied"
    revert = ctx.rerun("revert", False, dry=False) if ctx.rerun else "revert"
    steps, how = [], ""
    if partial or unsettled:  # first: its files back (an apply would refuse a fix only partly there: exit 4)
        back = {p for ps in partial.values() for p in ps} | set(manifest.files if manifest else ())
        back |= {p for fid in unsettled for p in ctx.pack.fixes[fid].touched_paths()}
        files = ctx.pack.with_sharers(held, back)  # a fix found whole in one of them: its files too
        has, settle, _unknown = recorded_has(ctx, ft, files)
        how = to_release(ctx, ft, files, has, settle)
        what = "its files" if manifest is None else "its files and every file the manifest lists"
        steps.append(f"put {what} back to the release with the command at the end")
    if held:
        if not ctx.lock.fixes:  # (revert went on without a lock: apply needs one)
            steps.append(regenerate_hint(ctx.profile, ctx.relock, ctx.pack).replace("regenerate it", "regenerate "
                                                                                         "the lock", 1))
        them = "them" if len(held) > 1 else "it"
        opt = tuple(f for f in held if f in ctx.profile.opt_in)  # named, so that apply takes them in
        steps.append(f"record {them} with: {ctx.rerun('apply', False, opt, False) if ctx.rerun else 'apply'}")
    steps.append(f"revert with: {revert}")
    said = []
    if unsettled:
        many = len(unsettled) > 1
        said.append(f"has a manifest that records {', '.join(f'{i} v{ctx.pack.fixes[i].version}' for i in unsettled)} "
                    f"as upstreamed, but {'their post-images are' if many else 'its post-image is'} not in the files, "
                    f"which do not show {'them' if many else 'it'} absent either (status says "
                    f"{', '.join(sorted(set(unsettled.values())))}): the record is not borne out, and what of "
                    f"{'them' if many else 'it'} is in cannot be told")
    if held:
        said.append(f"holds {', '.join(held)} ({'their post-images are' if len(held) > 1 else 'its post-image is'} "
                    f"there) but {which} {'them' if len(held) > 1 else 'it'}{applied}")
    if partial:
        said.append(f"holds part of {', '.join(partial)} (some of its hunks, or its lines edited by hand: `status` "
                    f"names them), which {which}{applied}")
    raise MismatchError(f"target {ft.spec.name} at {ft.root} {'; it also '.join(said)}. To revert: "
                        f"{'; then '.join(steps)}; {ctx.report.nothing_written()}"
                        + (f". The command that puts the files back: {how}" if how else ""))


def not_upstream(ctx: Context, ft: FoundTarget, tree: Tree, manifest: Manifest) -> dict[str, str]:
    """Revert's reports of the fixes ``manifest`` records as upstreamed, held to ``tree`` (the target with the recorded
    fixes reverted) as status holds them (a manifest is untrusted state): one whose pre-image is there and not its
    post-image, which status calls absent (drifted: moved), is reported absent with the record it contradicts (a
    manifest planted on a clean image said every fix upstreamed, and revert said so). Each is placed by its patch,
    with the lock's evidence where revert has a lock; one whose patch does not parse, or that the files bear out (or
    whose post-image is there: :func:`unrecorded` names it), is left as recorded. Returns those the files cannot
    settle (neither side whole, or its file missing: status says conflict, partial or ambiguous), with status's word:
    revert refuses them rather than vouch for a record the files do not bear out."""
    from .evaluate import FixEvidence

    said = {e.id for e in manifest.fixes if e.state is Recorded.UPSTREAMED}
    reports = [fr for fr in ctx.report.fixes if fr.kind == "fix" and fr.target == ft.spec.name and fr.id in said
               and fr.state is State.UPSTREAMED]
    parsed = set(partial_parse(ctx)([fr.id for fr in reports])) if reports else set()
    unsettled: dict[str, str] = {}
    for fr in (fr for fr in reports if fr.id in parsed):
        ev = _placed(ctx.pack.fixes[fr.id], tree, FixEvidence.from_lock(ctx.lock.fix(fr.id)))
        if ev is None:
            continue
        if ev.state in CONFLICT_STATES:
            unsettled[fr.id] = ev.state.value
        elif ev.state in (State.ABSENT, State.DRIFTED):
            fr.state = State.ABSENT
            fr.messages = ["the manifest records it as upstreamed, but its pre-image is in the files, not its "
                           "post-image (status says absent): it is not upstream's, and not in, so there is nothing "
                           "of it to revert"]
    return unsettled
