"""A new fix's ``[upstream]`` table from the mails ``fixpack import`` reads.

The mails' own DEP-3 / Yocto fields come first, as a patch that went through another distribution's series
carries them (``Upstream-Status: Backport [0.31.0]``, ``Origin: upstream, https://.../commit/<sha>``,
``Bug: <url>``, ``Forwarded: <url>``, ``Applied-Upstream: 0.31.0, <url>``, ``Last-Update: YYYY-MM-DD``): the
trailer block's, as git reads it; where several mails state one field, the first mail's value counts. What they
leave unsaid comes from the mails' text: a pull request's link makes the fix ``submitted``, a commit's gives
``Origin: upstream, <link>`` (a commit's link before a pull request's for a fix upstream has: accepted,
backport), an issue's (or a ``Bug:``, ``Closes:``, ``Fixes:``, ``Resolves:`` trailer's URL) the bug, the last
mail's ``Date:`` the ``last_update``.

The tool writes these fields from ``fix.toml`` (:func:`fixpack.patchtext.header_fields`), so a value that
fix.toml would not take (a ``Last-Update`` that is no date, an ``Upstream-Status`` word DEP-3 does not have)
is refused here, at its line of the mail file, rather than dropped.
"""

from __future__ import annotations

import re
from email.utils import parsedate_to_datetime

from .errors import BadInputError
from .model import UPSTREAM_STATUSES, Upstream
from .patchmail import Mail, trailer_lines
from .upstream_fields import upstream_problems

_PULL = re.compile(r"https?://[^\s>]+/pull/\d+")
_COMMIT = re.compile(r"https?://[^\s>]+/commit/[0-9a-f]{7,40}")
_ISSUE = re.compile(r"https?://[^\s>]+/issues/\d+")
_URL = re.compile(r"https?://[^\s>\]]+")
BUG_TRAILERS = ("bug", "closes", "fixes", "resolves")
# the DEP-3 fields a mail may state, as fix.toml's [upstream] keys take them
STATED = ("upstream-status", "origin", "bug", "forwarded", "applied-upstream", "last-update")
_STATUS = re.compile(r"([A-Za-z]+)(.*)", re.S)


def upstream_from(found: list[Mail], texts: list[str] | None = None, where: list[str] | None = None) -> Upstream:
    """``[upstream]`` for a fix made of the mails ``found`` (see the module's words); ``texts``: each mail's text and
    ``where``: its place, ``FILE:LINE`` of its first line, so that a refused field is named at its own line.
    Raises BadInputError (exit 2) for a stated field fix.toml would not take."""
    said = _stated(found, texts, where)
    status, note = "", ""
    if "upstream-status" in said:
        value, at = said["upstream-status"]
        m = _STATUS.fullmatch(value)
        status, note = (m.group(1).lower(), m.group(2).strip(" \t,:[]")) if m else ("", "")
        if status not in UPSTREAM_STATUSES or (m and m.group(2)[:1] not in ("", " ", "\t", "[", ",", ":")):
            words = ", ".join(s.capitalize() for s in UPSTREAM_STATUSES)
            raise BadInputError(f"{at}: Upstream-Status: {value}: not one of DEP-3's words ({words}; a link, a release "
                                f"or a reason in brackets after it): write one, or take the line out, and import "
                                f"again; nothing was written")
    text = "\n".join(m.description + "\n" + "\n".join(f"{k}: {v}" if k else v for k, v in m.trailers) for m in found)
    pull, commit = _PULL.search(text), _COMMIT.search(text)
    first = (commit or pull) if status in ("accepted", "backport") else (pull or commit)  # (where upstream has it)
    derived = first.group(0) if first else ""
    forwarded = said.get("forwarded", ("", ""))[0]
    forwarded = forwarded if _URL.fullmatch(forwarded) else ""
    applied = said.get("applied-upstream", ("", ""))[0]
    fixed_in, _comma, applied_link = (part.strip() for part in applied.partition(","))
    if _URL.fullmatch(fixed_in) and not applied_link:  # (a link alone: where upstream took it)
        fixed_in, applied_link = "", fixed_in
    applied_link = applied_link if _URL.fullmatch(applied_link) else ""
    link, reason = "", ""
    if status in ("submitted", "accepted", "denied") and _URL.fullmatch(note):
        link = note
    elif status == "backport" and _URL.fullmatch(note):
        link = note
    elif status == "backport" and note and not fixed_in:
        fixed_in = note
    elif status in ("denied", "inappropriate"):
        reason = note
    link = link or forwarded or applied_link or derived
    status = status or ("submitted" if pull else "pending")
    origin = said.get("origin", ("", ""))[0] or (f"upstream, {derived}" if derived else "")
    bug = said.get("bug", ("", ""))[0] or _bug(found, text)
    last = said.get("last-update", ("", ""))[0] or _last_date(found)
    up = Upstream(status, link, fixed_in, reason, origin, bug, last)
    _refuse_unreadable(up, said)
    return up


def _stated(found: list[Mail], texts: list[str] | None, where: list[str] | None) -> dict[str, tuple[str, str]]:
    """Each DEP-3 field the mails state: (its value, trimmed; its place, ``FILE:LINE`` where it can be told)."""
    out: dict[str, tuple[str, str]] = {}
    for i, mail in enumerate(found):
        place = where[i] if where else f"the mail {mail.subject!r}"
        for key in STATED:
            if key in out:
                continue
            values = [v.strip() for k, v in mail.trailers if k.lower() == key and v.strip()]
            if not values:
                continue
            lines = trailer_lines(texts[i], key, place, mail) if texts else []
            line = next((n for n, v in lines if v.strip() == values[0]), None)
            file, _sep, first = place.rpartition(":")
            at = f"{file}:{int(first) + line - 1}" if line and file and first.isdigit() else place
            out[key] = (values[0], at)
    return out


def _bug(found: list[Mail], text: str) -> str:
    bug = next((_URL.search(v) for m in found for k, v in m.trailers if k.lower() in BUG_TRAILERS and _URL.search(v)),
               None) or _ISSUE.search(text)
    return bug.group(0) if bug else ""


def _last_date(found: list[Mail]) -> str:
    """The last mail's ``Date:`` as YYYY-MM-DD; "" when none is one (``0000`` was read as 2000)."""
    dates = [m.date for m in found if m.date]
    if not dates:
        return ""
    try:
        when = parsedate_to_datetime(dates[-1])
    except (TypeError, ValueError):
        return ""
    return when.date().isoformat() if str(when.year) in dates[-1] else ""


_KEYS = {"fixed_in": ("applied-upstream", "upstream-status"), "last_update": ("last-update",),
         "link": ("upstream-status", "forwarded", "applied-upstream")}


def _refuse_unreadable(up: Upstream, said: dict[str, tuple[str, str]]) -> None:
    """A stated field whose value fix.toml would not take (:func:`fixpack.upstream_fields.upstream_problems`),
    named at its line: BadInputError."""
    for key, problem in upstream_problems({"fixed_in": up.fixed_in, "last_update": up.last_update, "link": up.link}):
        field = next((f for f in _KEYS[key] if f in said), None)
        if field is None:  # (the mails' text gave it: a link the patterns found is a URL, a Date: a date)
            continue
        value, at = said[field]
        name = "-".join(w.capitalize() for w in field.split("-"))
        raise BadInputError(f"{at}: {name}: {value}: the fix's {key} would be {getattr(up, key)!r}, {problem}; "
                            f"write it so (or take the line out) and import again; nothing was written")
