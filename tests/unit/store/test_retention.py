"""Screenshot retention on a real store and real files (`store/retention.py`, `store/upkeep.py`)."""

import json
import os
import time
from pathlib import Path

from click.testing import CliRunner
from tests_support.viewer_runs import build_run, tiny_png

from cua_rl.cli import cli
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.config import RetentionConfig, StoreConfig
from cua_rl.store.retention import describe, kept_of
from cua_rl.store.run_store import RunStore
from cua_rl.store.upkeep import StoreUpkeep
from cua_rl.types import Action, Step, Trajectory, TrajectoryStatus

SIZE = (64, 36)


def _save(store: RunStore, tid: str, group: str, names: list[str], score: float = 0.0) -> None:
    """A finished trajectory whose step i goes from names[i] to names[i + 1] (a failure
    unless `score` > 0)."""
    steps = tuple(
        Step(
            index=i,
            screenshot_before=names[i],
            screenshot_after=names[i + 1],
            response="r",
            actions=(Action(kind="left_click", coordinate=(1, 2)),),
            parse_error=None,
            code="",
            token_ids=(1,),
            logprobs=(-0.1,),
            policy_version=0,
        )
        for i in range(len(names) - 1)
    )
    store.save_trajectory(
        Trajectory(
            id=tid,
            variant_id="t1:default",
            steps=steps,
            status=TrajectoryStatus.FINISHED,
            score=score,
        ),
        group_id=group,
    )


def _shots(store: RunStore, seeds: range) -> list[str]:
    return [store.put_screenshot(tiny_png(s, SIZE)) for s in seeds]


def _age_all(run_dir: Path, seconds: float = 600) -> None:
    """As if every screenshot was written `seconds` ago (before its group's routing)."""
    old = time.time() - seconds
    for path in (run_dir / "screenshots").rglob("*.png"):
        os.utime(path, (old, old))


def _exists(store: RunStore, name: str) -> bool:
    return store.screenshot_path(name).is_file()


async def test_retention_keeps_what_the_run_still_needs(tmp_path: Path) -> None:
    sync = RunStore(tmp_path)
    g0a, g0b = _shots(sync, range(0, 5)), _shots(sync, range(10, 15))
    g1a, g1b = _shots(sync, range(20, 25)), _shots(sync, range(30, 35))
    recent, open_ = _shots(sync, range(40, 45)), _shots(sync, range(50, 55))
    g0b[2] = recent[2]  # the same screen in an old and a recent group: one file
    recent[3] = g0a[0]  # a recent middle step showing an old trajectory's first screen
    _save(sync, "g0-a", "g0", g0a)
    _save(sync, "g0-b", "g0", g0b)
    _save(sync, "g1-a", "g1", g1a)  # g1-a is in the success-replay buffer
    _save(sync, "g1-b", "g1", g1b)
    _save(sync, "recent-a", "recent", recent)
    _save(sync, "open-a", "open", open_)  # its group never routed (still open)
    _age_all(tmp_path)
    protected = {"g1-a"}
    store = AsyncRunStore(sync)
    upkeep = StoreUpkeep(
        store,
        StoreConfig(retention=RetentionConfig(after_updates=10)),
        lambda: frozenset(protected),
    )
    await upkeep.routed("g0", 0)
    await upkeep.routed("g1", 1)
    await upkeep.routed("recent", 5)
    await upkeep.routed("g0", 9)  # a group is recorded once, at its first routing
    assert all(_exists(sync, n) for n in g0a + g0b)  # not 10 updates yet
    await upkeep.routed("other", 11)  # the pass at update 11 takes g0 and g1

    ends = {g0a[0], g0a[-1], g0b[0], g0b[-1], g1b[0], g1b[-1]}
    for name in g0a + g0b + g1b:
        assert _exists(sync, name) == (name in ends or name == recent[2]), name
    assert all(_exists(sync, n) for n in g1a + recent + open_)
    counters = sync.counters()
    assert counters["screenshots_pruned"] == 8  # 3 middles each, one shared with `recent`
    assert counters["screenshot_bytes_pruned"] > 0
    # the viewer's store still loads every trajectory; the names stay
    assert sync.load_trajectory("g0-a").steps[1].screenshot_before == g0a[1]

    # g1 stays unpruned while g1-a is buffered; once it leaves, the next pass takes it
    protected.clear()
    await upkeep.routed("later", 12)
    assert [_exists(sync, n) for n in g1a] == [True, False, False, False, True]
    # and the recent group goes at its own time, keeping ends already kept elsewhere
    await upkeep.routed("last", 15)
    assert [_exists(sync, n) for n in recent] == [True, False, False, True, True]
    await store.close()


async def test_a_screenshot_taken_again_after_routing_is_kept(tmp_path: Path) -> None:
    """An episode still running that took the same screen only touched the file (its
    trajectory is not in the store yet): the file must stay for its group's samples."""
    sync = RunStore(tmp_path)
    names = _shots(sync, range(5))
    _save(sync, "a", "g", names)
    _age_all(tmp_path)
    store = AsyncRunStore(sync)
    upkeep = StoreUpkeep(store, StoreConfig(retention=RetentionConfig(after_updates=1)))
    await upkeep.routed("g", 0)
    sync._db.execute("UPDATE routed_groups SET routed_at = ?", (time.time() - 300,))
    assert sync.put_screenshot(tiny_png(2, SIZE)) == names[2]  # the running episode's put
    await upkeep.routed("h", 1)
    assert [_exists(sync, n) for n in names] == [True, False, True, False, True]
    await store.close()


