"""The scored steps of a stored run, as `cua-rl eval-prm` judges them.

Read read-only (`RunStore.read_only`): the run's trajectories that have a
verified outcome (status finished or step_limit with an evaluator score; aborted
and setup-failed ones never had one), their task variants' instructions, the
episode settings their prompts were built with, and any step labels stored with
them (store/step_labels.py). Prompts are rebuilt from these exactly as the
streaming judge built them during the run (`reward/samples.py` does the same for
training): `prm_messages` with the instruction, the previous steps' history lines,
the screenshot before, the step's full response and the screenshot after, each
screenshot encoded with `encode_image` and the run's `min_pixels`/`max_pixels`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cua_rl.agent import prm_messages
from cua_rl.agent.context import history_line
from cua_rl.agent.images import encode_image
from cua_rl.errors import RunDirError, StoreError, naming_path
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.store.run_store import DB_NAME, SHOTS_DIR, RunStore
from cua_rl.store.step_labels import StoredLabels, read_step_labels
from cua_rl.types import Step, Trajectory

SCORED_STATUSES = ("finished", "step_limit")


@dataclass(frozen=True, slots=True)
class ScoredTrajectory:
    """A trajectory with a verified outcome, without its steps (loaded only when one
    of them is asked about: a held-out set of thousands of long trajectories does not
    fit in memory with every step's token ids)."""

    id: str
    variant_id: str
    outcome: int
    """+1 success (evaluator score > 0), -1 failure."""
    n_steps: int

    def step_keys(self) -> list[tuple[str, int]]:
        return [(self.id, i) for i in range(self.n_steps)]


@dataclass
class HeldOutSet:
    """Everything eval-prm needs from one run directory."""

    run_dir: Path
    run_id: str
    episode: EpisodeConfig
    trajectories: list[ScoredTrajectory]
    """Scored trajectories (outcome known), oldest first."""
    instructions: dict[str, str]
    """variant id -> the instruction the policy was given."""
    task_ids: dict[str, str]
    """variant id -> task id."""
    stored_labels: dict[str, StoredLabels]
    rejected_label_rows: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Trajectories not used, by reason (`aborted`, `setup_failed`, `no_variant`)."""


def run_episode_settings(store: RunStore) -> EpisodeConfig:
    """The episode settings the run's prompts were built with: its saved config
    (train, rollout and eval save it in the store), else RUN_DIR/config.yaml. With
    neither the images cannot be sized as they were, so that is an error, not a guess."""
    where = f"{store.run_dir / DB_NAME}: runs.config_json"
    try:
        config: Any = json.loads(store.saved_config())
    except json.JSONDecodeError as exc:
        raise StoreError(f"{where}: not JSON ({exc})") from None
    if not config:
        path = store.run_dir / "config.yaml"
        if not path.is_file():
            raise RunDirError(
                f"{store.run_dir}: the store saved no config and there is no "
                "config.yaml; the reward model's prompts cannot be rebuilt"
            )
        where = str(path)
        try:
            with naming_path(path):
                config = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise RunDirError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise StoreError(f"{where}: expected a config mapping, got {type(config).__name__}")
    try:
        return EpisodeConfig.model_validate(config.get("episode") or {})
    except ValidationError as exc:
        raise StoreError(
            f"{where}: episode does not validate ({' '.join(str(exc).splitlines()[:3])})"
        ) from None


def read_held_out_set(run_dir: Path) -> HeldOutSet:
    """The scored trajectories of `run_dir` and what rebuilding their prompts needs.
    A directory that is not a run raises StoreError (one line)."""
    store = RunStore.read_only(run_dir)
    try:
        episode = run_episode_settings(store)
        variants = store.variant_rows()
        labels = read_step_labels(store)
        out = HeldOutSet(
            run_dir,
            store.run_id,
            episode,
            [],
            {v: row["instruction"] for v, row in variants.items()},
            {v: row["task_id"] for v, row in variants.items()},
            labels.by_trajectory,
            labels.rejected,
        )
        for record in store.trajectory_records():
            if record["status"] not in SCORED_STATUSES or record["score"] is None:
                out.skipped[str(record["status"])] += 1
            elif record["variant_id"] not in variants:
                out.skipped["no_variant"] += 1
            else:
                out.trajectories.append(
                    ScoredTrajectory(
                        record["trajectory_id"],
                        record["variant_id"],
                        1 if record["score"] > 0 else -1,
                        int(record["n_steps"]),
                    )
                )
        return out
    finally:
        store.close()


SHOT_NAME = re.compile(r"[0-9a-f]{40}\.(png|jpg|bin)")
"""A stored screenshot's name (`screenshot_hash`): anything else in a steps row is
never turned into a path (it could point outside the run directory)."""


class Screens:
    """Data URLs of one trajectory's stored screenshots, encoded once, off the loop."""

    def __init__(self, held_out: HeldOutSet) -> None:
        self.held_out = held_out
        self._urls: dict[str, str] = {}

    async def url(self, name: str) -> str:
        """Raises FileNotFoundError (a deleted file, or a name that is not a stored
        screenshot's) or CorruptImageError (bytes that do not decode)."""
        if name not in self._urls:
            if not SHOT_NAME.fullmatch(name):
                raise FileNotFoundError(f"{name[:80]!r} is not a stored screenshot's name")
            path = self.held_out.run_dir / SHOTS_DIR / name[:2] / name
            loop = asyncio.get_running_loop()
            data = await loop.run_in_executor(None, path.read_bytes)
            episode = self.held_out.episode
            self._urls[name] = await loop.run_in_executor(
                None,
                partial(
                    encode_image, data, min_pixels=episode.min_pixels, max_pixels=episode.max_pixels
                ),
            )
        return self._urls[name]


async def step_prompt(
    held_out: HeldOutSet, traj: Trajectory, step: Step, screens: Screens
) -> list[dict[str, Any]]:
    """The reward model's prompt for `step`, exactly as the streaming judge built it."""
    before = await screens.url(step.screenshot_before)
    after = await screens.url(step.screenshot_after)
    return prm_messages(
        held_out.instructions[traj.variant_id],
        [history_line(s) for s in traj.steps[: step.index]],
        before,
        step.response,
        after,
        parse_error=step.parse_error.message if step.parse_error else None,
    )
