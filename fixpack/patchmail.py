"""A patch file's mail part, read and written with the standard library's :mod:`email` package.

A fix's patch is a ``git format-patch`` message: a ``From <hash> <date>`` line, the mail header
(``From:``, ``Date:``, ``Subject:``, folded and RFC 2047 encoded as any mail may be), the commit
message (a description, then a last paragraph of ``Key: value`` trailers), ``---``, an optional
diffstat, then the diff. :func:`read_mail` decodes all of that; :func:`render` writes the pack's
deterministic form of it:

- the author, the date, the subject (decoded, unfolded) and the description are the author's and are
  kept as written; a header with non-ASCII text is written RFC 2047 encoded, on one line;
- every trailer the tool does not own (``Signed-off-by:``, ``Co-authored-by:``, ``Author:`` ...) is
  kept, in order; the DEP-3 / Yocto fields the tool owns (:data:`OWNED`) are written from ``fix.toml``
  after them (see :func:`fixpack.patchtext.header_fields`);
- only churn goes: the commit hash of the first line, the diffstat, ``index`` lines and git's version
  signature (:func:`fixpack.diff.diff_body`).
"""

from __future__ import annotations

import base64
import email.policy
import re
from collections.abc import Callable
from email.parser import BytesParser
from pathlib import Path

from . import dep3
from .diff import AUTHOR, FIXED_FROM_LINE, diff_body
from .diffpaths import plain_start
from .errors import BadInputError
from .mailtext import PATCH_TAG, author, cut_diffstat, header_value, known_charsets, message_parts, raw_field
from .structs import dataclass
from .trailers import block, is_patch_break

# the fields written from fix.toml: whatever a patch or a commit message says for them is replaced
OWNED = ("Upstream-Status", "Forwarded", "Origin", "Bug", "Applied-Upstream", "Last-Update", "Fix-Id", "Fixed-In")
_OWNED = {k.lower() for k in OWNED}
_WRITE = email.policy.default.clone(max_line_length=0, linesep="\n")  # no folding: one line a header
_READ = email.policy.default
# an mbox's separator line: git's ("From <commit> Mon Sep 17 00:00:00 2001") or any other mbox writer's
# ("From git@z Thu Jan  1 00:00:00 1970", b4 and lore; "From someone@example.org Tue Dec  1 ...")
MBOX_FROM = (r"From (?:[0-9a-f]{40} |\S+ +(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|"
             r"Nov|Dec) [ \d]?\d \d\d:\d\d:\d\d \d{4}[ \t]*$)")
_FROM_LINE = re.compile("^" + MBOX_FROM)


@dataclass(frozen=True)
class Mail:
    """A patch's message. ``author`` is ``Name <address>`` decoded; ``date`` as written ("" when the patch
    has none); ``subject`` decoded and unfolded, without its ``[PATCH ...]`` tag; ``description`` the
    message between the subject and the trailers; ``trailers`` the trailer block's lines as ``git interpret-trailers``
    finds and reads them (:mod:`fixpack.trailers`), the tool's own fields included, in order, each line of the block
    that is no trailer (a ``(cherry picked from commit ...)`` line, a comment, text) kept in its place with the key
    ""; ``written`` each one's text as it is written back (``Key: value``, or, for one read with no space after its
    ``:`` or one before it, the line as written: a paragraph that is a URL reads as a trailer ``https``, as git reads
    it), in step with ``trailers`` (none: ``Key: value`` each); ``after`` the comment lines after the block, which git
    reads as no part of the message's trailers."""

    author: str = ""
    date: str = ""
    subject: str = ""
    description: str = ""
    trailers: tuple[tuple[str, str], ...] = ()
    written: tuple[str, ...] = ()
    after: str = ""
    dep3: bool = False  # fields read from its header: a DEP-3 one (a Debian quilt patch's), or a mail's (:mod:`.dep3`)

    @property
    def kept(self) -> tuple[tuple[str, str], ...]:
        """The trailers the tool does not own (kept as written)."""
        return tuple((k, v) for k, v in self.trailers if k.lower() not in _OWNED)

    def message(self, fields: list[tuple[str, str]]) -> str:
        """The commit message: subject, description, kept trailers and ``fields``."""
        parts = [self.subject.strip()]
        if self.description.strip():
            parts.append(self.description.strip())
        written = self.written if len(self.written) == len(self.trailers) else [f"{k}: {v}" for k, v in self.trailers]
        trailers = [w for (k, _v), w in zip(self.trailers, written) if k.lower() not in _OWNED]
        trailers += [f"{k}: {v}" for k, v in fields]
        if trailers:
            parts.append("\n".join(trailers))
        if self.after.strip():
            parts.append(self.after.strip("\n"))
        return "\n\n".join(parts) + "\n"


