"""Deciding a fix's state on a tree, with evidence: applied, absent, upstreamed, drifted, conflict,
partial or tampered.

A fix is tried both ways on the same tree: forward (are its pre-images there, so that it would
apply?) and reverse (are its post-images there, so that it is in?). The lock's file-level hashes
and the manifest settle the cases where both are true (a hunk that only adds lines keeps its
pre-image visible after it is applied); where they cannot, a pre-image found only inside the fix's
own post-image is no second place for it (:func:`pre_inside_post`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .applier import (
    PINNED_POST_REASON,
    PINNED_REASON,
    Closest,
    HunkEvidence,
    HunkResult,
    Placement,
    apply_text,
    closest,
    image,
    occurrences,
    probe,
    sides,
    split_lines,
)
from .binpatch import BinaryApplyError
from .hunk_said import hunk_message, refuse_stray_cr
from .model import Fix, source_bytes
from .patchmodel import FilePatch
from .records import LockFix
from .safepath import file_on_the_way, not_a_file, shown_path
from .sameplace import inside_own, inside_own_post, removed_there
from .states import State
from .structs import dataclass, field
from .tree import Tree, decode, encode, file_hashes


@dataclass(frozen=True)
class FixEvidence:
    """What the pack knows of a fix's files beyond its patch text (from the lock, or a release copy).

    ``trusted``: the tree is the release copy the patches were written against (lock generation, the
    old side of a rebase): every hunk at its stated line. ``pre`` / ``post``: sha256 of each touched
    file before and after the fix along the chain. ``counts``: per hunk of the fix (in the order of
    :meth:`Fix.file_patches`), how often its pre-image and its post-image occur in those files. ``laid``: per hunk
    (that order), the offset unwinding the recorded fix took it off at, on files as that left them: laid forward
    there only (:func:`fixpack.replay.replay`).
    """

    trusted: bool = False
    pre: tuple[tuple[str, str | None], ...] = ()
    post: tuple[tuple[str, str | None], ...] = ()
    counts: tuple[tuple[int | None, int | None], ...] = ()
    laid: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def from_lock(cls, entry: LockFix | None) -> FixEvidence:
        """From a fix's lock entry: its files' pre/post hashes and its hunks' counts."""
        if entry is None:
            return cls()
        return cls(False, tuple((f.path, f.pre) for f in entry.files), tuple((f.path, f.post) for f in entry.files),
                   tuple((h.pre_count, h.post_count) for h in entry.hunks))

    def hunk(self, flat: int, reverse: bool, pinned: bool, recorded: bool = False) -> HunkEvidence:
        pair = self.counts[flat] if flat < len(self.counts) else (None, None)
        at = None if reverse else self.laid.get(flat)
        return HunkEvidence(pinned or at is not None, pair[1] if reverse else pair[0], at, recorded)

    def pinned(self, now: dict[str, str | None], reverse: bool) -> dict[str, bool]:
        """Per file, whether it is byte for byte the side a pass starts from (the fix's pre- or
        post-image); ``now`` holds the files' sha256 (see :meth:`digests`)."""
        known = dict(self.post if reverse else self.pre)
        return {p: self.trusted or (p in known and known[p] == h) for p, h in now.items()}

    def digests(self, fix: Fix, tree: Tree) -> dict[str, str | None]:
        """The touched files' sha256 now, hashed only when there is a lock hash to hold them against."""
        if self.trusted or not self.pre:
            return dict.fromkeys(fix.touched_paths())
        return file_hashes(tree, fix.touched_paths())


NO_EVIDENCE = FixEvidence()  # a fix known by its patch text only


TRUSTED = FixEvidence(trusted=True)


