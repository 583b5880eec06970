"""Option parsing: a mistyped option is a usage error with a "did you mean" (not
a config file that cannot be read), and a wrong union value is one line naming
the field and the types it allows."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cua_rl.cli import cli


@pytest.mark.parametrize("command", [["train"], ["rollout"], ["eval"], ["config", "show"]])
def test_a_mistyped_option_says_what_was_meant(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--ouput", "runs/x", "--prest", "quickstart"])
    assert result.exit_code == 2
    if command[0] == "config":
        assert "No such option '--ouput'" in result.output
    else:
        assert "No such option '--ouput'. Did you mean '--out'?" in result.output
    assert "cannot read config file" not in result.output


def test_a_union_value_names_the_field_and_the_allowed_types() -> None:
    runner = CliRunner()
    engine = runner.invoke(cli, ["config", "show", "train.policy.engine={zero_stage: 3}"])
    assert engine.exit_code == 1
    assert engine.output.strip() == (
        "Error: overrides: train.policy.engine: expected a "
        "mapping whose `type` is one of 'torch', 'deepspeed'"
    )
    provider = runner.invoke(cli, ["config", "show", "desktops.provider.type=dockr"])
    assert (
        "desktops.provider: expected a mapping whose `type` is one of 'local', "
        "'container', 'docker', 'qemu', 'aws' (got 'dockr')" in provider.output
    )
    assert "discriminator" not in engine.output + provider.output


NO_RESULT = {"config reference", "serve", "view"}
"""Commands that print no result to parse: a Markdown page, a server, a web viewer."""


def test_every_command_that_prints_results_has_json() -> None:
    import click

    ctx = click.Context(cli)
    missing, todo = [], [([], cli)]
    while todo:
        path, command = todo.pop()
        if isinstance(command, click.Group):
            todo += [([*path, n], command.get_command(ctx, n)) for n in command.list_commands(ctx)]
            continue
        options = {o for p in command.params for o in getattr(p, "opts", [])}
        if " ".join(path) not in NO_RESULT and "--json" not in options:
            missing.append(" ".join(path))
    assert missing == []


def test_every_json_result_goes_through_the_one_writer() -> None:
    # With --json the root group sends stdout to stderr for the whole command, so a
    # result printed with click.echo(json.dumps(...)) never reaches stdout: every
    # command must print it with command_output.emit_json.
    import re
    from pathlib import Path

    import cua_rl

    root = Path(cua_rl.__file__).parent
    pattern = re.compile(r"click\.echo\(\s*json\.dumps")
    offenders = [
        str(p.relative_to(root)) for p in root.rglob("*.py") if pattern.search(p.read_text())
    ]
    assert offenders == []
