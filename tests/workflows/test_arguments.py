"""workflows/arguments.py's check, on handlers' signatures alone: what the SDK would hand a
handler raw (a count that differs from its type hints) is checked as the hints say."""

from __future__ import annotations

from pydantic import BaseModel

from workflows.arguments import argument_problem


class Member(BaseModel):
    index: int


class Handlers:
    def none(self) -> None: ...

    def one(self, node: str) -> None: ...

    def defaults(self, reason: str = "r", message: str = "m") -> None: ...

    def model(self, inp: Member) -> None: ...


def test_the_count_must_fit_and_raw_values_their_types() -> None:
    assert argument_problem(Handlers.one, ["n1"]) == ""  # as many as the hints: the SDK decoded them
    assert argument_problem(Handlers.one, []) == "arguments: takes 1 (node), got 0"
    assert argument_problem(Handlers.one, ["a", "b"]) == "arguments: takes 1 (node), got 2"
    assert argument_problem(Handlers.none, [1]) == "arguments: takes 0 (none), got 1"
    assert argument_problem(Handlers.defaults, []) == ""
    assert argument_problem(Handlers.defaults, ["why"]) == ""
    assert argument_problem(Handlers.defaults, [5]) == "reason: Input should be a valid string"
    assert argument_problem(Handlers.defaults, ["a", "b", "c"]) == "arguments: takes 0 to 2 (reason, message), got 3"
    assert argument_problem(Handlers.model, []) == "arguments: takes 1 (inp), got 0"
    assert argument_problem(None, [1, 2, 3]) == ""  # a dynamic handler takes anything
