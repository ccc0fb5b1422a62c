"""``lachesis <command> --help``: every subcommand says what it does and shows its defaults (argparse's
ArgumentDefaultsHelpFormatter); the options that name a choice list the package's own."""

from __future__ import annotations

import contextlib
import io

import pytest

from lachesis import cli

COMMANDS = ("corpus", "segments", "datasets", "adapt", "sweep", "evaluate", "explore", "reproduce")


def _help(*argv: str, flat: bool = True) -> str:
    """The help text, its whitespace folded to single spaces (``flat``)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main([*argv, "--help"]) == 0
    return " ".join(out.getvalue().split()) if flat else out.getvalue()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_describes_itself_and_shows_its_defaults(command) -> None:
    text = _help(command, flat=False)
    description = text.split("\n\n")[1]
    assert len(description.split()) >= 12 and not description.startswith(("options:", "positional")), text
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: [])" not in text
    parser = next(a for a in cli.build_parser()._actions if a.dest == "command").choices[command]
    flat = " ".join(text.split())
    for action in parser._actions:  # every option with a default to show shows it
        if action.option_strings and action.default not in (None, False, [], "==SUPPRESS==") and action.help:
            shown = action.default if isinstance(action.default, str) else action.default
            assert f"(default: {shown})" in flat, (command, action.dest)


def test_the_defaults_read_as_a_user_types_them() -> None:
    assert "each draws its own sessions (default: 0)" in _help("evaluate")  # not "(0,)"
    assert "paper (8 GPUs in lockstep) or one_gpu (default: paper)" in _help("evaluate")
    assert "(default: notebooks/params/paper.yaml)" in _help("reproduce")


def test_the_choices_are_the_packages() -> None:
    from lachesis.evaluation import grid, knobs
    from lachesis.node import capacity

    assert cli.NODES == tuple(knobs.NODES) and cli.LOADS == tuple(grid.LOADS)
    assert cli.SEARCHES == tuple(capacity.SEARCH_PRESETS)
    assert "{paper,one_gpu}" in _help("evaluate") and "{per_deployment,per_cell,min,own}" in _help("explore")
