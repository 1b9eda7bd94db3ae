"""The components approval gate's rule: go, wait or skip a planned group create."""

from datetime import UTC, datetime, timedelta

from scaling.components.approvals import create_verdict, decided, next_deadline

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_new_create_waits_until_its_deadline_then_the_default_applies() -> None:
    verdict, entry, new = create_verdict(None, "create tikv group auto-x", NOW, 600, "deny")
    assert (verdict, new, entry.deadline, entry.step) == ("wait", True, NOW + timedelta(seconds=600), "create")
    assert create_verdict(entry, "r", NOW + timedelta(seconds=599), 600, "deny")[:2] == ("wait", entry)
    verdict, after, new = create_verdict(entry, "r", NOW + timedelta(seconds=600), 600, "deny")
    assert (verdict, after.decision, after.by, new) == ("skip", "denied", "timeout", False)
    _, approving, _ = create_verdict(None, "r", NOW, 600, "approve")  # the default is the wait's own
    verdict, after, _ = create_verdict(approving, "r", NOW + timedelta(seconds=600), 600, "deny")
    assert (verdict, after.decision) == ("go", "approved")


def test_a_denial_holds_for_the_timeout_then_the_plan_asks_again() -> None:
    _, entry, _ = create_verdict(None, "r", NOW, 600, "approve")
    denied = decided(entry, False, "operator", "budget", NOW + timedelta(seconds=10), 600)
    assert denied.deadline == NOW + timedelta(seconds=610) and denied.note == "budget"
    assert create_verdict(denied, "r", NOW + timedelta(seconds=609), 600, "approve")[0] == "skip"
    verdict, again, new = create_verdict(denied, "r", NOW + timedelta(seconds=610), 600, "approve")
    assert (verdict, again.decision, new) == ("wait", "", True)


def test_an_approval_goes_and_keeps_its_deadline() -> None:
    _, entry, _ = create_verdict(None, "r", NOW, 600, "deny")
    approved = decided(entry, True, "operator", "", NOW, 600)
    assert approved.deadline == entry.deadline and create_verdict(approved, "r", NOW, 600, "deny")[0] == "go"


def test_the_loop_wakes_at_the_earliest_open_deadline() -> None:
    _, a, _ = create_verdict(None, "r", NOW, 600, "deny")
    _, b, _ = create_verdict(None, "r", NOW, 60, "deny")
    assert next_deadline({"a": a, "b": b}) == NOW + timedelta(seconds=60)
    assert next_deadline({"a": decided(a, True, "operator", "", NOW, 600)}) is None
