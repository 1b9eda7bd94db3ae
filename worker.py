"""The one worker process: registers every workflow and activity of growth.

    growth-worker --config growth.yaml        (or GROWTH_CONFIG=growth.yaml growth-worker)

Secrets (kubeconfig, cloud tokens, Temporal API key) come from files or environment variables
named in the config, never from workflow inputs.

Operability: Prometheus metrics at http://<observability.metrics_address>/metrics, served by the
Temporal SDK's runtime (growth_* from workflows and activities, temporal_* from the SDK), and
probes at http://<observability.health_address>/healthz (the process is up) and /readyz
(connected to Temporal and polling the task queue).
"""

from __future__ import annotations

import gc

# The cyclic garbage collector waits while the worker's modules are imported: they make many
# objects (pydantic models, the Kubernetes API classes) and few cycles, and it ran over all of them
# again and again. The imports took ~1.45 CPU-s instead of ~1.95, at every worker start. main()
# then freezes what they made: the worker's later full collections leave those objects out.
_GC_WAS_ON = gc.isenabled()
gc.disable()

import argparse
import asyncio
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Interceptor, PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum, Worker

from activities import components, meter, nodes, tracing
from activities.components.decisions import DECISIONS as COMPONENT_DECISIONS
from activities.fleet.decisions import DECISIONS as FLEET_DECISIONS
from activities.heartbeat import HeartbeatInterceptor
from activities.kube.client import ClusterClients
from activities.nodes.wake import PendingPodsWake, signal_loop
from activities.settings import (
    ObservabilitySettings,
    Settings,
    SettingsError,
    enabled_address,
    load_settings,
)
from activities.temporal_client import connect
from scaling.components.loop_metrics import HISTOGRAM_BUCKETS as COMPONENT_BUCKETS
from scaling.nodes.metrics import HISTOGRAM_BUCKETS
from workflows.activity_options import HEARTBEAT_THROTTLE
from workflows.all import WORKFLOWS
from workflows.arguments import MessageArguments
from workflows.sandbox import workflow_runner

if _GC_WAS_ON:
    gc.enable()

log = logging.getLogger("growth.worker")
# A burst keeps hundreds of NodeRequests waiting for their nodes at once. Those waits are async
# activities (no thread while waiting), but they hold a slot each: with few slots, the loop's own
# observation queued behind them (10,000 pods: 18 s a loop with 32 slots). A 10,000-pod burst
# keeps 323 waits at once (up to the loop's 400 in flight): with 256 slots the loop's
# start_node_requests waited 25 s for a slot (load 13). Slots are cheap; a thread starts only
# when that many sync activities run at once. The loop keeps up to 1,500 requests in flight
# (max_requests_in_flight), each with its wait: room for them and the loop's own beside them.
ACTIVITY_SLOTS = 2048
# A workflow task holds its slot until the server took its completion, which on a busy server is
# most of its time, so the requests' tasks queued behind a full worker with spare CPU (10,000
# pods, p99: a request's first task waited 12-16 s with 20 slots, 7 s with 60, 7-10 s with 150,
# its later tasks 11-15 s, 6-10 s and 10 s, the loop's own 0.3-0.8 s throughout, ahead of them
# by priority; docs/nodes-benchmarks.md, "Fewer workflow tasks per request").
WORKFLOW_TASK_SLOTS = 60
WORKFLOW_TASK_POLLS = 10
# Recovery (issue 20). SIGTERM stops polling, lets running activities finish for this long (long
# waits hand themselves back at once, activities.heartbeat.pause), then cancels the rest so
# they are retried elsewhere; deploy/base/worker.yaml's terminationGracePeriodSeconds (30) covers it.
GRACEFUL_SHUTDOWN = timedelta(seconds=15)
# A workflow's next task goes to the worker that ran its last one (its sticky queue) and moves to
# the shared queue after this long unpicked: what a SIGKILLed worker costs each of its workflows
# (the default 10 s; a shutdown worker tells the server at once). A live worker picks its
# sticky tasks in well under this unless all its task slots are busy; then another worker
# replays the history instead, which costs CPU but not correctness.
STICKY_QUEUE_TIMEOUT = timedelta(seconds=5)


def _build_id() -> str:
    try:
        return f"growth-{package_version('growth')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "growth-source"


BUILD_ID = _build_id()
WORKER_READY = "growth_worker_ready"  # gauge: what /readyz answers, 1 or 0
READY_EVERY_S = 10.0


