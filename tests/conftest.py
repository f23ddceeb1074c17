"""Test helpers: real trees and real git repositories in temporary folders, a pinned git identity,
and no access to the home folder."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixpack import engine

REPO = Path(__file__).resolve().parent.parent
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000"}


@pytest.fixture(autouse=True)
def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GAUDI_FIXES_ROOT", raising=False)
    monkeypatch.delenv("FIXPACK_FAULT_AT", raising=False)
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root with its bytes and mode (the byte-identical check)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".git" not in p.relative_to(root).parts:
            out[p.relative_to(root).as_posix()] = (p.read_bytes(), p.stat().st_mode & 0o777)
    return out


def make_diff(before: dict[str, str | None], after: dict[str, str | None], tmp: Path) -> str:
    """A git diff (a/ b/ prefixes, 3 lines of context) from file contents before and after."""
    repo = tmp / f"diffrepo-{len(list(tmp.glob('diffrepo-*')))}"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for path, text in before.items():
        if text is not None:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "base")
    for path, text in after.items():
        if text is None:
            (repo / path).unlink()
        else:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "-M")


HEADER = ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
          "From: t <t@invalid>\nSubject: [PATCH] {summary}\n\n{summary}\n\n---\n")


@dataclass
class PackBuilder:
    """Builds a pack (fixes, series, profile) and target trees under a temporary folder."""

    base: Path
    target: str = "demo"
    package: str = "demo_pkg"
    version: str = "1.0"
    commit: str = "abcdef1234"
    series: list[str] = field(default_factory=list)
    fix_meta: dict[str, dict] = field(default_factory=dict)

    @property
    def pack(self) -> Path:
        return self.base / "pack"

    def tree(self, name: str, files: dict[str, str]) -> Path:
        root = self.base / name
        (root / self.package).mkdir(parents=True, exist_ok=True)
        (root / self.package / "__init__.py").write_text("")
        (root / self.package / "_version.py").write_text(
            f"__version__ = version = {self.version!r}\n__commit_id__ = commit_id = {'g' + self.commit!r}\n")
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        return root

    def git_release(self, files: dict[str, str], name: str = "release") -> tuple[Path, str]:
        """A release tree committed to git, which a profile can fetch; the builder's commit becomes its HEAD.
        Returns the tree and the ``[targets.demo]`` line that fetches it (``source = {git, ref}``)."""
        release = self.tree(name, files)
        git(release, "init", "-q")
        git(release, "add", "-A")
        git(release, "commit", "-qm", name)
        self.commit = git(release, "rev-parse", "HEAD").strip()
        return release, f'source = {{ git = "{release}", ref = "{self.commit}" }}'

    def add_fix(self, fix_id: str, before: dict[str, str | None], after: dict[str, str | None],
                diff: str | None = None, **meta: object) -> Path:
        folder = self.pack / "fixes" / fix_id
        folder.mkdir(parents=True, exist_ok=True)
        body = diff if diff is not None else make_diff(before, after, self.base / "diffs")
        (folder / "0001-change.patch").write_text(HEADER.format(summary=fix_id) + body)
        fields = {"id": fix_id, "version": 1, "summary": f"fix {fix_id}", "why": "a test symptom",
                  "target": self.target, "patches": ["0001-change.patch"], **meta}
        (folder / "fix.toml").write_text(toml(fields))
        self.series.append(fix_id)
        self.fix_meta[fix_id] = fields
        self.write_series()
        return folder

    def write_series(self) -> None:
        (self.pack / "fixes").mkdir(parents=True, exist_ok=True)
        (self.pack / "fixes" / "series").write_text("".join(f"{s}\n" for s in self.series))

    def profile(self, default: list[str], opt_in: list[str] | None = None, name: str = "p1",
                extra_targets: str = "") -> Path:
        (self.pack / "profiles").mkdir(parents=True, exist_ok=True)
        path = self.pack / "profiles" / f"{name}.toml"
        path.write_text(
            f'name = "{name}"\n[targets.{self.target}]\npackage = "{self.package}"\nversion = "{self.version}"\n'
            f'commit = "{self.commit[:8]}"\n{extra_targets}\n[fixes]\ndefault = {default!r}\nopt_in = {opt_in or []!r}\n'
            .replace("'", '"'))
        return path

    def request(self, root: Path, name: str = "p1", **kw: object) -> engine.Request:
        return engine.Request(pack_root=self.pack, profile=name, roots={self.target: root}, **kw)  # type: ignore[arg-type]

    def lock(self, clean_root: Path, name: str = "p1") -> None:
        engine.write_lock(self.request(clean_root, name))

    def run_child(self, root: Path, command: str = "apply", fault_at: int | None = None) -> int:
        """engine.<command> of profile p1 on ``root`` in a child process, its exit status; ``fault_at`` N kills
        it (SIGKILL, 137) at its N-th write point (FIXPACK_FAULT_AT)."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("FIXPACK_FAULT_AT", None)
        if fault_at:
            env["FIXPACK_FAULT_AT"] = str(fault_at)
        code = ("import sys; from pathlib import Path; from fixpack import engine; "
                f"r = engine.{command}(engine.Request(pack_root=Path({str(self.pack)!r}), profile='p1', "
                f"roots={{{self.target!r}: Path({str(root)!r})}})); sys.exit(r.exit_code)")
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).returncode


