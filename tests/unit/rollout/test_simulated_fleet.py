import asyncio
import base64
import json

from click.testing import CliRunner

from cua_rl.agent.images import encode_image
from cua_rl.cli.bench.fleet import bench_fleet
from cua_rl.reward.config import JudgeConfig
from cua_rl.reward.judge import StreamingJudge
from cua_rl.rollout.actor import run_episode
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.latency import Dist, LatencyModel
from cua_rl.rollout.simulated import SimClock, SimulatedDesktops, SimulatedModelPool, screenshot_png
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import TaskVariant, TrajectoryStatus

FAST = Dist(median_s=0.001, sigma=0.0)
VARIANT = TaskVariant(
    task_id="t0",
    domain="simulated",
    evaluator_name="default",
    instruction="do it",
    config=(),
    evaluator={"func": "simulated"},
)


def test_latency_defaults_and_file_override(tmp_path) -> None:
    model = LatencyModel()
    assert 9.0 <= model.episode_steps.mean() <= 11.0  # heavy-tailed, mean ~10
    path = tmp_path / "latency.yaml"
    path.write_text("time_scale: 0.5\npolicy_s: {median_s: 2.0}\ncapacity: {policy_batch: 8}\n")
    loaded = LatencyModel.load(path)
    assert (loaded.time_scale, loaded.policy_s.median_s, loaded.capacity.policy_batch) == (
        0.5,
        2.0,
        8,
    )
    assert loaded.reset_s == model.reset_s
    assert model.expected_steps_per_s(10) < model.expected_steps_per_s(1000)


def test_screenshot_passes_through_encoding() -> None:
    """No resize, no re-encode: the bench must not charge the actor for PIL work
    a real screen at model size would not need."""
    png = screenshot_png()
    url = encode_image(png, min_pixels=EpisodeConfig().min_pixels)
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == png


async def test_pool_caps_batch_honours_n_and_terminates_at_drawn_length() -> None:
    clock = SimClock(1.0, seed=0)
    prm = SimulatedModelPool(1, 2, FAST, clock, slowdown=0.5, tokens=4, version=lambda: 7)
    results = await asyncio.gather(*(prm.chat([], n=3) for _ in range(5)))
    assert prm.peak_running == 2 and prm.calls == 5  # the rest queued
    assert all(len(r.choices) == 3 and r.model_version == 7 for r in results)
    assert all(c.text.endswith(("\\boxed{1}", "\\boxed{-1}")) for r in results for c in r.choices)

    policy = SimulatedModelPool(
        2, 4, FAST, clock, slowdown=0.0, tokens=4, version=lambda: 0, episode_length=lambda rng: 3
    )
    texts = [(await policy.chat([], session_key="a")).choices[0].text for _ in range(3)]
    assert ['"terminate"' in t for t in texts] == [False, False, True]
    policy.end_session("a")
    assert '"left_click"' in (await policy.chat([], session_key="a")).choices[0].text


async def test_real_episode_and_judge_on_simulated_parts(tmp_path) -> None:
    model = LatencyModel(reset_s=FAST, act_s=FAST, screenshot_s=FAST, evaluate_s=FAST)
    clock = SimClock(1.0, seed=1)
    policy = SimulatedModelPool(
        1, 4, FAST, clock, slowdown=0.0, tokens=4, version=lambda: 2, episode_length=lambda rng: 4
    )
    prm = SimulatedModelPool(1, 4, FAST, clock, slowdown=0.0, tokens=4, version=lambda: 0)
    store = AsyncRunStore.open(tmp_path)
    judge = StreamingJudge(prm, store, JudgeConfig())
    desktops = SimulatedDesktops(1, model, clock)
    try:
        async with desktops.lease() as desktop:
            assert desktops.leased == 1
            traj = await run_episode(
                VARIANT, desktop, policy, store, EpisodeConfig(max_steps=30), judge=judge
            )
        verdicts = await judge.collect(traj.id)
    finally:
        await judge.close()
        await store.close()
    assert traj.status == TrajectoryStatus.FINISHED and len(traj.steps) == 4
    assert all(s.parse_error is None and s.policy_version == 2 for s in traj.steps)
    assert traj.steps[0].actions[0].kind == "left_click"
    assert [v.step_index for v in verdicts] == [0, 1, 2, 3]
    assert all(len(v.votes) == 3 for v in verdicts)
    assert desktops.leased == 0 and desktops.busy_seconds() > 0 and desktops.work_s > 0


def test_bench_fleet_command_reports_both_modes(tmp_path) -> None:
    """Structure and invariants only: timing goals belong to the benchmark."""
    latency = tmp_path / "latency.json"
    latency.write_text(json.dumps({"time_scale": 0.002}))
    runner = CliRunner()
    assert runner.invoke(bench_fleet, ["--actors", "4"]).exit_code != 0  # --simulated needed
    result = runner.invoke(
        bench_fleet,
        ["--simulated", "--actors", "4", "--group-size", "2", "--latency", str(latency), "--json"],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    for key in (
        "async_steps_per_s",
        "sync_steps_per_s",
        "speedup",
        "desktop_utilization",
        "cpu_ms_per_step",
        "sync_desktop_utilization",
        "async_stale_fraction",
        "host_bound",
        "async_global_pause_steps_per_s",
        "speedup_global_pause",
        "sync_streaming_steps_per_s",
        "speedup_vs_sync_mode",
    ):
        assert key in figures
    assert figures["async_steps"] > 0 and figures["sync_steps"] > 0
    assert figures["sync_cycles"] >= 1 and figures["time_scale"] == 0.002
    assert 0.0 < figures["desktop_utilization"] <= 1.0 + 1e-3
    assert 0.0 < figures["sync_desktop_utilization"] <= 1.0 + 1e-3
    assert figures["desktop_work_share"] <= figures["desktop_utilization"] + 1e-3
    assert 0.0 <= figures["async_stale_fraction"] <= 1.0