def metrics_runtime(obs: ObservabilitySettings) -> Runtime | None:
    """The SDK runtime that serves /metrics, or None when metrics are off.

    Its Prometheus exporter carries the SDK's own metrics and every metric growth records through
    workflow.metric_meter() (skipped during replay, so counters never double-count) and
    activity.metric_meter(). Measured: `metric_prefix` renames only the SDK's metrics (temporal_*),
    never custom ones, and the exporter serves only /metrics, so the probes need their own port."""
    address = enabled_address(obs.metrics_address)
    if address is None:
        return None
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(
                    bind_address=address,
                    durations_as_seconds=True,  # Prometheus convention; growth's histograms are seconds too
                    histogram_bucket_overrides={**HISTOGRAM_BUCKETS, **COMPONENT_BUCKETS},
                )
            )
        )
    except ValueError as err:  # the port is taken, or the address is malformed
        raise SettingsError(f"observability.metrics_address {address}: {err}") from None


def build_activities(
    settings: Settings, clusters: ClusterClients | None = None, wake: PendingPodsWake | None = None
) -> list[Any]:
    """Every loop's activities; each loop package builds its own. One ClusterClients for all, so
    every loop reaches a cluster through the same cached client."""
    clusters = clusters or ClusterClients(settings)
    built = [*nodes.build_activities(settings, clusters, wake), *components.build_activities(settings, clusters)]
    # Pure: a loop's decisions run as local activities on whichever worker runs the loop.
    built += [*FLEET_DECISIONS, *COMPONENT_DECISIONS]
    if settings.fleet is not None:  # only a worker configured for the fleet loop talks to OCM
        from activities import fleet

        built += fleet.build_activities(settings)
    return built


class Health:
    """/healthz: the process answers. /readyz: the worker polls and Temporal answers its health check."""

    def __init__(self, client: Client, worker: Worker) -> None:
        self.client, self.worker = client, worker

    async def ready(self) -> tuple[bool, str]:
        if not self.worker.is_running or self.worker.is_shutdown:
            return False, "worker not polling"
        try:
            ok = await self.client.service_client.check_health(timeout=timedelta(seconds=2))
        except Exception as err:  # noqa: BLE001 - any failure means "not ready", with the reason
            return False, f"temporal unreachable: {err}"
        return (True, "ok") if ok else (False, "temporal not serving")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass  # headers: nothing in them matters here
            parts = request.decode("latin-1").split()
            path = parts[1] if len(parts) > 1 else ""
            if path == "/healthz":
                code, body = 200, "ok"
            elif path == "/readyz":
                ok, body = await self.ready()
                code = 200 if ok else 503
            else:
                code, body = 404, "not found: /healthz, /readyz"
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[code]
            data = (body + "\n").encode()
            writer.write(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
                f"Connection: close\r\n\r\n".encode()
                + data
            )
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def report(self, runtime: Runtime, every_s: float = READY_EVERY_S) -> None:
        """growth_worker_ready (1 or 0) on /metrics, what /readyz would answer, every `every_s`."""
        gauge = runtime.metric_meter.create_gauge(WORKER_READY, "1 while the worker polls and Temporal answers")
        while True:
            ok, _ = await self.ready()
            gauge.set(1 if ok else 0)
            await asyncio.sleep(every_s)

    async def serve(self, address: str) -> asyncio.Server:
        host, _, port = address.rpartition(":")
        try:
            return await asyncio.start_server(self.handle, host or "127.0.0.1", int(port))
        except (OSError, ValueError) as err:
            raise SettingsError(f"observability.health_address {address}: {err}") from None