def split(text: str) -> tuple[str, str]:
    """The mail part of a patch file's text and its diff part (from the first ``diff --git`` on; in a mail without
    one, a plain ``diff -u`` as git am takes it: from its first ``---`` line that leads to an ``@@`` line)."""
    idx = text.find("diff --git ")
    while idx > 0 and text[idx - 1] != "\n":
        idx = text.find("\ndiff --git ", idx) + 1 or -1
    if idx < 0:
        lines = text.split("\n")
        at = plain_start(lines)
        if at is None:
            return text, ""
        idx = sum(len(ln) + 1 for ln in lines[:at])
    return text[:idx], text[idx:]


def header_start(lines: list[str]) -> int:
    """Where the header of a patch file's ``lines`` (its mail part) starts (0-based): after an mbox ``From`` line
    above it, and after empty lines above a DEP-3 header, which starts on the first line that is not empty (DEP-3,
    "Structure"; a mail's header starts on its first)."""
    start = 1 if lines and _FROM_LINE.match(lines[0]) else 0
    first = next((i for i in range(start, len(lines)) if lines[i].strip()), start)
    return first if first > start and dep3.is_dep3(dep3.fields(lines[first:]), bool(start)) else start


def read_mail(text: str, where: str = "the patch") -> Mail:
    """The message of a patch file (its text, decoded with ``surrogateescape``). A file without a mail
    header (a plain diff) gives an empty :class:`Mail`. BadInputError naming ``where`` (a file, or file:line) for a
    charset Python does not know, or a ``From:`` whose encoded words hold a line break."""
    head, _diff = split(text)
    lines = head.split("\n")
    start = header_start(lines)
    lines = lines[start:]
    if not lines or not re.match(r"^[A-Za-z-]+:", lines[0]):
        return Mail()
    found = dep3.fields(lines)
    if dep3.is_dep3(found, bool(start)):
        return Mail(*dep3.read(lines, found, where, start), dep3=True)
    raw = "\n".join(lines).encode("utf-8", "surrogateescape")
    msg = BytesParser(policy=_READ).parsebytes(raw)
    payload = msg.get_payload(decode=True)
    charset = _charset(msg, where)
    body = payload.decode(charset, "replace") if isinstance(payload, bytes) else ""
    description, trailers, written, after = message_parts(cut_diffstat(body))
    known_charsets(lines, "subject", where)  # (From: is decoded whole by author, which says its own)
    told = dep3.in_header(found)  # (git format-patch --add-header="Origin: ...")
    return Mail(author(lines, where), raw_field(lines, "date"), PATCH_TAG.sub("", header_value(msg, "Subject")).strip(),
                description, tuple(told) + trailers, tuple(f"{k}: {v}" for k, v in told) + written, after, bool(told))


def trailer_lines(text: str, key: str, where: str = "the patch", mail: Mail | None = None
                  ) -> list[tuple[int | None, str]]:
    """Each trailer ``key`` (lower case) of a patch's message (its ``text``; ``mail``: as :func:`read_mail` read it
    already, else read here), with its line in ``text`` (1-based; None where it cannot be told: a body in
    quoted-printable or base64; a trailer folded over lines: its first): the trailer block's, as git finds it
    (:mod:`fixpack.trailers`), before the ``---`` line, never a copy of it in the notes after that line or in the
    description."""
    mail = mail or read_mail(text, where)
    said = [v for k, v in mail.trailers if k.lower() == key]
    lines = split(text)[0].split("\n")
    start = header_start(lines)
    body = start + dep3.header_end(lines[start:]) + 1
    end = next((i for i in range(body, len(lines)) if is_patch_break(lines[i])), len(lines))
    mine: list[tuple[int | None, str]] = [(n + 1, " ".join(v.split())) for n, k, v in dep3.fields(lines[start:], start)
                                          if k.lower() == key] if mail.dep3 else []
    mine += [(e.line + 1, e.value) for e in block(lines, body, end)[1] if e.key.lower() == key]
    return mine if [v for _n, v in mine] == said else [(None, v) for v in said]  # (an encoded body: other lines)