@dataclass
class HunkNote:
    """One hunk's placement, for the report: file, 1-based hunk number, where, how far it moved; for a
    refused hunk the candidate lines, the reason, the line range searched and the closest near-miss."""

    path: str
    hunk: int
    placement: str
    line: int | None
    offset: int
    flat: int = 0
    candidates: tuple[int, ...] = ()
    expected: int = 0
    searched: int = 0
    reason: str = ""
    closest: Closest | None = None
    text: str = ""
    pre: tuple[str, ...] = ()  # the lines it looked for (for the near-miss, worked out when reported)
    side: str = "pre-image"  # what those lines are: reversed (is the fix in? revert), the post-image
    patch: str = ""  # the patch file that holds the hunk, and the line of its @@ header there (0: not known)
    at: int = 0
    of: str = ""  # that patch file's name, where the fix has several (said beside the hunk's number)
    turned: int = 0  # the offset a pass the other way measures (HunkResult.turned)

    def as_dict(self) -> dict[str, object]:
        return {"file": self.path, "hunk": self.hunk, "placement": self.placement, "line": self.line,
                "offset": self.offset}

    def refusal(self) -> dict[str, object]:
        """The JSON form of a refused hunk: where it was looked for and what was found instead."""
        out: dict[str, object] = {**self.as_dict(), "candidates": list(self.candidates), "expected": self.expected,
                                  "searched": [1, self.searched], "reason": self.reason, "closest": None,
                                  "patch": self.text}
        if self.closest is not None:
            c = self.closest
            out["closest"] = {"line": c.line, "matching": c.matching, "lines": c.total,
                              "differs": [{"line": n, "expected": e, "found": f} for n, e, f in c.differs],
                              "line_ends": c.line_ends}
        return out

    def header_wrong(self) -> bool:
        """A missing hunk of a file that is the pre-image it was written against (reversed: the post-image it leaves;
        placed at its stated line only) whose whole pre-image (post-image) is at other lines there: the @@ line's
        numbers are what is wrong, not the file."""
        return self.reason in (PINNED_REASON, PINNED_POST_REASON) and self.whole()

    def whole(self) -> bool:
        c = self.closest
        return self.placement == Placement.MISSING.value and c is not None and c.total > 0 and c.matching == c.total

    def message(self, edited: bool = False) -> str:
        """What became of the hunk; ``edited``: the file is a fix's, changed since it was applied (tampered), so an
        ambiguous post-image is the image's doing, not the pack's (advice for the file, not a refresh)."""
        return hunk_message(self, edited)

    @property
    def number(self) -> str:
        """"hunk #N", with the patch file that holds it where its fix has several ("hunk #N of 0002-x.patch")."""
        return f"hunk #{self.hunk}{f' of {self.of}' if self.of else ''}"

