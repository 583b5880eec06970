"""`cua-rl eval-prm`: a reward model's outcome and process accuracy on a held-out run.

The judged model votes m times on every scored step of a stored run, with exactly
the streaming judge's prompt (runtime/held_out_steps.py); step labels come from a
labelling judge (any OpenAI-compatible endpoint, its own m votes, majority) or from
the `step_labels` rows stored with the run. The formulas are in
`reward/accuracy.py`, the recipe in docs/reward-model-accuracy.md.

Every answer is written to the vote cache in `--out` as it arrives
(runtime/vote_cache.py), so a rerun asks only for the steps that have none, and an
interrupted run loses only the requests in flight. A request that fails (after the
pool's or the client's retries), or a step whose screenshot cannot be read, loses
that step only: it is counted, named in the report and logged in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cua_rl.agent import parse_prm_vote
from cua_rl.errors import CuaRlError, InferenceError, RunFailed
from cua_rl.reward.accuracy import JudgedStep, majority_label, tally, tally_by, vote_sign
from cua_rl.runtime.held_out_steps import (
    HeldOutSet,
    ScoredTrajectory,
    Screens,
    read_held_out_set,
    step_prompt,
)
from cua_rl.runtime.vote_cache import AsyncVoteCache, CachedVotes, StepKey
from cua_rl.runtime.vote_sources import ModelSpec, VoteSettings, VoteSource, connect, identify
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.store.run_store import RunStore

log = logging.getLogger(__name__)

MAX_LISTED_FAILURES = 50
"""Lost steps named one by one in the report (all are counted)."""


def prompt_identity() -> str:
    """A short hash of the reward model's prompt texts: votes cached under an older
    wording are not this prompt's votes."""
    import hashlib

    from cua_rl.agent import prompts

    texts = [
        prompts.PRM_PREVIOUS,
        prompts.PRM_BEFORE,
        prompts.PRM_ACTION,
        prompts.PRM_NOT_EXECUTED,
        prompts.PRM_AFTER,
        prompts.PRM_TASK,
        prompts.PRM_PARSE_NOTE,
    ]
    return hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:12]


Connect = Callable[[], contextlib.AbstractAsyncContextManager[VoteSource]]
"""Opens a voter's source (starts its model or reaches its server) for a block."""


@dataclass
class Voter:
    """One role's votes: the judged model (`judge`) or the labelling judge (`labeller`)."""

    role: str
    settings: VoteSettings
    source_identity: dict[str, Any]
    """Who answers (`vote_sources.identify`), known before it is started."""
    connect: Connect
    source: VoteSource | None = None
    """Open only while steps of this role are asked (none when all were cached)."""
    key: str = ""
    """Its vote-cache key (set once registered)."""
    votes: dict[StepKey, CachedVotes] = field(default_factory=dict)
    """What it has answered, cached or new."""
    cached: int = 0
    failed: set[StepKey] = field(default_factory=set)

    def identity(self) -> dict[str, Any]:
        return {
            "role": self.role,
            **self.source_identity,
            "votes": self.settings.votes,
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
            "prompt": prompt_identity(),
        }

    async def ask(self, messages: list[dict[str, Any]]) -> tuple[str, ...]:
        assert self.source is not None, "asked before its source was opened"
        return await self.source.ask(messages, self.settings)