async def test_retention_never_deletes_outside_the_screenshots(tmp_path: Path) -> None:
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    victim = outside / "keep.png"
    victim.write_bytes(b"precious")
    sync = RunStore(run)
    names = _shots(sync, range(3))
    # a store row naming a path outside, and a shard directory linked outside
    linked = "ab" + "0" * 38 + ".png"
    os.symlink(outside, run / "screenshots" / "ab")
    os.symlink(victim, outside / linked)
    _save(sync, "a", "g", [names[0], "../../outside/keep.png", linked, "/etc/passwd", names[2]])
    _age_all(run)
    old = time.time() - 600
    os.utime(victim, (old, old))
    store = AsyncRunStore(sync)
    upkeep = StoreUpkeep(store, StoreConfig(retention=RetentionConfig(after_updates=1)))
    await upkeep.routed("g", 0)
    await upkeep.routed("h", 1)
    assert victim.read_bytes() == b"precious" and (outside / linked).is_symlink()
    assert _exists(sync, names[0]) and _exists(sync, names[2])
    assert sync.counters().get("screenshots_pruned", 0) == 0
    await store.close()


async def test_retention_off_deletes_nothing(tmp_path: Path) -> None:
    sync = RunStore(tmp_path)
    names = _shots(sync, range(5))
    _save(sync, "a", "g", names)
    _age_all(tmp_path)
    store = AsyncRunStore(sync)
    cfg = StoreConfig(retention=RetentionConfig(enabled=False, after_updates=1))
    upkeep = StoreUpkeep(store, cfg)
    await upkeep.routed("g", 0)
    await upkeep.routed("h", 5)
    assert all(_exists(sync, n) for n in names)
    await store.close()


def test_successes_are_kept_whole_and_of_the_others_the_ends_and_every_kth() -> None:
    steps = [(f"s{i}", f"s{i + 1}") for i in range(12)]  # 13 screens, s0 .. s12
    every = {f"s{i}" for i in range(13)}
    assert kept_of(steps, 1.0, RetentionConfig()) == every
    assert kept_of(steps, 0.0, RetentionConfig()) == {"s0", "s5", "s10", "s12"}
    assert kept_of(steps, None, RetentionConfig(keep_every=0)) == {"s0", "s12"}
    assert kept_of(
        steps, 1.0, RetentionConfig(keep_successes=False, keep_ends=False, keep_every=4)
    ) == {"s0", "s4", "s8"}
    assert kept_of([], 1.0, RetentionConfig()) == set()


def test_train_can_say_what_retention_will_delete() -> None:
    line = describe(RetentionConfig())
    assert "10 policy updates" in line and "every screenshot of a successful trajectory" in line
    assert "0, 5, 10, ..." in line and "store.retention.enabled=false" in line
    assert "successful" not in describe(RetentionConfig(keep_successes=False))
    assert describe(RetentionConfig(enabled=False)).endswith("every screenshot is kept")


async def test_default_retention_leaves_every_success_exportable_whole(tmp_path: Path) -> None:
    """Issue 50's acceptance: after the default retention pruned a trained group,
    `export trajectories --success-only` writes every successful trajectory with all
    its screenshots; the failure lost its middle screenshots (ends and every 5th kept)."""
    run = tmp_path / "run"
    built = build_run(run, n_trajectories=4, n_steps=9)  # scores 1, 1, 1, 0; no shared screen
    _age_all(run)
    sync = RunStore(run)
    store = AsyncRunStore(sync)
    upkeep = StoreUpkeep(store, StoreConfig())
    await upkeep.routed("g1", 0)
    await upkeep.routed("later", 10)  # the default window: 10 updates
    pruned = sync.counters()["screenshots_pruned"]
    failed = built.shots["traj-3"] + [sync.load_trajectory("traj-3").steps[-1].screenshot_after]
    assert [i for i, n in enumerate(failed) if _exists(sync, n)] == [0, 5, 9]
    await store.close()
    assert pruned == 7

    _check_success_export(run, tmp_path)


def _check_success_export(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "success.jsonl"
    done = CliRunner().invoke(
        cli, ["export", "trajectories", str(run), "--success-only", "--out", str(out), "--json"]
    )
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["trajectories"] == 3 and summary["skipped"] == {"not_success": 1}
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["trajectory_id"] for r in records] == ["traj-0", "traj-1", "traj-2"]
    for record in records:
        shots = record["images"] + [s["screenshot_after"] for s in record["steps"]]
        assert len(record["images"]) == 9 and all(Path(p).is_file() for p in shots)
    everything = CliRunner().invoke(
        cli, ["export", "trajectories", str(run), "--out", str(tmp_path / "all.jsonl"), "--json"]
    )
    assert json.loads(everything.output)["skipped"] == {"missing_screenshot": 1}