def decoded(text: str, where: str) -> str:
    """A mail whose body is ``quoted-printable`` or ``base64`` (its ``Content-Transfer-Encoding``), as ``git am``
    reads it: the body decoded (with its charset), the header saying ``8bit``; any other mail as it is. Its diff
    was read as written (``=3D`` for ``=``, or no diff found at all). BadInputError naming ``where`` for a charset
    Python does not know, or a body that is not what its encoding says. A multipart mail (``git format-patch
    --attach`` or ``--inline``) is read as one: :func:`_flattened`."""
    flat = _flattened(text, where)
    if flat is not None:
        return flat
    head, sep, body = text.partition("\n\n")
    lines = head.split("\n")
    start = 1 if lines and _FROM_LINE.match(lines[0]) else 0
    if not sep or not re.match(r"^[A-Za-z-]+:", lines[start] if len(lines) > start else ""):
        return text
    msg = BytesParser(policy=_READ).parsebytes("\n".join(lines[start:]).encode("utf-8", "surrogateescape") + b"\n\n")
    cte = str(msg.get("Content-Transfer-Encoding", "")).strip().lower()
    if cte not in ("quoted-printable", "base64"):
        return text
    import binascii
    import quopri

    raw = body.encode("utf-8", "surrogateescape")
    try:
        data = quopri.decodestring(raw) if cte == "quoted-printable" else base64.b64decode(raw, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise BadInputError(f"{where}: its body is not {cte} as its Content-Transfer-Encoding says ({exc}); "
                            f"export the mail again") from None
    out = data.decode(_charset(msg, where), "surrogateescape")
    head = re.sub(r"(?im)^Content-Transfer-Encoding:[^\n]*$", "Content-Transfer-Encoding: 8bit", head)
    return head + "\n\n" + out.replace("\r\n", "\n")


_MIME_HEADER = re.compile(r"(?im)^(MIME-Version|Content-Type|Content-Transfer-Encoding|Content-Disposition):[^\n]*"
                          r"(\n[ \t][^\n]*)*\n?")


def _flattened(text: str, where: str) -> str | None:
    """A multipart mail (``git format-patch --attach`` or ``--inline``: the message in one text part, the patch in
    another) as the one-part mail ``git am`` reads from it: its header without the MIME lines, declared UTF-8 8bit,
    then the first text part that holds no diff (the message, its ``---`` and diffstat kept), then every text part
    that holds one, in order, each decoded by its own transfer encoding and charset. None for a mail that is not
    multipart. BadInputError naming ``where`` for a part whose charset Python does not know."""
    head, sep, _body = text.partition("\n\n")
    lines = head.split("\n")
    start = 1 if lines and _FROM_LINE.match(lines[0]) else 0
    if not sep or not re.search(r"(?im)^Content-Type:\s*multipart/", head):
        return None
    msg = BytesParser(policy=_READ).parsebytes(text.split("\n", start)[-1].encode("utf-8", "surrogateescape"))
    if not msg.is_multipart():
        return None
    message, diffs = None, []
    for part in msg.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        payload = part.get_payload(decode=True)
        content = payload.decode(_charset(part, where), "surrogateescape") if isinstance(payload, bytes) else ""
        content = content.replace("\r\n", "\n")
        if split(content)[1]:
            diffs.append(content if content.endswith("\n") else content + "\n")
        elif message is None:
            message = content
    if not diffs:
        return None  # (no patch in it: said as such by the caller)
    top = _MIME_HEADER.sub("", "\n".join(lines) + "\n").rstrip("\n")
    mime = "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit"
    return f"{top}\n{mime}\n\n{(message or '').strip(chr(10))}\n\n{''.join(diffs)}"


def _charset(msg: email.message.Message, where: str) -> str:
    """The mail's ``Content-Type`` charset (UTF-8 when none), one Python knows (BadInputError naming ``where``)."""
    import codecs

    charset = msg.get_content_charset() or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        raise BadInputError(f"{where}: its Content-Type names charset {charset!r}, which Python does not know: "
                            f"write it as UTF-8 (charset=UTF-8), or export the mail again") from None
    return charset


def parse_message(message: str) -> Mail:
    """A commit message as a :class:`Mail` without author or date: git's subject is the first paragraph, its lines
    joined by spaces."""
    text = message.strip("\n")
    first, _sep, rest = text.partition("\n\n")
    description, trailers, written, after = message_parts(rest)
    return Mail("", "", " ".join(s.strip() for s in first.splitlines()), description, trailers, written, after)


def render(mail: Mail, fields: list[tuple[str, str]], body: str, where: str | Callable[[], str] = "the patch"
           ) -> str:
    """The patch file in the pack's deterministic form: the fixed ``From`` line, ``From:`` (the pack's
    own author when the mail has none), ``Date:`` when there is one, ``Subject: [PATCH] ...``, the MIME
    headers when the message is not ASCII (as git writes them), the message with ``fields`` as its last
    trailers, ``---``, then ``body``'s diff (churn dropped). BadInputError (exit 2; ``where``: the patch, or its
    trailer block's line, for the message, or what works it out, called only then) when its trailers, read as git
    reads them, would not be the mail's kept ones and ``fields`` (:func:`_reads_back`)."""
    lines = [FIXED_FROM_LINE, _fold("From", _quoted(mail.author or AUTHOR))]
    if mail.date:
        lines.append(f"Date: {mail.date}")
    lines.append(_fold("Subject", f"[PATCH] {mail.subject.strip()}"))
    message = mail.message(fields)
    _subject, _sep, rest = message.partition("\n\n")
    if not rest.isascii():
        lines += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=UTF-8", "Content-Transfer-Encoding: 8bit"]
    lines.append("")
    if rest.strip():
        lines.append(rest.rstrip("\n"))
    lines += ["---", ""]
    out = "\n".join(lines) + diff_body(body)
    _reads_back(mail, fields, out, where)
    return out


def _as_read(value: str) -> str:
    """A trailer's value as git reads it back: white space (git's) trimmed, lines joined by one space."""
    return re.sub(r"\n[ \t\r\n]*", " ", value.strip(" \t\r\n")).strip(" \t\r")


def _reads_back(mail: Mail, fields: list[tuple[str, str]], out: str, place: str | Callable[[], str]) -> None:
    """Refuse a patch ``out`` written from ``mail`` whose trailers, read as git reads them, are not the kept ones and
    ``fields`` (values compared as git reads them: :func:`_as_read`). A last paragraph with text lines among its
    trailers is a trailer block only while a quarter of its lines are trailers, one of them git's, and the tool's
    fields it drops can leave fewer (a fresh user: a ``Bug:`` line dropped, 4 trailers to 13 lines of text: git read
    no trailer, and the next ``format`` wrote another block); a field with a line break that does not continue it
    breaks the block."""
    meant = [(k, _as_read(v)) for k, v in [*mail.kept, *fields] if k]
    if [(k, v) for k, v in read_mail(out).trailers if k] == meant:  # (this function's own output: no error of its own)
        return
    where = place() if callable(place) else place
    if any(not k for k, _v in mail.trailers):
        raise BadInputError(f"{where}: its trailer block holds lines of text among its trailers, which git reads as "
                            f"trailers only while at least a quarter of the block's lines are (one of them git's, such "
                            f"as Signed-off-by:), and written with fix.toml's fields it would no longer be one (git "
                            f"would read no trailer, and format would add another block): move the text above the "
                            f"trailers, a blank line between; nothing was written")
    said = "; ".join(f"{k}: {v}" for k, v in meant)
    raise BadInputError(f"{where}: its trailers, written with fix.toml's [upstream] fields, would not read back as git "
                        f"reads them ({said}): a field's value with a line break? write it on one line in fix.toml; "
                        f"nothing was written")


_RFC822_SPECIALS = set('()<>@,;:\\".[]')


def _quoted(author: str) -> str:
    """``Name <address>`` as git format-patch writes it: an ASCII name holding an RFC 822 special
    (``Doe, John``, ``J. Smith``, ``O'Brien (ACME)``) in quotes, ``"`` and ``\\`` escaped; a name that is
    not ASCII is encoded instead: one encoded word when it holds a special (``Renée (ACME)``: encoded by the
    email package, its ``(ACME)`` was written as a comment, which a read drops), else by :func:`_fold`."""
    name, sep, rest = author.rpartition(" <")
    if not sep or not _RFC822_SPECIALS & set(name) or (name.startswith('"') and name.endswith('"')):
        return author
    if not name.isascii():  # one encoded word for the whole name, as git writes it: ( and ) in it are no comment
        word = "".join(chr(b) if chr(b).isalnum() and b < 128 or chr(b) in "!*+-/" else f"={b:02X}"
                       for b in name.encode("utf-8", "surrogateescape"))
        return f"=?UTF-8?q?{word}?= <{rest}"
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '" <' + rest


def _fold(name: str, value: str) -> str:
    """One header line, RFC 2047 encoded where the value is not ASCII, never folded."""
    if value.isascii():
        return f"{name}: {value}"
    # a header object, not a str: for a str the policy writes a short value as it is, unencoded
    folded: str = _WRITE.fold(name, _WRITE.header_factory(name, value))
    return folded.rstrip("\n")


def mail_line(patch: str, mail: str, line: int, n: int) -> int | None:
    """The line of a file (whose mail ``mail`` starts at its ``line``) that line ``n`` of the ``patch`` made of that
    mail was copied from (both 1-based); None for a line the patch wrote itself (its header, a line it left out)."""
    from difflib import SequenceMatcher  # only for a refusal

    for a, b, size in SequenceMatcher(None, patch.split("\n"), mail.split("\n"), autojunk=False).get_matching_blocks():
        if a <= n - 1 < a + size:
            return line + b + n - 1 - a
    return None


def mail_ref(file: Path, line_of: Callable[[int], int | None], at: re.Match[str]) -> str:
    """``FILE:LINE`` for the patch line matched by ``at`` (its group 1): the line of ``file`` ``line_of`` gives (a
    :func:`mail_line`), ``FILE:?`` where it is none of the mail's."""
    return f"{file}:{line_of(int(at[1])) or '?'}"
