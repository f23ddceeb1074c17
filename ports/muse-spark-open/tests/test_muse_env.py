"""The MUSE_SPARK_* switches: one place, validated, errors that name the variable."""

from muse_testutil import _no_stray_switches  # noqa: F401  (fixtures)

import pytest

from muse_spark_open import env


def test_defaults_when_unset_or_empty():
    assert env.read_all({}) == {s: env.SWITCHES[s].default for s in env.SWITCHES}
    assert env.read("MUSE_SPARK_MXFP4_KERNELS", {"MUSE_SPARK_MXFP4_KERNELS": "  "}) == "1"


@pytest.mark.parametrize("name", sorted(env.SWITCHES))
def test_every_value_of_every_switch_is_accepted(name):
    for value in env.SWITCHES[name].choices:
        assert env.read(name, {name: value}) == value


@pytest.mark.parametrize("name,bad", [("MUSE_SPARK_MXFP4_KERNELS", "yes"), ("MUSE_SPARK_REFERENCE_DTYPE", "fp16"),
                                      ("MUSE_SPARK_STRICT_LOAD", "true")])
def test_bad_value_is_an_error_naming_the_variable(name, bad):
    with pytest.raises(env.SwitchError) as e:
        env.read_all({name: bad})
    assert name in str(e.value) and repr(bad) in str(e.value)
    assert ", ".join(env.SWITCHES[name].choices) in str(e.value)


def test_unknown_muse_spark_variable_is_an_error():
    with pytest.raises(env.SwitchError, match="MUSE_SPARK_MXFP4_KERNEL\\b"):
        env.read_all({"MUSE_SPARK_MXFP4_KERNEL": "1"})  # a typo would otherwise be ignored
    assert env.read_all({"OTHER": "x"})  # other variables are not ours


def test_switches_are_read_only_in_env_module():
    """No other module reads a MUSE_SPARK_ variable from the environment."""
    import re
    from pathlib import Path

    pkg = Path(env.__file__).parent
    offenders = [p.name for p in pkg.rglob("*.py") if p.name != "env.py"
                 and re.search(r"(os\.environ|getenv)[^\n]*MUSE_SPARK_", p.read_text())]
    assert offenders == []


def test_readme_describes_every_switch():
    from muse_testutil import PORT

    readme = (PORT / "README.md").read_text()
    for name in env.SWITCHES:
        assert name in readme
