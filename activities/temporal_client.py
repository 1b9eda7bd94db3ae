"""The Temporal client every growth process connects with (the worker, the `growth` command):
address, namespace, mTLS or an API key from the settings, growth's pydantic data converter.

A module of its own so that the command connects without importing the worker (every loop's
activities and the Kubernetes client: ~1 CPU-second per `growth` process)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client, TLSConfig
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime

from activities.settings import TemporalSettings


async def connect(t: TemporalSettings, runtime: Runtime | None = None, interceptors: Sequence[Any] = ()) -> Client:
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
        runtime=runtime,
        interceptors=interceptors,
    )
