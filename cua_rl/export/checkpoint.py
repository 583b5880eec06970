"""Which learner checkpoint an export reads, and its weights as one state dict.

A run's learner writes `checkpoints/<role>/step-NNNNNN` (one older kept) and points
`latest.json` at the newest (learner/service.py). The two engines write different
things there: the torch engine one `train_state.pt` (model, optimizer, scheduler,
counters), DeepSpeed its own tree (`latest` naming a tag directory, one model-states
and one optimizer-states file per rank). Weights come out of each in the dtype the
learner trained in, so an export equals the checkpoint bit for bit: the torch
state dict as saved; DeepSpeed's fp32 master weights consolidated over every rank
by its own `zero_to_fp32` (ZeRO 1-3, any number of ranks) and cast to the training
dtype (bf16 training keeps its bf16 weights as the rounding of those masters).
Everything read here was written by a run, perhaps another version's or a
half-copied one, so each file is checked and a problem is one line naming it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cua_rl.errors import RunDirError

if TYPE_CHECKING:
    import torch

Role = Literal["policy", "prm"]
TORCH_STATE = "train_state.pt"
"""The torch engine's checkpoint file (engine_torch.STATE_FILE)."""
DEEPSPEED_TAG = "train_state"
"""The DeepSpeed engine's checkpoint tag (engine_deepspeed.CHECKPOINT_TAG)."""
_STEP = re.compile(r"step-(\d+)")


@dataclass(frozen=True)
class LearnerCheckpoint:
    """One complete checkpoint of one learner."""

    role: Role
    version: int
    path: Path
    engine: Literal["torch", "deepspeed"]


def find_checkpoint(run_dir: Path, role: Role, version: int | None = None) -> LearnerCheckpoint:
    """The checkpoint `version` of `role` in `run_dir` (None: the one `latest.json`
    names); RunDirError when the run, the role or the version is not there."""
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    if not (run_dir / "config.yaml").is_file():
        raise RunDirError(f"{run_dir}: no config.yaml; not a cua-rl train run")
    root = run_dir / "checkpoints" / role
    versions = available_versions(root)
    if not versions:
        raise RunDirError(
            f"{root}: no checkpoint of the {role} learner (it has not finished "
            "an update yet, or this run did not train it)"
        )
    if version is None:
        version, path = _latest(root)
    else:
        path = root / f"step-{version:06d}"
        if version not in versions:
            kept = ", ".join(str(v) for v in versions)
            raise RunDirError(
                f"{run_dir}: no {role} checkpoint of version {version}; the run "
                f"keeps versions {kept}"
            )
    return LearnerCheckpoint(role, version, path, _engine_of(path))


def available_versions(root: Path) -> list[int]:
    """Versions of the complete `step-N` directories under one role's root."""
    if not root.is_dir():
        return []
    found = (_STEP.fullmatch(p.name) for p in root.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def _latest(root: Path) -> tuple[int, Path]:
    pointer = root / "latest.json"
    try:
        data = json.loads(pointer.read_text())
    except FileNotFoundError:
        raise RunDirError(
            f"{pointer}: missing (the learner writes it after every "
            "checkpoint); choose one with --version"
        ) from None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{pointer}: not readable JSON ({exc})") from None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("version"), int)
        and isinstance(data.get("path"), str)
        and _STEP.fullmatch(data["path"])
    ):
        raise RunDirError(f'{pointer}: expected {{"version": int, "path": "step-N"}}, got {data!r}')
    path = root / data["path"]
    if not path.is_dir():
        raise RunDirError(f"{pointer}: names {data['path']}, which is not there")
    return data["version"], path


def _engine_of(path: Path) -> Literal["torch", "deepspeed"]:
    if (path / TORCH_STATE).is_file():
        return "torch"
    if (path / "latest").is_file() and (path / DEEPSPEED_TAG).is_dir():
        return "deepspeed"
    raise RunDirError(
        f"{path}: neither a torch ({TORCH_STATE}) nor a DeepSpeed "
        f"(latest + {DEEPSPEED_TAG}/) learner checkpoint"
    )


