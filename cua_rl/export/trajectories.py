"""`export trajectories`: the run store's trajectories as JSON lines for SFT and
rejection sampling (docs/run-store.md describes the format).

One line per scored trajectory (status `finished` or `step_limit`). Each step
carries the policy's prompt at that step, rebuilt with `step_messages` exactly as
the actor built it (the sample builder of reward/samples.py does the same), with
the stored response as the last assistant turn, in the messages + images layout
of TRL's vision SFT: `{"type": "image"}` content parts, the image paths in order
in `images`. Aborted and setup-failed trajectories are never scored and never
trained on: they are skipped and counted, as are trajectories whose instruction
or screenshot files are missing (only that trajectory is lost).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cua_rl.agent.context import step_messages
from cua_rl.errors import RunDirError, StoreError, naming_path
from cua_rl.reward.advantages import step_rewards
from cua_rl.reward.config import RewardConfig, stored_reward
from cua_rl.rollout.config import EpisodeConfig
from cua_rl.store.run_store import DB_NAME, RunStore
from cua_rl.types import Step, StepVerdict, Trajectory, TrajectoryStatus

log = logging.getLogger(__name__)

SCORED = (TrajectoryStatus.FINISHED, TrajectoryStatus.STEP_LIMIT)
IMAGES_DIR = "images"
"""Beside the output file, with `copy_images`."""
SHOT_NAME = re.compile(r"[0-9a-f]{40}\.(png|jpg|bin)")
"""A stored screenshot's name (`screenshot_hash`): anything else in a steps row is
never turned into a path (it could point outside the run directory)."""


@dataclass(frozen=True)
class Keep:
    """Which scored trajectories are written."""

    success_only: bool = False
    """Only outcome +1 (evaluator score > 0)."""
    min_reward: float | None = None
    """Only evaluator score >= this."""

    def reason_to_drop(self, score: float | None) -> str | None:
        if self.success_only and not (score is not None and score > 0):
            return "not_success"
        if self.min_reward is not None and not (score is not None and score >= self.min_reward):
            return "below_min_reward"
        return None


@dataclass(frozen=True)
class RunPrompting:
    """What rebuilding the run's prompts and rewards needs from its saved config."""

    episode: EpisodeConfig
    reward: RewardConfig
    """The policy's outcome weight and lambda (Eq. 1): the step rewards the learner used."""


@dataclass
class ExportResult:
    out: str
    trajectories: int = 0
    steps: int = 0
    images_copied: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    """Trajectories not written, by reason (status, filter, missing data)."""

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "skipped": dict(sorted(self.skipped.items()))}


def run_prompting(store: RunStore) -> RunPrompting:
    """The run's episode config and reward settings: the store's saved config (train, rollout
    and eval save it), else RUN_DIR/config.yaml. Without either the prompts cannot
    be rebuilt exactly, so that is an error rather than a guess from defaults."""
    where = f"{store.run_dir / DB_NAME}: runs.config_json"
    try:
        config = json.loads(store.saved_config())
    except json.JSONDecodeError as exc:
        raise StoreError(f"{where}: not JSON ({exc})") from None
    if not config:
        config, where = _config_yaml(store.run_dir), str(store.run_dir / "config.yaml")
    if not isinstance(config, dict):
        raise StoreError(f"{where}: expected a config mapping, got {type(config).__name__}")
    try:
        episode = EpisodeConfig.model_validate(config.get("episode") or {})
        reward = stored_reward(config)
    except (ValidationError, TypeError, ValueError) as exc:
        first = str(exc).splitlines()
        raise StoreError(
            f"{where}: episode/train.reward do not validate ({' '.join(first[:3])})"
        ) from None
    return RunPrompting(episode, reward)


def _config_yaml(run_dir: Path) -> dict[str, Any]:
    import yaml

    path = run_dir / "config.yaml"
    if not path.is_file():
        raise RunDirError(
            f"{run_dir}: the store saved no config and there is no config.yaml; "
            "the policy's prompts cannot be rebuilt"
        )
    try:
        with naming_path(path):
            loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RunDirError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    return loaded if isinstance(loaded, dict) else {}


