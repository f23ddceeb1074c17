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
from .mailtext import PATCH_TAG, author, cut_diffstat, decoded_words, message_parts, raw_field
from .trailers import is_patch_break

# DEP-3's own fields (Bug-<Vendor> too), which no mail's header has
KEYS = {"description", "author", "origin", "bug", "forwarded", "applied-upstream", "last-update", "reviewed-by",
        "acked-by", "upstream-status"}
# a mail's transport headers, which git am drops: none is a field of the patch
_TRANSPORT = re.compile(r"(to|cc|bcc|message-id|in-reply-to|references|mime-version|content-.*|x-.*|user-agent|"
                        r"list-.*|reply-to|sender|received|return-path)", re.I)
_FIELD = re.compile(r"^[A-Za-z0-9-]+:")
_OWN = ("description", "subject", "author", "from", "date")
Message = tuple[str, str, str, str, tuple[tuple[str, str], ...], tuple[str, ...], str]


def header_end(lines: list[str]) -> int:
    """The index of a header's first empty line (a line of white space, a CR, too), or ``len(lines)``."""
    return next((i for i, ln in enumerate(lines) if not ln.strip()), len(lines))


def fields(lines: list[str], first: int = 0) -> list[tuple[int, str, str]]:
    """A header's fields (``lines``, up to its first empty line) as (line, key, value): a value folded over lines
    (each after the first starts with a space or a TAB) joined by newlines, each continuation less its first
    character, a CR at a line's end dropped; ``line``: 0-based, counted from ``first``. A line that is neither is
    skipped (:func:`read` refuses it)."""
    out: list[tuple[int, str, str]] = []
    for i, ln in enumerate(lines[:header_end(lines)]):
        ln = ln.removesuffix("\r")
        if ln[:1] in (" ", "\t") and out:
            n, k, v = out[-1]
            out[-1] = (n, k, f"{v}\n{ln[1:]}")
        elif _FIELD.match(ln):
            k, _c, v = ln.partition(":")
            out.append((first + i, k, v.strip()))
    return out


def is_dep3(lines: list[str], mailed: bool) -> bool:
    """The header (``lines``) is a DEP-3 one, not a mail's: it has a ``Description:``, or, where it is no mail's
    (``mailed``: an mbox ``From`` line above it, or a ``Date:``), any field of DEP-3's own."""
    keys = {k.lower() for _n, k, _v in fields(lines)}
    return "description" in keys or (not mailed and any(k in KEYS or k.startswith("bug-") for k in keys))


def in_header(lines: list[str]) -> list[tuple[str, str]]:
    """The fields of DEP-3's own in a mail's header (``lines``; ``git format-patch --add-header``), as trailers: a
    field git am would drop, which the fix's ``[upstream]`` is made of."""
    return [(k, " ".join(v.split())) for _n, k, v in fields(lines) if k.lower() in KEYS or k.lower().startswith("bug-")]


def at(where: str, offset: int) -> str:
    """``where`` (``FILE:LINE``, the line of the header's first line) moved ``offset`` lines on; else as it is."""
    m = re.fullmatch(r"(.*):(\d+)", where)
    return f"{m.group(1)}:{int(m.group(2)) + offset}" if m else where


def read(lines: list[str], where: str, first: int = 0) -> Message:
    """The message of a patch with a DEP-3 header (``lines``: the patch's part before its diff, ``lines[0]`` at
    ``first`` lines after ``where``'s): (author, date, subject, description, trailers, each trailer as written, the
    comment lines after them), as the module says. BadInputError at the header's line for what it cannot read."""
    lines = [ln.removesuffix("\r") for ln in lines]
    end = header_end(lines)
    stray = next((i for i in range(end) if not (_FIELD.match(lines[i]) or i and lines[i][:1] in (" ", "\t"))), None)
    if stray is not None:
        _refuse(where, first + stray, f"{lines[stray][:60]!r} is neither a field (Key: value) nor a line of the one "
                                      f"above (which starts with a space)", "put an empty line between the header and "
                                      "free text, or start the line with a space")
    found = fields(lines)
    told = [(n, k, v) for n, k, v in found if k.lower() in ("description", "subject")]
    if not told:
        _refuse(where, first, "the DEP-3 header has no Description: (the patch's subject)", "write one")
    if len(told) > 1:
        _refuse(where, first + told[1][0], f"a second {told[1][1]}: (DEP-3's Subject: is Description: by another "
                                           f"name)", "state the description once")
    n, key, value = told[0]
    title, _nl, long = value.partition("\n")
    if not title.strip():
        _refuse(where, first + n, f"its {key}: line is empty, where DEP-3 puts the short description (the lines "
                                  f"below it are the long one)", f"write the short description on the {key}: line")
    said = ["" if ln.strip() == "." else ln for ln in long.split("\n")] if long else []
    cut = next((j for j, ln in enumerate(said) if is_patch_break(ln)), None)
    if cut is not None:
        _refuse(where, first + n + 1 + cut, f"a description line {said[cut]!r}, where git am ends a patch's message",
                "write the line otherwise")
    authors = [i for i, k, _v in found if k.lower() in ("author", "from")]
    who = author(lines[authors[0]:], at(where, first + authors[0]), lines[authors[0]].partition(":")[0].lower()) \
        if authors else ""
    for i in authors[1:]:
        author(lines[i:], at(where, first + i), lines[i].partition(":")[0].lower())  # (each one Name <address>)
    trailers = [("Co-authored-by", " ".join(v.split())) for i, _k, v in found if i in authors[1:]]
    trailers += [(k, " ".join(v.split())) for _i, k, v in found if not (k.lower() in _OWN or _TRANSPORT.fullmatch(k))]
    free, more, written, after = message_parts(cut_diffstat("\n".join(lines[end + 1:])))
    description = "\n\n".join(p for p in ("\n".join(said).strip("\n"), free) if p.strip())
    return (who, raw_field(lines, "date"), PATCH_TAG.sub("", decoded_words(title)).strip(), description,
            tuple(trailers) + more, tuple(f"{k}: {v}" for k, v in trailers) + written, after)


def _refuse(where: str, offset: int, what: str, do: str) -> None:
    raise BadInputError(f"{at(where, offset)}: {what}: {do}, and import again; nothing was written")
