import os
import subprocess
import sys

HELP_CPU_BUDGET_S = 1.5
"""Acceptance: `cua-rl --help` answers in under 1.5 s. Measured as the child's CPU
time (user + system), not wall time, so a loaded machine does not fail it."""


def test_help_is_fast_and_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from cua_rl.cli import cli\n"
        "r = CliRunner().invoke(cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'vm' in r.output and 'bench' in r.output\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_help_entry_point_takes_under_the_cpu_budget() -> None:
    """The entry point as `cua-rl` runs it (`main`), interpreter start included."""
    with subprocess.Popen(
        [sys.executable, "-m", "cua_rl.cli", "--help"], stdout=subprocess.PIPE, text=True
    ) as proc:
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, nobody else's
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0 and "Usage:" in out and "train" in out, out
    cpu_s = usage.ru_utime + usage.ru_stime
    assert cpu_s < HELP_CPU_BUDGET_S, f"`cua-rl --help` used {cpu_s:.2f} s of CPU"


def test_run_commands_help_shows_common_overrides_and_the_reference() -> None:
    from click.testing import CliRunner

    from cua_rl.cli import cli

    for command in ("train", "eval", "rollout"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0, result.output
        for key in (
            "tasks.ids=",
            "episode.max_steps=",
            "fleet.max_groups=",
            "desktops.count=",
            "docs/configuration.md",
        ):
            assert key in result.output, (command, key)


def test_log_level_is_a_global_option() -> None:
    from click.testing import CliRunner

    from cua_rl.cli import cli

    result = CliRunner().invoke(cli, ["--log-level", "verbose", "config", "--help"])
    assert result.exit_code == 2 and "--log-level" in result.output
    assert CliRunner().invoke(cli, ["--log-level", "debug", "config", "--help"]).exit_code == 0


def test_vm_commands_offer_every_provider_and_check_its_settings() -> None:
    from click.testing import CliRunner

    from cua_rl.cli import cli

    for command in ("up", "list", "down"):
        result = CliRunner().invoke(cli, ["vm", command, "--help"])
        assert result.exit_code == 0, result.output
        assert all(name in result.output for name in ("local", "docker", "qemu", "aws"))
    result = CliRunner().invoke(cli, ["vm", "list", "--provider", "qemu", "--set", "ram_size=8G"])
    assert result.exit_code == 1
    assert "Error: --provider qemu --set: ram_size: unknown key" in result.output


def test_vm_with_a_missing_engine_is_one_line() -> None:
    import os

    env = {**os.environ, "PATH": "/nonexistent"}  # no docker, no qemu on PATH
    for args in (
        ["list", "--provider", "docker"],
        ["up", "--provider", "qemu", "--set", "image=/etc/hostname"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "cua_rl.cli", "vm", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, (args, done.stderr)
        assert lines[0].startswith("Error: ") and "not found on PATH" in lines[0], lines[0]
