"""The one worker process: registers every workflow and activity of growth.

    growth-worker --config growth.yaml        (or GROWTH_CONFIG=growth.yaml growth-worker)

Secrets (kubeconfig, cloud tokens, Temporal API key) come from files or environment variables
named in the config, never from workflow inputs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio.client import Client, TLSConfig
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities import nodes
from activities.settings import Settings, TemporalSettings, load_settings
from workflows.all import WORKFLOWS

log = logging.getLogger("growth.worker")


async def connect(t: TemporalSettings) -> Client:
    tls: TLSConfig | bool = False
    if t.tls_cert_file or t.tls_ca_file:
        def read(path: str | None) -> bytes | None:
            return open(path, "rb").read() if path else None

        tls = TLSConfig(
            client_cert=read(t.tls_cert_file),
            client_private_key=read(t.tls_key_file),
            server_root_ca_cert=read(t.tls_ca_file),
        )
    api_key = os.environ.get(t.api_key_env) if t.api_key_env else None
    return await Client.connect(
        t.address,
        namespace=t.namespace,
        tls=tls if not api_key else True,
        api_key=api_key,
        data_converter=pydantic_data_converter,
    )


def build_activities(settings: Settings) -> list[Any]:
    """Every loop's activities; each loop package builds its own."""
    return [*nodes.build_activities(settings)]


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    client = await connect(settings.temporal)
    with ThreadPoolExecutor(max_workers=32) as executor:
        worker = Worker(
            client,
            task_queue=settings.temporal.task_queue,
            workflows=WORKFLOWS,
            activities=build_activities(settings),
            activity_executor=executor,
            max_concurrent_activities=32,
        )
        stop = stop or asyncio.Event()
        async with worker:
            log.info("growth worker polling task queue %s on %s", settings.temporal.task_queue, settings.temporal.address)
            print(f"growth worker ready: task queue {settings.temporal.task_queue}", flush=True)
            await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="growth worker")
    parser.add_argument("--config", help="settings YAML (default: $GROWTH_CONFIG)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("GROWTH_LOG_LEVEL", "INFO"), format="%(asctime)s %(name)s %(message)s")
    settings = load_settings(args.config)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    asyncio.run(_main())


if __name__ == "__main__":
    main()
