"""Patch text: the header fields a fix's patches carry, their deterministic form, the patch files of a
fix regenerated from new diff bodies, and interdiffs between two versions of a fix.

A patch's mail part is the author's (:mod:`fixpack.patchmail`: author, date, subject, description and
every trailer the tool does not own are kept); the DEP-3 / Yocto fields the tool owns come from
``fix.toml`` (:func:`header_fields`). The diff part loses churn (``index`` lines, the ``-- `` version
signature).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Container
from functools import partial
from pathlib import Path

from .diff import diff_body, parse_patch
from .errors import BadInputError, Problem
from .model import Fix, PatchFile, Upstream
from .patchfiles import patch_again
from .patchmail import Mail, read_mail, render, trailer_lines
from .patchmodel import sha256_bytes
from .structs import replace
from .tree import decode


def upstream_status(fix: Fix | Upstream) -> str:
    """Yocto's ``Upstream-Status`` for the fix (or its ``[upstream]``): ``Pending``, ``Submitted [link]``, ``Accepted
    [link]``, ``Backport [fixed_in or link]``, ``Denied [reason or link]``, ``Inappropriate [reason]``."""
    up = fix if isinstance(fix, Upstream) else fix.upstream
    note = {"submitted": up.link, "accepted": up.link, "backport": up.fixed_in or up.link,
            "denied": up.reason or up.link, "inappropriate": up.reason}.get(up.status, "")
    return up.status.capitalize() + (f" [{note}]" if note else "")


def header_fields(fix: Fix) -> list[tuple[str, str]]:
    """The DEP-3 / Yocto fields the tool owns (:data:`fixpack.patchmail.OWNED`), from ``fix.toml``'s
    ``[upstream]``: :func:`owned_fields`."""
    return owned_fields(fix.upstream, fix.id)


def owned_fields(up: Upstream, fix_id: str) -> list[tuple[str, str]]:
    """The fields the tool writes for ``[upstream]`` ``up`` of fix ``fix_id``, in this order: Upstream-Status,
    Forwarded (the link once submitted, ``yes`` without one; ``not-needed`` for a backport or an inappropriate
    change; else ``no``), Origin, Bug, Applied-Upstream (``fixed_in``, with the link once accepted), Last-Update,
    Fix-Id. Each value trimmed of spaces and tabs at its ends, as git reads a trailer's; empty fields (a ``fix_id``
    of "" too) are left out."""
    if up.status in ("backport", "inappropriate"):
        forwarded = "not-needed"
    else:  # (DEP-3: any value but no and not-needed says it was forwarded)
        forwarded = (up.link or "yes") if up.status in ("submitted", "accepted", "denied") else "no"
    applied = up.fixed_in + (f", {up.link}" if up.fixed_in and up.link and up.status in ("accepted", "backport")
                             else "")
    fields = [("Upstream-Status", upstream_status(up)), ("Forwarded", forwarded), ("Origin", up.origin),
              ("Bug", up.bug), ("Applied-Upstream", applied), ("Last-Update", up.last_update), ("Fix-Id", fix_id)]
    return [(k, v.strip(" \t")) for k, v in fields if v.strip(" \t")]  # (as git reads a trailer: trimmed)


def patch_mail(fix: Fix, text: str, where: str = "the patch") -> Mail:
    """A patch's message, its subject defaulting to the fix's summary; ``where``: the patch file, for its errors."""
    mail = read_mail(text, where)
    return mail if mail.subject else replace(mail, subject=fix.summary)


def foreign_fix_ids(fix_id: str, text: str, where: str = "the patch", mail: Mail | None = None
                    ) -> list[tuple[int | None, str]]:
    """The ``Fix-Id:`` trailers of a patch of fix ``fix_id`` (its ``text``; ``where``: the file, for its errors;
    ``mail``: its message as read already, else read here) that name another id, each id once: (its line, None where
    it cannot be told; the id). A patch without the trailer has none (``format`` writes it)."""
    found: dict[str, int | None] = {}
    for line, said in trailer_lines(text, "fix-id", where, mail):
        if said != fix_id:
            found.setdefault(said, line)
    return [(line, said) for said, line in found.items()]


def swapped_ids(fix_id: str, text: str, where: str, known: Container[str], mail: Mail | None = None
                ) -> list[tuple[int | None, str]]:
    """:func:`foreign_fix_ids` that name a fix of the pack (``known``): a patch swapped with, or copied from, that
    fix's. ``format`` refuses them, as do the commands that rewrite a patch (:func:`rewritten_fields`); a Fix-Id that
    names no fix of the pack (a fix renamed) is rewritten from fix.toml."""
    return [(line, other) for line, other in foreign_fix_ids(fix_id, text, where, mail) if other in known]


def swapped_problems(fix_id: str, variant: str | None, path: Path, raw: bytes, known: Container[str]) -> list[Problem]:
    """A patch (``path``, its bytes ``raw``) of fix ``fix_id`` (of its variant for profile ``variant``, if one) whose
    Fix-Id trailer names another fix of the pack (``known``: :func:`swapped_ids`), each at the trailer's line with both
    ids and what to do: the rule and words of ``format`` (:func:`swapped_refusal`) and ``rebase``, which refuse it
    before they write anything."""
    return [Problem(fix_id_said(fix_id, variant, other, True), path, line, fix_id_hint(fix_id, True))
            for line, other in swapped_ids(fix_id, raw.decode("utf-8", "surrogateescape"), str(path), known)]


def swapped_refusal(problems: list[Problem], writer: str, nothing: str) -> BadInputError:
    """The refusal of :func:`swapped_problems`' ``problems`` by the command that would write those patches'
    Fix-Id from fix.toml (``writer``: what it writes), saying ``nothing`` (what it did not do)."""
    return BadInputError(f"{len(problems)} Fix-Id trailer(s) name another fix of the pack than the one that lists "
                         f"the patch: {writer} from the fix that lists it, which would hide two fixes' patches "
                         f"swapped; {nothing}", problems)


def fix_id_said(fix_id: str, variant: str | None, other: str, known: bool, listed: str = "") -> str:
    """Words for a patch of fix ``fix_id`` (of its variant for profile ``variant``, if one) whose Fix-Id trailer says
    ``other`` (``known``: the id of a fix of the pack); ``listed``: how the text came to be the fix's, for one that is
    no patch file of it yet (a commit of its edit, a mail imported as it)."""
    theirs = f" (the id of fix {other}, fixes/{other}/)" if known else ""
    if not listed:
        where = f"fixes/{fix_id}/fix.toml's patches" if variant is None else \
            f"its variant for profile {variant}, fixes/{fix_id}/{variant}/"
        listed = f"the patch is listed under fix {fix_id!r} ({where})"
    said = f"says {other!r}" if other else "is empty"
    return f"its Fix-Id trailer {said}{theirs}, but {listed}"


def fix_id_hint(fix_id: str, known: bool, fmt: str = "") -> str:
    """What to do about a patch of fix ``fix_id`` whose Fix-Id trailer names another id (``known``: a fix of the pack;
    ``fmt``: the format command, where the hint names it)."""
    if known:
        return (f"were two fixes' patches swapped? put each back in its own fix's folder and lock again; if this patch "
                f"is {fix_id}'s after all, write its trailer as Fix-Id: {fix_id}"
                + (f" (`{fmt}` rewrites no Fix-Id that names another fix of the pack)" if fmt else ""))
    return (f"a fix renamed, or the id left out? `{fmt or 'fixpack format'}` writes its Fix-Id from fix.toml; else put "
            f"the patch back in the folder of the fix it belongs to and lock again")


def rewritten_fields(fix: Fix, mail: Mail, text: str, where: str, known: Container[str], *, first: int = 1,
                     variant: str | None = None, listed: str = "", hint: Callable[[str], str] | None = None
                     ) -> list[tuple[str, str]]:
    """:func:`header_fields` for a patch of ``fix`` that ``edit``, ``refresh``, ``import`` or ``rebase`` writes again:
    the one place they build a patch's new header. ``mail``: the message it is written from, read from ``text`` (a
    patch file of ``fix``, of its variant for profile ``variant``; a commit's message; a mail), named ``where``, whose
    line ``first`` is ``text``'s first. BadInputError (exit 2), before anything is written, where its Fix-Id trailer
    names another fix of the pack (``known``), as ``format`` refuses it (:func:`swapped_ids`): fix.toml's id written
    over it would hide a patch swapped with, or copied from, that fix. ``listed`` and ``hint``: how a text that is no
    patch file of the fix came to be its (:func:`fix_id_said`), and what to do then (given the other fix's id)."""
    for line, other in swapped_ids(fix.id, text, where, known, mail)[:1]:
        at = f"{where}:{first + line - 1}" if line else where
        todo = hint(other) if hint else fix_id_hint(fix.id, True)
        raise BadInputError(f"{at}: {fix_id_said(fix.id, variant, other, True, listed)}; writing it again would put "
                            f"fix.toml's Fix-Id: {fix.id} over the trailer and hide a patch swapped with, or copied "
                            f"from, fix {other}; nothing was written ({todo})")
    return header_fields(fix)


def variant_of(fix: Fix, pf: PatchFile) -> str | None:
    """The profile whose variant of ``fix`` holds the patch file ``pf`` (its folder); None for the fix's own."""
    return None if pf.path.parent == fix.folder else pf.path.parent.name


def normalized(fix: Fix, pf: PatchFile, raw: bytes | None = None) -> str:
    """The deterministic text of one of ``fix``'s patch files (``raw``: its bytes, else read again as the load
    read them: :func:`fixpack.patchfiles.patch_again`)."""
    raw = patch_again(pf) if raw is None else raw
    return normalize_text(fix, raw.decode("utf-8", "surrogateescape"), str(pf.path))


def normalize_text(fix: Fix, text: str, source: str = "<patch>") -> str:
    """``text`` (a patch of ``fix``; ``source``: its file) in the pack's deterministic form. BadInputError (exit 2)
    for a message whose trailers, written so, would not read back as those it writes (:func:`fixpack.patchmail.render`),
    named at its trailer block's first trailer."""
    parse_patch(text.encode("utf-8", "surrogateescape"), source)  # refuses a malformed patch, naming the line
    mail = patch_mail(fix, text, source)
    return render(mail, header_fields(fix), diff_body(text), partial(block_at, text, mail, source))


def block_at(text: str, mail: Mail, source: str) -> str:
    """``source`` with the line of the first trailer of ``text``'s trailer block (``mail``: as read from it), as a
    refusal names a place: ``FILE:LINE``, or ``FILE`` where it has none."""
    first = next((k for k, _v in mail.trailers if k), "")
    line = next((n for n, _v in trailer_lines(text, first.lower(), source, mail)), None) if first else None
    return f"{source}:{line}" if line else source


def patch_bytes(fix: Fix) -> dict[str, bytes]:
    """Each patch file of ``fix`` by name, the bytes the pack's load read (read again: :func:`patch_again`)."""
    return {p.path.name: patch_again(p) for p in fix.patches}


def write_patches(fix: Fix, bodies: list[str], known: Container[str]) -> dict[str, bytes]:
    """Each patch file's deterministic text: its own message (author, date, subject, description, kept
    trailers), fields from fix.toml, the new diff ``body``. BadInputError, before anything is written, for a patch
    whose Fix-Id trailer names another fix of the pack (``known``: :func:`rewritten_fields`)."""
    out = {}
    for pf, body in zip(fix.patches, bodies):
        was = decode(patch_again(pf))
        mail = patch_mail(fix, was, str(pf.path))
        fields = rewritten_fields(fix, mail, was, str(pf.path), known, variant=variant_of(fix, pf))
        text = render(mail, fields, body, partial(block_at, was, mail, str(pf.path)))
        out[pf.path.name] = normalize_text(fix, text, str(pf.path)).encode("utf-8", "surrogateescape")
    return out


def as_fix(fix: Fix, patches: dict[str, bytes]) -> Fix:
    pfs = []
    for pf in fix.patches:
        data = patches[pf.path.name]
        parsed = parse_patch(data, f"regenerated {pf.path.name}")
        pfs.append(PatchFile(pf.path, sha256_bytes(data), parsed.files))
    return replace(fix, patches=tuple(pfs))


def change_lines(data: bytes) -> list[str]:
    """The change itself: every file's removed and added lines, without context, line numbers or paths. Split
    on LF only: a CR (a CRLF file's line end) is part of its line, so a change of line ends is a change."""
    out: list[str] = []
    in_hunk = False
    for line in decode(data).split("\n"):
        if line.startswith("diff --git "):
            in_hunk = False
            out.append("diff")
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line[:1] in ("+", "-", "\\"):
            out.append(line)
    return out


def interdiff(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """A unified diff of the old and new patch files' diff parts (headers dropped)."""
    parts: list[str] = []
    for name in old:
        a = diff_body(decode(old[name])).splitlines(keepends=True)
        b = diff_body(decode(new.get(name, b""))).splitlines(keepends=True)
        parts += difflib.unified_diff(a, b, f"old/{name}", f"new/{name}", n=2)
    return "".join(line if line.endswith("\n") else line + "\n" for line in parts)
