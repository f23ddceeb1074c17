"""A patch mail's text, read as git reads it: its header values as written (the author as ``Name <address>``, a field
unfolded, RFC 2047 encoded words decoded), and its message's parts (the description, the trailer block as ``git
interpret-trailers`` finds it, the comments after it). Read by :mod:`fixpack.patchmail` (a mail's header) and
:mod:`fixpack.dep3` (a DEP-3 header's)."""

from __future__ import annotations

import email.message
import re

from .errors import UNSHOWN, BadInputError
from .trailers import block, is_patch_break

PATCH_TAG = re.compile(r"^\[PATCH[^\]]*\]\s*")  # a mail subject's "[PATCH v2 1/3]"


def message_parts(body: str) -> tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], str]:
    """A message body (after its title) as (description, trailers, each as written back: :attr:`Mail.written`, the
    comment lines after the trailers: :attr:`Mail.after`): the trailer block as ``git interpret-trailers`` finds it
    (:func:`fixpack.trailers.block`: the last paragraph, all of it trailers (``Key: value``, ``Key:value`` and
    ``Key : value`` too, a value folded over lines), or one at least a quarter trailers with a git-generated line,
    ``Signed-off-by:`` or ``(cherry picked from commit ...)``, among them)."""
    lines = body.split("\n")
    start, entries, end = block(lines, 0, len(lines))
    said = "\n".join(lines[:start])
    paras = [p for p in re.split(r"\n[ \t]*\n", said.strip("\n")) if p.strip()]
    if not entries:
        return "\n\n".join(paras).strip(), (), (), ""
    after = "\n".join(lines[end:]).strip("\n")
    return ("\n\n".join(paras).strip(), tuple((e.key, e.value) for e in entries), tuple(e.written for e in entries),
            after if after.strip() else "")


def cut_diffstat(body: str) -> str:
    """The commit message: the body up to format-patch's ``---`` line (the diffstat follows it), as ``git am`` ends it
    (:func:`fixpack.trailers.is_patch_break`)."""
    lines = body.split("\n")
    end = next((i for i, line in enumerate(lines) if is_patch_break(line)), None)
    return body if end is None else "\n".join(lines[:end])


def author(lines: list[str], where: str = "the patch", field: str = "from") -> str:
    """``From:`` as git's ``Name <address>``, read from the header as written (``lines``; encoded words decoded):
    the display name unquoted and unescaped (``"Doe, John"`` is ``Doe, John``), a comment kept in the name
    (``O'Brien (ACME)``; the email package's parse dropped it, and a raw UTF-8 name became ``unknown-8bit``). A bare
    address stays as written. BadInputError naming ``where`` for a line break in an encoded word (``=0A``: a header
    of its own), a charset Python does not know, or a header that is neither (the address was lost: ``a (x <r@x>``
    became ``a``)."""
    from email.errors import HeaderParseError
    from email.header import make_header

    raw = raw_field(lines, field)
    header = field.capitalize()
    if not raw:
        return ""
    try:
        text = str(make_header(encoded_words(raw))).strip()
    except (HeaderParseError, LookupError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{where}: its {header}: header {raw[:80]!r} cannot be decoded ({exc}); write the author "
                            f"as Name <address>") from None
    if re.search(r"[\r\n]", text):
        raise BadInputError(f"{where}: its {header}: header holds a line break in an encoded word (=0A or =0D); write "
                            f"the author as Name <address> on one line")
    if re.fullmatch(r"[^\s<>@]+@[^\s<>@]+", text):
        return text
    name, sep, rest = text.rpartition("<")
    if sep and re.search(r"[<>]|@\S+\s*,", name):  # ("A <a@x>, B <b@x>": the first address would be lost)
        raise BadInputError(f"{where}: its {header}: header {text[:80]!r} names more than one author: name one there "
                            f"(a commit has one author; the others can be Co-authored-by: trailers)")
    if not sep or not re.fullmatch(r"[^\s<>@\"()]+@[^\s<>@\"()]+>", rest) or name.count("(") != name.count(")"):
        raise BadInputError(f"{where}: its {header}: header {text[:80]!r} is not Name <address> (as git format-patch "
                            f"writes it): its address would be lost; write it so")
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = re.sub(r"\\(.)", r"\1", name[1:-1])
    return f"{name} <{rest[:-1]}>" if name else f"<{rest[:-1]}>"


def folded(lines: list[str], at: int, end: int | None = None) -> list[int]:
    """The lines of the header field at ``lines[at]``: it, and each line after it (up to ``end``) that starts with a
    space or a tab (RFC 5322's folding)."""
    stop = len(lines) if end is None else end
    span = [at]
    while span[-1] + 1 < stop and lines[span[-1] + 1][:1] in (" ", "\t"):
        span.append(span[-1] + 1)
    return span


def raw_field(lines: list[str], field: str) -> str:
    """The header ``field`` (lower case) as written, its folded lines joined (the email package would re-render
    it: "2 Jan" as "02 Jan", a comment dropped)."""
    for i, line in enumerate(lines):
        if line == "":
            return ""
        if line.lower().startswith(field + ":"):
            return " ".join(" ".join([line[len(field) + 1:], *(lines[j] for j in folded(lines, i)[1:])]).split())
    return ""


