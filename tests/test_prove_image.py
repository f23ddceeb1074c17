"""`prove` on a real interpreter's site-packages (a throwaway venv holding the demo package, never the
stand-in images): SIGTERM mid-proof reverts the image before the run ends (exit 143), a site left patched is
refused with the revert command that cleans it, and a Python without pytest is refused before anything is
written. Found by a fresh user."""

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, numbered, snapshot

from fixpack import engine
from fixpack.errors import BadInputError, MismatchError
from fixpack.prove import prove

MOD = "demo_pkg/mod.py"
PROOF = '''import os, pathlib, time
import demo_pkg

def test_fixed():
    text = (pathlib.Path(demo_pkg.__file__).parent / "mod.py").read_text()
    if "three" in text and os.environ.get("PROVE_MARK"):
        pathlib.Path(os.environ["PROVE_MARK"]).write_text("patched")
        time.sleep(120)  # a proof the CI timeout cuts short
    assert "three" in text
'''


def image(builder, with_pytest: bool = True) -> tuple[Path, Path]:
    """A venv (the image stand-in) whose site-packages holds the demo release; pytest through a .pth to this
    interpreter's site when ``with_pytest``. Returns (its python, its site-packages)."""
    venv = builder.base / ("venv" if with_pytest else "venv-bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin/python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    release = builder.tree("release", {MOD: numbered(20)})
    os.rename(release / "demo_pkg", site / "demo_pkg")
    if with_pytest:
        (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, site


@pytest.fixture
def pack(builder):
    base = numbered(20)
    clean = builder.tree("clean", {MOD: base})
    folder = builder.add_fix("one", {MOD: base}, {MOD: base.replace("line 3\n", "three\n")})
    (folder / "test_one.py").write_text(PROOF)
    builder.profile(["one"])
    builder.lock(clean)
    return builder


def every_path(site: Path) -> tuple[dict, list[str]]:
    return snapshot(site), sorted(p.relative_to(site).as_posix() for p in site.rglob("*"))


def cli(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", **kw.pop("env", {})}
    return subprocess.Popen([sys.executable, "-m", "fixpack.cli", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_sigterm_mid_proof_reverts_the_image_then_exits_143(pack, tmp_path, as_json):
    """A CI timeout's SIGTERM while the patched image's proof runs: it left the fix applied and the manifest in
    the site (the revert is in a ``finally``, which SIGTERM's default action skips)."""
    python, site = image(pack)
    before = every_path(site)
    mark = tmp_path / "mark"
    proc = cli("prove", "--pack", str(pack.pack), "-p", "p1", "--python", str(python), *["--json"] * as_json,
               env={"PROVE_MARK": str(mark)})
    deadline = time.monotonic() + 60
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), proc.communicate()
    assert (site / ".fixpack").exists() and "three" in (site / MOD).read_text()  # mid-proof: patched
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)
    assert time.monotonic() - start < 30  # the sleeping proof was stopped, not waited for
    said = json.loads(out)["error"] if as_json else err
    assert "terminated (SIGTERM)" in said and "left as it was found" in said, (out, err)
    if as_json:
        for kind in ("prove", "error"):
            schema = json.loads((REPO / "schemas" / f"{kind}.schema.json").read_text())
            jsonschema.Draft202012Validator(schema).validate(json.loads(out))
    assert every_path(site) == before


def test_a_site_left_patched_is_refused_with_the_command_that_reverts_it(pack):
    python, site = image(pack)
    before = every_path(site)
    assert engine.apply(engine.Request(pack_root=pack.pack, profile="p1", roots={"demo": site})).ok
    with pytest.raises(MismatchError, match="not clean: one: applied; revert it first") as err:
        prove(pack.pack, "p1", str(python))
    said = str(err.value)
    command = said[said.index("revert it first"):].split(": ", 1)[1]
    assert " revert --profile p1 --pack " in command and f"demo={site}" in command, said
    r = subprocess.run(command, shell=True, capture_output=True, text=True, cwd="/")  # runnable as written
    assert r.returncode == 0, r.stderr
    assert every_path(site) == before


def test_a_python_without_pytest_is_refused_before_anything_is_written(pack):
    """It patched the image, ran no proof (pytest missing twice over), reverted, and said NOT PROVEN (exit 4)."""
    python, site = image(pack, with_pytest=False)
    before = every_path(site)
    with pytest.raises(BadInputError, match=r"cannot import pytest .*pip install pytest") as err:
        prove(pack.pack, "p1", str(python))
    assert err.value.exit_code == 2 and every_path(site) == before
    proc = cli("prove", "--pack", str(pack.pack), "-p", "p1", "--python", str(python))
    out, err2 = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "cannot import pytest" in err2 and every_path(site) == before
