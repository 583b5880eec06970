"""One environment's episode on one leased desktop, driven on the hub's event loop.

The sync `DesktopEnv`, the `DesktopVectorEnv` and the asyncio `AsyncDesktopEnv` are
thin fronts over this class; it reuses what a training episode uses and copies
none of it: `GuestDesktop` (reset through the pool, the task's setup steps,
settling, OSWorld's evaluate with its per-episode work folder), the response
parser and pyautogui code generator (via `actions.resolve`), the streaming judge.

Rules:
- reward is 0 until the episode ends, then the evaluator's score (plus, with
  `prm_weight`, lambda times each step's mean vote); it ends with `terminated`
  on DONE/FAIL (a `terminate` call) and `truncated` at `max_steps`, both scored;
- an action that does not parse is a no-op step with its reason in `info`; an
  exception inside the agent's code or its timeout is a no-op too (`info["act"]`);
- a dead desktop (GuestError, DesktopError) fails the call, and the desktop goes
  back to its pool unhealthy (replaced there); the next reset leases another. So
  does a call cancelled half-way (the caller's deadline): the desktop's state is
  unknown then.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import time
import uuid
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from cua_rl.agent.pyautogui_code import CODE_PRELUDE
from cua_rl.env.actions import EnvAction, resolve
from cua_rl.env.config import EnvConfig
from cua_rl.env.hub import DesktopHub, Lease
from cua_rl.env.prm import StepJudge
from cua_rl.errors import ConfigError, CorruptImageError, DesktopError, GuestError
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.rollout.guest_desktop import GuestDesktop
from cua_rl.types import Action, TaskVariant

Observation = dict[str, Any]


class EpisodeOver(RuntimeError):
    """`step()` before the first `reset()` or after the episode ended."""


def decode_screenshot(data: bytes, screen: tuple[int, int]) -> np.ndarray:
    """PNG/JPEG bytes from the guest as an (height, width, 3) uint8 array."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            array = np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise CorruptImageError(
            f"screenshot: not a decodable image ({len(data)} bytes): {exc}"
        ) from exc
    if array.shape != (screen[1], screen[0], 3):
        raise CorruptImageError(
            f"screenshot: expected {screen[0]}x{screen[1]} pixels, got "
            f"{array.shape[1]}x{array.shape[0]}"
        )
    return array