@dataclass
class Pass:
    """The outcome of running a fix's file patches one way over a fork of the tree.

    ``ok``: every hunk placed and every file changed; ``present``: no file-level failure and every
    hunk's lines are in the file, placed or ambiguous; ``counts``: per hunk (flat), the occurrences of
    its pre-image before and of its post-image after (only when counting was asked for).
    """

    ok: bool
    tree: Tree
    hunks: list[HunkNote] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    present: bool = True
    counts: dict[int, tuple[int, int]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # the text of each file whose hunks were refused

    def explain(self, edited: bool = False) -> list[str]:
        """The refused hunks' messages, each missing one with its closest near-miss (worked out now, only
        for a pass that is reported); ``edited`` as :meth:`HunkNote.message` takes it."""
        texts = iter(self.failed)
        by_file: dict[str, list[str]] = {}
        out = list(self.messages)
        for note in self.hunks:
            if note.placement not in ("missing", "ambiguous"):
                continue
            if note.path not in by_file:
                by_file[note.path] = split_lines(next(texts, ""))
            if note.placement == "missing" and note.closest is None and note.pre:
                note.closest = closest(by_file[note.path], note.pre, note.expected - 1)
            out.append(note.message(edited))
        return out

    @property
    def refused(self) -> list[HunkNote]:
        return [h for h in self.hunks if h.placement in (Placement.AMBIGUOUS.value, Placement.MISSING.value)]


@dataclass
class Evaluation:
    state: State
    forward: Pass
    reverse: Pass
    messages: list[str]
    drifted: list[str] = field(default_factory=list)  # DRIFTED: the files its hunks moved in or that differ

    @property
    def offsets(self) -> list[HunkNote]:
        return [h for h in self.forward.hunks if h.offset]

    @property
    def refused(self) -> list[HunkNote]:
        """The hunks that kept the fix from its state: the forward side's (the reverse side's when only
        the post-image is there)."""
        side = self.reverse if self.state is State.AMBIGUOUS and not self.forward.refused else self.forward
        return side.refused if self.state in (State.AMBIGUOUS, State.CONFLICT, State.PARTIAL) else []


def _mode(value: str | None) -> int | None:
    return int(value[-3:], 8) if value else None


def _notes(path: str, results: tuple[HunkResult, ...], flat: int, searched: int,
           hunks: tuple[Any, ...], reverse: bool, patch: str = "", of: str = "") -> list[HunkNote]:
    return [HunkNote(path, r.index + 1, r.placement.value, r.line, r.offset, flat + r.index, r.candidates,
                     r.expected, searched, r.reason, None, hunks[r.index].text,
                     sides(hunks[r.index], reverse)[0], image(reverse), patch, hunks[r.index].diff_line, of,
                     r.turned)
            for r in results]


def run_pass(fix: Fix, tree: Tree, reverse: bool, evidence: FixEvidence = NO_EVIDENCE,
             count: bool = False, now: dict[str, str | None] | None = None,
             at: Mapping[int, tuple[int, ...]] | None = None) -> Pass:
    """Apply (or reverse-apply) every file patch of ``fix`` to a fork of ``tree``, by the placement rule.

    A file is pinned when it is byte for byte the side the pass starts from (``evidence``); the
    others are searched, forward from the running offset ``tree`` holds for the file (the fixes before it), reversed
    from ``at``'s offsets for its file patch (where the manifest records the fix was laid, :func:`fixpack.replay.
    hunks_laid`: its first hunk's, or each hunk's; None: no record, :attr:`fixpack.applier.HunkEvidence.recorded`).
    With ``count``, each hunk's occurrences are recorded (for the lock).
    """
    work = tree.fork()
    result = Pass(True, work)
    fps = list(fix.file_patches())
    starts = [sum(len(f.hunks) for f in fps[:j]) for j in range(len(fps))]
    pinned = evidence.pinned(evidence.digests(fix, tree) if now is None else now, reverse)
    order = list(zip(fps, starts, [str(p.path) for p in fix.patches for _fp in p.files]))
    for fp, flat, patch in reversed(order) if reverse else order:
        of = patch.rpartition("/")[2] if len(fix.patches) > 1 else ""
        _one_file(fix, fp, work, reverse, result, _FileCtx(flat, pinned, evidence, count, patch, at, of))
    return result


@dataclass(frozen=True)
class _FileCtx:
    flat: int
    pinned: dict[str, bool]
    evidence: FixEvidence
    count: bool
    patch: str = ""  # the patch file that holds the file patch (for messages)
    at: Mapping[int, tuple[int, ...]] | None = None  # reversed: per file patch, its offsets (replay.hunks_laid)
    of: str = ""  # its name, where the fix has several (said beside a hunk's number)


def _one_file(fix: Fix, fp: FilePatch, work: Tree, reverse: bool, out: Pass, ctx: _FileCtx) -> None:
    src, dst = (fp.new_path, fp.old_path) if reverse else (fp.old_path, fp.new_path)
    src_mode, dst_mode = (fp.new_mode, fp.old_mode) if reverse else (fp.old_mode, fp.new_mode)
    current = work.read(src) if src else None
    at = f"; its file section is at {ctx.patch}:{fp.diff_line}" if ctx.patch and fp.diff_line else ""
    s_src, s_dst = shown_path(src), shown_path(dst)  # (a name that ends in a space is quoted)
    if src is None:
        if dst is not None and work.read(dst) is not None:
            return _fail(out, f"{s_dst}: exists, though fix {fix.id} deletes it (reverting it would bring the file "
                              f"back)" if reverse else f"{s_dst}: exists already (the patch creates it{at})")
        way = file_on_the_way(work.root, dst) if dst is not None else None  # (its write failed: ENOTDIR, exit 5)
        if way is not None:
            return _fail(out, f"{s_dst}: {way} is {not_a_file(work.root / way) or 'a file'}, not a folder, but the "
                              f"{'revert' if reverse else 'patch'} makes {s_dst} in it")
        current = ""
    elif current is None:
        return _fail(out, f"{s_src}: no such file{f' ({at[2:]})' if at else ''}")
    if src and dst and src != dst and work.read(dst) is not None:
        return _fail(out, f"{s_dst}: exists, though fix {fix.id} renames it to {s_src} (reverting it would rename "
                          f"{s_src} back over it)" if reverse else
                     f"{s_dst}: exists already (the patch renames {s_src} to it)")
    if fp.binary:
        text = _binary(fix, fp, current, reverse, out)
        if text is None:
            return None
    else:
        # a file the patch creates starts empty: its hunk's place is not in doubt
        pinned = src is None or ctx.pinned.get(src, False)
        recorded = reverse and ctx.at is not None
        ev = tuple(ctx.evidence.hunk(ctx.flat + i, reverse, pinned, recorded) for i in range(len(fp.hunks)))
        laid = (0,) if pinned or not reverse else (ctx.at or {}).get(ctx.flat, (0,))  # (each hunk's, where recorded)
        delta = 0 if pinned else laid[0] if reverse else work.delta(src or "")
        if not reverse:
            refuse_stray_cr(current, fp, ctx.patch)
        res = apply_text(current, fp.hunks, reverse, ev, delta, fp.in_place, laid if len(laid) > 1 else ())
        out.hunks += _notes(fp.path, res.hunks, ctx.flat, res.lines, fp.hunks, reverse, ctx.patch, ctx.of)
        if ctx.count:
            _count(fp, current, res.text, reverse, ctx.flat, out)
        if res.text is None:
            out.failed.append(current)
            out.ok = False
            out.present = out.present and all(h.present for h in res.hunks)
            return None
        text = res.text
        if dst and not reverse:
            work.set_delta(dst, res.delta)
    if src_mode and dst_mode and src_mode != dst_mode and src is not None:
        have = work.mode(src)
        if have is not None and have != _mode(src_mode):
            return _fail(out, f"{s_src}: mode {oct(have)} is not the patch's {src_mode[-3:]}")
    if dst is None:
        if text != "" and reverse:  # undoing a created file: its lines came off, others stay
            return _fail(out, f"{s_src}: holds more than the file the patch creates (lines added since it was applied)")
        if text != "":
            return _fail(out, f"{s_src}: does not match the content the patch deletes")
        work.write(src or "", None)
        return None
    mode = _mode(dst_mode) if dst_mode and dst_mode != src_mode else None
    owner = None
    if src and src != dst:  # a renamed file keeps its mode (unless the patch sets one) and owner, as git's rename
        mode, owner = mode or work.mode(src), work.owner(src)
        work.write(src, None)
    work.write(dst, text, mode, owner)
    return None


def _count(fp: FilePatch, before: str, after: str | None, reverse: bool, flat: int, out: Pass) -> None:
    """Record, per hunk, how often its pre-image occurs before and its post-image after (lock evidence)."""
    a, b = (after, before) if reverse else (before, after)
    pre_lines = split_lines(a or "")
    post_lines = split_lines(b or "")
    for i, h in enumerate(fp.hunks):
        out.counts[flat + i] = (len(occurrences(pre_lines, h.old_lines)), len(occurrences(post_lines, h.new_lines)))


def _binary(fix: Fix, fp: FilePatch, current: str, reverse: bool, out: Pass) -> str | None:
    blob = dict(fix.binary).get(fp.path)
    if blob is None:  # the loader refuses this; kept for a hand-built Fix
        _fail(out, f"{shown_path(fp.path)}: binary change is not declared")
        return None
    if fp.data is not None:  # a git binary patch: its blob ids say which side the bytes are
        try:
            return decode(fp.data.apply(encode(current), reverse))
        except BinaryApplyError as exc:
            _fail(out, f"{shown_path(fp.path)}: {exc}")
            return None
    post = decode(source_bytes(fix, blob))
    if reverse:
        if current != post:
            _fail(out, f"{shown_path(fp.path)}: binary content differs from {blob}")
            return None
        return ""  # declared binary changes are new files only (the loader checks): the pre-image is empty
    return post


def _fail(out: Pass, message: str) -> None:
    out.ok = False
    out.present = False
    out.messages.append(message)


def decide(fix: Fix, tree: Tree, evidence: FixEvidence | None, in_manifest: bool) -> Evaluation:
    """Work out the fix's state on ``tree`` (which holds the fixes before it in the chain).

    Both sides are tried. Where both are there (an add-only hunk keeps its pre-image visible once
    applied; a twin may hold either side), the lock's file hashes decide; on a drifted file the fix is in
    when its pre-image is there only inside its own post-image (:func:`pre_inside_post`), else ``ambiguous``, never
    applied a second time.
    """
    ev = evidence or NO_EVIDENCE
    now = ev.digests(fix, tree)  # hashed once for both passes and the lock's side
    fwd = run_pass(fix, tree, reverse=False, evidence=ev, now=now)
    rev = run_pass(fix, tree, reverse=True, evidence=ev, now=now)
    if in_manifest:
        if rev.ok:
            return Evaluation(State.APPLIED, fwd, rev, ["already applied"])
        return Evaluation(State.TAMPERED, fwd, rev, ["the manifest records it as applied, but its post-image is "
                                                     "not there"] + rev.explain(edited=True))
    side = _lock_side(ev, now)
    early = [] if side == "pre" or ev.laid or rev.ok or not fwd.ok else inside_own(fix, fwd, rev)
    if early:  # these hunks' lines are in already, where they go (not the others'): laid, they would be in twice
        return Evaluation(State.PARTIAL, fwd, rev, ["only some hunks are in: " + ", ".join(
            f"{shown_path(n.path)} {n.number} (the lines it adds are there already, beside its context at line "
            f"{n.line}: laid, they would be in twice)" for n in early)])
    if fwd.ok and (not rev.present or side == "pre" or ev.laid):  # (laid: where it was, whatever else is there)
        drift, files = _drift(ev, now, fwd)
        return Evaluation(State.DRIFTED if drift else State.ABSENT, fwd, rev, drift, files)
    removed = removed_there(fwd, rev) if side == "" else []
    if rev.ok and not removed and (not fwd.present or side == "post"
                                   or (side == "" and fwd.ok and pre_inside_post(fix, fwd, rev, ev))):
        return Evaluation(State.UPSTREAMED, fwd, rev, ["the target already holds the post-image, without our "
                                                       "manifest"])
    if rev.ok and removed and not fwd.ok:  # some hunks in (their pre-image gone), these not: the lines they take out
        return Evaluation(State.PARTIAL, fwd, rev, ["only some hunks are in: not present: " + ", ".join(
            f"{shown_path(n.path)} {n.number} (the lines it removes are at line {n.line}, where its post-image is "
            f"found: they were never taken out)" for n in removed)])  # (are there, where their post-image is)
    if fwd.present and rev.present:
        return Evaluation(State.AMBIGUOUS, fwd, rev, [
            "both its pre-image and its post-image are in the file (a twin block?) and the file is not the lock's "
            "pre- or post-image: whether it is applied already cannot be told, so it is not applied (again). "
            "Check the file by hand, then refresh the fix against this tree or restore the target"]
            + fwd.explain() + rev.explain())
    if fwd.present or rev.present:
        side_pass = fwd if fwd.present else rev
        return Evaluation(State.AMBIGUOUS, fwd, rev, side_pass.explain())
    partial = _partial(fix, tree, ev)
    if partial:  # the hunks it cannot apply are those already in: said so in their JSON too, not "missing" alone
        for note in fwd.hunks:
            if note.placement == "missing":
                note.reason = "its post-image is in the file: this part of the fix is in already"
        return Evaluation(State.PARTIAL, fwd, rev, partial)
    return Evaluation(State.CONFLICT, fwd, rev, fwd.explain())


def pre_inside_post(fix: Fix, fwd: Pass, rev: Pass, ev: FixEvidence) -> bool:
    """Each hunk the forward pass placed lies inside its own post-image, at the side it adds lines on, where the
    reversed pass placed that (:func:`fixpack.sameplace.inside_own_post`): no second place for the fix, its pre-image
    is there only as part of its post-image, which is in. Not so where the post-image outlives its own reversal (the
    added lines are in the file twice, one after the other): which copy is the fix's cannot be told."""
    return inside_own_post(fix, fwd, rev) and not run_pass(fix, rev.tree, reverse=True, evidence=ev).ok


def _lock_side(ev: FixEvidence, now: dict[str, str | None]) -> str:
    """"pre" when a touched file is the lock's pre-image (and not its post-image), "post" for the
    opposite, "" when the lock cannot tell (no lock, or a drifted file)."""
    if ev.trusted:
        return "pre"
    pre, post = dict(ev.pre), dict(ev.post)
    for path, h in now.items():
        if path not in pre:
            continue
        if h == pre[path] and h != post.get(path):
            return "pre"
        if h == post.get(path) and h != pre[path]:
            return "post"
    return ""


def _drift(ev: FixEvidence, now: dict[str, str | None], fwd: Pass) -> tuple[list[str], list[str]]:
    """What makes a fix that applies drifted: each hunk placed at an offset, each touched file whose hash is not
    the lock's pre-image (the messages), and those files (sorted; the ``drifted`` of an Evaluation)."""
    msgs = [f"{shown_path(h.path)}: {h.number} applies at line {h.line} (offset {h.offset:+d} lines)"
            for h in fwd.hunks if h.offset]
    files = {h.path for h in fwd.hunks if h.offset}
    for path, want in ev.pre:
        h = now.get(path)
        if h != want:
            n = max(12, next((i for i, (a, b) in enumerate(zip(str(h), str(want))) if a != b), 0) + 1)  # told apart
            msgs.append(f"{shown_path(path)}: pre-image sha256 {str(h)[:n]} differs from the lock's {str(want)[:n]}")
            files.add(path)
    return msgs, sorted(files)


def both_ways(fp: FilePatch, text: str, ev: FixEvidence = NO_EVIDENCE,
              flat: int = 0) -> list[tuple[HunkResult, HunkResult]]:
    """Each hunk of ``fp`` placed on its own in ``text`` (nothing pinned; ``ev``'s counts from its ``flat``-th hunk):
    (forward, reversed) per hunk: whether its pre-image, and its post-image, is there."""
    fwd, rev = (probe(text, fp.hunks, back, tuple(ev.hunk(flat + i, back, False) for i in range(len(fp.hunks))),
                      fp.in_place) for back in (False, True))
    return list(zip(fwd, rev))


def _partial(fix: Fix, tree: Tree, ev: FixEvidence) -> list[str]:
    """When each hunk is either present (post-image) or applicable (pre-image), but not all one way."""
    present, missing = [], []
    flat = 0
    for of, fp in ((p.path.name if len(fix.patches) > 1 else "", fp) for p in fix.patches for fp in p.files):
        text = tree.read(fp.path if fp.kind != "rename" else (fp.old_path or "")) if not fp.binary else None
        if text is None or not fp.hunks:
            return []
        both = both_ways(fp, text, ev, flat)
        flat += len(fp.hunks)
        for f, r in both:
            label = f"{shown_path(fp.path)} hunk #{f.index + 1}{f' of {of}' if of else ''} (line " \
                    f"{fp.hunks[f.index].old_start})"
            if r.found and not f.present:
                present.append(label)
            elif f.found and not r.present:
                missing.append(label)
            elif not f.present and not r.present:
                return []
    if present and missing:
        return ["only some hunks are in: present: " + ", ".join(present) + "; not present: " + ", ".join(missing)]
    return []
