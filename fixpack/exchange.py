"""Patches in and out of the pack as mail: ``fixpack import`` (a ``git format-patch`` file or an mbox
becomes a new fix) and ``fixpack export`` (a profile's chain as a numbered series ``git am`` takes).

Import keeps each mail's author, date, subject, description and trailers (:mod:`fixpack.patchmail`);
the fix's DEP-3 fields come from the mails: those they state (``Upstream-Status``, ``Origin``, ``Bug``, ...),
else ``Origin`` / ``Forwarded`` from a pull request or commit link, ``Bug`` from an issue link (or a ``Bug:``,
``Closes:``, ``Fixes:`` trailer holding a URL), ``Last-Update`` from the last mail's date
(:mod:`fixpack.mail_upstream`). The fix is laid on the profile's chain: a patch that applies
only at an offset is regenerated against it (its message kept), one that does not apply is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

from .binpatch import new_file_patch
from .diff import parse_patch
from .diffsyntax import refuse_not_utf8_message, wide_text
from .documents import MAX_PACK_TEXT_BYTES, MAX_PATCH_BYTES
from .editrefresh import Refreshed, metadata, release_roots
from .editstate import EditState
from .editwork import check_new
from .errors import BadInputError, ConflictError, PatchParseError
from .evaluate import decide
from .fsio import remove_file
from .gitwork import git_diffs, snap
from .loader import load_pack, load_profile
from .mail_upstream import upstream_from
from .mailcheck import refuse_unsafe_words
from .mailtext import refuse_bad_date
from .model import BINARY_IN_PATCH, Fix, Pack, PatchFile, Profile, source_bytes
from .nofollow import atomic_write
from .outputs import check_folder, write_failed
from .pack_journal import WORK_DIR, open_edits
from .packupdate import lay, recovered_first, update
from .patchfiles import outside_package, patch_again
from .patchmail import MBOX_FROM, Mail, decoded, header_start, mail_line, mail_ref, read_mail, render, split
from .patchmodel import sha256_bytes
from .patchtext import rewritten_fields
from .progname import command as _command
from .progname import pack_words
from .progress import QUIET, Progress
from .records import is_sha256
from .run import refuse_half_written
from .runlock import pack_lock
from .safepath import TooLargeError, not_a_file, read_regular
from .states import State
from .structs import replace
from .tree import Tree, decode, encode

_MAIL_START = re.compile("^" + MBOX_FROM, re.M)


def mails(data: bytes, source: str) -> list[tuple[int, str]]:
    """The mails of a ``git format-patch`` file or mbox, each with the line it starts at (1-based). Raises
    PatchParseError (exit 2) naming the file's line where a mail's header or description (before its diff) holds
    bytes that are not UTF-8 and the mail declares no other charset. A UTF-8 byte order mark before the first mail
    (an editor's) is no part of it: it hid that mail's ``From`` line, and the mail was dropped without a word. A mail
    whose body is quoted-printable or base64 is decoded, as git am reads it (:func:`fixpack.patchmail.decoded`)."""
    wide = wide_text(data)
    if wide is not None:  # (read as UTF-8 it holds no mail: said as what it is)
        raise BadInputError(f"{source}: a mail file saved as {wide[0]}, not UTF-8 as git format-patch writes it: "
                            f"convert it to UTF-8 (iconv -f {wide[1]} -t UTF-8 FILE > NEW) and import that; nothing "
                            f"was written")
    text = decode(data).removeprefix(_BOM.decode())
    starts = [m.start() for m in _MAIL_START.finditer(text)] or [0]
    out = []
    for a, b in zip(starts, [*starts[1:], len(text)]):
        chunk = text[a:b]
        lead = len(chunk) - len(re.sub(r"\A(?:[ \t]*\n)*", "", chunk))  # (git skips empty lines above a mail)
        chunk, a = chunk[lead:], a + lead
        if chunk.strip():
            line = text.count("\n", 0, a) + 1
            out.append((line, decoded(chunk if chunk.endswith("\n") else chunk + "\n", f"{source}:{line}")))
    if not out or not any(split(m)[1] for _line, m in out):
        raise BadInputError(f"{source}: no patch mail in it (expected `git format-patch` output or an mbox of "
                            f"them, each with a From: header and a diff)")
    for line, mail in out:  # (its message is read as text: a byte that is not UTF-8 would become U+FFFD there)
        refuse_not_utf8_message(split(mail)[0].split("\n"), line, f"{source} (mail at line {line})")
    return out


def import_mails(pack_root: Path, file: Path, fix_id: str, profile: str, target: str = "", after: str = "",
                 opt_in: bool = False, roots: dict[str, Path] | None = None,
                 progress: Progress = QUIET) -> Refreshed:
    """Make ``fix_id`` from the mails in ``file``: one patch a mail, in order (see the module's words), laid
    on the chain on ``root`` (the target's clean release copy; fetched when None).

    Raises BadInputError for a file without patch mails, a malformed diff (file and line named) or a
    clashing name; ConflictError when a patch does not apply on the profile's chain, or a later fix
    no longer applies on top; nothing is written then.
    """
    pack_root = pack_root.resolve()  # the pack's files are named relative to it (a relative --pack too)
    data = _mail_bytes(file)
    found = mails(data, str(file))
    # a killed import or refresh: rolled back before the pack is read
    with pack_lock(pack_root, progress), recovered_first(pack_root, progress):
        return _import(pack_root, file, data, found, fix_id, profile, target, after, opt_in, roots, progress)


def _import(pack_root: Path, file: Path, data: bytes, found: list[tuple[int, str]], fix_id: str, profile: str,
            target: str, after: str, opt_in: bool, roots: dict[str, Path] | None, progress: Progress) -> Refreshed:
    pack = load_pack(pack_root)
    prof = load_profile(pack, profile)
    view = pack.for_profile(prof.name)
    target = target or _only_target(view, prof)
    target, after = check_new(view, prof, fix_id, target, after, opt_in)
    if fix_id in open_edits(pack_root / WORK_DIR):  # its refresh would replace the import, or the way back
        raise BadInputError(f"an edit of {fix_id} is in progress (.edit/{fix_id}, from `fixpack new`): refresh it, "
                            f"or drop it (`{_command('edit', '--abort', fix_id, *pack_words(pack_root))}`), or "
                            f"import as another name; nothing was written")
    parsed = [(read_mail(text, f"{file}:{line}"), split(text)[1], line) for line, text in found]
    written = _as_written(data, found)
    for (m, _b, line), (_n, text), as_written in zip(parsed, found, written):  # (first: a refusal quotes words)
        refuse_unsafe_words(m, text, as_written is not None, file, line)
    first = parsed[0][0]
    folder = pack_root / "fixes" / fix_id
    fix = Fix(fix_id, 1, first.subject, first.description or first.subject, target, (), (), opt_in,
              upstream_from([m for m, _b, _l in parsed], written, [(str(file), n) for n, _t in found]), (), folder)
    names = [f"{i:04d}-{_slug(m.subject)}.patch" for i, (m, _b, _l) in enumerate(parsed, 1)]
    fields = [_fields(pack, prof, fix, m, text, file, line) for (m, _b, _l), (line, text) in zip(parsed, found)]
    texts = [render(m, f, body, f"{file}:{line}") for (m, body, line), f in zip(parsed, fields)]
    for (m, body, line), (_n, text) in zip(parsed, found):
        if not body.strip():
            raise BadInputError(f"{file}:{line}: the mail {m.subject!r} carries no diff (a cover letter, [PATCH "
                                f"0/N]?): take it out of the file (its words can go into fixes/{fix_id}/fix.toml's "
                                f"why) and import again")
        if not m.author and not m.subject:
            raise BadInputError(f"{file}:{line}: the patch starts with neither a mail's header (From:, Subject:) nor a "
                                f"DEP-3 header (Description:, Author:) on its first line: write one there")
        if not m.author or not m.subject:
            head = split(text)[0].split("\n")
            start = header_start(head)  # (a DEP-3 header's first line after empty lines; else the mail's first)
            top = line + start if start and not head[start - 1].strip() else line
            if not m.author:
                what = "DEP-3 header has no Author:" if m.dep3 else "mail has no From: header"
                raise BadInputError(f"{file}:{top}: the {what} (the patch's author); write one")
            said = next((n for n, ln in enumerate(head) if ln.lower().startswith("subject:")), None)
            raise BadInputError(f"{file}:{top if said is None else line + said}: the mail's Subject: is empty (the "
                                f"fix's summary, less its [PATCH] tag); write one")
        at = next((n for n, ln in enumerate(text.split("\n")) if ln.lower().startswith("date:")), 0) if m.date else 0
        refuse_bad_date(m.date, f"{file}:{line + at}")  # (a DEP-3 header's is refused as it is read)
    for (line, text), (_m, body, _l) in zip(found, parsed):
        _check_diff(file, data, line, text, body)
    fix = replace(fix, patches=tuple(_patch_file(folder / n, t, f"{file} (mail at line {line})")
                                     for n, t, (_m, _b, line) in zip(names, texts, parsed)))
    _refuse_binary(fix, file, [line for _m, _b, line in parsed], prof.name)
    _refuse_outside(file, found, parsed, prof.target(target).package, prof.target(target).version_module)
    root = (roots or {}).get(target)
    state = EditState(fix_id, prof.name, target, True, after, opt_in, str(root) if root else "", "")
    roots = release_roots(pack, state, progress)
    bodies = _on_chain(view, prof, fix, after, roots[target], [b for _m, b, _l in parsed],
                       [f"{file}:{line}: the mail there: " for _m, _b, line in parsed],
                       [partial(mail_line, t, text, line) for t, (line, text) in zip(texts, found)], file)
    texts = [render(m, f, body, f"{file}:{line}") for (m, _b, line), f, body in zip(parsed, fields, bodies)]
    changes: dict[str, bytes | None] = {f"fixes/{fix_id}/{n}": t.encode("utf-8", "surrogateescape")
                                        for n, t in zip(names, texts)}
    changes.update(metadata(pack_root, pack, fix, state, names, True))
    outcome = update(pack_root, changes, fix_id, {prof.name: roots}, progress, by="import")
    return Refreshed(fix_id, prof.name, [f"fixes/{fix_id}/{n}" for n in names], outcome)


def _fields(pack: Pack, prof: Profile, fix: Fix, mail: Mail, text: str, file: Path, line: int
            ) -> list[tuple[str, str]]:
    """fix.toml's fields for the patch made of ``mail`` (its ``text``, at ``line`` of ``file``); a Fix-Id trailer in it
    that names a fix of the pack (a patch of that fix, written out of it) is refused, named at its line."""
    def hint(other: str) -> str:
        edit = _command("edit", other, "--profile", prof.name, *pack_words(pack.root))
        return (f"a patch of fix {other}, which the pack holds already? `{edit}` changes it there; if the mail is "
                f"{fix.id}'s after all, write its trailer as Fix-Id: {fix.id} (or take the line out) and import again")

    return rewritten_fields(fix, mail, text, str(file), pack.fixes, first=line,
                            listed=f"the mail is imported as fix {fix.id!r}", hint=hint)


# The mails ``import`` reads: each becomes one of the fix's patch files, themselves capped at MAX_PATCH_BYTES.
MAX_MAIL_BYTES = MAX_PATCH_BYTES


def _mail_bytes(file: Path) -> bytes:
    """The bytes of the mail file ``file`` (a link followed): something there that is no regular file (a FIFO
    would block the read, a device never end it) named unread, a file larger than MAX_MAIL_BYTES told by its
    size, unread; BadInputError then."""
    what = not_a_file(file)
    if what is not None:
        raise BadInputError(f"{file}: is {what}, not a regular file: give the `git format-patch` file or mbox "
                            f"itself; nothing was written")
    try:
        return read_regular(file, MAX_MAIL_BYTES)
    except TooLargeError as exc:  # told by its size, never read
        raise BadInputError(f"{file}: {exc.said('a mail file')} (a patch mail is KBs, a few MB with binary data): "
                            f"split the series into several files, each imported as a fix of its own; nothing "
                            f"was written") from exc
    except OSError as exc:
        raise BadInputError(f"{file}: cannot read: {exc.strerror}") from exc


def _refuse_binary(fix: Fix, file: Path, lines: list[int], profile: str) -> None:
    """A binary file is changed only where fix.toml declares it, and a new fix has none yet: say how (the edit of
    ``profile``, the import's)."""
    for pf, line in zip(fix.patches, lines):
        for fp in pf.files:
            if fp.binary:
                raise BadInputError(
                    f"{file}:{line}: the mail changes binary file {fp.path} (at its line {fp.diff_line}), and binary "
                    f"files are changed only where fix.toml declares them ([binary] \"{fp.path}\" = \"patch\"); a new "
                    f"fix has no fix.toml yet: import the mail without that file's section, then "
                    f"`{_command('edit', fix.id, '--profile', profile, *pack_words(fix.folder.parent.parent))}`, "
                    f"declare it in "
                    f"fixes/{fix.id}/fix.toml, commit the file and refresh")


def _refuse_outside(file: Path, found: list[tuple[int, str]], parsed: list[tuple[Mail, str, int]], package: str,
                    version_path: str) -> None:
    """A mail that changes a file outside the target's package folder, or its version module, is refused at that
    file's section in ``file`` (its line there): the pack's load of the staged fix named the patch file it would
    have become, which is not there (a fresh maintainer's finding)."""
    for (line, text), (_m, body, _l) in zip(found, parsed):
        for fp in parse_patch(encode(body), str(file)).files:
            out = [(p, why) for p in fp.paths() if (why := outside_package(p, package, version_path))]
            if out:
                p, why = out[0]
                at = line + text[:len(text) - len(body)].count("\n") + fp.diff_line - 1
                raise BadInputError(f"{file}:{at}: the mail at line {line} changes {p!r}, {why}; take that file's "
                                    f"section out of the mail (a fix changes files under {package}/ only, never the "
                                    f"version module); nothing was written")


def _as_written(data: bytes, found: list[tuple[int, str]]) -> list[str | None]:
    """Each mail's text where its lines are the file's (``data``), None for one decoded (quoted-printable, base64,
    MIME parts: its lines are not the file's): a field is named at its line only where that is the file's."""
    whole = decode(data)
    return [text if text.rstrip("\n") in whole else None for _line, text in found]


def _only_target(view: Pack, prof: Profile) -> str:
    with_fixes = sorted({view.fixes[f].target for f in prof.default + prof.opt_in})
    if len(with_fixes) == 1:
        return with_fixes[0]
    raise BadInputError(f"profile {prof.name} has fixes for {', '.join(with_fixes) or 'no target'}: name the "
                        f"target with --target")


def _slug(subject: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:52].strip("-") or "change"


_BLANK = bytes(b if b == 0x0A else 0x20 for b in range(256))  # every byte a space but the newline
_BOM = "\ufeff".encode()


def _check_diff(file: Path, data: bytes, mail_line: int, text: str, body: str) -> None:
    """The diff of the mail at line ``mail_line`` of ``file`` (``data``; the mail ``text``, its diff part ``body``)
    parsed as the user wrote it, so that an error names the file's lines and bytes (the patch file made of it has
    others: its header is the pack's, its churn dropped). Raises PatchParseError "FILE (mail at line M):N: what"
    (exit 2), each line number and byte offset in it the file's: a diff that fails is parsed again behind the
    file's bytes before it, blanked (spaces, the newlines kept), which only an error pays for."""
    diff = encode(body)
    source = f"{file} (mail at line {mail_line})"
    try:
        parse_patch(diff, source)
    except PatchParseError:
        at = len(_BOM) if data.startswith(_BOM) else 0  # (mails() reads the file without it)
        for _ in range(mail_line - 1):  # the mail's first byte
            at = data.index(b"\n", at) + 1
        before = data[:at + len(encode(text[:len(text) - len(body)]))]
        parse_patch(before.translate(_BLANK) + diff, source)
        raise  # (the same diff behind blank lines fails the same way: not reached)


def _patch_file(path: Path, text: str, source: str) -> PatchFile:
    data = text.encode("utf-8", "surrogateescape")
    parsed = parse_patch(data, source)
    return PatchFile(path, sha256_bytes(data), parsed.files)


def _on_chain(view: Pack, prof: Profile, fix: Fix, after: str, root: Path, given: list[str],
              where: list[str], lines: list[Callable[[int], int | None]], file: Path) -> list[str]:
    """Each patch's diff laid on the chain before the fix: as written when it applies at its lines, else
    regenerated where it applies (an offset). Raises ConflictError when a patch does not apply, each refusal starting
    with ``where`` of its patch (the mail it comes from, in the file given), a line of the patch (never written) said
    as the ``file``'s line it comes from (``lines``: :func:`fixpack.patchmail.mail_line`)."""
    tree = Tree(root)
    cut = view.series.index(after) if after else -1
    laid: list[str] = []
    for other in view.ordered(prof.default + prof.opt_in):
        if other.target == fix.target and view.series.index(other.id) <= cut:
            tree.adopt(lay(other, tree).tree)
            laid.append(other.id)
    bodies = []
    for i, pf in enumerate(fix.patches):
        one = replace(fix, patches=(pf,))
        ev = decide(one, tree, None, False)
        if ev.state is State.UPSTREAMED:
            carrier = _carrier(view, one, root, laid)
            raise BadInputError(f"{where[i]}patch {i + 1} of {fix.id} ({pf.path.name}): "
                                + (f"fix {carrier!r} already makes this change on the chain of profile {prof.name}"
                                   if carrier else f"the release of profile {prof.name} already holds this change"
                                   if carrier == "" else "an earlier patch of this import already makes this change "
                                                         "(the same mail twice in the file?)")
                                + "; there is nothing to import (a mail imported twice?); nothing was written")
        if ev.state not in (State.ABSENT, State.DRIFTED) or not ev.forward.ok:
            at = rf"its file section is at {re.escape(str(pf.path))}:\d+"  # (a patch never written: not named)
            gone = rf" \({at}\)|; {at}"
            said = [re.sub(rf"{re.escape(str(pf.path))}:(\d+)", partial(mail_ref, file, lines[i]), re.sub(gone, "", m))
                    for m in ev.messages]  # (a line of the patch not written: the mail's)
            raise ConflictError(f"{where[i]}patch {i + 1} of {fix.id} ({pf.path.name}) is {ev.state.value} on the "
                                f"chain of profile {prof.name}: {'; '.join(said)}; nothing was written")
        tree_after = ev.forward.tree
        if ev.state is State.ABSENT and not ev.offsets:
            bodies.append(given[i])
            tree.adopt(tree_after)
            continue
        paths = list(one.touched_paths())
        with tempfile.TemporaryDirectory(prefix="fixpack-import-") as tmp:
            body = git_diffs(Path(tmp) / "repo", [snap(tree, paths), snap(ev.forward.tree, paths)], [pf.path.name])[0]
        bodies.append(body)
        tree.adopt(ev.forward.tree)
    return bodies


def _carrier(view: Pack, one: Fix, root: Path, laid: list[str]) -> str | None:
    """The first fix of ``laid`` (in order) after which ``one``'s post-image is there; "" when the release itself
    holds it; None when neither does (an earlier patch of the import made it: it blamed the chain's last fix)."""
    tree = Tree(root)
    if decide(one, tree, None, False).state is State.UPSTREAMED:
        return ""
    for fid in laid:
        tree.adopt(lay(view.fixes[fid], tree).tree)
        if decide(one, tree, None, False).state is State.UPSTREAMED:
            return fid
    return None


def export(pack_root: Path, profile: str, opt_ins: tuple[str, ...], out: Path, target: str = "") -> list[Path]:
    """Write the chain of ``profile`` with the named opt-ins (in series order) to ``out`` as numbered
    ``git format-patch`` files (``NNNN-<fix>-<patch>``, the pack's bytes) and a ``series`` file listing
    them: the same bytes on every run, and a record (:data:`RECORD`) of each file's sha256. Raises
    BadInputError for an unknown opt-in, a missing ``requires``, a selected ``conflicts``, or ``out``
    holding a file the record of an earlier export does not list with its bytes; DamagedStateError for a pack a
    killed update left half written."""
    refuse_half_written(pack_root)
    pack = load_pack(pack_root)
    prof = load_profile(pack, profile)
    view = pack.for_profile(prof.name)
    unknown = [o for o in opt_ins if o not in prof.opt_in]
    if unknown:
        raise BadInputError(f"not an opt-in fix of profile {prof.name}: {', '.join(unknown)} (its opt-in fixes: "
                            f"{', '.join(prof.opt_in) or 'none'})")
    chain = view.ordered(prof.default + tuple(opt_ins))
    _check_selection(chain)
    targets = sorted({f.target for f in chain})
    if target:
        chain = tuple(f for f in chain if f.target == target)
    elif len(targets) > 1:
        raise BadInputError(f"profile {prof.name} patches {', '.join(targets)}: a series is for one repository; "
                            f"name it with --target")
    files: dict[str, bytes] = {}
    for fix in chain:
        for pf in fix.patches:
            stem = re.sub(r"^\d{4}-", "", pf.path.name)
            raw = patch_again(pf, "while the pack was exported", "run the export again; nothing was written")
            files[f"{len(files) + 1:04d}-{fix.id}-{stem}"] = _with_binary_data(fix, raw)
    files["series"] = "".join(f"{n}\n" for n in files).encode()
    _refuse_pack_folder(out, pack_root)
    _write_out(out, files)
    return [out / n for n in files]


def _with_binary_data(fix: Fix, raw: bytes) -> bytes:
    """The patch with each new binary file whose bytes come from the fix's folder (``[binary] "PATH" =
    "FILE"``, a section that says only "Binary files ... differ") written as ``git diff --binary`` writes it,
    so that ``git am`` creates the file (it refuses a binary change without its data)."""
    text = raw.decode("utf-8", "surrogateescape")
    for target_path, src in fix.binary:
        if src == BINARY_IN_PATCH:
            continue
        lines = text.split("\n")
        head = f"diff --git a/{target_path} b/{target_path}"
        if head not in lines:
            continue
        start = lines.index(head)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("diff --git ") or lines[i] == "-- "),
                   len(lines))
        section = lines[start:end]
        if not any(ln.startswith("Binary files ") for ln in section):
            continue
        mode = next((ln.split()[-1] for ln in section if ln.startswith("new file mode ")), "100644")
        data = source_bytes(fix, src)
        section_lines = new_file_patch(target_path, data, mode).split("\n")  # ends "", "": the block's empty line
        lines[start:end] = section_lines if end == len(lines) else section_lines[:-1]
        text = "\n".join(lines)
    return text.encode("utf-8", "surrogateescape")


def _check_selection(chain: tuple[Fix, ...]) -> None:
    ids = {f.id for f in chain}
    for fix in chain:
        missing = [r for r in fix.requires if r not in ids]
        clash = [c for c in fix.conflicts if c in ids]
        if missing or clash:
            raise BadInputError(f"{fix.id} " + (f"requires {', '.join(missing)}" if missing else
                                                 f"conflicts with {', '.join(clash)}") + ": change the selection")


RECORD = ".fixpack-export"  # in --out: each file an export wrote there, its sha256 and name


def _recorded(out: Path) -> set[tuple[str, str]]:
    """The (name, sha256) of each file the record of an earlier export into ``out`` lists: the only files a
    new export may replace or remove, and only while they hold those bytes (a file a user wrote, or changed
    since, is never touched). No record (a folder an export never wrote), none."""
    record = out / RECORD
    if record.is_symlink() or not record.is_file():
        return set()
    try:  # a line a file (sha256 and name): an export's record is a few KB, read no further than the pack's text cap
        raw = read_regular(record, MAX_PACK_TEXT_BYTES, follow=False)
    except TooLargeError as exc:  # told by its size, never read
        raise BadInputError(f"--out {out}: its record {record}: {exc.said('an export record')} (an export's is a "
                            f"line per file it wrote): no record an export wrote; give a new or empty folder, or "
                            f"remove that file; nothing was written") from exc
    pairs = set()
    for line in raw.decode("utf-8", "replace").splitlines():
        sha, sep, name = line.partition("  ")
        if sep and is_sha256(sha) and name not in ("", ".", "..", RECORD) and "/" not in name:
            pairs.add((name, sha))
    return pairs


def _record_text(pairs: set[tuple[str, str]]) -> bytes:
    return "".join(f"{sha}  {name}\n" for name, sha in sorted(pairs)).encode()


def _refuse_pack_folder(out: Path, pack_root: Path) -> None:
    """An ``--out`` that is the pack's root or lies in a folder the pack or the tool reads as its own (a link into
    one too) is BadInputError, nothing written; a folder of its own in the checkout (``<pack>/out``) is the user's."""
    pack, where = pack_root.resolve(), out.resolve()
    inside = next((d for d in ("fixes", "profiles", ".git", ".edit", ".rebase", ".fixpack")
                   if where.is_relative_to(pack / d)), None)
    if where == pack or inside:
        said = f"inside the pack's {inside}/" if inside else "the pack itself"
        raise BadInputError(f"--out {out}: {said} ({pack}), "
                            f"whose files the pack reads as its own: give a folder of its own (outside those), nothing "
                            f"was written")


def _write_out(out: Path, files: dict[str, bytes]) -> None:
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {out}: not a folder")
    check_folder(out, "--out")  # a missing parent is named, never made (a typo should not grow a tree)
    try:
        _write_files(out, files)
    except OSError as exc:
        raise write_failed(exc, out, "--out", "give a folder you may write") from exc


def _held(path: Path, new: bytes | None) -> tuple[bytes | None, str | None]:
    """A file of --out: its bytes when they may be the ``new`` ones this export writes there (no more than those
    are read), and its sha256 (read in blocks, never held whole); (None, None) for a link or something that is no
    regular file (a FIFO would block the read), never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None, None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # (a folder: fdopen would raise EISDIR, said as "cannot write 3")
        os.close(fd)
        return None, None
    with os.fdopen(fd, "rb") as f:
        h, data = hashlib.sha256(), bytearray()
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            if new is not None and len(data) <= len(new):
                data += block[:len(new) + 1 - len(data)]
        return (bytes(data) if new is not None and data == new else None), h.hexdigest()


def _write_files(out: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into ``out``, replacing or removing only what the record of an earlier export lists
    (byte for byte); refused, with nothing written, when ``out`` holds anything else. The record is
    written first listing the old files and the new ones, and last listing only the new: an export
    stopped half-way leaves no file that the record does not vouch for."""
    present = sorted(out.iterdir()) if out.is_dir() else []
    record = _recorded(out)
    old: set[tuple[str, str]] = set()
    held: dict[str, bytes] = {}  # each regular file there, read once
    foreign = []
    for path in present:
        if path.name == RECORD and path.is_file() and not path.is_symlink():
            continue
        data, sha = _held(path, files.get(path.name))
        pair = (path.name, sha) if sha is not None else None
        if data is not None:
            held[path.name] = data
        if pair in record:
            old.add(pair)
        elif data is None or data != files.get(path.name):  # the very bytes this export writes lose nothing
            foreign.append(path.name)
    if foreign:
        more = f", and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        raise BadInputError(f"--out {out} holds files no earlier export wrote, or that changed since one did "
                            f"({', '.join(foreign[:5])}{more}): an export replaces or removes only the files its "
                            f"record {RECORD} lists, byte for byte; give a new or empty folder, or move those "
                            f"files away; nothing was written")
    new = {(name, sha256_bytes(data)) for name, data in files.items()}
    atomic_write(out / RECORD, _record_text(old | new))
    for path in present:
        if path.name not in files and path.name != RECORD:
            remove_file(path)
    for name, data in files.items():
        if held.get(name) != data:
            atomic_write(out / name, data)
    if old - new:
        atomic_write(out / RECORD, _record_text(new))