def toml(fields: dict) -> str:
    lines = []
    tables = {}
    for k, v in fields.items():
        if isinstance(v, dict):
            tables[k] = v
        elif isinstance(v, bool):
            lines.append(f"{k} = {'true' if v else 'false'}")
        elif isinstance(v, (int, float)):
            lines.append(f"{k} = {v}")
        elif isinstance(v, list):
            lines.append(f"{k} = [{', '.join(repr(x).replace(chr(39), chr(34)) for x in v)}]")
        else:
            lines.append(f'{k} = """{v}"""')
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f'{k} = "{v}"' for k, v in table.items()]
    return "\n".join(lines) + "\n"


def one_fix_pack(builder: PackBuilder, mod: str = "demo_pkg/mod.py") -> Path:
    """The smallest pack a CLI test needs: fix "one" (``line 3`` -> ``three`` in ``mod``, 20 numbered lines) in
    profile p1, locked on a clean tree; returns a fresh image tree (the release's bytes) to run it on."""
    base = numbered(20)
    clean = builder.tree("clean", {mod: base})
    builder.add_fix("one", {mod: base}, {mod: base.replace("line 3\n", "three\n")})
    builder.profile(["one"])
    builder.lock(clean)
    return builder.tree("image", {mod: base})


GAUDI_RUNNER = "vllm_gaudi/v1/worker/hpu_model_runner.py"


def gaudi_tree(root: Path) -> Path:
    """A small tree shaped like the vllm-gaudi plugin (a second target)."""
    (root / "vllm_gaudi/v1/worker").mkdir(parents=True)
    (root / "vllm_gaudi/__init__.py").write_text("def register():\n    return None\n")
    (root / GAUDI_RUNNER).write_text(numbered(50, "runner"))
    (root / "pyproject.toml").write_text('[project]\nname = "vllm-gaudi"\n')
    return root


def two_target_pack(builder: PackBuilder, tmp_path: Path) -> tuple[engine.Request, Path, Path]:
    """Profile p1 with fix core on target demo (``line 4`` -> ``four``; written first) and fix plugin on target
    vllm-gaudi (``runner 7`` -> ``seven`` in a git checkout shaped like the plugin), locked; returns the request
    and both roots (the demo release's tree and the plugin's checkout, where the run writes)."""
    base = numbered(20)
    clean = builder.tree("clean", {"demo_pkg/mod.py": base})
    gclean = gaudi_tree(tmp_path / "gclean")
    git(gclean, "init", "-q")
    git(gclean, "add", "-A")
    git(gclean, "commit", "-qm", "x")
    head = git(gclean, "rev-parse", "HEAD").strip()
    builder.add_fix("core", {"demo_pkg/mod.py": base}, {"demo_pkg/mod.py": base.replace("line 4\n", "four\n")})
    rtext = (gclean / GAUDI_RUNNER).read_text()
    builder.target = "vllm-gaudi"
    builder.add_fix("plugin", {GAUDI_RUNNER: rtext}, {GAUDI_RUNNER: rtext.replace("runner 7\n", "seven\n")})
    builder.target = "demo"
    builder.profile(["core", "plugin"], extra_targets=(f'[targets.vllm-gaudi]\npackage = "vllm_gaudi"\n'
                                                        f'distribution = "vllm-gaudi"\ncommit = "{head[:7]}"\n'))
    req = builder.request(clean)
    req.roots["vllm-gaudi"] = gclean
    engine.write_lock(req)
    return req, clean, gclean


@pytest.fixture
def builder(tmp_path: Path) -> PackBuilder:
    return PackBuilder(tmp_path)


def numbered(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


def reads_of(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes asked of each read of ``path`` (its real path), as they happen: -1 for the whole file (through an
    open file from ``os.fdopen``, or ``Path.read_text`` / ``Path.read_bytes``, which read it whole)."""
    real_path, asked = os.path.realpath(path), []
    fdopen, read_text, read_bytes = os.fdopen, Path.read_text, Path.read_bytes

    class Spy:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            asked.append(n)
            return self.f.read(n)

    def spy_fdopen(fd, *args, **kw):
        f = fdopen(fd, *args, **kw)
        return Spy(f) if os.readlink(f"/proc/self/fd/{fd}") == real_path else f

    def spy_text(self, *args, **kw):
        if os.path.realpath(self) == real_path:
            asked.append(-1)
        return read_text(self, *args, **kw)

    def spy_bytes(self):
        if os.path.realpath(self) == real_path:
            asked.append(-1)
        return read_bytes(self)

    monkeypatch.setattr(os, "fdopen", spy_fdopen)
    monkeypatch.setattr(Path, "read_text", spy_text)
    monkeypatch.setattr(Path, "read_bytes", spy_bytes)
    return asked


class StillRunning(BaseException):
    """Raised by :func:`within`: a BaseException, so that no ``except OSError`` (TimeoutError is one) takes it."""


@contextlib.contextmanager
def within(seconds: int):  # type: ignore[no-untyped-def]
    """Fail (StillRunning) a block that blocks or runs longer than ``seconds``, rather than hang the suite: a read
    of a FIFO waits for a writer."""
    import signal

    def late(_signum, _frame):  # type: ignore[no-untyped-def]
        raise StillRunning(f"still running after {seconds} s")

    before = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def with_fault(monkeypatch: pytest.MonkeyPatch, spec: str, run):  # type: ignore[no-untyped-def]
    """``run()`` with the engine's I/O fault hook set to ``spec`` ($FIXPACK_IO_FAULT, counted from 0): (its result,
    None), or (None, the FixpackError it raised)."""
    from fixpack import fsio
    from fixpack.errors import FixpackError

    monkeypatch.setenv(fsio.IO_FAULT_ENV, spec)
    fsio.reset_fault_counters()
    try:
        return run(), None
    except FixpackError as exc:
        return None, exc
    finally:
        monkeypatch.delenv(fsio.IO_FAULT_ENV)
