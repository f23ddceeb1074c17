"""Deciding a fix's state on a tree, with evidence: applied, absent, upstreamed, drifted, conflict,
partial or tampered.

A fix is tried both ways on the same tree: forward (are its pre-images there, so that it would
apply?) and reverse (are its post-images there, so that it is in?). The lock's file-level hashes
and the manifest settle the cases where both are true (a hunk that only adds lines keeps its
pre-image visible after it is applied).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


from .applier import HunkResult, Placement, apply_text, probe
from .diff import FilePatch, sha256_text
from .model import Fix
from .tree import Tree, decode


class State(str, Enum):
    APPLIED = "applied"          # the manifest says so and the post-images are there
    ABSENT = "absent"            # not in; applies exactly at its lines on the pinned pre-image
    UPSTREAMED = "upstreamed"    # the post-images are there without our manifest
    DRIFTED = "drifted"          # not in; applies only with an offset, or the file differs from the lock
    CONFLICT = "conflict"        # not in, and does not apply
    PARTIAL = "partial"          # some hunks in, others not
    TAMPERED = "tampered"        # the manifest says applied, but the files differ from it


@dataclass
class HunkNote:
    """One hunk's placement, for the report: file, 1-based hunk number, where, how far it moved."""

    path: str
    hunk: int
    placement: str
    line: int | None
    offset: int

    def as_dict(self) -> dict[str, object]:
        return {"file": self.path, "hunk": self.hunk, "placement": self.placement, "line": self.line,
                "offset": self.offset}


@dataclass
class Pass:
    """The outcome of running a fix's file patches one way over a fork of the tree."""

    ok: bool
    tree: Tree
    hunks: list[HunkNote] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


@dataclass
class Evaluation:
    state: State
    forward: Pass
    reverse: Pass
    messages: list[str]

    @property
    def offsets(self) -> list[HunkNote]:
        return [h for h in self.forward.hunks if h.offset]


def _mode(value: str | None) -> int | None:
    return int(value[-3:], 8) if value else None


def _notes(path: str, results: tuple[HunkResult, ...]) -> list[HunkNote]:
    return [HunkNote(path, r.index + 1, r.placement.value, r.line, r.offset) for r in results]


def run_pass(fix: Fix, tree: Tree, reverse: bool) -> Pass:
    """Apply (or reverse-apply) every file patch of ``fix`` to a fork of ``tree``."""
    work = tree.fork()
    result = Pass(True, work)
    fps = list(fix.file_patches())
    for fp in reversed(fps) if reverse else fps:
        _one_file(fix, fp, work, reverse, result)
    return result


def _one_file(fix: Fix, fp: FilePatch, work: Tree, reverse: bool, out: Pass) -> None:
    src, dst = (fp.new_path, fp.old_path) if reverse else (fp.old_path, fp.new_path)
    src_mode, dst_mode = (fp.new_mode, fp.old_mode) if reverse else (fp.old_mode, fp.new_mode)
    current = work.read(src) if src else None
    if src is None:
        if dst is not None and work.read(dst) is not None:
            return _fail(out, f"{dst}: exists already (the patch creates it)")
        current = ""
    elif current is None:
        return _fail(out, f"{src}: no such file")
    if src and dst and src != dst and work.read(dst) is not None:
        return _fail(out, f"{dst}: exists already (the patch renames {src} to it)")
    if fp.binary:
        text = _binary(fix, fp, current, reverse, out)
        if text is None:
            return None
    else:
        res = apply_text(current, fp.hunks, reverse)
        out.hunks += _notes(fp.path, res.hunks)
        if res.text is None:
            bad = [h for h in res.hunks if not h.found]
            for h in bad:
                extra = (f" at lines {list(h.candidates)} (give the hunk more context, or rebase the fix onto this "
                         "release)" if h.placement is Placement.AMBIGUOUS else "")
                out.messages.append(f"{fp.path}: hunk #{h.index + 1} {h.placement.value}{extra}")
            out.ok = False
            return None
        text = res.text
    if src_mode and dst_mode and src_mode != dst_mode and src is not None:
        have = work.mode(src)
        if have is not None and have != _mode(src_mode):
            return _fail(out, f"{src}: mode {oct(have)} is not the patch's {src_mode[-3:]}")
    if dst is None:
        if text != "":
            return _fail(out, f"{src}: does not match the content the patch deletes")
        work.write(src or "", None)
        return None
    if src and src != dst:
        work.write(src, None)
    work.write(dst, text, _mode(dst_mode) if dst_mode and dst_mode != src_mode else None)
    return None


