"""The Replayer every replay test uses: the sandbox as the worker runs it, without the SDK's 2 s
deadlock timer. A replay test checks that the code makes the recorded commands; at load 15-20
one activation's first replay (the sandbox importing the workflow's modules) took over 2 s and
failed as a "potential deadlock"."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer


def new_replayer(workflows: Sequence[type]) -> Replayer:
    return Replayer(workflows=workflows, data_converter=pydantic_data_converter, debug_mode=True)
