from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from cua_rl.config import apply_override, load_config
from cua_rl.errors import ConfigError


class Inner(BaseModel):
    count: int = Field(default=2, ge=1)
    name: str = "x"


class Outer(BaseModel):
    inner: Inner = Inner()
    ratio: float = 0.5


def test_file_then_overrides_win(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("inner:\n  count: 3\n  name: a\nratio: 0.1\n")
    out = load_config(Outer, cfg, overrides=["inner.count=7", "ratio=0.9"])
    assert out.inner.count == 7
    assert out.inner.name == "a"
    assert out.ratio == 0.9


def test_error_names_file_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("inner:\n  count: 0\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: inner\.count: .*greater than or equal to 1"):
        load_config(Outer, cfg)


def test_bad_yaml_and_bad_override(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("inner: [\n")
    with pytest.raises(ConfigError, match="c.yaml: not valid YAML"):
        load_config(Outer, cfg)
    with pytest.raises(ConfigError, match="expected the form dotted.key=value"):
        apply_override({}, "novalue")
    with pytest.raises(ConfigError, match="'ratio' is not a section"):
        apply_override({"ratio": 1}, "ratio.x=2")


def test_unknown_preset_lists_known() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        load_config(Outer, preset="nope")


def test_unknown_keys_get_one_line_with_the_key_meant(tmp_path: Path) -> None:
    from cua_rl.config import RunConfig

    cfg = tmp_path / "c.yaml"
    cfg.write_text("episode:\n  max_step: 5\n")
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, cfg)
    assert str(err.value) == f"{cfg}: episode.max_step: unknown key (did you mean 'max_steps'?)"
    with pytest.raises(
        ConfigError,
        match=r"train\.sync\.modee: unknown key \(did you mean "
        r"'mode'\?\)",
    ):
        load_config(RunConfig, overrides=["train.sync.modee=broadcast"])
    # through a discriminated union (the provider) and at the top level
    with pytest.raises(ConfigError, match=r"did you mean 'state_dir'\?"):
        load_config(RunConfig, overrides=["desktops.provider.state_dirr=/tmp/x"])
    with pytest.raises(ConfigError, match=r"polcy: unknown key \(did you mean 'policy'\?\)"):
        load_config(RunConfig, overrides=["polcy.model=tiny"])
    # nothing close: the section's keys
    with pytest.raises(
        ConfigError,
        match=r"fleet\.zzzz: unknown key \(this section has: "
        r"actors, ",
    ):
        load_config(RunConfig, overrides=["fleet.zzzz=1"])


def test_loading_the_config_imports_no_service_code() -> None:
    """Config models live in config modules: `cua_rl.config` pulls in no HTTP client,
    launcher or engine (so `config show` and the CLI stay light)."""
    import subprocess
    import sys

    code = (
        "import sys, cua_rl.config\n"
        "bad = [m for m in ('aiohttp', 'torch', 'cua_rl.desktop.client', "
        "'cua_rl.inference.client', 'cua_rl.inference.launcher', 'cua_rl.adapt.rewriter', "
        "'cua_rl.learner.weight_sync') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_config_show_prints_the_learner_temperatures_the_run_uses() -> None:
    """Derived values are resolved at load, not patched at run start: the paper's
    reward-model learner scores at the judge's 0.8 and `config show` says so."""
    import re

    from click.testing import CliRunner

    from cua_rl.cli import cli

    shown = CliRunner().invoke(cli, ["config", "show", "--preset", "rlanything-osworld"])
    assert shown.exit_code == 0, shown.output
    train = shown.output[shown.output.index("\ntrain:") :]
    learners = dict(re.findall(r"\n  (policy|prm):\n(?:    .*\n)*?    temperature: (\S+)", train))
    assert learners == {"policy": "1.0", "prm": "0.8"}, train[:2000]

    from cua_rl.config import RunConfig

    with pytest.raises(
        ConfigError, match="train.prm.temperature 0.3 differs from judge.temperature"
    ):
        load_config(RunConfig, preset="quickstart", overrides=["train.prm.temperature=0.3"])


def test_the_run_composition_copies_no_config_with_changes() -> None:
    """What a run uses is what its config says (`config show`): the modules that
    compose a run do not derive settings by copying a config with updates."""
    root = Path(__file__).resolve().parents[2] / "cua_rl" / "runtime"
    composing = [
        "train.py",
        "local.py",
        "rollout_run.py",
        "evaluation_run.py",
        "group_router.py",
        "ray/train.py",
        "ray/workers.py",
        "ray/fleet.py",
        "learn_demo.py",
    ]
    found = [name for name in composing if "model_copy(update" in (root / name).read_text()]
    assert found == []


@pytest.mark.parametrize("switch", ["fleet.spare_desktops=2", "fleet.fork_groups=true"])
def test_desktop_preparation_is_refused_under_ray_with_its_reason(switch: str) -> None:
    """Spare desktops and group forks live in one process's pool (issue 51); under Ray
    they are refused in one line until fleet workers prepare desktops too."""
    from cua_rl.config import RunConfig

    with pytest.raises(ConfigError, match=r"not available under runtime: ray yet"):
        load_config(RunConfig, preset="quickstart", overrides=[switch, "runtime=ray"])
    cfg = load_config(RunConfig, preset="quickstart", overrides=[switch])
    assert cfg.fleet.spare_desktops == 2 or cfg.fleet.fork_groups
    defaults = load_config(RunConfig, preset="quickstart")
    assert defaults.fleet.spare_desktops == 0 and not defaults.fleet.fork_groups
    assert defaults.episode.screenshot_encoder == "auto"
