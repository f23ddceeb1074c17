"""What ``fixpack import`` refuses in a mail's words before any of them reach the pack: a control character (an
escape a terminal acts on, an encoded line break that would write a header line of its own) or a bidirectional
control (Trojan Source, CVE-2021-42574) in its subject, author, date, description, trailers or the notes after them
(:func:`fixpack.mailtext.first_unsafe`), named at the line of the file that holds it."""

from __future__ import annotations

import re
from pathlib import Path

from .mailtext import decoded_words, first_unsafe, folded, holding, refuse_unsafe
from .patchmail import Mail, header_start, split

_KEY = re.compile(r"^[A-Za-z0-9-]+[ \t]*:[ \t]*")


def refuse_unsafe_words(mail: Mail, text: str, written: bool, file: Path, line: int) -> None:
    """BadInputError (exit 2) for the first control character or bidirectional control in ``mail``'s words (the
    mail at ``line`` of ``file``; ``text``: the mail as read, ``written``: its lines are the file's, not decoded from
    quoted-printable, base64 or MIME parts). It is named at the file's line that holds it; at its header line for one
    that came from an encoded word there (``Subject:``, ``From:``); else at the mail (``FILE (mail at line M)``)."""
    lines = [ln.removesuffix("\r") for ln in split(text)[0].split("\n")]  # (CR LF: a line's end, as git am reads it)
    start = header_start(lines)
    head_end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    subject = _field(lines, start, head_end, "subject")
    fields: list[tuple[str, str, int | None, bool]] = \
        [("its Subject:", decoded_words(subject[1]), subject[0], False)] if subject else []
    author = next((i for i in range(start, head_end) if lines[i].lower().startswith(("from:", "author:"))), None)
    fields += [("its author", mail.author, author, False), ("its Date:", mail.date, None, False),
               ("its description", mail.description, None, True)]
    fields += [(f"its {k}: trailer" if k else "a line of its trailer block", v, None, False) for k, v in mail.trailers]
    fields += [("the notes after its trailers", mail.after, None, True)]
    for what, value, own, many in fields:
        value = value.replace("\r\n", "\n").removesuffix("\r")
        c = first_unsafe(value, lines=many)
        if not c:
            continue
        # (the file's line that holds it: in the header wherever the mail was decoded, else anywhere before the diff)
        searched = range(start, len(lines) if written else head_end)
        held = [n for n in searched if c in lines[n]]
        n = next((n for n in held if _part_of(lines[n], value)), None)
        if not held and own is not None:  # (the line of the field, folded or not, whose encoded word holds it)
            n = holding(c, lines, own)[0]
        where = f"{file}:{line + n}" if n is not None else f"{file} (mail at line {line})"
        refuse_unsafe(value, where, what, encoded=not held and n is not None, lines=many)


def _field(lines: list[str], start: int, end: int, name: str) -> tuple[int, str] | None:
    """The header field ``name`` (lower case) in ``lines[start:end]``: its line, and its value unfolded as RFC 5322
    unfolds (the line breaks taken out, every other character kept: :func:`fixpack.mailtext.raw_field` collapses
    white space, a form feed or U+001F among it)."""
    for i in range(start, end):
        if lines[i].lower().startswith(name + ":"):
            return i, "".join([lines[i][len(name) + 1:], *(lines[j] for j in folded(lines, i, end)[1:])]).strip(" \t")
    return None


def _part_of(line: str, value: str) -> bool:
    """``line`` (as written) carries a part of ``value``: its text, less a field's key and the spaces around it."""
    said = line.strip(" \t")  # (its CR off already)
    return bool(said) and (said in value or _KEY.sub("", said) in value)