def image_parts(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The actor's OpenAI messages (`image_url` parts, here holding file paths) in
    TRL's vision layout: every content a list of parts, `{"type": "image"}` where an
    image was, plus the image paths in order. Lists everywhere (no plain-string
    content) so `datasets` infers one Arrow type for every message."""
    images: list[str] = []
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        parts = []
        for part in content:
            if part.get("type") == "image_url":
                images.append(part["image_url"]["url"])
                parts.append({"type": "image"})
            else:
                parts.append(part)
        out.append({**message, "content": parts})
    return out, images


def response_turn(response: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": response}]}


def step_record(
    instruction: str, traj: Trajectory, step: Step, image: dict[str, str], prompting: RunPrompting
) -> dict[str, Any]:
    """Step `step.index`'s prompt (exactly the actor's) + response as one SFT sample."""
    prior = traj.steps[: step.index]
    urls = [image[s.screenshot_before] for s in (*prior, step)]
    prompt = step_messages(instruction, prior, urls, traj.screen, prompting.episode)
    messages, images = image_parts(prompt)
    messages.append(response_turn(step.response))
    return {
        "index": step.index,
        "messages": messages,
        "images": images,
        "response": step.response,
        "policy_version": step.policy_version,
        "parse_error": asdict(step.parse_error) if step.parse_error else None,
        "actions": [
            {k: v for k, v in asdict(a).items() if v not in (None, ())} for a in step.actions
        ],
        "screenshot_after": image[step.screenshot_after],
    }


def trajectory_record(
    traj: Trajectory,
    row: dict[str, Any],
    variant: dict[str, str],
    verdicts: list[StepVerdict],
    image: dict[str, str],
    prompting: RunPrompting,
    run_id: str,
) -> dict[str, Any]:
    """One JSON line: ids, rewards, per-step samples and the reward model's verdicts."""
    by_step = {v.step_index: v for v in verdicts}
    votes = [
        [vote.score for vote in by_step[s.index].votes] if s.index in by_step else []
        for s in traj.steps
    ]
    settings = prompting.reward
    rewards = (
        step_rewards(traj.outcome, votes, settings.policy_lam, settings.outcome_weight)
        if traj.outcome is not None
        else [None] * len(traj.steps)
    )
    steps = []
    for step, reward in zip(traj.steps, rewards, strict=True):
        record = step_record(variant["instruction"], traj, step, image, prompting)
        verdict = by_step.get(step.index)
        record["reward"] = reward
        record["verdicts"] = (
            []
            if verdict is None
            else [
                {"score": v.score, "text": v.text, "prm_version": verdict.prm_version}
                for v in verdict.votes
            ]
        )
        steps.append(record)
    return {
        "run_id": run_id,
        "trajectory_id": traj.id,
        "group_id": row["group_id"],
        "task_id": variant["task_id"],
        "variant_id": traj.variant_id,
        "domain": variant["domain"],
        "evaluator": variant["evaluator"],
        "instruction": variant["instruction"],
        "status": str(traj.status),
        "score": traj.score,
        "outcome": traj.outcome,
        "lam": settings.policy_lam,
        "outcome_weight": settings.outcome_weight,
        "step_rewards": rewards,
        "screen": list(traj.screen),
        "policy_version_at_start": traj.policy_version_at_start,
        "policy_versions": [s.policy_version for s in traj.steps],
        "image_pixels": {"min": prompting.episode.min_pixels, "max": prompting.episode.max_pixels},
        "images": [image[s.screenshot_before] for s in traj.steps],
        "steps": steps,
    }


def _records(
    store: RunStore,
    keep: Keep,
    prompting: RunPrompting,
    result: ExportResult,
    image_path: Callable[[str], str | None],
) -> Iterator[dict[str, Any]]:
    variants = store.variant_rows()
    for row in store.trajectory_records():
        status = row["status"]
        if status not in SCORED:
            result.skipped[str(status)] += 1
            continue
        reason = keep.reason_to_drop(row["score"])
        if reason:
            result.skipped[reason] += 1
            continue
        variant = variants.get(row["variant_id"])
        if variant is None:
            result.skipped["unknown_variant"] += 1
            continue
        try:
            traj = store.load_trajectory(row["trajectory_id"])
            verdicts = store.load_verdicts(traj.id)
        except (ValueError, TypeError, KeyError) as exc:  # a damaged steps/votes row
            log.warning(
                "%s: trajectory %s: unreadable steps or votes row (%s); skipped",
                store.run_dir / DB_NAME,
                row["trajectory_id"],
                exc,
            )
            result.skipped["unreadable_row"] += 1
            continue
        if not traj.steps:
            result.skipped["no_steps"] += 1
            continue
        names = {n for s in traj.steps for n in (s.screenshot_before, s.screenshot_after)}
        image = {n: image_path(n) for n in names}
        if any(p is None for p in image.values()):
            result.skipped["missing_screenshot"] += 1
            continue
        yield trajectory_record(traj, row, variant, verdicts, image, prompting, store.run_id)


def export_trajectories(
    run_dir: Path, out: Path | None, keep: Keep = Keep(), *, copy_images: bool = False
) -> ExportResult:
    """Write RUN_DIR's scored trajectories to `out` (None: stdout) as JSON lines.

    Image paths are absolute paths into RUN_DIR/screenshots, or, with
    `copy_images`, relative paths into `images/` beside `out` (a folder that moves
    to a training machine without the run directory's checkpoints)."""
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    if copy_images and out is None:
        raise RunDirError("--copy-images needs --out FILE (the images go beside it)")
    if out is not None and out.is_dir():
        raise RunDirError(f"{out}: a directory; --out takes the JSON-lines file to write")
    store = RunStore.read_only(run_dir)
    try:
        prompting = run_prompting(store)
        result = ExportResult(out=str(out) if out else "-")

        def image_path(name: str) -> str | None:
            src = store.screenshot_path(name)
            if not SHOT_NAME.fullmatch(name) or not src.is_file():
                return None
            if not copy_images:
                return str(src.resolve())
            assert out is not None
            dst = out.parent / IMAGES_DIR / name
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                with naming_path(dst):
                    shutil.copyfile(src, dst)
                result.images_copied += 1
            return f"{IMAGES_DIR}/{name}"

        records = _records(store, keep, prompting, result, image_path)
        _write_lines(records, out, result)
        return result
    finally:
        store.close()


def _write_lines(records: Iterator[dict[str, Any]], out: Path | None, result: ExportResult) -> None:
    """Lines to stdout, or to `out` through a temporary file renamed into place (a
    failed export never leaves a half file that looks complete)."""
    import sys

    if out is None:
        for record in records:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            result.trajectories += 1
            result.steps += len(record["steps"])
        sys.stdout.flush()
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with naming_path(tmp), tmp.open("w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                result.trajectories += 1
                result.steps += len(record["steps"])
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
