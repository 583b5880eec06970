"""One episode: screenshot -> policy -> parse -> act -> screenshot, until the
agent terminates or the step limit, then evaluate.

Each call of `run_episode` returns exactly one Trajectory or raises
EpisodeAborted (or CancelledError): never both, never neither. Everything from
outside the process that the episode cannot use (a dead desktop, a corrupt
screenshot, no model replica, an unusable model answer, a broken setup step)
aborts this episode only. A response that does not parse as an action becomes
a recorded no-op step (docs/architecture.md, failure rules); every step
is handed to the judge as soon as it exists, so reward-model votes arrive while
the episode goes on.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from functools import partial
from typing import Protocol

from cua_rl import spans
from cua_rl.agent import parse_response, to_pyautogui
from cua_rl.agent.context import history_line, model_image_size, step_messages
from cua_rl.agent.images import encode_image, png_passthrough_url
from cua_rl.errors import (
    DesktopError,
    EpisodeAborted,
    GuestError,
    InferenceError,
    ModelResponseError,
    SetupStepError,
)
from cua_rl.inference.base import ChatBackend
from cua_rl.rollout.base import EpisodeDesktop
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.episode_recording import EpisodeRecording, recording_path
from cua_rl.rollout.step_progress import StepProgress
from cua_rl.seeds import derive_seed
from cua_rl.store.async_run_store import AsyncRunStore
from cua_rl.types import Action, Step, StepTimings, TaskVariant, Trajectory, TrajectoryStatus


class StepSink(Protocol):
    """Receives each finished step (the streaming judge implements this)."""

    def submit(
        self,
        trajectory_id: str,
        variant: TaskVariant,
        step: Step,
        prior_actions: list[str],
        before_url: str,
        after_url: str,
        *,
        seed: int | None = None,
    ) -> None: ...


class EpisodeImages:
    """Screenshots of one episode: stored by hash, encoded for the model once."""

    def __init__(self, store: AsyncRunStore, cfg: EpisodeConfig, tid: str = "") -> None:
        self.store = store
        self.cfg = cfg
        self.tid = tid

    async def shoot(self, desktop: EpisodeDesktop) -> tuple[str, str]:
        """A screenshot of `desktop`, added (spans `screenshot` and `images`)."""
        with spans.span("screenshot", tid=self.tid):
            data = await desktop.screenshot()
        with spans.span("images", tid=self.tid):
            return await self.add(data)

    async def add(self, data: bytes) -> tuple[str, str]:
        """(content hash, data URL); resizing runs off the event loop, an image that
        needs none is encoded inline (a thread hop would cost more than the work)."""
        bounds = {"min_pixels": self.cfg.min_pixels, "max_pixels": self.cfg.max_pixels}
        url = png_passthrough_url(data, **bounds)
        if url is not None:
            return await self.store.put_screenshot(data), url
        loop = asyncio.get_running_loop()
        url_future = loop.run_in_executor(None, partial(encode_image, data, **bounds))
        name = await self.store.put_screenshot(data)
        return name, await url_future


async def run_episode(
    variant: TaskVariant,
    desktop: EpisodeDesktop,
    policy: ChatBackend,
    store: AsyncRunStore,
    cfg: EpisodeConfig,
    *,
    judge: StepSink | None = None,
    trajectory_id: str | None = None,
    group_id: str = "",
    policy_version: int = 0,
    seed: int | None = None,
) -> Trajectory:
    """Run one episode of `variant` on a reset desktop and store it.

    `seed`: the rollout's seed (the fleet derives it from the run's); step i's policy
    request is seeded with `derive_seed(seed, "policy", i)` and its reward-model request
    with `derive_seed(seed, "prm", i)`; None: unseeded.

    On a desktop (dead guest, failed reset), model-server or setup failure the
    partial trajectory is stored as `aborted` (for audit; it is never trained on)
    and EpisodeAborted raised.
    """
    tid = trajectory_id or uuid.uuid4().hex
    images = EpisodeImages(store, cfg, tid)
    started = time.time()
    steps: list[Step] = []
    recording: EpisodeRecording | None = None
    try:
        with spans.span("setup", tid=tid):
            await desktop.prepare(variant)
        if cfg.record:
            recording = EpisodeRecording(desktop, recording_path(store.run_dir, tid))
            with spans.span("recording", tid=tid):
                await recording.start()
        image_size = model_image_size(desktop.screen, cfg)
        progress = StepProgress(desktop, variant.step_progress, variant.task_id)
        await progress.read()  # the count before the first step
        shot_hash, shot_url = await images.shoot(desktop)
        urls = [shot_url]
        last_action: Action | None = None
        status = TrajectoryStatus.STEP_LIMIT
        for index in range(cfg.max_steps):
            t0 = time.perf_counter()
            with spans.span("prompt", tid=tid):
                messages = step_messages(variant.instruction, steps, urls, desktop.screen, cfg)
            with spans.span("policy_call", tid=tid, step=index):
                result = await policy.chat(
                    messages,
                    session_key=tid,
                    temperature=cfg.temperature,
                    top_p=cfg.top_p,
                    max_tokens=cfg.max_tokens,
                    seed=derive_seed(seed, "policy", index),
                )
            if not result.choices:  # the HTTP client checks this; other backends may not
                raise ModelResponseError(result.url, "policy chat", "at least one choice")
            choice = result.choices[0]
            t1 = time.perf_counter()
            actions, error = parse_response(choice.text, desktop.screen, cfg.coords, image_size)
            code = to_pyautogui(actions) if error is None else ""
            if code or cfg.wait_after_action_s:
                with spans.span("act", tid=tid):  # with the settle pause
                    if code:
                        await desktop.act(code)
                    if cfg.wait_after_action_s:
                        await asyncio.sleep(cfg.wait_after_action_s)
            t2 = time.perf_counter()
            await progress.read()
            after_hash, after_url = await images.shoot(desktop)
            step = Step(
                index=index,
                screenshot_before=shot_hash,
                response=choice.text,
                actions=tuple(actions),
                parse_error=error,
                code=code,
                screenshot_after=after_hash,
                token_ids=choice.token_ids,
                logprobs=choice.logprobs,
                policy_version=result.model_version
                if result.model_version is not None
                else policy_version,
                timings=StepTimings(
                    policy_s=t1 - t0, act_s=t2 - t1, screenshot_s=time.perf_counter() - t2
                ),
            )
            steps.append(step)
            if judge is not None:
                judge.submit(
                    tid,
                    variant,
                    step,
                    [history_line(s) for s in steps[:-1]],
                    urls[-1],
                    after_url,
                    seed=derive_seed(seed, "prm", index),
                )
            urls.append(after_url)
            shot_hash = after_hash
            if actions:
                last_action = actions[-1]
            if last_action is not None and last_action.kind == "terminate":
                status = TrajectoryStatus.FINISHED
                break
        if recording is not None:
            with spans.span("recording", tid=tid):
                await recording.save()  # before evaluate(): OSWorld's runner stops it there too
        with spans.span("evaluate", tid=tid):
            score = await desktop.evaluate(variant, last_action)
    except (GuestError, DesktopError, InferenceError, SetupStepError) as exc:
        # DesktopError: the reset before the episode could not start the desktop again
        setup_failed = isinstance(exc, SetupStepError)
        if recording is not None:
            await recording.save()  # keep what was recorded; frees the guest's recorder
        aborted = Trajectory(
            id=tid,
            variant_id=variant.variant_id,
            steps=tuple(steps),
            status=TrajectoryStatus.SETUP_FAILED if setup_failed else TrajectoryStatus.ABORTED,
            policy_version_at_start=policy_version,
        )
        with spans.span("save", tid=tid):
            await store.save_trajectory(
                aborted, group_id=group_id, error=f"{type(exc).__name__}: {exc}", started_at=started
            )
        raise EpisodeAborted(f"{variant.variant_id}: {exc}", permanent=setup_failed) from exc
    finally:
        policy.end_session(tid)
    trajectory = Trajectory(
        id=tid,
        variant_id=variant.variant_id,
        steps=tuple(steps),
        status=status,
        score=score,
        policy_version_at_start=policy_version,
        screen=desktop.screen,
    )
    with spans.span("save", tid=tid):
        await store.save_trajectory(trajectory, group_id=group_id, started_at=started)
        await progress.store(store, tid, len(steps))
    return trajectory