def worker_interceptors() -> list[Interceptor]:
    """Activities beat in the background; a message whose arguments do not fit its handler is
    dropped or refused before it reaches a workflow (workflows/arguments.py)."""
    return [HeartbeatInterceptor(), MessageArguments()]


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    runtime = metrics_runtime(settings.observability)
    if runtime is not None:  # what records outside an activity (activities/meter.py) reaches /metrics too
        meter.use(runtime.metric_meter)
    clusters = ClusterClients(settings)
    clusters.preload()  # a bad kubeconfig stops the worker now, naming the cluster
    try:
        interceptors, flush_traces = tracing.from_environment()
    except RuntimeError as err:
        raise SettingsError(str(err)) from None
    client = await connect(settings.temporal, runtime, interceptors)
    # Pods that become unschedulable wake their cluster's loop (activities/nodes/wake.py).
    wake = PendingPodsWake(signal_loop(client, asyncio.get_running_loop()))
    with ThreadPoolExecutor(max_workers=ACTIVITY_SLOTS) as executor:
        worker = Worker(
            client,
            task_queue=settings.temporal.task_queue,
            workflows=WORKFLOWS,
            activities=build_activities(settings, clusters, wake),
            activity_executor=executor,
            max_concurrent_activities=ACTIVITY_SLOTS,
            # A burst starts hundreds of NodeRequests at once (measured at 10,000 pending pods):
            # - their first tasks come on the shared queue, which by default only one poll in five
            #   takes from; letting every poller take from it brought their first activation from
            #   11-12 s (mean) after the loop's start to 2-3.5 s;
            # - with 100 tasks at a time they all share the interpreter and each takes long; the
            #   loop's own next task then waited for a slot (the loop committed its last starts
            #   9.5-18 s (p99) after their pods were pending with 100, 7-8.5 s with 20). Since
            #   the loop's tasks go first by priority (activities/nodes/requests.py), 60 (above).
            max_concurrent_workflow_tasks=WORKFLOW_TASK_SLOTS,
            workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(WORKFLOW_TASK_POLLS),
            nonsticky_to_sticky_poll_ratio=1.0,
            activity_task_poller_behavior=PollerBehaviorAutoscaling(),
            interceptors=worker_interceptors(),
            graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
            sticky_queue_schedule_to_start_timeout=STICKY_QUEUE_TIMEOUT,
            max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
            workflow_runner=workflow_runner(),
            # Named, not derived: the SDK's default hashes the byte code of every loaded module,
            # about 0.3 CPU-s at each start (growth uses no Worker Versioning: it only labels the
            # tasks this worker completed, in the Web UI).
            build_id=BUILD_ID,
        )
        stop = stop or asyncio.Event()
        health_address = enabled_address(settings.observability.health_address)
        health = Health(client, worker)
        server = await health.serve(health_address) if health_address else None
        readiness = asyncio.create_task(health.report(runtime)) if runtime is not None else None
        agent_api = None
        if settings.fleet is not None:  # the fleet agents report here; it only needs the client
            from activities.fleet.agent_api import serve as serve_agent_api

            agent_api = asyncio.create_task(serve_agent_api(client, settings.fleet.agent_api, stop))
        try:
            async with worker:
                log.info(
                    "growth worker polling task queue %s on %s", settings.temporal.task_queue, settings.temporal.address
                )
                log.info("growth worker serves %s", serving(settings))
                metrics = enabled_address(settings.observability.metrics_address)
                print(
                    f"growth worker ready: task queue {settings.temporal.task_queue}"
                    f"; metrics {f'http://{metrics}/metrics' if metrics else 'off'}"
                    f"; probes {f'http://{health_address}/healthz' if health_address else 'off'}",
                    flush=True,
                )
                await stop.wait()
        finally:
            if readiness is not None:
                readiness.cancel()
            if server is not None:
                server.close()
            if agent_api is not None:
                stop.set()
                await agent_api
            wake.close()
            clusters.close()
            flush_traces()
            meter.use(None)


def serving(settings: Settings) -> str:
    """What this worker serves, for its start-up log: a loop started for anything else fails."""
    clusters = ", ".join(sorted(settings.clusters)) if settings.clusters else "every name (one default connection)"
    fleet = f"agent API on {settings.fleet.agent_api.bind}" if settings.fleet is not None else "off"
    return f"clusters: {clusters}; node providers: {', '.join(sorted(settings.providers)) or 'none'}; fleet: {fleet}"


def main(argv: list[str] | None = None) -> None:
    gc.freeze()  # the imports' objects (see the top): never garbage, left out of full collections
    parser = argparse.ArgumentParser(description="growth worker")
    parser.add_argument("--config", help="settings YAML (default: $GROWTH_CONFIG)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("GROWTH_LOG_LEVEL", "INFO"), format="%(asctime)s %(name)s %(message)s")
    try:
        settings = load_settings(args.config)
    except SettingsError as err:
        raise SystemExit(f"growth-worker: {err}") from None

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    try:
        asyncio.run(_main())
    except SettingsError as err:  # an address that cannot be bound, a cluster that cannot be reached
        raise SystemExit(f"growth-worker: {err}") from None


if __name__ == "__main__":
    main()