def known_charsets(lines: list[str], field: str, where: str) -> None:
    """BadInputError naming ``where`` when an encoded word of header ``field`` names a charset Python does not know
    (the email package would keep its bytes as they are, and they would be read as UTF-8: a guess)."""
    import codecs
    from email.errors import HeaderParseError

    raw = raw_field(lines, field)
    try:
        charsets = {cs for _part, cs in encoded_words(raw) if cs and cs != "unknown-8bit"} if raw else set()
    except HeaderParseError:  # (not an encoded word after all: read as it is written)
        return
    for cs in sorted(charsets):
        try:
            codecs.lookup(cs)
        except LookupError:
            raise BadInputError(f"{where}: its {field.capitalize()}: header names charset {cs!r}, which Python does "
                                f"not know: write it as UTF-8 (=?UTF-8?q?...?=), or export the mail again") from None


def encoded_words(raw: str) -> list[tuple[bytes | str, str | None]]:
    """A header's parts as :func:`email.header.decode_header` gives them (bytes and charset), each charset without an
    RFC 2231 language tag (``UTF-8*en`` is UTF-8). Raises HeaderParseError as it does."""
    from email.header import decode_header

    return [(b, cs.split("*", 1)[0] if cs else cs) for b, cs in decode_header(raw)]


def decoded_words(value: str) -> str:
    """A header's value with its RFC 2047 encoded words decoded (as it is where it holds none, or one Python cannot
    read: then kept as written, never guessed)."""
    from email.errors import HeaderParseError
    from email.header import make_header

    if "=?" not in value:
        return value
    try:
        return str(make_header(encoded_words(value)))
    except (HeaderParseError, LookupError, UnicodeDecodeError):
        return value


def header_value(msg: email.message.Message, name: str) -> str:
    value = msg.get(name)
    if value is None:
        return ""
    text = str(value)
    if re.search("[\udc80-\udcff]", text):  # raw 8-bit bytes in a header: UTF-8 as git writes it
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return " ".join(text.split()) if name == "Subject" else text.strip()


def refuse_bad_date(date: str, where: str, also: str = "") -> None:
    """BadInputError at ``where`` (the ``Date:`` line) for a date git am cannot read (no RFC 2822 date): the pack's
    patch would keep it, and git am of it fail; ``also``: a word more for the way on. Nothing for no date."""
    from email.utils import parsedate_tz

    if date and parsedate_tz(date) is None:
        raise BadInputError(f"{where}: Date: {date[:60]}: not a mail's date, which git am reads (RFC 2822: Mon, 1 Jan "
                            f"2024 10:00:00 +0000): write it so, or take the line out{also}, and import again; nothing "
                            f"was written")


# what a message shows escaped, a line feed (in a one-line field) and a line or paragraph separator
_UNSAFE = re.compile(f"[\n\u2028\u2029{UNSHOWN}]")


def first_unsafe(value: str, lines: bool = False) -> str:
    """The first control character or bidirectional control in ``value`` (``lines``: its line feeds are its own),
    "" for none: :func:`refuse_unsafe`."""
    m = _UNSAFE.search(value.replace("\n", " ") if lines else value)
    return m.group(0) if m else ""


def refuse_unsafe(value: str, where: str, what: str, encoded: bool = False, lines: bool = False) -> None:
    """BadInputError at ``where`` for a control character or a bidirectional control in ``value`` (``what``: the
    field, as the message names it; ``encoded``: it may have come from an RFC 2047 encoded word; ``lines``: a text of
    lines, whose line feeds are its own): a line break would write a header line of its own in the pack's patch, a
    terminal acts on an escape, a bidirectional control shows the text in another order than it is read (Trojan
    Source, CVE-2021-42574). Nothing for a value without one."""
    c = first_unsafe(value, lines)
    if not c:
        return
    breaks = "\n\r\x0b\x0c\x85\u2028\u2029"  # (str.splitlines reads each as a line's end)
    kind = ("a line break, which would write a header line of its own" if c in breaks and not lines else
            "a line or paragraph separator, which other tools read as a line break" if c in breaks[-2:] else
            "a bidirectional control, which shows the text in another order than it is read (Trojan Source)"
            if c >= "\u202a" else "a control character, which a terminal acts on" + (
                " (a Windows-1252 character in a mail that declares ISO-8859-1? declare charset=windows-1252)"
                if "\x80" <= c <= "\x9f" else ""))
    raise BadInputError(f"{where}: {what} holds U+{ord(c):04X}{' (from an encoded word)' if encoded else ''}, {kind} "
                        f"({value[:60]!r}): write it as plain text, and import again; nothing was written")


def holding(c: str, lines: list[str], at: int) -> tuple[int, bool]:
    """The line of the header field at ``lines[at]`` (it, or one of its folded lines) that holds ``c``: (its index,
    whether ``c`` came from an RFC 2047 encoded word there); ``(at, True)`` where no one line tells (an encoded word
    split over two)."""
    span = folded(lines, at)
    return next(((i, False) for i in span if c in lines[i]), None) or \
        next(((i, True) for i in span if c in decoded_words(lines[i].strip())), (at, True))

