"""A new fix's ``[upstream]`` table from the mails ``fixpack import`` reads.

The mails' own DEP-3 / Yocto fields come first, as a patch that went through another distribution's series
carries them (``Upstream-Status: Backport [0.31.0]``, ``Origin: upstream, https://.../commit/<sha>``,
``Bug: <url>``, ``Forwarded: <url>``, ``Applied-Upstream: 0.31.0, <url>``, ``Last-Update: YYYY-MM-DD``): the
trailer block's, as git reads it. A fix has one ``[upstream]``, written into each of its patches: where several
mails state a field they must agree (``Last-Update``: the latest date; case and spacing aside); one the tool owns
written above the trailer block is refused, not kept beside the tool's. What they leave unsaid comes from the
mails' ``Link:`` trailers (and a last paragraph that is a link), not their prose or other trailers (a link there may
name the change that brought the bug, a fork's commit, a pull request it reverts): an ``Applied-Upstream`` makes
the fix ``accepted``, an ``Origin: upstream, ...`` (or ``backport, ...``) ``backport``, a ``Forwarded`` other than
``no`` or a pull request's link ``submitted``, ``Forwarded: not-needed`` ``inappropriate``; a commit's link gives
``Origin: upstream, <link>`` (a pull request's does not: not upstream's yet), else git cherry-pick -x's line
``Origin: commit:<id>``; a ``Bug:``, ``Closes:``, ``Fixes:``
or ``Resolves:`` trailer's URL that is no commit's (a kernel-style ``Fixes:`` names the culprit), else an issue's
link anywhere, the bug; the latest of the mails' ``Date:`` the ``last_update``.

The tool writes these fields from ``fix.toml`` (:func:`fixpack.patchtext.owned_fields`), so a stated value fix.toml
would not take (a ``Last-Update`` that is no date, an ``Upstream-Status`` word DEP-3 does not have), one a later
mail states otherwise, and one whose words the patches would no longer carry (``Pending`` with a ``Forwarded``
link, a bracket note that is neither a link, a release nor a reason) are refused at their line of the mail file
(exit 2), never dropped.
"""

from __future__ import annotations

import re
from email.utils import parsedate_to_datetime

from .errors import BadInputError
from .model import UPSTREAM_STATUSES, Upstream
from .patchmail import OWNED, Mail, trailer_lines
from .patchtext import owned_fields
from .upstream_fields import upstream_problems

_CHARS = r"[^\s<>\"'()\[\]`]"  # (a link in prose ends at a quote, a bracket or a parenthesis: Markdown's [x](y))
_PULL = re.compile(rf"https?://{_CHARS}+/pull/\d+")
_COMMIT = re.compile(rf"https?://{_CHARS}+/commit/[0-9a-f]{{7,40}}")
_ISSUE = re.compile(rf"https?://{_CHARS}+/issues/\d+")
_URL = re.compile(rf"https?://{_CHARS}+")
_CHERRY = re.compile(r"\(cherry picked from commit ([0-9a-f]{40}|[0-9a-f]{64})\)")
BUG_TRAILERS = ("bug", "closes", "fixes", "resolves")
# the DEP-3 fields a mail may state, as they are written
STATED = ("Upstream-Status", "Origin", "Bug", "Forwarded", "Applied-Upstream", "Last-Update")
_STATUS = re.compile(r"([A-Za-z]+)(.*)", re.S)
_DO = "write the mail's fields as fix.toml's [upstream] holds them (README: the fields the tool owns), or take the " \
      "line out, and import again; nothing was written"

Said = dict[str, tuple[str, str]]  # a field: (its value, trimmed; its place, FILE:LINE or FILE (mail at line M))
Place = tuple[str, int]  # a mail's file, and the line (1-based) the mail starts at there


