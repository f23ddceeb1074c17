"""A Debian quilt patch's DEP-3 header (https://dep-team.pages.debian.net/deps/dep3/), read as the message git would
hold: ``Description:`` (or its other name ``Subject:``) gives the subject (its first line) and the description (its
other lines, one space less, `` .`` an empty line), then the free text below the header; ``Author:`` (or ``From:``)
the author, another one a ``Co-authored-by:`` trailer; ``Date:`` (a mail's; DEP-3 says ``Last-Update``) the date;
every other field a trailer, in order (a mail's transport headers, ``To:``, ``Cc:``, ``Message-Id:`` ..., dropped as
git am drops them), then the free text's own trailer block. DEP-3's ``Origin``, ``Bug``, ``Forwarded``,
``Last-Update`` ... are then read from the trailers as a mail's (:mod:`fixpack.mail_upstream`).

A header it cannot read so is refused at its line (BadInputError, exit 2), never read in part: a line that is neither
a field nor a continuation of one, the description stated twice, or with an empty first line, a description line
``---`` (git am would end the message there), an author that is not one ``Name <address>``.
"""

from __future__ import annotations

import re

from .errors import BadInputError
from .mailtext import (
    PATCH_TAG,
    author,
    cut_diffstat,
    decoded_words,
    first_unsafe,
    holding,
    message_parts,
    refuse_bad_date,
    refuse_unsafe,
)
from .trailers import is_patch_break

# DEP-3's own fields (Bug-<Vendor> too), which no mail's header has
KEYS = {"description", "author", "origin", "bug", "forwarded", "applied-upstream", "last-update", "reviewed-by",
        "acked-by", "upstream-status"}
# a mail's transport headers, which git am drops: none is a field of the patch
_TRANSPORT = re.compile(r"(to|cc|bcc|message-id|in-reply-to|references|mime-version|content-.*|user-agent|list-.*|"
                        r"reply-to|sender|received|return-path)", re.I)
_FIELD = re.compile(r"^[A-Za-z0-9-]+:")
_OWN = ("description", "subject", "author", "from", "date")
Message = tuple[str, str, str, str, tuple[tuple[str, str], ...], tuple[str, ...], str]


def header_end(lines: list[str]) -> int:
    """The index of the line that ends a header: its first empty line (a CR alone too; a line of spaces is a
    continuation), or, as DEP-3 ends one, a line that starts with ``---``; else ``len(lines)``."""
    return next((i for i, ln in enumerate(lines) if ln in ("", "\r") or ln.startswith("---")), len(lines))


def fields(lines: list[str], first: int = 0) -> list[tuple[int, str, str]]:
    """A header's fields (``lines``, up to its first empty line) as (line, key, value): a value folded over lines
    (each after the first starts with a space or a TAB) joined by newlines, each continuation less its first
    character, a CR at a line's end dropped; ``line``: 0-based, counted from ``first``. A line that is neither is
    skipped (:func:`read` refuses it)."""
    out: list[tuple[int, str, list[str]]] = []  # (each value's lines, joined once: a long fold stays linear)
    for i, ln in enumerate(lines[:header_end(lines)]):
        ln = ln.removesuffix("\r")
        if ln[:1] in (" ", "\t") and out:
            out[-1][2].append(ln[1:])
        elif _FIELD.match(ln):
            k, _c, v = ln.partition(":")
            out.append((first + i, k, [v.strip()]))
    return [(n, k, "\n".join(v)) for n, k, v in out]


def _own(key: str) -> bool:
    """``key`` is a field of DEP-3's own (Bug-<Vendor> too), which no mail's header has."""
    return key.lower() in KEYS or key.lower().startswith("bug-")


def is_dep3(found: list[tuple[int, str, str]], mailed: bool) -> bool:
    """The header whose :func:`fields` are ``found`` is a DEP-3 one, not a mail's: it has a ``Description:`` or an
    ``Author:``, or, where it is no mail's (``mailed``: an mbox ``From`` line above it, as git format-patch writes
    one), any field of DEP-3's own."""
    return any(k.lower() in ("description", "author") or not mailed and _own(k) for _n, k, _v in found)


