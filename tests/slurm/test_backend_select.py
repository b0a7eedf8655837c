"""make_backend: the CLI unless a pyslurm built for the running Slurm is importable.

A fake runner answers `sinfo --version` and a fake `pyslurm` module is put in sys.modules, so
the choice logic is exercised without Slurm or pyslurm (a real matching pyslurm cannot be
built here: PyPI has 25.11, Debian 12 ships Slurm 22.05).
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
from tesserae_slurm.slurm.pyslurm_backend import PyslurmBackend


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


def test_matching_pyslurm_is_chosen(fake_pyslurm, monkeypatch):
    fake_pyslurm("22.5.1")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    backend = make_backend("auto", runner=FakeRunner())
    assert isinstance(backend, PyslurmBackend) and backend.name == "pyslurm"


def test_matching_pyslurm_refused_when_env_points_elsewhere(fake_pyslurm, monkeypatch):
    fake_pyslurm("22.5.1")
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    env = {"SLURM_CONF": "/tmp/dev/etc/slurm.conf"}
    assert type(make_backend("auto", env, runner=FakeRunner())) is SlurmCliBackend
    with pytest.raises(SlurmBackendError, match="process environment"):
        make_backend("pyslurm", env, runner=FakeRunner())


def test_unknown_preference():
    with pytest.raises(InputError, match="unknown Slurm backend"):
        make_backend("rest", runner=FakeRunner())


def test_backends_satisfy_protocol():
    assert isinstance(SlurmCliBackend(runner=FakeRunner()), SlurmBackend)
