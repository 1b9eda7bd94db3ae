"""Processes.temporal: a started dev server is one a client can use, and a start that cannot
bind says so instead of handing back a port another process holds."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from temporalio.client import Client

from starters.processes import Processes


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