def load_weights(ckpt: LearnerCheckpoint) -> dict[str, torch.Tensor]:
    """The checkpoint's model weights under their HF names, in the training dtype."""
    if ckpt.engine == "torch":
        return _torch_weights(ckpt.path / TORCH_STATE)
    return _deepspeed_weights(ckpt.path)


def _torch_weights(file: Path) -> dict[str, torch.Tensor]:
    import torch

    try:
        # weights_only: a checkpoint is data; mmap: an 8B state is not read twice
        state = torch.load(file, map_location="cpu", mmap=True, weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged file
        raise RunDirError(f"{file}: not a readable torch checkpoint ({exc})") from None
    model = state.get("model") if isinstance(state, dict) else None
    if not isinstance(model, dict) or not model:
        raise RunDirError(f"{file}: expected a 'model' state dict in the checkpoint")
    return model


def _deepspeed_weights(path: Path) -> dict[str, torch.Tensor]:
    import torch

    from cua_rl.command_output import stdout_to_stderr

    stage, bf16 = _deepspeed_settings(path / DEEPSPEED_TAG)
    dtype = torch.bfloat16 if bf16 else torch.float32
    with stdout_to_stderr():  # zero_to_fp32 prints its progress
        if stage == 0:  # no ZeRO: no partitioned masters; the module is saved whole
            states = _load(_model_states_file(path / DEEPSPEED_TAG, stage))
            return {k: v for k, v in states["module"].items() if isinstance(v, torch.Tensor)}
        from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

        try:
            masters = get_fp32_state_dict_from_zero_checkpoint(
                str(path), tag=DEEPSPEED_TAG, lazy_mode=True
            )
        except (OSError, ValueError, KeyError) as exc:
            raise RunDirError(
                f"{path}: DeepSpeed could not consolidate the ZeRO-{stage} checkpoint ({exc})"
            ) from None
        # one tensor at a time: the fp32 masters of a large model are never all in memory;
        # tied weights (one tensor under two names) stay one tensor
        out: dict[str, torch.Tensor] = {}
        done: dict[int, torch.Tensor] = {}
        for name, lazy in masters.items():
            if id(lazy) not in done:
                tensor = lazy.contiguous()
                done[id(lazy)] = tensor.to(dtype) if tensor.is_floating_point() else tensor
            out[name] = done[id(lazy)]
        return out


def _deepspeed_settings(tag_dir: Path) -> tuple[int, bool]:
    """(ZeRO stage, bf16) of the learner that wrote the checkpoint (its client state)."""
    file = None
    for stage in (3, 0):  # rank 0's model-states file name tells ZeRO-3 apart
        if (candidate := _model_states_file(tag_dir, stage)).is_file():
            file = candidate
            break
    if file is None:
        raise RunDirError(f"{tag_dir}: no DeepSpeed model-states file of rank 0")
    states = _load(file)
    config = states.get("config")
    engine = config.get("engine") if isinstance(config, dict) else None
    if not isinstance(engine, dict) or engine.get("type") != "deepspeed":
        raise RunDirError(
            f"{file}: expected the learner's config (engine.type deepspeed) in its client state"
        )
    return int(engine.get("zero_stage", 0)), bool(engine.get("bf16", False))


def _model_states_file(tag_dir: Path, stage: int) -> Path:
    name = (
        "zero_pp_rank_0_mp_rank_00_model_states.pt" if stage == 3 else "mp_rank_00_model_states.pt"
    )
    return tag_dir / name


def _load(file: Path) -> dict[str, Any]:
    import torch

    try:
        # DeepSpeed pickles its own config objects next to the tensors
        state = torch.load(file, map_location="cpu", mmap=True, weights_only=False)
    except Exception as exc:  # torch raises several types for a damaged file
        raise RunDirError(f"{file}: not a readable DeepSpeed checkpoint ({exc})") from None
    if not isinstance(state, dict):
        raise RunDirError(f"{file}: expected a dict of model states")
    return state