def upstream_from(found: list[Mail], texts: list[str | None] | None = None, where: list[Place] | None = None
                  ) -> Upstream:
    """``[upstream]`` for a fix made of the mails ``found`` (see the module's words). ``where``: each mail's file and
    first line; ``texts``: each mail's text where its lines are the file's (None for one decoded from
    quoted-printable, base64 or MIME parts), so that a refused field is named at its own line, else at its mail.
    Raises BadInputError (exit 2) for a stated field that fix.toml would not take, that mails state otherwise, or
    whose words the patches would not carry."""
    places: list[Place | None] = list(where) if where else [None] * len(found)
    mailed = list(zip(found, texts or [None] * len(found), places))
    said = _agreed([_stated(*m) for m in mailed])
    status, note = _status_of(*said["Upstream-Status"]) if "Upstream-Status" in said else ("", "")
    _refuse_outside_block(mailed)
    text = "\n".join(w for m in found for (k, _v), w in zip(m.trailers, m.written or [f"{k}: {v}" if k else v for
                                                                                      k, v in m.trailers])
                     if k.lower() in ("link", "https", "http"))  # (as written: a paragraph that is a link reads as one)
    pull, commit = _link(_PULL, text), _link(_COMMIT, text) or _link(_COMMIT, _value(said, "Origin"))
    forwarded, why = _forwarded(_value(said, "Forwarded"))
    fixed_in, _comma, applied_link = (_unbracketed(part.strip()) for part in
                                      _value(said, "Applied-Upstream").partition(","))
    if _URL.fullmatch(fixed_in) and not applied_link:  # (a link alone: where upstream took it)
        fixed_in, applied_link = "", fixed_in
    sent = bool(forwarded) and _sense(forwarded) == "forwarded"  # (DEP-3: any value but no, not-needed)
    taken = _value(said, "Origin").lower().startswith(("upstream", "backport"))  # (DEP-3: from upstream's VCS)
    status = status or ("accepted" if fixed_in or applied_link else "backport" if taken else "submitted" if pull or
                        sent else "inappropriate" if _sense(forwarded) == "not-needed" else "pending")
    derived = (commit or pull) if status in ("accepted", "backport") else (pull or commit)  # (where upstream has it)
    link, reason = (note, "") if _URL.fullmatch(note) else ("", "")
    if note and not link and status in ("backport", "accepted") and not fixed_in:
        fixed_in = note
    elif note and not link and status in ("denied", "inappropriate"):
        reason = note
    if why and not reason and status == "inappropriate" and _sense(forwarded) == "not-needed":
        reason = why  # (Forwarded: not-needed (why): the reason Upstream-Status: Inappropriate [why] carries)
    link = link or (_link(_URL, forwarded) if sent else "") or \
        (applied_link if _URL.fullmatch(applied_link) else "") or derived
    # (a pull request's link gives no origin: not upstream's yet)
    origin = _value(said, "Origin") or (f"upstream, {commit}" if commit else "") or _picked(found)
    bug = _value(said, "Bug") or _bug(found)
    up = Upstream(status, link, fixed_in, reason, origin, bug, _value(said, "Last-Update") or _last_date(found))
    _refuse_unreadable(up, said)
    written = owned_fields(up, "")  # (the patches' fields; no Fix-Id: an empty field is left out)
    _refuse_unforwarded(up, said, forwarded, dict(written))
    _refuse_lost(said, written)
    return up


def _value(said: Said, key: str) -> str:
    return said.get(key, ("", ""))[0]


def _forwarded(value: str) -> tuple[str, str]:
    """A stated ``Forwarded`` value: DEP-3's word ``no`` or ``not-needed`` with the note a writer puts after it
    (``not-needed (Gaudi only)``, ``no, waiting``), its brackets off ("" without one); any other value whole (a
    link, ``yes``: it was forwarded), with no note; a sentence's last dot off either."""
    value = _unbracketed(value.rstrip(".,;"))  # (a sentence's: "No.", "<https://.../pull/3>.")
    # (a note in brackets is the whole rest, its brackets matched or the last one left open; any other rest is the
    # note as written)
    m = re.fullmatch(r"(no|not-needed)(?:[ \t]*\(((?:[^()]|\([^()]*\))*)\)|[ \t]*\(([^()]*)|[ \t]*\[([^\[\]]*)]|"
                     r"[ \t]*[,;:](.*)|[ \t]+(.*))", value, re.I | re.S)
    note = next(g for g in m.groups()[1:] if g is not None).strip(" \t") if m else ""
    return (m.group(1), note) if m else (value, "")


