"""The loop's scale-up decision as a local activity: the loop's history records its result
(the planner's input and what it decided), so a replay reads it instead of planning again."""

from __future__ import annotations

import asyncio

from temporalio import activity

from scaling.nodes import contracts
from scaling.nodes.scale_up.decision import ScaleUpDecision, ScaleUpInput, decide_scale_up


@activity.defn(name=contracts.PLAN_SCALE_UP)
async def plan_scale_up(inp: ScaleUpInput) -> ScaleUpDecision:
    # In a thread: a 30,000-pod plan is CPU for a second or more, off the event loop that runs
    # the worker's workflow tasks.
    return await asyncio.to_thread(decide_scale_up, inp)