def _binary(fix: Fix, fp: FilePatch, current: str, reverse: bool, out: Pass) -> str | None:
    blob = dict(fix.binary).get(fp.path)
    if blob is None:  # the loader refuses this; kept for a hand-built Fix
        _fail(out, f"{fp.path}: binary change is not declared")
        return None
    post = decode((fix.folder / blob).read_bytes())
    if reverse:
        if current != post:
            _fail(out, f"{fp.path}: binary content differs from {blob}")
            return None
        return ""  # declared binary changes are new files only (the loader checks): the pre-image is empty
    return post


def _fail(out: Pass, message: str) -> None:
    out.ok = False
    out.messages.append(message)


def decide(fix: Fix, tree: Tree, lock_entry: dict[str, Any] | None, in_manifest: bool) -> Evaluation:
    """Work out the fix's state on ``tree`` (which holds the fixes before it in the chain)."""
    fwd = run_pass(fix, tree, reverse=False)
    rev = run_pass(fix, tree, reverse=True)
    msgs: list[str] = []
    if in_manifest:
        if rev.ok:
            return Evaluation(State.APPLIED, fwd, rev, ["already applied"])
        return Evaluation(State.TAMPERED, fwd, rev, ["the manifest records it as applied, but its post-image is "
                                                     "not there"] + rev.messages)
    if fwd.ok and rev.ok:
        fwd.ok = _prefer_forward(fix, tree, lock_entry, fwd, rev)
        rev.ok = not fwd.ok
    if fwd.ok:
        drift = _drift(tree, lock_entry, fwd)
        if drift:
            return Evaluation(State.DRIFTED, fwd, rev, drift)
        return Evaluation(State.ABSENT, fwd, rev, msgs)
    if rev.ok:
        return Evaluation(State.UPSTREAMED, fwd, rev, ["the target already holds the post-image, without our "
                                                       "manifest"])
    partial = _partial(fix, tree)
    if partial:
        return Evaluation(State.PARTIAL, fwd, rev, partial)
    return Evaluation(State.CONFLICT, fwd, rev, fwd.messages)


def _prefer_forward(fix: Fix, tree: Tree, lock_entry: dict[str, Any] | None, fwd: Pass, rev: Pass) -> bool:
    files = (lock_entry or {}).get("files", [])
    for f in files:
        current = tree.read(f["path"])
        h = sha256_text(current) if current is not None else None
        if h == f.get("pre") and h != f.get("post"):
            return True
        if h == f.get("post") and h != f.get("pre"):
            return False
    # no lock evidence: the side whose hunks sit closer to the lines the patch names wins
    return sum(abs(h.offset) for h in fwd.hunks) <= sum(abs(h.offset) for h in rev.hunks)


def _drift(tree: Tree, lock_entry: dict[str, Any] | None, fwd: Pass) -> list[str]:
    msgs = [f"{h.path}: hunk #{h.hunk} applies at line {h.line} (offset {h.offset:+d} lines)"
            for h in fwd.hunks if h.offset]
    for f in (lock_entry or {}).get("files", []):
        current = tree.read(f["path"])
        h = sha256_text(current) if current is not None else None
        if h != f.get("pre"):
            msgs.append(f"{f['path']}: pre-image sha256 {str(h)[:12]} differs from the lock's {str(f.get('pre'))[:12]}")
    return msgs


def _partial(fix: Fix, tree: Tree) -> list[str]:
    """When each hunk is either present (post-image) or applicable (pre-image), but not all one way."""
    present, missing = [], []
    for fp in fix.file_patches():
        text = tree.read(fp.path if fp.kind != "rename" else (fp.old_path or "")) if not fp.binary else None
        if text is None or not fp.hunks:
            return []
        fwd = probe(text, fp.hunks)
        rev = probe(text, fp.hunks, reverse=True)
        for f, r in zip(fwd, rev):
            label = f"{fp.path} hunk #{f.index + 1} (line {fp.hunks[f.index].old_start})"
            if r.found and not f.found:
                present.append(label)
            elif f.found and not r.found:
                missing.append(label)
            elif not f.found and not r.found:
                return []
    if present and missing:
        return ["only some hunks are in: present: " + ", ".join(present) + "; not present: " + ", ".join(missing)]
    return []


def file_hashes(tree: Tree, paths: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in paths:
        text = tree.read(p)
        out[p] = sha256_text(text) if text is not None else None
    return out