def _unbracketed(value: str) -> str:
    """A stated link as fix.toml holds it: without the angle brackets mail writes around one (``<https://...>``)."""
    return value[1:-1].strip() if value.startswith("<") and value.endswith(">") else value


def _link(pattern: re.Pattern[str], text: str) -> str:
    """The first link ``pattern`` finds in ``text`` that is one (an http(s) URL), without the punctuation a sentence
    puts after it (``.../pull/3.``); "" when none is."""
    for m in pattern.finditer(text):
        found = m.group(0).rstrip(".,;:!?")
        if not upstream_problems({"link": found}):
            return found
    return ""


def _at(mail: Mail, place: Place | None, line: int | None = None) -> str:
    """Where a refusal names ``mail`` (at ``place``), or its ``line`` (1-based, in the mail): ``FILE:LINE``, else
    ``FILE (mail at line M)``; a mail given without its file, by its subject."""
    if place is None:
        return f"the mail {mail.subject!r}"
    file, first = place
    return f"{file}:{first + line - 1}" if line else f"{file} (mail at line {first})"


def _stated(mail: Mail, text: str | None, place: Place | None) -> dict[str, list[tuple[str, str]]]:
    """Each DEP-3 field ``mail`` states: every value (trimmed), each with its place (:func:`_at`): its line where
    ``text`` (the mail, its lines the file's) tells it, else its mail's."""
    out: dict[str, list[tuple[str, str]]] = {}
    for key in STATED:
        values = [v.strip() for k, v in mail.trailers if k.lower() == key.lower() and v.strip()]
        if not values:
            continue
        lines = trailer_lines(text, key.lower(), _at(mail, place), mail) if text is not None else []
        told = [n for n, v in lines if v.strip() in values and n is not None]
        out[key] = [(v, _at(mail, place, n)) for v, n in zip(values, told if len(told) == len(values) else
                                                                  [None] * len(values))]
    return out


def _agreed(mails: list[dict[str, list[tuple[str, str]]]]) -> Said:
    """The fix's value of each field the mails state: the one they all state (``Last-Update``: the latest date);
    BadInputError at the line of the first value that is not (a mail that states a field twice, otherwise)."""
    firsts: dict[str, tuple[str, str]] = {}
    for stated in mails:
        for key, values in stated.items():
            if key == "Last-Update":
                _refuse_not_date(values)
                other = next(((v, a) for v, a in values[1:] if v != values[0][0]), None)
                if other is not None:  # (the latest of several mails' dates; one mail states its own once)
                    raise BadInputError(f"{other[1]}: {key}: {other[0]}: but {values[0][1]} says {key}: "
                                        f"{values[0][0]}: a mail states it once; nothing was written")
                firsts[key] = max([*values, *([firsts[key]] if key in firsts else [])])
                continue
            for value, at in values:
                if key == "Upstream-Status":
                    _status_of(value, at)  # (a word DEP-3 lacks is said so, before a disagreement)
                was = firsts.setdefault(key, (value, at))
                if " ".join(value.casefold().split()) != " ".join(was[0].casefold().split()):
                    same = was[1] in [a for _v, a in values]  # (the first value is this mail's too)
                    todo = "a mail states it once" if same else "make them agree, or import the mails as fixes of " \
                                                                "their own"
                    raise BadInputError(f"{at}: {key}: {value}: but {was[1]} says {key}: {was[0]}, and a fix has one "
                                        f"[upstream], written into each of its patches: {todo}; nothing was written")
    return firsts


def _refuse_not_date(values: list[tuple[str, str]]) -> None:
    for value, at in values:
        if upstream_problems({"last_update": value}):
            raise BadInputError(f"{at}: Last-Update: {value}: not a date: write it as YYYY-MM-DD (ISO 8601), or take "
                                f"the line out, and import again; nothing was written")


