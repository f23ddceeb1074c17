"""A CycloneDX 1.6 SBOM of an image as it is, and the check of an image against one.

Built with cyclonedx-python-lib from what is on disk and in the manifests, not from what the profile
says should be there: each found target (vLLM, vllm-gaudi) as a component with its version, commit
and package URL; each fix its manifest records as applied as a ``pedigree.patches`` entry of its
target (``backport`` when upstream took it as one, else ``unofficial``; the patch text as the diff;
``resolves`` naming the fix and its upstream link); each installed component as a component; and, as
properties (a CycloneDX patch has no hash field), every patched or installed file's sha256 now.

The facts :func:`verify` compares are read back from the properties (``fixpack:*``), so an SBOM
written by this tool on one machine checks an image on another.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from cyclonedx.model import AttachedText, Property, XsUri
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import (
    Commit,
    Component,
    ComponentType,
    Diff,
    Patch,
    PatchClassification,
    Pedigree,
)
from cyclonedx.model.issue import IssueClassification, IssueType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from . import __version__
from .advice import run_writes
from .documents import MAX_SBOM_BYTES, TOO_DEEP, loads_json
from .errors import BadInputError, EnvironmentProblem, MismatchError, of_code
from .manifest_trust import check_fix_files
from .model import Fix
from .outputs import check_file, refuse_inside, source_date_epoch, write_failed
from .patchfiles import patch_again
from .records import Manifest, Recorded
from .rollback import pending_note
from .run import Context, Request, find_target, prepare
from .runlock import run_lock
from .safepath import TooLargeError, not_a_file, path_problem, read_regular, sha256_regular
from .state import leftover_journal, load_journal, manifest_path, read_manifest
from .states import State, TargetStatus
from .structs import dataclass, field, replace
from .targets import FoundTarget, normalize_commit

P = "fixpack:"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass
class TargetState:
    found: FoundTarget
    manifest: Manifest | None
    hashes: dict[str, str] = field(default_factory=dict)  # every recorded file's sha256 now ("missing")


@dataclass
class SbomResult:
    """``fixpack sbom``: what was written."""

    path: Path | None
    text: str
    written: bool
    exit_code: int = 0


@dataclass
class VerifyResult:
    """``fixpack verify``: each difference between the SBOM and the image (exit 3 when any)."""

    sbom: Path
    differences: list[str]
    checked: int

    @property
    def exit_code(self) -> int:
        return 3 if self.differences else 0


def _sha(path: Path) -> str:
    """The sha256 of a recorded file of the image, read in blocks, never through a link nor from a FIFO (what a
    run writes there is a regular file): "missing", or "not a regular file" (a difference verify names)."""
    try:
        return sha256_regular(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError:
        return "missing" if not os.path.lexists(path) else "not a regular file"


def image_state(req: Request) -> tuple[set[tuple[str, str]], tuple[int, str] | None]:
    """What ``status`` finds applied on the image the request points at, as (kind, id) pairs (("upstreamed", id) for a
    fix it finds upstream's), and, when status would
    not exit 0 (a tampered file, a missing target, a manifest whose fixes are not in the files: a planted one), its
    exit code and error. The SBOM tells only what status vouches for: a manifest alone made it list an unpatched
    image's patches, and a component pip had uninstalled."""
    from .engine import status

    rep = status(req)  # (an error it raises, a pack or lock it cannot read, goes up as it is)
    held = {(f.kind, f.id) for f in rep.fixes if f.state is State.APPLIED}
    held |= {("upstreamed", f.id) for f in rep.fixes if f.state is State.UPSTREAMED}  # (a record of it told too)
    said = rep.error.removeprefix("nothing was written; ")  # (status writes nothing: its words for a refused run)
    return held, ((rep.exit_code, said) if rep.exit_code else None)


def told(states: list[TargetState], held: set[tuple[str, str]]) -> list[TargetState]:
    """``states`` with only the fixes and components status finds applied (``held``: :func:`image_state`) kept of
    their manifests' records: what status does not find applied is not told."""
    out = []
    for st in states:
        m = st.manifest
        if m is not None:
            m = replace(m, fixes=tuple(e for e in m.fixes if ("fix" if e.state is Recorded.APPLIED else "upstreamed",
                                                               e.id) in held),
                        components=tuple(c for c in m.components if ("component", c.id) in held))
        out.append(replace(st, manifest=m))
    return out


def read_image(req: Request) -> tuple[Context, list[TargetState]]:
    """The run's context and each located target with its manifest and its recorded files' sha256 now."""
    ctx = prepare(req, "sbom", need_lock=False)
    states = []
    for spec in ctx.profile.targets:
        tr, ft = find_target(spec, req)
        if ft is None or tr.status is TargetStatus.SKIPPED:
            continue
        if tr.status is TargetStatus.MISMATCH:  # the document would name a release the image does not hold
            raise MismatchError(" ".join(tr.notes))
        with run_lock(ft.root, shared=True, wait=req.lock_wait):
            if leftover_journal(ft.root):
                load_journal(ft.root, run_writes(ctx, ft.root))  # a damaged or planted one: its own words (exit 3)
                raise MismatchError(f"{ft.root / '.fixpack'}: {pending_note(ft.root)}; the document waits for it: "
                                    f"run apply (or revert) first")
            manifest = read_manifest(ft.root, spec.name)
            if manifest is not None and manifest.profile != ctx.profile.name:
                raise MismatchError(f"{manifest_path(ft.root, spec.name)}: the image was patched with profile "
                                    f"{manifest.profile!r}, not {ctx.profile.name!r}; describe it with "
                                    f"--profile {manifest.profile}, or apply {ctx.profile.name} first")
            if manifest is not None:  # a file added by hand to a fix's entry is damaged state here too (exit 3)
                check_fix_files(ctx, manifest, manifest_path(ft.root, spec.name))
            st = TargetState(ft, manifest)
            if manifest is not None:
                paths = [p for p, h in manifest.files.items() if h is not None]
                paths += [p for c in manifest.components for p in c.files]
                st.hashes = {p: _sha(ft.root / p) for p in sorted(paths)}
        states.append(st)
    return ctx, states


_AGAIN = "run the sbom command again; nothing was written"  # a patch file changed since the load


def _patch(fix: Fix) -> Patch:
    status = fix.upstream.status
    kind = PatchClassification.BACKPORT if status in ("backport", "accepted") else PatchClassification.UNOFFICIAL
    text = "".join(patch_again(p, then=_AGAIN).decode("utf-8", "surrogateescape") for p in fix.patches)
    refs = [XsUri(fix.upstream.link)] if fix.upstream.link else None
    issue = IssueType(type=IssueClassification.DEFECT, id=fix.id, name=fix.summary, description=fix.why.strip(),
                      references=refs)
    return Patch(type=kind, diff=Diff(text=AttachedText(content=text, content_type="text/x-diff")), resolves=[issue])


def _file_props(st: TargetState, paths: list[str]) -> list[Property]:
    name = st.found.spec.name
    return [Property(name=f"{P}file:{name}:{p}", value=st.hashes.get(p, "missing")) for p in sorted(paths)]


def build_bom(ctx: Context, states: list[TargetState]) -> Bom:
    bom = Bom()
    image = Component(name=f"fixpack-image-{ctx.profile.name}", type=ComponentType.CONTAINER, version=ctx.profile.name,
                      bom_ref="image", properties=[Property(name=f"{P}profile", value=ctx.profile.name),
                                                   Property(name=f"{P}tool_version", value=__version__)])
    bom.metadata = BomMetaData(component=image)
    # None omits it (the property is typed datetime; the serializer skips None); to the constructor None means now
    bom.metadata.timestamp = _stamp(states)  # type: ignore[assignment]
    for st in states:
        ft, manifest = st.found, st.manifest
        name = ft.spec.name
        commit = normalize_commit(ft.commit)
        props = [Property(name=f"{P}target", value=name), Property(name=f"{P}commit", value=commit or "unknown")]
        patches, fix_files = [], []
        for entry in manifest.fixes if manifest else ():
            props.append(Property(name=f"{P}fix:{entry.id}", value=f"{entry.state.value} v{entry.version}"))
            fix = ctx.pack.fixes.get(entry.id)
            if entry.state is Recorded.APPLIED:
                fix_files += [p for p, h in entry.files.items() if h is not None]
                if fix is not None and fix.recorded_as(entry.patch_sha256):
                    patches.append(_patch(fix))
        props += _file_props(st, sorted(set(fix_files)))
        commits = [Commit(uid=commit)] if commit else None
        target = Component(name=ft.spec.distribution, version=ft.version or None, bom_ref=f"target:{name}",
                           type=ComponentType.FRAMEWORK,
                           purl=PackageURL(type="pypi", name=ft.spec.distribution, version=ft.version or None),
                           pedigree=Pedigree(commits=commits, patches=patches or None), properties=props)
        bom.components.add(target)
        bom.register_dependency(image, [target])
        for rec in manifest.components if manifest else ():
            dist = rec.dist_info[: -len(".dist-info")].rpartition("-")[0]
            comp = Component(name=dist, version=rec.version, bom_ref=f"component:{rec.id}",
                             purl=PackageURL(type="pypi", name=dist, version=rec.version),
                             properties=[Property(name=f"{P}component", value=f"{rec.id} {rec.version} in {name}"),
                                         *_file_props(st, list(rec.files))])
            bom.components.add(comp)
            bom.register_dependency(comp, [target])
            bom.register_dependency(image, [comp])
    made = {c.bom_ref.value: c for c in bom.components}
    for spec in ctx.profile.components:  # a component that requires another depends on it (mxfp4-moe on the port)
        if f"component:{spec.id}" in made:
            needs = [made[f"component:{r}"] for r in spec.requires if f"component:{r}" in made]
            if needs:
                bom.register_dependency(made[f"component:{spec.id}"], needs)
    return bom


def _stamp(states: list[TargetState]) -> datetime | None:
    """When the image reached its state: the newest modification time of its targets' manifests (a run that
    changes nothing writes none), None for an image no run has patched (the document then has no timestamp).
    So the same image gives the same document, byte for byte."""
    times = []
    for st in states:
        try:
            times.append(manifest_path(st.found.root, st.found.spec.name).stat().st_mtime_ns)
        except OSError:  # no manifest: nothing applied there
            continue
    return EPOCH + timedelta(microseconds=max(times) // 1000) if times else None


def render(bom: Bom) -> str:
    """The JSON form, with a serial number derived from its facts and the timestamp from the image's state
    (:func:`_stamp`), or from SOURCE_DATE_EPOCH when set: the same image gives the same document."""
    facts = facts_of(json.loads(JsonV1Dot6(bom).output_as_string()))
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, "fixpack:" + json.dumps(sorted(facts.items())))
    try:
        epoch = source_date_epoch()  # (checked before by sbom; verify compares no time)
    except BadInputError:
        epoch = None
    if epoch is not None:
        bom.metadata.timestamp = epoch
    return JsonV1Dot6(bom).output_as_string(indent=2) + "\n"


def facts_of(doc: Any) -> dict[str, str]:
    """What :func:`verify` compares, from an SBOM's ``fixpack:*`` properties."""
    out: dict[str, str] = {}
    comps = doc.get("components", []) if isinstance(doc, dict) else []
    for c in comps if isinstance(comps, list) else []:
        props = {p.get("name"): p.get("value") for p in c.get("properties", []) if isinstance(p, dict)}
        if f"{P}target" in props:
            t = props[f"{P}target"]
            out[f"target {t} version"] = str(c.get("version", ""))
            out[f"target {t} commit"] = str(props.get(f"{P}commit", ""))
        for k, v in props.items():
            if isinstance(k, str) and k.startswith(f"{P}fix:"):
                out[f"fix {k[len(P) + 4:]}"] = str(v)
            elif isinstance(k, str) and k.startswith(f"{P}file:"):
                out[f"file {k[len(P) + 5:]}"] = str(v)
            elif k == f"{P}component":
                out[f"component {str(v).split(' ')[0]}"] = str(v)
    return out


INSIDE = "write it outside the target (the SBOM describes the image, it is not a file of it)"


def sbom(req: Request, out: Path | None, option: str = "--out") -> SbomResult:
    """The SBOM of the image the request points at; written to ``out`` when given (unless it already
    holds the same facts: a re-run writes nothing). ``option``: how the user named ``out`` (``--out`` of
    ``fixpack sbom``, ``--sbom`` of apply), for the messages. A place that cannot be written is refused
    before the image is read (:mod:`fixpack.outputs`); a write that fails is EnvironmentProblem (exit 5)."""
    if out is not None:
        check_file(out, option)
    source_date_epoch()  # (read before the image, so that a bad one is said first)
    ctx, states = read_image(req)
    held, wrong = image_state(req)
    if wrong:
        from .progname import program

        raise of_code(wrong[0])(f"the image is not in a state its SBOM can tell truly: {wrong[1]}; `{program()} "
                                f"status` with the same options names what is wrong; nothing was written")
    states = told(states, held)
    if out is not None:
        refuse_inside(out, option, [(st.found.spec.name, st.found.root) for st in states], INSIDE, ctx.pack.root)
    text = render(build_bom(ctx, states))
    if out is None:
        return SbomResult(None, text, False)
    if _same_bytes(out, text):
        return SbomResult(out, text, False)
    from .nofollow import atomic_write

    try:
        atomic_write(out, text.encode("utf-8"), 0o644)
    except OSError as exc:
        from .progname import command

        done = (f"the apply itself is done (the image is in the profile's state): write the SBOM with "
                f"`{command('sbom', '--out', str(out))}` and the same options once it can be written"
                if option == "--sbom" else "nothing was written; free space or make it writable, or give another --out")
        raise write_failed(exc, out, option, done) from exc
    return SbomResult(out, text, True)


def _same_bytes(out: Path, text: str) -> bool:
    """Whether the file at ``out`` holds ``text`` byte for byte (the same image gives the same document): read only
    when it is a regular file, never through a symbolic link (one put there since check_file looked: the write
    replaces the link, never reads or writes where it points), and no further than ``MAX_SBOM_BYTES``. A file with
    the same serial number but other contents (a hand edit, another tool's document) is written over: it kept them,
    and said "unchanged"."""
    try:
        return read_regular(out, MAX_SBOM_BYTES, follow=False) == text.encode("utf-8")
    except (OSError, ValueError):  # (TooLargeError is a ValueError)
        return False


def load_sbom(path: Path) -> Any:
    """An SBOM file, checked against the CycloneDX 1.6 schema. Raises BadInputError (exit 2)."""
    from cyclonedx.exception import MissingOptionalDependencyException
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    try:
        validator = JsonStrictValidator(SchemaVersion.V1_6)
        validator.validate_str("{}")  # (the schema check's own libraries load here: jsonschema, referencing)
    except MissingOptionalDependencyException as exc:  # cyclonedx-python-lib without its extra: exit 1 before
        raise EnvironmentProblem(f"verify validates the SBOM against the CycloneDX schema, which needs "
                                 f"`pip install 'cyclonedx-python-lib[json-validation]'` in {sys.executable} ({exc}); "
                                 f"nothing was checked") from None
    what = not_a_file(path)  # read nothing first: a FIFO would block the read for ever
    if what is not None:
        raise BadInputError(f"the SBOM {path} is {what}, not a regular file; give the SBOM file itself")
    try:
        text = read_regular(path, MAX_SBOM_BYTES).decode("utf-8")
    except TooLargeError as exc:  # told by its size, never read
        raise BadInputError(f"the SBOM {path}: {exc.said('an SBOM')}; give the SBOM `fixpack sbom` wrote "
                            f"of the image") from exc
    except FileNotFoundError:
        raise BadInputError(f"the SBOM {path} does not exist; give the file `fixpack sbom --out` (or `apply "
                            f"--sbom`) wrote") from None
    except UnicodeDecodeError as exc:
        raise BadInputError(f"the SBOM {path} is not UTF-8 text ({exc.reason} at byte {exc.start}), so no CycloneDX "
                            f"JSON document; give the file `fixpack sbom` wrote") from None
    except OSError as exc:  # (a file this user may not read: the environment's, exit 5)
        from .errors import io_said

        raise EnvironmentProblem(f"cannot read the SBOM {io_said(exc, path)}; run as a user who may read it") \
            from exc
    try:
        doc = loads_json(text)
        errors = list(validator.validate_str(text, all_errors=True) or ())
    except ValueError as exc:  # not JSON at all
        raise BadInputError(f"{path} is not a CycloneDX 1.6 JSON document: {exc}") from exc
    except RecursionError:  # JSON, nested deeper than the schema's (recursive) check can follow
        raise BadInputError(f"{path} is not a CycloneDX 1.6 JSON document: {TOO_DEEP}") from None
    if errors:
        raise BadInputError(f"{path} is not a valid CycloneDX 1.6 document: {schema_errors([e.data for e in errors])}")
    return doc


def schema_errors(errors: list[Any], most: int = 3) -> str:
    """jsonschema's validation ``errors`` said briefly: the most relevant first (jsonschema's ``best_match``), then
    the others in document order, at most ``most``, each as ``at JSON-PATH: message`` cut to 200 characters.
    (An error's own text carries the whole schema it failed against: 1.8 MB for CycloneDX's.)"""
    from jsonschema.exceptions import best_match

    best = best_match(errors)
    shown = [best, *(e for e in errors if e is not best)][:most]
    said = [f"at {e.json_path}: {e.message if len(e.message) <= 200 else e.message[:197] + '...'}" for e in shown]
    more = f"; and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
    return "; ".join(said) + more


def profile_of(doc: Any) -> str:
    props = doc.get("metadata", {}).get("component", {}).get("properties", [])
    return next((str(p.get("value")) for p in props if p.get("name") == f"{P}profile"), "")


def verify(req: Request, path: Path, doc: Any) -> VerifyResult:
    """Each difference between the SBOM ``doc`` and the image: a fix or component missing or extra, a
    file changed or missing, another version or commit of a target."""
    want = facts_of(doc)
    ctx, states = read_image(req)
    held, wrong = image_state(req)
    states = states if wrong else told(states, held)  # (wrong: the facts compared one by one too, as they are)
    have = facts_of(json.loads(render(build_bom(ctx, states))))
    roots = {st.found.spec.name: st.found.root for st in states}
    diffs = [f"status does not vouch for the image as it is (status exit {wrong[0]}): {wrong[1]}"] if wrong \
        else []
    for key in sorted(set(want) | set(have)):
        a, b = want.get(key), have.get(key)
        if a == b:
            continue
        if b is None and key.startswith("file ") and _there(roots, key[5:]):  # the file is there, unpatched
            diffs.append(f"{key}: in the SBOM ({a[:12] if a else a}...), not a patched file of the image (no fix "
                         f"applied there records it)")
        elif b is None or b == "missing":
            diffs.append(f"{key}: in the SBOM ({a}), missing in the image")
        elif a is None:
            diffs.append(f"{key}: in the image ({b}), not in the SBOM")
        elif key.startswith("file "):
            diffs.append(f"{key}: changed (sha256 {a[:12]}... in the SBOM, {b[:12]}... now)")
        else:
            diffs.append(f"{key}: {a} in the SBOM, {b} in the image")
    return VerifyResult(path, diffs, len(want))


def _there(roots: dict[str, Path], named: str) -> bool:
    """Whether the file an SBOM names (``TARGET:PATH``) is in that target's root now."""
    target, _, path = named.partition(":")
    return target in roots and path_problem(path) is None and os.path.lexists(roots[target] / path)
