"""How long an activity may take, and how soon a dead worker's activity is handed to another.

Each loop lists its activities with these limits in one table (`workflows/<loop>/activity_options.py`),
with the reason next to each. The retry policies stay beside the calls that decide them.

- heartbeat: every activity beats while it runs (the worker's `activities.heartbeat`
  interceptor, every third of this), so a SIGKILLed worker is noticed after `heartbeat`, not
  after the whole start-to-close limit; the retry then goes to any live worker. The worker sends
  a beat at most every 3 s (its max_heartbeat_throttle_interval), which leaves two beats of slack.
- start_to_close: bounds one attempt of a live but stuck call (an API call that never answers).
- schedule_to_start: never set. A task waits on the shared queue, which every live worker polls;
  a dead worker holds none of them. Temporal does not retry this timeout, so it would only turn
  "no worker is up" into a failed step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

# Short activities: noticed dead within 6 s; the SDK's beats every <= 3 s leave one late beat.
HEARTBEAT = timedelta(seconds=6)
# Long waits (node Ready, pods gone): hundreds run at once in a burst, each beating every 3 s;
# 10 s keeps that load where it was and still hands a dead worker's wait on within seconds.
WAIT_HEARTBEAT = timedelta(seconds=10)
# Beats reach the server at most this far apart (the worker's max and default heartbeat throttle;
# the SDK's default, 0.8 x the heartbeat timeout, left one second of slack on a 6 s timeout). It
# is also how late an activity learns that its workflow cancelled it.
HEARTBEAT_THROTTLE = timedelta(seconds=3)


@dataclass(frozen=True)
class ActivityOptions:
    start_to_close: timedelta
    heartbeat: timedelta = HEARTBEAT

    def timeouts(self, start_to_close: timedelta | None = None) -> dict[str, Any]:
        """Keyword arguments for workflow.execute_activity; `start_to_close` when it depends on
        the input (a readiness timeout, a drain timeout, a step's deadline)."""
        return {
            "start_to_close_timeout": start_to_close or self.start_to_close,
            "heartbeat_timeout": self.heartbeat,
        }