def _status_of(value: str, at: str) -> tuple[str, str]:
    """A stated ``Upstream-Status`` (``value``, at ``at``): its word, lower case, and the note after it, its brackets
    off; BadInputError for a word DEP-3 does not have."""
    m = _STATUS.fullmatch(value)
    status, note = (m.group(1).lower(), m.group(2).strip(" \t,:[]")) if m else ("", "")
    if status not in UPSTREAM_STATUSES or (m and m.group(2)[:1] not in ("", " ", "\t", "[", ",", ":")):
        words = ", ".join(s.capitalize() for s in UPSTREAM_STATUSES)
        raise BadInputError(f"{at}: Upstream-Status: {value}: not one of DEP-3's words ({words}; a link, a release "
                            f"or a reason in brackets after it): write one, or take the line out, and import again; "
                            f"nothing was written")
    return status, note


def _bug(found: list[Mail]) -> str:
    """The bug's link: a ``Bug:``, ``Closes:``, ``Fixes:`` or ``Resolves:`` trailer's (not a commit's: a kernel-style
    ``Fixes:`` names the change that brought the bug), else an issue's link anywhere in the mails."""
    said = "\n".join(v for m in found for k, v in m.trailers if k.lower() in BUG_TRAILERS)
    everything = "\n".join(m.description + "\n" + "\n".join(v for _k, v in m.trailers) for m in found)
    return next((u for u in (_link(_URL, line) for line in said.split("\n")) if u and not _COMMIT.fullmatch(u)),
                "") or _link(_ISSUE, everything)


def _picked(found: list[Mail]) -> str:
    """DEP-3's ``commit:<id>`` for the commit the mails were cherry-picked from (``git cherry-pick -x``'s ``(cherry
    picked from commit <id>)`` line in the trailer block), "" when none is, or they name several: which repository
    holds it is not said, so the fix stays as its other fields make it (``pending``: not upstream's for all we know)."""
    ids = {m.group(1) for mail in found for k, v in mail.trailers
           if not k and (m := _CHERRY.fullmatch(v.strip()))}
    return f"commit:{ids.pop()}" if len(ids) == 1 else ""


def _last_date(found: list[Mail]) -> str:
    """The latest of the mails' ``Date:`` as YYYY-MM-DD (a series reordered: not the last mail's); "" when none is
    one (``0000`` was read as 2000)."""
    days = []
    for m in found:
        try:
            when = parsedate_to_datetime(m.date) if m.date else None
        except (TypeError, ValueError):
            when = None
        if when is not None and str(when.year) in m.date:
            days.append(when.date().isoformat())
    return max(days, default="")


# the fields the tool owns that a description line may not start with ("Bug: ..." is prose as often as a field)
_OWNED_LINE = re.compile("(" + "|".join(k for k in OWNED if k not in ("Bug", "Fixed-In")) + r")[ \t]*:", re.I)


def _refuse_outside_block(mailed: list[tuple[Mail, str | None, Place | None]]) -> None:
    """A field the tool owns written in a mail's description, not its trailer block (a DEP-3 header as the first
    paragraph, a Yocto Upstream-Status above the sign-off): the patch would keep it there and carry the tool's own
    field too, a contradiction. BadInputError at its line (at its mail where that cannot be told)."""
    for mail, text, place in mailed:
        line = next((ln for ln in mail.description.split("\n") if _OWNED_LINE.match(ln)), None)
        if line is None:
            continue
        n = next((n for n, ln in enumerate(text.split("\n"), 1) if ln == line), None) if text is not None else None
        raise BadInputError(f"{_at(mail, place, n)}: {line.strip()}: a field the tool writes from fix.toml, above the "
                            f"mail's trailer block (its last paragraph), which is all git and this tool read as "
                            f"fields: move it into that block (or take it out) and import again; nothing was written")


_KEYS = {"fixed_in": ("Applied-Upstream", "Upstream-Status"), "last_update": ("Last-Update",),
         "link": ("Upstream-Status", "Forwarded", "Applied-Upstream")}


