"""make_backend: the CLI unless a pyslurm built for the running Slurm is importable (and, for `auto`,
live-tested on that release).

A fake runner answers `sinfo --version` and a fake `pyslurm` module is put in sys.modules (an
imported pyslurm is not probed again), so the choice logic is exercised without Slurm or pyslurm;
the real one runs in the pyslurm lane (docs/slurm-versions.md).
"""

from __future__ import annotations

import sys
import types

import pytest

from tesserae_slurm.model import InputError
from tesserae_slurm.slurm import (
    SlurmBackend,
    SlurmBackendError,
    SlurmCliBackend,
    make_backend,
)
from tesserae_slurm.slurm.pyslurm_backend import LIVE_TESTED, PyslurmBackend


class FakeRunner:
    """Answers `sinfo --version` like Slurm 22.05.8 and records every argv."""

    def __init__(self, version: str = "slurm-wlm 22.05.8\n") -> None:
        self.version = version
        self.calls: list[list[str]] = []

    def run(self, argv, **kwargs):
        self.calls.append(list(argv))
        if list(argv) == ["sinfo", "--version"]:
            return self.version
        raise AssertionError(f"unexpected call {argv}")


@pytest.fixture
def no_pyslurm(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm -> ImportError


@pytest.fixture
def fake_pyslurm(monkeypatch):
    def install(version: str):
        module = types.ModuleType("pyslurm")
        module.__version__ = version
        monkeypatch.setitem(sys.modules, "pyslurm", module)
        return module

    return install


def test_cli_when_asked():
    backend = make_backend("cli", runner=FakeRunner())
    assert isinstance(backend, SlurmCliBackend) and not isinstance(backend, PyslurmBackend)


def test_auto_falls_back_to_cli_without_pyslurm(no_pyslurm):
    backend = make_backend("auto", runner=FakeRunner())
    assert type(backend) is SlurmCliBackend


def test_explicit_pyslurm_without_pyslurm_fails_clearly(no_pyslurm):
    with pytest.raises(SlurmBackendError, match="pyslurm is not importable"):
        make_backend("pyslurm", runner=FakeRunner())


def test_auto_falls_back_on_version_mismatch(fake_pyslurm):
    fake_pyslurm("25.11.0")
    assert type(make_backend("auto", runner=FakeRunner())) is SlurmCliBackend


def test_explicit_pyslurm_version_mismatch_message(fake_pyslurm):
    fake_pyslurm("25.11.0")
    with pytest.raises(SlurmBackendError) as info:
        make_backend("pyslurm", runner=FakeRunner())
    assert str(info.value) == "pyslurm 25.11 does not match Slurm 22.05; using the CLI backend requires prefer=cli"


def test_auto_chooses_matching_pyslurm_on_a_live_tested_release(fake_pyslurm, monkeypatch):
    fake_pyslurm("24.11.0")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    backend = make_backend("auto", runner=FakeRunner("slurm-wlm 24.11.5\n"))
    assert isinstance(backend, PyslurmBackend) and backend.name == "pyslurm"


def test_auto_keeps_the_cli_where_pyslurm_was_not_live_tested(fake_pyslurm, monkeypatch):
    fake_pyslurm("23.11.1")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    runner = FakeRunner("slurm 23.11.10\n")
    assert (23, 11) not in LIVE_TESTED
    assert type(make_backend("auto", runner=runner)) is SlurmCliBackend
    with pytest.raises(SlurmBackendError, match="has not passed the live tests on Slurm 23.11"):
        PyslurmBackend.create(SlurmCliBackend(runner=runner), live_tested_only=True)
    assert isinstance(make_backend("pyslurm", runner=runner), PyslurmBackend)  # asked for explicitly


def test_auto_chooses_pyslurm_on_22_05_too(fake_pyslurm, monkeypatch):
    fake_pyslurm("22.5.3")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert isinstance(make_backend("auto", runner=FakeRunner()), PyslurmBackend)


def test_matching_pyslurm_refused_when_bound_elsewhere(fake_pyslurm, monkeypatch):
    fake_pyslurm("24.11.0")  # imported elsewhere: libslurm read the process's SLURM_CONF
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    env = {"SLURM_CONF": "/tmp/dev/etc/slurm.conf"}
    runner = FakeRunner("slurm-wlm 24.11.5\n")
    assert type(make_backend("auto", env, runner=runner)) is SlurmCliBackend
    with pytest.raises(SlurmBackendError, match="bound to /etc/slurm/slurm.conf, not /tmp/dev/etc/slurm.conf"):
        make_backend("pyslurm", env, runner=runner)
    assert isinstance(make_backend("pyslurm", {"SLURM_CONF": "/etc/slurm/slurm.conf"}, runner=runner), PyslurmBackend)


def test_pyslurm_that_kills_its_process_is_refused_not_fatal(tmp_path, monkeypatch):
    """libslurm exits the process that imports pyslurm without a configuration; the probe runs in a child."""
    fake = tmp_path / "pyslurm"
    fake.mkdir()
    (fake / "__init__.py").write_text('import sys\nsys.stderr.write("python: fatal: Could not establish a '
                                      'configuration source\\n")\nsys.exit(1)\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    assert type(make_backend("auto", runner=FakeRunner())) is SlurmCliBackend
    with pytest.raises(SlurmBackendError, match=r"not importable \(python: fatal: Could not establish"):
        make_backend("pyslurm", runner=FakeRunner())
    assert "pyslurm" not in sys.modules


def test_probe_reads_the_version_of_an_importable_pyslurm(tmp_path, monkeypatch):
    fake = tmp_path / "pyslurm"
    fake.mkdir()
    (fake / "__init__.py").write_text('import os\n__version__ = "22.5.1"\n'
                                      'assert os.environ["SLURM_CONF"] == "/tmp/dev/etc/slurm.conf"\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    with pytest.raises(SlurmBackendError, match="pyslurm 22.05 does not match Slurm 24.11"):
        make_backend("pyslurm", {"SLURM_CONF": "/tmp/dev/etc/slurm.conf"}, runner=FakeRunner("slurm-wlm 24.11.5\n"))


def test_unknown_preference():
    with pytest.raises(InputError, match="unknown Slurm backend"):
        make_backend("rest", runner=FakeRunner())


def test_backends_satisfy_protocol():
    assert isinstance(SlurmCliBackend(runner=FakeRunner()), SlurmBackend)
