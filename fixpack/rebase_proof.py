"""Proofs inside a rebase: each carried fix's tests run on a stand-in image of the new release.

A text merge can be clean and still wrong (on 0.31.0 a clean merge of prompt-order called a method
upstream had removed). With ``--python PATH`` (the interpreter of a virtual environment that has the
new release installed, e.g. made by ``tools/image-venv.sh``), every carried fix's proof
(``fixes/<id>/test_*.py``) runs twice:

- on the clean image, where it must fail (pytest exit 1): if it passes, upstream fixed the symptom and
  the fix is reported upstreamed (proof passes without the fix), proposed for dropping;
- on the image with the chain carried so far, where it must pass: if it fails, the fix is **broken**,
  whatever its text said, and the rebase stops there as a conflict for the maintainer.

The image itself is never written: the chain is laid over a copy of the target's package folder
(hard links, a patched file replaced by a new one) that goes first on ``PYTHONPATH``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from .errors import BadInputError
from .evaluate import run_pass
from .model import Fix
from .nofollow import atomic_write
from .patchtext import as_fix
from .prove import TestRun, run_proof, site_packages
from .rebase_result import FixOutcome
from .rebase_session import Session
from .safepath import hash_regular, not_a_file
from .structs import dataclass
from .tree import Tree


@dataclass
class Prover:
    """The proof runs of one target: the image's interpreter, the folder its package lies in, the
    overlay that holds the chain carried so far, and the proof environment of the profile."""

    python: str
    site: Path
    overlay: Path
    package: str
    env: dict[str, str]
    pack_root: Path

    @classmethod
    def start(cls, python: str, site: Path | None, package: str, work: Path, env: dict[str, str],
              pack_root: Path) -> Prover:
        """A fresh overlay of ``<site>/<package>`` under ``work`` (site: the interpreter's purelib)."""
        root = site or site_packages(python)
        if not (root / package / "__init__.py").is_file():
            raise BadInputError(f"--python {python}: no {package}/ package in {root}; give the interpreter of a "
                                f"stand-in image of the new release (tools/image-venv.sh VERSION DIR)")
        overlay = work / "proof" / package
        shutil.rmtree(overlay.parent, ignore_errors=True)
        overlay.parent.mkdir(parents=True)
        shutil.copytree(root / package, overlay / package, copy_function=os.link,
                        ignore=shutil.ignore_patterns("__pycache__"))
        return cls(python, root, overlay, package, env, pack_root)

    def clean(self, fix: Fix) -> TestRun:
        """The fix's proof on the clean image."""
        return run_proof(self.python, fix.folder, self.pack_root, {**self.env, "PYTHONPATH": str(self.site)})

    def patched(self, fix: Fix) -> TestRun:
        """The fix's proof on the image with the chain carried so far (see :meth:`carry`)."""
        return run_proof(self.python, fix.folder, self.pack_root, {**self.env, "PYTHONPATH": str(self.overlay)})

    def carry(self, fix: Fix) -> list[str]:
        """Lay ``fix`` (as carried: its new patches) over the overlay. Returns why it did not apply ([] when
        it did); a patched file is written as a new file, never through the image's hard link."""
        p = run_pass(fix, Tree(self.overlay), reverse=False)
        if not p.ok:
            return p.explain()
        for change in p.tree.changes():
            dest = self.overlay / change.path
            if change.data is None:
                dest.unlink(missing_ok=True)
            else:
                dest.unlink(missing_ok=True)  # break the hard link to the image's file first
                atomic_write(dest, change.data, change.mode or 0o644)
        return []

    def drop(self) -> None:
        shutil.rmtree(self.overlay.parent, ignore_errors=True)


def tests_digest(fix: Fix) -> str:
    """sha256 over the fix's proof files (a clean run is reused only while they are unchanged), each read in blocks
    (:func:`hash_regular`, as pytest reads it: a link followed) without blocking: one that is no regular file
    (a FIFO would block the read) is BadInputError naming it."""
    h = hashlib.sha256()
    for p in sorted(fix.folder.glob("test_*.py")):
        h.update(p.name.encode() + b"\0")
        try:
            hash_regular(p, h, follow=True)
        except OSError as exc:
            what = f"it is {not_a_file(p) or 'no regular file'}" if p.is_symlink() or not_a_file(p) else exc.strerror
            raise BadInputError(f"{p}: the proof file of fix {fix.id} cannot be read ({what}): put the proof's own "
                                f"test file there, then run the rebase again") from exc
    return h.hexdigest()


def tail(run: TestRun, lines: int = 8) -> str:
    """What a proof run said, for the report: its first error lines (pytest's ``E`` lines, which name the
    exception) and its short summary at the end."""
    text = run.output.splitlines()
    errors = [ln for ln in text if ln.startswith("E ")][:lines]
    summary = [ln for ln in text if ln.startswith(("FAILED", "ERROR"))][:lines]
    return "\n".join(errors + summary + text[-1:])


def start_prover(session: Session, package: str, target: str, proof_env: dict[str, str]) -> Prover | None:
    """The session's prover for one target, or None when no stand-in image was given."""
    conf = session.state.get("proof") or {}
    if not conf.get("python"):
        return None
    site = Path(conf["site"]) if conf.get("site") else None
    return Prover.start(conf["python"], site, package, session.work / ".proof" / target, proof_env,
                        session.pack_root)


def prove_carried(session: Session, prover: Prover | None, fix: Fix, o: FixOutcome, new_v: str) -> str:
    """Prove a carried fix: its proof must fail on the clean image and pass with the chain carried up to it.

    Sets ``o.proof`` (and, when the proof passes without the fix, makes ``o`` upstreamed); returns why
    the fix is broken ("" when it is not).
    """
    if prover is None:
        o.proof = "not proven"
        o.flags.append("not proven: no stand-in image was given (--python), so nothing shows that the carried "
                       "change still works on this release")
        return ""
    carried = as_fix(fix, o.new_patches) if o.new_patches else fix
    clean = _clean_run(session, prover, fix)
    if clean.rc == 0:
        o.outcome, o.proof = "upstreamed", "passes without the fix"
        o.evidence.append(f"its proof passes on the clean {new_v} ({clean.summary}): upstream removed the symptom; "
                          f"proposed for dropping (kept listed; check the proof's output):\n{tail(clean)}")
        prover.carry(carried)
        return ""
    if clean.rc != 1:
        o.proof = "does not run"
        return (f"its proof does not run on the clean {new_v} (pytest exit {clean.rc}: {clean.summary}); adapt "
                f"fixes/{fix.id}/test_*.py to this release:\n{tail(clean)}")
    why = prover.carry(carried)
    if why:
        o.proof = "fails with the fix"
        return "the carried patch does not apply to the image's files: " + "; ".join(why)
    patched = prover.patched(fix)
    if patched.rc != 0:
        o.proof = "fails with the fix"
        return (f"its text carried ({o.outcome}), but its proof fails on {new_v} with the fix (pytest exit "
                f"{patched.rc}: {patched.summary}):\n{tail(patched)}")
    o.proof = "proven"
    o.evidence.append(f"proof: fails on the clean {new_v} ({clean.summary}), passes with the fix ({patched.summary})")
    return ""


def _clean_run(session: Session, prover: Prover, fix: Fix) -> TestRun:
    """The proof on the clean image, reused across --continue while the proof files are unchanged."""
    cache = session.state.setdefault("proof", {}).setdefault("clean", {})
    digest = tests_digest(fix)
    hit = cache.get(fix.id)
    if hit and hit.get("digest") == digest:
        return TestRun(int(hit["rc"]), str(hit["summary"]), str(hit["output"]))
    run = prover.clean(fix)
    cache[fix.id] = {"digest": digest, "rc": run.rc, "summary": run.summary, "output": run.output}
    session.save()
    return run