@dataclass
class _Asking:
    """The state of one eval-prm run while it asks."""

    held_out: HeldOutSet
    store: AsyncRunStore
    """The run's store, read-only: trajectories are loaded from it one at a time."""
    cache: AsyncVoteCache
    voters: list[Voter]
    failures: list[dict[str, Any]] = field(default_factory=list)
    lost: Counter[str] = field(default_factory=Counter)
    done: int = 0
    total: int = 0
    next_note: float = 0.0

    async def trajectory(self, scored: ScoredTrajectory) -> None:
        wanted_steps = [k for k in scored.step_keys() if any(k not in v.votes for v in self.voters)]
        if not wanted_steps:
            return
        traj = await self.store.load_trajectory(scored.id)
        screens = Screens(self.held_out)
        for step in traj.steps:
            key = (traj.id, step.index)
            wanted = [v for v in self.voters if key not in v.votes]
            if not wanted:
                continue
            try:
                messages = await step_prompt(self.held_out, traj, step, screens)
            except (OSError, CuaRlError) as exc:  # deleted or corrupt screenshot
                self.lost["unreadable_screenshot"] += 1
                self._fail("screenshot", key, exc)
            else:
                await asyncio.gather(*(self.ask(v, key, messages) for v in wanted))
            self._progress()

    async def ask(self, voter: Voter, key: StepKey, messages: list[dict[str, Any]]) -> None:
        try:
            texts = await voter.ask(messages)
        except InferenceError as exc:
            voter.failed.add(key)
            self._fail(voter.role, key, exc)
            return
        votes = CachedVotes(tuple(parse_prm_vote(t) for t in texts), texts)
        voter.votes[key] = votes
        await self.cache.put(
            voter.key, self.held_out.run_id, key, votes, vote_sign(votes.scores) or None
        )

    def _fail(self, who: str, key: StepKey, exc: BaseException) -> None:
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        log.warning("eval-prm: step %d of %s lost (%s): %s", key[1], key[0], who, reason)
        if len(self.failures) < MAX_LISTED_FAILURES:
            self.failures.append(
                {"who": who, "trajectory_id": key[0], "step_index": key[1], "reason": reason}
            )

    def _progress(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now >= self.next_note or self.done == self.total:
            log.info("eval-prm: %d/%d steps asked", self.done, self.total)
            self.next_note = now + 30.0


async def evaluate_reward_model(
    run_dir: Path,
    out_dir: Path,
    judge: Voter,
    labeller: Voter | None = None,
    *,
    concurrency: int = 8,
) -> dict[str, Any]:
    """Judge every scored step of `run_dir` with `judge` (and label it with
    `labeller`, else with the stored labels); return the report (docs/
    reward-model-accuracy.md). Votes already in `out_dir`'s cache are not asked again,
    and a voter with nothing left to ask is never started."""
    held_out = await asyncio.to_thread(read_held_out_set, run_dir)
    for line in held_out.rejected_label_rows:
        log.warning("eval-prm: stored labels ignored: %s", line)
    voters = [judge, *([labeller] if labeller else [])]
    keys = [k for t in held_out.trajectories for k in t.step_keys()]
    async with contextlib.AsyncExitStack() as stack:
        store = AsyncRunStore(await asyncio.to_thread(RunStore.read_only, run_dir))
        stack.push_async_callback(store.close)
        cache = await AsyncVoteCache.open(out_dir)
        stack.push_async_callback(cache.close)
        for voter in voters:
            voter.key = await cache.register(voter.identity())
            voter.votes = await cache.load(voter.key, held_out.run_id)
            voter.cached = sum(1 for k in keys if k in voter.votes)
        asking = _Asking(held_out, store, cache, voters)
        asking.total = sum(1 for k in keys if any(k not in v.votes for v in voters))
        log.info(
            "eval-prm: %d scored trajectories, %d steps; %d to ask (the rest cached in %s)",
            len(held_out.trajectories),
            len(keys),
            asking.total,
            cache.sync.path,
        )
        for voter in voters:  # started (or reached) only when it has steps to answer
            if voter.cached < len(keys):
                voter.source = await stack.enter_async_context(voter.connect())
        pending = iter(held_out.trajectories)

        async def worker() -> None:
            for scored in pending:  # one shared iterator: each trajectory once
                await asking.trajectory(scored)

        async with asyncio.TaskGroup() as workers:  # a failure cancels the others
            for _ in range(max(1, concurrency)):
                workers.create_task(worker())
    return _report(held_out, judge, labeller, asking)


def _judged_steps(held_out: HeldOutSet, judge: Voter, labeller: Voter | None) -> list[JudgedStep]:
    out = []
    for traj in held_out.trajectories:
        stored = held_out.stored_labels.get(traj.id)
        for key in traj.step_keys():
            if key not in judge.votes and key not in judge.failed:
                continue  # its screenshot could not be read: counted apart
            votes = judge.votes.get(key)
            label, label_failed, label_tie = None, False, False
            if labeller is not None:
                answered = labeller.votes.get(key)
                label_failed = key in labeller.failed
                if answered is not None:
                    label = majority_label(answered.scores)
                    label_tie = label is None
            elif stored is not None and key[1] < len(stored.labels):
                label = stored.labels[key[1]]
            out.append(
                JudgedStep(
                    traj.id,
                    key[1],
                    traj.variant_id,
                    traj.outcome,
                    votes.scores if votes else None,
                    label,
                    label_failed,
                    label_tie,
                )
            )
    return out


def _report(
    held_out: HeldOutSet, judge: Voter, labeller: Voter | None, asking: _Asking
) -> dict[str, Any]:
    steps = _judged_steps(held_out, judge, labeller)
    overall = {
        **tally(steps).as_dict(),
        "unreadable_screenshot": asking.lost["unreadable_screenshot"],
    }
    variants = {
        v: {"task_id": held_out.task_ids.get(v, ""), **t.as_dict()}
        for v, t in tally_by(steps).items()
    }
    if labeller is not None:
        labels: dict[str, Any] = {"source": "judge", **_voter_info(labeller)}
    elif held_out.stored_labels:
        sources = Counter(s.source for s in held_out.stored_labels.values())
        labels = {
            "source": "stored",
            "labellers": dict(sources.most_common()),
            "rejected_rows": held_out.rejected_label_rows,
        }
    else:
        labels = {"source": "none", "rejected_rows": held_out.rejected_label_rows}
    return {
        "run_dir": str(held_out.run_dir),
        "run_id": held_out.run_id,
        "judge": _voter_info(judge),
        "labels": labels,
        "overall": overall,
        "variants": variants,
        "skipped_trajectories": dict(held_out.skipped),
        "failures": asking.failures,
        "failures_total": sum(len(v.failed) for v in (judge, labeller) if v)
        + asking.lost["unreadable_screenshot"],
    }


def _voter_info(voter: Voter) -> dict[str, Any]:
    identity = voter.identity()
    return {
        "identity": {k: v for k, v in identity.items() if k != "role"},
        "cache_key": voter.key,
        "cached_steps": voter.cached,
        "requests": voter.source.requests if voter.source else 0,
        "failed_steps": len(voter.failed),
    }


def write_report(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """report.json, report.md and report.png in `out_dir`."""
    from cua_rl.report.prm_accuracy import render_markdown, render_plot

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "report.json", out_dir / "report.md", out_dir / "report.png"]
    paths[0].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    paths[1].write_text(render_markdown(report))
    render_plot(report, paths[2])
    return paths


@dataclass(frozen=True)
class EvalPrmRequest:
    """Everything `cua-rl eval-prm` was asked to do."""

    run_dir: Path
    out_dir: Path
    judge: ModelSpec
    judge_settings: VoteSettings
    labeller: ModelSpec | None = None
    label_settings: VoteSettings | None = None
    concurrency: int = 8
    request_timeout_s: float = 300.0


def run_eval_prm(request: EvalPrmRequest) -> tuple[dict[str, Any], list[Path]]:
    """The whole command: check the run, reach or start the models that have steps to
    answer, ask, report. The run directory is checked before anything starts; a run
    whose every step was lost is a failed command (after its report is written)."""
    RunStore.read_only(request.run_dir).close()  # not a run: one line, nothing started
    report = asyncio.run(_run(request))
    files = write_report(report, request.out_dir)
    overall = report["overall"]
    if overall["steps"] == 0 and report["failures_total"]:
        raise RunFailed(
            f"{request.run_dir}: no step was judged ({report['failures_total']} "
            f"lost; the first: {report['failures'][0]['reason']}); "
            f"see {files[1]}"
        )
    return report, files


async def _run(request: EvalPrmRequest) -> dict[str, Any]:
    judge = await _voter("judge", request.judge, request.judge_settings, request, "prm")
    labeller = None
    if request.labeller is not None:
        assert request.label_settings is not None
        labeller = await _voter(
            "labeller", request.labeller, request.label_settings, request, "labeller"
        )
    return await evaluate_reward_model(
        request.run_dir, request.out_dir, judge, labeller, concurrency=request.concurrency
    )


async def _voter(
    role: str, spec: ModelSpec, settings: VoteSettings, request: EvalPrmRequest, name: str
) -> Voter:
    return Voter(
        role,
        settings,
        await identify(spec),
        functools.partial(
            connect,
            spec,
            log_dir=request.out_dir / "logs",
            request_timeout_s=request.request_timeout_s,
            name=name,
        ),
    )
