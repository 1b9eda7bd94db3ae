"""`growth demo` is a click command like the rest of `growth`: its help lists the options with their
defaults and the exit codes, a bad option is refused with exit 2 naming it, and `python -m
starters.demo` (make demo) takes the same options. In process (click's runner): nothing starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from starters import demo
from starters.cli import growth


def test_the_help_lists_options_examples_and_exit_codes() -> None:
    out = CliRunner().invoke(growth, ["demo", "--help"])
    assert out.exit_code == 0
    assert (
        "--scenario [burst|components|constraints|fleet|scale-down|storage]" in out.output
        and "[default: burst]" in out.output
    )
    assert "growth demo --scenario burst --headless" in out.output and "Exit codes: 0 done" in out.output
    assert "demo" in CliRunner().invoke(growth, ["--help"]).output


@pytest.mark.parametrize(("argv", "field"), [(["--scenario", "nope"], "--scenario"), (["--pods", "0"], "--pods")])
def test_a_bad_option_is_refused_naming_it(argv: list[str], field: str) -> None:
    refused = CliRunner().invoke(growth, ["demo", *argv])
    assert refused.exit_code == 2 and field in refused.output


def test_make_demo_takes_the_same_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        demo.main(["--provider", "gcp"])  # python -m starters.demo
    assert done.value.code == 2 and "--provider" in capsys.readouterr().err
    args = demo.parse_args(["--scenario", "fleet", "--headless", "--temporal-port", "0", "--instances", "5"])
    assert (args.scenario, args.headless, args.temporal_port, args.ui_port, args.instances) == (
        "fleet",
        True,
        None,
        8233,
        5,
    )
