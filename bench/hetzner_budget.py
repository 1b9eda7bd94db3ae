"""Benchmark of the Hetzner request budget: a 500-node burst through the fake Hetzner API while a
second tool of the same project spends 1,000 requests an hour.

What runs: FakeHetzner (`rate_limit_per_hour` 3,600: the bucket Hetzner documents, 3,600
requests that refill one a second, counted per project) and growth's HetznerProvider, the code
the create/delete activities call, through the real hcloud client: 500 `create_node` calls at
once (as a burst's NodeRequests start them; each activity is in its first attempt), then a
batched readiness poll (one list of the servers still booting, backing off while nothing
changes) until every server runs. The other tool is a plain HTTP client with its own token of
the same project, spending its share evenly. Temporal is not in the loop: this measures what
the provider spends and how the gate paces it.

`--start-remaining N` starts the project's bucket part-spent (another tool used the rest before
the burst), so the budget binds; `--time-scale S` runs the fake's refill clock and the other tool
S times faster (stated in the output; requests per node and 429s are unchanged, seconds bound by
the budget shrink by S, the servers' boot time does not). Default: the issue's case, a full
bucket at real speed.

python -m bench.hetzner_budget [--nodes 500] [--start-remaining 3600] [--time-scale 1]
(last line is JSON: nodes, api_requests_per_node, responses_429, seconds_to_all_ready, ...)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from activities.nodes.providers.hetzner import HetznerProvider, HetznerSettings
from scaling.nodes.contracts import CreateNodeInput
from scaling.nodes.models import Pool
from sim.clouds.hetzner import FakeHetzner

TOKEN = "bench-growth-token"
OTHER_TOKEN = "bench-other-tool-token"
CLUSTER = "bench"
LIMIT_PER_HOUR = 3600
OTHER_TOOL_PER_HOUR = 1000
BOOT_S = 20.0  # a Hetzner server takes tens of seconds from create to running
CONCURRENCY = 256  # the worker's activity slots (worker.ACTIVITY_SLOTS)


def other_tool(url: str, per_s: float, stop: threading.Event, counts: dict[str, int]) -> None:
    """Another tool of the project: one GET every 1/per_s seconds, whatever the budget says."""
    step = 1.0 / per_s
    next_at = time.monotonic()
    while not stop.is_set():
        req = urllib.request.Request(f"{url}/locations", headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
        try:
            with urllib.request.urlopen(req, timeout=10):
                counts["ok"] += 1
        except urllib.error.HTTPError as err:
            counts["429" if err.code == 429 else "error"] += 1
        next_at += step
        stop.wait(max(0.0, next_at - time.monotonic()))


async def wait_all_running(provider: HetznerProvider, expected: int, t0: float) -> tuple[float, int]:
    """Poll the servers still booting, one paged list per round, backing off (x1.5, at most 10 s)
    while the count does not change. Returns (seconds from t0 to all running, polls)."""
    delay, polls, last = 1.0, 0, -1
    while True:
        booting = await provider.servers_not_running(CLUSTER)
        polls += 1
        if not booting:
            return time.monotonic() - t0, polls
        delay = 1.0 if len(booting) != last else min(10.0, delay * 1.5)
        last = len(booting)
        await asyncio.sleep(delay)


async def burst(args: argparse.Namespace) -> dict[str, object]:
    workdir = Path(tempfile.mkdtemp(prefix="growth-bench-hz-"))
    (workdir / "join-token").write_text("bench0.0123456789abcdef\n")
    os.environ["GROWTH_BENCH_HCLOUD_TOKEN"] = TOKEN
    hz = FakeHetzner(
        TOKEN,
        rate_limit_per_hour=LIMIT_PER_HOUR,
        rate_time_scale=args.time_scale,
        action_delay_s=BOOT_S,
        boot_delay_s=BOOT_S,
    ).start()
    stop = threading.Event()
    counts = {"ok": 0, "429": 0, "error": 0}
    try:
        hz.add_token(OTHER_TOKEN)  # same project: one bucket
        hz.set_rate_remaining(args.start_remaining)
        provider = HetznerProvider(
            HetznerSettings(
                api_endpoint=hz.url,
                token_env="GROWTH_BENCH_HCLOUD_TOKEN",
                join_token_file=str(workdir / "join-token"),
                join_endpoint="10.0.0.1:6443",
                locations=["fsn1", "nbg1", "hel1"],
                budget={"rate_limit_per_hour": LIMIT_PER_HOUR},
            )
        )
        tool = threading.Thread(
            target=other_tool,
            args=(hz.url, OTHER_TOOL_PER_HOUR / 3600.0 * args.time_scale, stop, counts),
            daemon=True,
        )
        tool.start()
        pool = Pool(group="general", name="hetzner-cx22", provider="hetzner", server_type="cx22", priority=50)
        slots = asyncio.Semaphore(CONCURRENCY)

        async def create(i: int) -> str:
            inp = CreateNodeInput(cluster=CLUSTER, request_id=f"nodes/{CLUSTER}/request/{i}", attempt=1, pool=pool)
            async with slots:
                result = await ActivityEnvironment().run(provider.create_node, inp)
            return result.outcome

        before = hz.stats()["projects"].get("default", {}).get("requests", 0) - counts["ok"] - counts["429"]
        t0 = time.monotonic()
        outcomes = await asyncio.gather(*(create(i) for i in range(args.nodes)))
        created_s = time.monotonic() - t0
        ready_s, polls = await wait_all_running(provider, args.nodes, t0)
        stop.set()
        tool.join(timeout=15)
        stats = hz.stats()
        project = stats["projects"]["default"]
        ours = provider.budget.sent
        created = sum(1 for o in outcomes if o == "created")
        growth_429 = provider.budget.responses_429
        return {
            "nodes": created,
            "api_requests": ours,
            "api_requests_per_node": round(ours / max(1, created), 3),
            "responses_429": growth_429,
            "seconds_to_all_created": round(created_s, 2),
            "seconds_to_all_ready": round(ready_s, 2),
            "readiness_polls": polls,
            "gate_wait_s": round(provider.budget.waited_s, 1),
            "other_tool_requests": counts["ok"] + counts["429"],
            "other_tool_429": counts["429"],
            "project_requests": project["requests"] - max(0, before),
            "project_responses_429": project["responses_429"],
            "budget_left": project["rate_limit_remaining"],
            "start_remaining": args.start_remaining,
            "time_scale": args.time_scale,
            "boot_s": BOOT_S,
            "requests_by_route": stats["requests_by_route"],
        }
    finally:
        stop.set()
        hz.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--start-remaining", type=float, default=LIMIT_PER_HOUR)
    p.add_argument("--time-scale", type=float, default=1.0)
    args = p.parse_args()
    r = asyncio.run(burst(args))
    needed = float(r["api_requests"])  # type: ignore[arg-type]
    net_per_s = (LIMIT_PER_HOUR - OTHER_TOOL_PER_HOUR) / 3600.0 * args.time_scale
    bound_s = max(0.0, needed - args.start_remaining) / net_per_s
    print(
        f"{r['nodes']} nodes created through the fake Hetzner API (limit {LIMIT_PER_HOUR}/h, "
        f"another tool spending {OTHER_TOOL_PER_HOUR}/h, bucket starting at {args.start_remaining:.0f}, "
        f"refill clock x{args.time_scale:g})"
    )
    print(f"  API requests per node created: {r['api_requests_per_node']} ({r['api_requests']} requests)")
    print(f"  429 responses to growth: {r['responses_429']} (other tool: {r['other_tool_429']})")
    print(
        f"  seconds to all created: {r['seconds_to_all_created']}, to all Ready: {r['seconds_to_all_ready']} "
        f"(servers boot in {BOOT_S:g} s; the budget alone allows all creates after {bound_s:.1f} s)"
    )
    print(f"  readiness polls: {r['readiness_polls']}, budget left: {r['budget_left']}")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
