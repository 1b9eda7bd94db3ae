"""Processes.temporal: a started dev server is one a client can use, and a start that cannot
bind says so instead of handing back a port another process holds; the ports it picks are ones no
bind(0) can be handed before the server binds them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from temporalio.client import Client

from starters.processes import Processes, ephemeral_low, free_port, picking_span


async def test_a_started_dev_server_serves_a_client_at_once(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    try:
        port, _ = procs.temporal(tmp_path / "temporal.db", ui=False)
        client = await Client.connect(f"127.0.0.1:{port}")  # no "not healthy yet"
        assert [w async for w in client.list_workflows()] == []
    finally:
        procs.stop_all()


def test_a_port_another_process_holds_is_an_exited_server_not_a_served_one(tmp_path: Path) -> None:
    with socket.socket() as holder:  # takes connections and never answers, as a stranger would
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        procs = Processes(tmp_path)
        try:
            with pytest.raises(RuntimeError, match="temporal dev server exited"):
                procs.temporal(tmp_path / "temporal.db", port=holder.getsockname()[1], ui=False)
        finally:
            procs.stop_all()


def test_picked_ports_are_free_and_below_the_ephemeral_range() -> None:
    """The dev server picks its internal ports by bind(0): one picked from the ephemeral range and let
    go of could be handed to it before our server bound it (a test's frontend port once was)."""
    low = ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert all(1024 < p < low for p in ports) and len(ports) > 1, ports
    for p in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # nothing holds it


def test_each_xdist_worker_picks_from_its_own_slice() -> None:
    """Two workers' time-skipping servers once got the same port: the second could not bind, its test
    ran on the first's server, and failed with "tcp connect error" when that one stopped."""
    low, high = 20768, 32768
    slices = [
        picking_span(low, high, {"PYTEST_XDIST_WORKER": f"gw{i}", "PYTEST_XDIST_WORKER_COUNT": "6"}) for i in range(6)
    ]
    assert slices[0][0] == low and all(a[1] == b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert all(hi - lo == 2000 for lo, hi in slices)
    assert picking_span(low, high, {}) == (low, high)  # outside pytest-xdist: the whole span
    assert picking_span(low, high, {"PYTEST_XDIST_WORKER": "master", "PYTEST_XDIST_WORKER_COUNT": "6"}) == (low, high)


def test_a_process_never_hands_out_the_same_port_twice_in_a_row_of_picks() -> None:
    # A port handed out but not yet bound (a server still starting) is free to bind(), so only the
    # picker's own memory keeps it from being handed out again.
    lo, hi = picking_span(max(1025, ephemeral_low() - 12000), ephemeral_low())
    ports = [free_port() for _ in range(100)]
    assert len(set(ports)) == len(ports) and all(lo <= p < hi for p in ports), ports


def test_the_range_is_the_kernels_and_bind_0_is_the_last_resort(tmp_path: Path) -> None:
    (tmp_path / "range").write_text("40000\t60999\n")
    assert ephemeral_low(tmp_path / "range") == 40000
    assert ephemeral_low(tmp_path / "missing") == 32768  # Linux's default
    assert free_port(tries=0) >= ephemeral_low()  # none tried below: the kernel's pick
