import multiprocessing as mp
from pathlib import Path

from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_store import RunStore
from cua_rl.types import Action, ParseError, Step, StepVerdict, Trajectory, TrajectoryStatus, Vote

PNG = b"\x89PNG\r\n\x1a\n" + b"x" * 32


def _traj(tid: str, status=TrajectoryStatus.FINISHED, score=1.0, n=2) -> Trajectory:
    steps = tuple(
        Step(
            index=i,
            screenshot_before="a.png",
            response=f"r{i}",
            actions=(Action(kind="left_click", coordinate=(3, 4)),),
            parse_error=ParseError("bad_json", "x") if i == 1 else None,
            code="pyautogui.click(3, 4)",
            screenshot_after="b.png",
            token_ids=(1, 2),
            logprobs=(-0.1, -0.2),
            policy_version=3,
        )
        for i in range(n)
    )
    return Trajectory(id=tid, variant_id="t1:default", steps=steps, status=status, score=score)


def test_round_trip_and_summary(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    name = store.put_screenshot(PNG)
    assert name.endswith(".png") and store.screenshot_path(name).read_bytes() == PNG
    traj = _traj("a")
    store.save_trajectory(traj)
    store.save_trajectory(traj)  # idempotent: stored once
    store.save_trajectory(_traj("b", status=TrajectoryStatus.ABORTED, score=None))
    store.save_verdict(StepVerdict("a", 0, (Vote(1, "ok"), Vote(-1, "no"), Vote(0, "?"))))
    store.incr("policy_updates")
    store.incr("policy_updates")
    assert store.load_trajectory("a") == traj
    assert store.load_verdicts("a")[0].votes[1] == Vote(-1, "no")
    summary = store.summary()
    assert summary["trajectories"] == 1 and summary["aborted"] == 1
    # steps of the aborted trajectory are lost work, counted apart
    assert summary["steps"] == 2 and summary["aborted_steps"] == 2
    assert summary["verdicts"] == 1
    assert summary["policy_updates"] == 2
    assert summary["tasks"]["t1:default"] == {"trajectories": 1, "success_rate": 1.0}
    run_id = store.run_id
    store.close()
    reopened = RunStore(tmp_path)
    assert reopened.run_id == run_id and reopened.summary()["policy_updates"] == 2


def _writer(run_dir: str, k: int) -> None:
    store = RunStore(run_dir)
    for i in range(20):
        store.save_trajectory(_traj(f"w{k}-{i}"))
        store.incr("steps_seen", 2)


def test_concurrent_writer_processes(tmp_path: Path) -> None:
    RunStore(tmp_path).close()
    procs = [
        mp.get_context("spawn").Process(target=_writer, args=(str(tmp_path), k)) for k in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    summary = RunStore(tmp_path).summary()
    assert summary["trajectories"] == 60
    assert summary["counters"]["steps_seen"] == 120


async def test_async_store(tmp_path: Path) -> None:
    store = AsyncRunStore.open(tmp_path)
    name = await store.put_screenshot(PNG)
    await store.save_trajectory(_traj("c"))
    await store.incr("x")
    assert (await store.call(store.sync.summary))["trajectories"] == 1
    assert name
    await store.close()


def test_runs_show_json(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from cua_rl.cli import cli  # errors become messages at the root group

    store = RunStore(tmp_path)
    store.save_trajectory(_traj("a"))
    store.close()
    result = CliRunner().invoke(cli, ["runs", "show", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["trajectories"] == 1 and data["steps"] == 2 and data["adapt_accepted"] == 0
    empty = CliRunner().invoke(cli, ["runs", "show", str(tmp_path / "..")])
    assert empty.exit_code != 0 and "no run.sqlite here" in empty.output


async def test_concurrent_verdicts_share_a_write_and_all_land(tmp_path: Path) -> None:
    import asyncio

    store = AsyncRunStore.open(tmp_path)
    await asyncio.gather(
        *(
            store.save_verdict(StepVerdict("t", i, (Vote(1, "ok"), Vote(-1, "no"))))
            for i in range(50)
        )
    )
    await store.save_verdict(StepVerdict("t", 50, (Vote(0, "?"),)))
    verdicts = await store.call(store.sync.load_verdicts, "t")
    assert [v.step_index for v in verdicts] == list(range(51))
    await store.close()
