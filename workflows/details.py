"""The Web UI's current details under the workflow's one-line summary.

A workflow's static summary (the Web UI's list and the top of its page) is given when it starts;
the SDK's continue_as_new takes none, so a loop's later runs show "No summary available". Each
run of a loop therefore repeats its summary as the first line of its details: nothing about a
loop is lost at continue-as-new. No command: details are not in history."""

from __future__ import annotations

from temporalio import workflow


def show(summary: str, details: str) -> None:
    workflow.set_current_details(f"{summary}\n{details}")