def _refuse_unreadable(up: Upstream, said: Said) -> None:
    """A stated field whose value fix.toml would not take (:func:`fixpack.upstream_fields.upstream_problems`),
    named at its line: BadInputError."""
    for key, problem in upstream_problems({"fixed_in": up.fixed_in, "last_update": up.last_update, "link": up.link}):
        field = next((f for f in _KEYS[key] if f in said), None)
        if field is None:  # (the mails' text gave it: a link the patterns found is a URL, a Date: a date)
            continue
        value, at = said[field]
        raise BadInputError(f"{at}: {field}: {value}: the fix's {key} would be {getattr(up, key)!r}, {problem}; "
                            f"write it so (or take the line out) and import again; nothing was written")


def _words(value: str) -> list[str]:
    """The words of a field's value in their order and case, as a link is read (its angle brackets, a note's
    brackets and parentheses and a sentence's punctuation off)."""
    words = (w.rstrip(".,;:!?").strip("<>").rstrip(".,;:!?") for w in re.split(r"[\s,\[\]()]+", value))
    return [w for w in words if w]


def _refuse_unforwarded(up: Upstream, said: Said, forwarded: str, written: dict[str, str]) -> None:
    """A stated ``Forwarded`` (DEP-3's word ``forwarded``: ``no``, ``not-needed``, else it was forwarded) that the
    patches' own ``Forwarded`` would say otherwise (a pull request's link beside ``Origin: upstream, ...``: a
    backport, whose patches say ``not-needed``), named at its line: BadInputError. Its words may be carried by
    another field; its sense is this field's. ``written``: the patches' fields."""
    if "Forwarded" not in said or not forwarded:  # (no words: "<>", ","; read as none, as "Forwarded:" is)
        return
    now = written.get("Forwarded", "")
    if _sense(forwarded) != _sense(now):
        value, at = said["Forwarded"]
        raise BadInputError(f"{at}: Forwarded: {value}: the patches would say Forwarded: {now} (the tool writes its "
                            f"fields from fix.toml's [upstream]: Upstream-Status: {written['Upstream-Status']} here"
                            f"{', from Origin: ' + up.origin if up.status == 'backport' and up.origin else ''}"
                            f"{_NEAR if _near_miss(forwarded) else ''}); {_DO}")


_NEAR = "; DEP-3 reads any Forwarded: but no and not-needed as forwarded"


def _sense(forwarded: str) -> str:
    """What a ``Forwarded`` word says, as DEP-3 reads it: ``no``, ``not-needed``, else ``forwarded``."""
    return forwarded.lower() if forwarded.lower() in ("no", "not-needed") else "forwarded"


def _near_miss(forwarded: str) -> bool:
    """A Forwarded value that reads as forwarded (:func:`_forwarded`) but was meant as DEP-3's ``no`` or
    ``not-needed`` (``not needed``, ``notneeded``, ``No!``)."""
    return forwarded.lower().startswith("no") and _sense(forwarded) == "forwarded"


def _refuse_lost(said: Said, written: list[tuple[str, str]]) -> None:
    """A stated field whose words the patches' fields (``written``, from fix.toml's ``[upstream]``) would not carry
    (``Pending`` with a ``Forwarded`` link: the patches say ``Forwarded: no``), named at its line: BadInputError."""
    carried = {w.lower() for _k, v in written for w in _words(v)}
    if _sense(dict(written).get("Forwarded", "no")) == "forwarded":
        carried.add("yes")  # (Forwarded: yes: the patches say it was forwarded, with the link where they have one)
    for key, (value, at) in said.items():
        lost = [w for w in _words(value) if w.lower() not in carried]
        if lost and key != "Last-Update":  # (the latest date of several: the others are older, not lost)
            now = next((v for k, v in written if k == key), "")
            status = "" if key == "Upstream-Status" else \
                f", with Upstream-Status: {next(v for k, v in written if k == 'Upstream-Status')}"
            near = _NEAR if key == "Forwarded" and _near_miss(_forwarded(value)[0]) else ""
            raise BadInputError(f"{at}: {key}: {value}: the patches would not carry {' '.join(lost)!r} (the tool "
                                f"writes its fields from fix.toml's [upstream]: {key}: {now or '(none)'} here"
                                f"{status}{near}); {_DO}")