def in_header(found: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    """The fields of DEP-3's own among a mail's header's :func:`fields` (``found``; ``git format-patch --add-header``),
    as trailers: a field git am would drop, which the fix's ``[upstream]`` is made of."""
    return [(k, " ".join(v.split())) for _n, k, v in found if _own(k)]


def at(where: str, offset: int) -> str:
    """``where`` (``FILE:LINE``, the line of the header's first line) moved ``offset`` lines on; else as it is."""
    m = re.fullmatch(r"(.*):(\d+)", where)
    return f"{m.group(1)}:{int(m.group(2)) + offset}" if m else where


def read(lines: list[str], found: list[tuple[int, str, str]], where: str, first: int = 0) -> Message:
    """The message of a patch with a DEP-3 header (``lines``: the patch's part before its diff, ``lines[0]`` at
    ``first`` lines after ``where``'s; ``found``: its :func:`fields`): (author, date, subject, description, trailers,
    each trailer as written, the comment lines after them), as the module says. BadInputError at the header's line
    for what it cannot read."""
    lines = [ln.removesuffix("\r") for ln in lines]
    end = header_end(lines)
    stray = next((i for i in range(end) if not (_FIELD.match(lines[i]) or i and lines[i][:1] in (" ", "\t"))), None)
    if stray is not None:
        _refuse(where, first + stray, f"{lines[stray][:60]!r} is neither a field (Key: value) nor a line of the one "
                                      f"above (which starts with a space)", "put an empty line between the header and "
                                      "free text, or start the line with a space")
    told = [(n, k, v) for n, k, v in found if k.lower() in ("description", "subject")]
    if not told:
        _refuse(where, first, "the DEP-3 header has no Description: (the patch's subject)", "write one")
    if len(told) > 1:
        _refuse(where, first + told[1][0], f"a second {told[1][1]}: (DEP-3's Subject: is Description: by another "
                                           f"name)", "state the description once")
    n, key, value = told[0]
    # (a Subject: folded over lines is one line, as a mail's; Description: holds the long description below)
    title, _nl, long = value.partition("\n") if key.lower() == "description" else (" ".join(value.split()), "", "")
    tagged, title = title.strip(), PATCH_TAG.sub("", decoded_words(title)).strip()
    c = first_unsafe(title)
    if c:  # (at the line that holds it: a Subject: is folded over lines)
        i, encoded = holding(c, lines, n)
        refuse_unsafe(title, at(where, first + i), f"its {key}:", encoded)
    title = " ".join(title.split())  # (as a mail's Subject: is read, and format writes it: a tab, two spaces ...)
    if not title:
        but = " but for a [PATCH] tag" if tagged else ""
        _refuse(where, first + n, f"its {key}: line is empty{but}, where DEP-3 puts the short description (the lines "
                                  f"below it are the long one)", f"write the short description on the {key}: line")
    said = ["" if ln.strip() in (".", "") else ln for ln in long.split("\n")] if long else []
    cut = next((j for j, ln in enumerate(said) if is_patch_break(ln)), None)
    if cut is not None:
        _refuse(where, first + n + 1 + cut, f"a description line {said[cut]!r}, where git am ends a patch's message",
                "write the line otherwise")
    # (each author read from its own line: Name <address>, decoded; the first the patch's, the others co-authors)
    names = [author([f"{k}: {' '.join(v.split())}"], at(where, first + i), k.lower())
             for i, k, v in found if k.lower() in ("author", "from")]
    trailers = [("Co-authored-by", name) for name in names[1:]]
    trailers += [(k, " ".join(v.split())) for _i, k, v in found if not (k.lower() in _OWN or _TRANSPORT.fullmatch(k))]
    line, date = next(((i, " ".join(v.split())) for i, k, v in found if k.lower() == "date"), (0, ""))
    refuse_bad_date(date, at(where, first + line), " (DEP-3's date is Last-Update: YYYY-MM-DD)")
    # (after a '---' line, as after a mail's, come notes git am drops: no part of the message)
    rest = lines[end + 1:] if end < len(lines) and not lines[end].startswith("---") else []
    free, more, written, after = message_parts(cut_diffstat("\n".join(rest)))
    description = "\n\n".join(p for p in ("\n".join(said).strip("\n"), free) if p.strip())
    return (names[0] if names else "", date, title, description, tuple(trailers) + more,
            tuple(f"{k}: {v}" if v else f"{k}:" for k, v in trailers) + written, after)


def _refuse(where: str, offset: int, what: str, do: str) -> None:
    raise BadInputError(f"{at(where, offset)}: {what}: {do}, and import again; nothing was written")
