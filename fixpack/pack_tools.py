"""Maintainer helpers over the pack's files: write every patch in its deterministic form.

A patch's header is derived from its fix: the subject and description stay as written in the patch,
the DEP-3 / Yocto fields (``Upstream-Status``, ``Forwarded``, ``Fix-Id``) come from ``fix.toml``.
The diff part loses churn (``index`` lines, the ``-- `` version signature). Running it twice gives
the same bytes, so CI can fail on a patch that was not written this way.
"""

from __future__ import annotations

from pathlib import Path

from .diff import diff_body, format_patch, parse_patch
from .model import Fix, Pack, PatchFile


def header_fields(fix: Fix) -> list[tuple[str, str]]:
    up = fix.upstream
    status = up.status.capitalize() + (f" [{up.link}]" if up.link and up.status != "pending" else "")
    fields = [("Upstream-Status", status),
              ("Forwarded", up.link if up.link and up.status in ("submitted", "accepted") else "no"),
              ("Fix-Id", fix.id)]
    if up.fixed_in:
        fields.append(("Fixed-In", up.fixed_in))
    return fields


def normalized(fix: Fix, path: Path) -> str:
    """The deterministic text of one of ``fix``'s patch files."""
    return normalize_text(fix, path.read_bytes().decode("utf-8", "surrogateescape"), str(path))


def normalize_text(fix: Fix, text: str, source: str = "<patch>") -> str:
    header = parse_patch(text.encode("utf-8", "surrogateescape"), source).header
    subject = header.subject or fix.summary
    return format_patch(subject, header.description, header_fields(fix), diff_body(text))


def stale_patches(pack: Pack) -> list[Path]:
    """Patch files whose bytes differ from their deterministic form."""
    out = []
    for fix in pack.fixes.values():
        for p in _all_patches(fix):
            if p.path.read_bytes().decode("utf-8", "surrogateescape") != normalized(fix, p.path):
                out.append(p.path)
    return out


def _all_patches(fix: Fix) -> list[PatchFile]:
    return list(fix.patches) + [p for v in fix.variants for p in v.patches]


def rewrite_patches(pack: Pack) -> list[Path]:
    """Rewrite every stale patch in place; returns the files rewritten."""
    changed = stale_patches(pack)
    for path in changed:
        fix = next(f for f in pack.fixes.values() if any(p.path == path for p in _all_patches(f)))
        path.write_bytes(normalized(fix, path).encode("utf-8", "surrogateescape"))
    return changed


def diff_trees(before: dict[str, str | None], after: dict[str, str | None]) -> str:
    """A git diff (a/ b/ prefixes, 3 lines of context, renames found) from file contents before and after.

    Paths are relative to a target root; None means the file does not exist on that side.
    """
    import tempfile

    from .gitutil import commit_all, init_repo, run

    with tempfile.TemporaryDirectory(prefix="fixpack-diff-") as tmp:
        repo = Path(tmp)
        init_repo(repo)
        _write_side(repo, before)
        commit_all(repo, "pre-image")
        _write_side(repo, after)
        run(repo, "add", "--all")
        return run(repo, "diff", "--cached", "-M", "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/")


def _write_side(repo: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        dest = repo / path
        if text is None:
            dest.unlink(missing_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(text.encode("utf-8", "surrogateescape"))


def refresh(pack_root: Path, profile_name: str, fix_id: str, root: Path, target: str = "vllm") -> Path:
    """Regenerate one fix's (single) patch against the profile's chain on a clean release copy, like
    ``quilt refresh``: the fixes before it in the series are applied in memory, then this fix (exact
    or with an offset), and the patch is rewritten from the result. Returns the patch path.

    Raises ConflictError when the fix does not apply to its chain.
    """
    from .errors import BadInputError, ConflictError
    from .evaluate import State, decide
    from .loader import load_pack, load_profile
    from .tree import Tree

    pack = load_pack(pack_root)
    profile = load_profile(pack, profile_name)
    pack = pack.for_profile(profile.name)
    fix = pack.fixes.get(fix_id)
    if fix is None or len(fix.patches) != 1:
        raise BadInputError(f"{fix_id}: refresh needs a fix of the pack with exactly one patch")
    tree = Tree(root)
    for other in pack.ordered(profile.default + profile.opt_in):
        if other.target != fix.target:
            continue
        ev = decide(other, tree, None, False)
        if other.id == fix_id:
            if ev.state not in (State.ABSENT, State.DRIFTED):
                raise ConflictError(f"{fix_id} is {ev.state.value} on its chain: {'; '.join(ev.messages)}")
            paths = fix.touched_paths()
            before = {p: tree.read(p) for p in paths}
            after = {p: ev.forward.tree.read(p) for p in paths}
            path = fix.patches[0].path
            text = path.read_bytes().decode("utf-8", "surrogateescape")
            new = normalize_text(fix, text[: text.find("diff --git ")] + diff_trees(before, after), str(path))
            path.write_bytes(new.encode("utf-8", "surrogateescape"))
            return path
        if ev.state in (State.ABSENT, State.DRIFTED):
            tree.adopt(ev.forward.tree)
    raise BadInputError(f"{fix_id} is not in profile {profile_name}")
