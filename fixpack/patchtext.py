"""Patch text: the header fields a fix's patches carry, their deterministic form, the patch files of a
fix regenerated from new diff bodies, and interdiffs between two versions of a fix.

A patch's header is derived from its fix: the subject and description stay as written in the patch,
the DEP-3 / Yocto fields (``Upstream-Status``, ``Forwarded``, ``Fix-Id``) come from ``fix.toml``.
The diff part loses churn (``index`` lines, the ``-- `` version signature).
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path

from .diff import diff_body, format_patch, parse_patch, sha256_bytes
from .model import Fix, PatchFile
from .tree import decode


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


def patch_bytes(fix: Fix) -> dict[str, bytes]:
    return {p.path.name: p.path.read_bytes() for p in fix.patches}


def write_patches(fix: Fix, bodies: list[str]) -> dict[str, bytes]:
    """Each patch file's deterministic text: its own subject and description, fields from fix.toml."""
    out = {}
    for pf, body in zip(fix.patches, bodies):
        header = parse_patch(pf.path.read_bytes(), str(pf.path)).header
        text = format_patch(header.subject or fix.summary, header.description, header_fields(fix), body)
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
    """The change itself: every file's removed and added lines, without context, line numbers or paths."""
    out: list[str] = []
    in_hunk = False
    for line in decode(data).splitlines():
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
