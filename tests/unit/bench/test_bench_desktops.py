"""`cua-rl bench desktops` without desktops: the provider list it accepts, and the
JSON it prints from measured samples (the measuring itself is stubbed)."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner

from cua_rl.bench import desktops as bd
from cua_rl.cli.bench.desktops import bench_desktops, parse_providers
from cua_rl.errors import CuaRlError

FIGURE_KEYS = {"start_s", "reset_s", "screenshot_p50_ms", "screenshot_p99_ms", "rss_mb"}


def test_a_comma_list_keeps_its_order_once_each() -> None:
    assert parse_providers(" qemu, local,,qemu ") == ["qemu", "local"]
    assert parse_providers(",".join(bd.ALL_PROVIDERS)) == list(bd.ALL_PROVIDERS)


@pytest.mark.parametrize("text", ["local,dokcer", "", " , "])
def test_an_unknown_or_missing_provider_is_a_usage_error(text: str) -> None:
    with pytest.raises(click.BadParameter, match="expected a comma list of local, container"):
        parse_providers(text)


def test_figures_are_the_median_and_p99_of_the_samples() -> None:
    shots = [float(ms) for ms in range(1, 101)]  # 1..100 ms
    figures = bd.provider_figures(3.14159, 0.5049, shots, 250.0)
    assert figures == {
        "start_s": 3.14,
        "reset_s": 0.5,
        "screenshot_p50_ms": 50.5,
        "screenshot_p99_ms": 99.0,
        "rss_mb": 250.0,
    }
    assert bd.provider_figures(1, 1, [7.0] * 5, None)["rss_mb"] is None


def test_percentile_is_nearest_rank() -> None:
    hundred = [float(v) for v in range(100, 0, -1)]  # unsorted on purpose
    assert [bd.percentile(hundred, q) for q in (1, 50, 99, 100)] == [1.0, 50.0, 99.0, 100.0]
    assert bd.percentile([5.0, 1.0, 3.0], 50) == 3.0
    assert bd.percentile([4.0], 0) == 4.0


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Stub the measuring: record which providers were benched with which fields."""
    calls: list[tuple[str, dict[str, Any]]] = []

    async def bench_provider(name: str, calls_n: int, **fields: Any) -> dict[str, Any]:
        calls.append((name, fields))
        if name == "qemu":
            raise CuaRlError("no qcow2 configured\nsecond line")
        return bd.provider_figures(1.0, 2.0, [10.0, 20.0, 30.0, 40.0, 50.0], 100.0)

    async def max_local_desktops(limit: int, calls_n: int) -> dict[str, Any]:
        return {
            "max_desktops": 3,
            "max_desktops_p99_ms": {1: 20.0, 2: 40.0, 3: 90.0, 4: 120.0},
            "max_desktops_limit": limit,
        }

    monkeypatch.setattr(bd, "bench_provider", bench_provider)
    monkeypatch.setattr(bd, "max_local_desktops", max_local_desktops)
    return calls


def test_the_default_benches_every_provider_side_by_side(measured: list) -> None:
    result = CliRunner().invoke(bench_desktops, ["--json", "--max-limit", "4"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    # local and container twice: with their limits, then without (their cost, issue 29)
    assert [name for name, _ in measured] == ["local", "local", "container", "container", "qemu"]
    assert measured[1] == ("local", {"limits": {"enabled": False}})
    assert measured[3] == (
        "container",
        {"image": "cua-rl-desktop:full", "limits": {"enabled": False}},
    )
    assert (
        set(out["local"])
        == set(out["local_no_limits"])
        == set(out["container"])
        == set(out["container_no_limits"])
        == FIGURE_KEYS
    )
    assert out["container"]["screenshot_p50_ms"] == 30.0
    assert out["qemu"] == {"error": "no qcow2 configured"}  # one line, the run goes on
    assert out["max_desktops"] == 3 and out["max_desktops_limit"] == 4
    assert measured[2] == ("container", {"image": "cua-rl-desktop:full"})


def test_a_provider_list_benches_only_those_and_max_limit_0_skips_the_search(
    measured: list,
) -> None:
    result = CliRunner().invoke(
        bench_desktops, ["--provider", "container", "--max-limit", "0", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output).keys() == {"container", "container_no_limits"}
    assert [name for name, _ in measured] == ["container", "container"]


def test_an_unknown_provider_fails_before_anything_starts(measured: list) -> None:
    result = CliRunner().invoke(bench_desktops, ["--provider", "local,kvm"])
    assert result.exit_code == 2
    assert "Invalid value for --provider: unknown provider(s) kvm" in result.output
    assert measured == []