class DesktopSession:
    """Reset/step/close of one environment (call only on the hub's loop)."""

    def __init__(self, hub: DesktopHub, cfg: EnvConfig) -> None:
        self.hub = hub
        self.cfg = cfg
        self.screen = cfg.screen_hint()
        self.episode_cfg = EpisodeConfig(
            max_steps=cfg.max_steps,
            coords=cfg.coords,
            settle_max_s=cfg.settle_max_s,
            strict_setup=cfg.strict_setup,
            screenshot_format=cfg.screenshot_format,
            screenshot_quality=cfg.screenshot_quality,
        )
        self.lease: Lease | None = None
        self.desktop: GuestDesktop | None = None
        self.judge: StepJudge | None = None
        self.variant: TaskVariant | None = None
        self.episode_id = ""
        self.steps = 0
        self.over = True
        self.last_action: Action | None = None
        self.last_shot = b""
        self.history: list[str] = []
        self.untouched: TaskVariant | None = None
        """The variant of the last reset while no step has run since (see reuse_untouched)."""
        self._turn = asyncio.Lock()
        """One call at a time: a call its caller gave up on finishes its cleanup (the
        desktop given back) before the next call starts."""

    @property
    def active(self) -> bool:
        """Whether a desktop is leased (close has something to give back)."""
        return self.lease is not None or self.judge is not None

    async def reset(self, variant: TaskVariant) -> tuple[Observation, dict[str, Any]]:
        """Lease a desktop if needed, reset it, run the task's setup, observe."""
        async with self._turn:
            return await self._reset(variant)

    async def step(self, action: object) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """Run one action; score the episode if it ended."""
        async with self._turn:
            return await self._step(action)

    async def close(self) -> None:
        """Give the desktop back to its pool (kept for the next environment)."""
        async with self._turn:
            await self._close()

    # internals --------------------------------------------------------------------

    async def _reset(self, variant: TaskVariant) -> tuple[Observation, dict[str, Any]]:
        t0 = time.perf_counter()
        fresh = False
        if self.desktop is None:
            self.lease = await self.hub.lease(self.cfg.provider)
            handle, client = self.lease.desktop
            fresh = self.lease.fresh
            self.desktop = GuestDesktop(
                self.lease.pool,
                handle,
                client,
                cache=self.hub.cache,
                work_root=self.hub.work_root,
                cfg=self.episode_cfg,
            )
        if self.cfg.judge_urls and self.judge is None:
            self.judge = StepJudge(self.cfg)
        desktop = self.desktop
        reuse = (
            self.cfg.reuse_untouched and self.untouched == variant and desktop.work_dir is not None
        )
        self.untouched = None
        if not reuse:
            await self._drop_work_dir()
        self.variant, self.over = None, True
        try:
            if not reuse:
                await desktop.prepare(variant, reset=not fresh)
            if desktop.screen != self.screen:
                raise ConfigError(
                    f"provider settings say a {self.screen[0]}x{self.screen[1]} screen, the "
                    f"desktop {desktop.handle.id} has {desktop.screen[0]}x{desktop.screen[1]}: "
                    "set provider width/height to the desktop's size"
                )
            t1 = time.perf_counter()
            self.last_shot = await desktop.screenshot()
            obs = await self._observe(self.last_shot, variant, {})
        except (GuestError, DesktopError, asyncio.CancelledError):
            # dead, or cut off by the caller's deadline mid-way: its state is unknown
            await self._give_back(healthy=False)
            raise
        self.variant, self.over, self.untouched = variant, False, variant
        self.episode_id, self.steps = uuid.uuid4().hex, 0
        self.last_action, self.history = None, []
        info = {
            "task_id": variant.task_id,
            "variant": variant.evaluator_name,
            "domain": variant.domain,
            "desktop": desktop.handle.id,
            "reused": reuse,
            "timings": {
                "reset_s": t1 - t0,
                "observe_s": time.perf_counter() - t1,
                "settle_s": desktop.settled.waited_s if desktop.settled and not reuse else 0.0,
            },
        }
        return obs, info

    async def _step(self, action: object) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        if self.over or self.variant is None or self.desktop is None:
            raise EpisodeOver(
                "step() needs an episode: call reset() first (an episode "
                "that ended, terminated or truncated, needs a new reset())"
            )
        variant, desktop = self.variant, self.desktop
        self.untouched = None  # from here on the desktop may differ from a reset one
        t0 = time.perf_counter()
        act = resolve(action, self.screen, self.cfg.coords)
        info: dict[str, Any] = {
            "step": self.steps + 1,
            "action": {
                "kind": act.kind,
                "text": act.text[:2000],
                "code": act.code,
                "parse_error": None
                if act.error is None
                else f"{act.error.code}: {act.error.message}",
            },
        }
        try:
            info["act"] = await self._act(act)
            if self.cfg.wait_after_action_s:
                await asyncio.sleep(self.cfg.wait_after_action_s)
            t1 = time.perf_counter()
            before, self.last_shot = self.last_shot, await desktop.screenshot()
            t2 = time.perf_counter()
            self.steps += 1
            if act.actions:
                self.last_action = act.last
            terminated = act.terminal
            truncated = not terminated and self.steps >= self.cfg.max_steps
            self.over = terminated or truncated
            score, prm = await asyncio.gather(
                self._score(variant) if self.over else _none(),
                self._judge(variant, act, before) if self.judge is not None else _none(),
            )
            t3 = time.perf_counter()
            self.history.append(act.text[:300])
            obs = await self._observe(self.last_shot, variant, info)
        except (GuestError, DesktopError, asyncio.CancelledError):
            self.over = True
            await self._give_back(healthy=False)
            raise
        reward = 0.0
        if score is not None:
            reward = info["score"] = float(score)
        if prm is not None:
            verdict, info["prm"] = prm
            if verdict is not None:
                reward += self.cfg.prm_weight * verdict.mean_score
        info["timings"] = {
            "act_s": t1 - t0,
            "screenshot_s": t2 - t1,
            "score_and_prm_s": t3 - t2,
            "step_s": time.perf_counter() - t0,
        }
        return obs, reward, terminated, truncated, info

    async def _close(self) -> None:
        self.over, self.variant, self.untouched = True, None, None
        if self.judge is not None:
            judge, self.judge = self.judge, None
            await judge.close()
        await self._give_back(healthy=True)

    async def _act(self, act: EnvAction) -> dict[str, Any] | None:
        assert self.desktop is not None
        if act.kind == "WAIT":
            await asyncio.sleep(self.cfg.wait_s)
        if not act.code:
            return None
        # A timeout or an exception in the agent's code is the agent's no-op (as in
        # training); only an unreachable guest raises. The prelude imports what
        # OSWorld's pyautogui runner has in scope (`time` for waits): our guest's
        # /act starts each action with `pyautogui` alone.
        result = await self.desktop.client.act(
            CODE_PRELUDE + act.code, timeout=self.cfg.act_timeout_s
        )
        return {"status": result.status, "error": (result.error or "")[-2000:]}

    async def _score(self, variant: TaskVariant) -> float:
        assert self.desktop is not None
        return await self.desktop.evaluate(variant, self.last_action)

    async def _judge(self, variant: TaskVariant, act: EnvAction, before: bytes) -> Any:
        assert self.judge is not None
        return await self.judge.verdict(
            self.episode_id,
            variant,
            self.steps - 1,
            act,
            list(self.history),
            before,
            self.last_shot,
        )

    async def _observe(
        self, shot: bytes, variant: TaskVariant, info: dict[str, Any]
    ) -> Observation:
        assert self.desktop is not None
        screen = await asyncio.to_thread(decode_screenshot, shot, self.screen)
        obs: Observation = {
            "screenshot": screen,
            "instruction": variant.instruction[: self.cfg.max_text_chars],
        }
        if self.cfg.accessibility_tree:
            tree = await self.desktop.client.accessibility_tree() or ""
            if len(tree) > self.cfg.max_text_chars:
                tree, info["a11y_truncated"] = tree[: self.cfg.max_text_chars], True
            obs["accessibility_tree"] = tree
        return obs

    async def _drop_work_dir(self) -> None:
        """An episode that was not scored leaves its work folder: remove it."""
        desktop = self.desktop
        if desktop is not None and desktop.work_dir is not None:
            folder, desktop.work_dir = desktop.work_dir, None
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def _give_back(self, healthy: bool) -> None:
        if healthy:
            await self._drop_work_dir()
        lease, self.lease, self.desktop = self.lease, None, None
        if lease is not None:
            self.hub.give_back(lease, healthy)


async def _none() -> None:
    return None
