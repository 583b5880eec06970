"""Write a learner's weights as a Hugging Face folder that transformers and vLLM load.

The folder is what checkpoint-mode weight sync gives the replicas (the engines'
`export_weights`: `save_pretrained` of the model, then of the processor), made
without a learner: the model is built on the meta device from the base model's
config (no memory, no weights read), and `save_pretrained` is handed the
checkpoint's state dict, so transformers does the safetensors sharding, tied
weights and any name conversion exactly as for its own models. Processor, chat
template and generation config come from the base model the run started from.
The folder appears whole or not at all: it is written beside its final name and
renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_rl.errors import RunDirError

if TYPE_CHECKING:
    import torch

EXPORT_INFO = "cua_rl_export.json"
"""Where an exported folder says which run, role, version and checkpoint it holds."""


def write_hf_folder(
    weights: dict[str, torch.Tensor], base: Path, out: Path, info: dict[str, Any]
) -> dict[str, Any]:
    """Write `weights` (HF names, one dtype) as an HF folder at `out` with the config,
    processor and generation config of the checkpoint directory `base`; returns
    `info` completed with the dtype and parameter count. `out` must not exist or be
    empty."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    check_out(out)
    dtype = _single_dtype(weights)
    try:
        config = AutoConfig.from_pretrained(base)
        processor = AutoProcessor.from_pretrained(base)
    except OSError as exc:
        raise RunDirError(
            f"base model {base}: cannot read its config and processor "
            f"({exc}); give the checkpoint directory with --base-model"
        ) from None
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    _check_names(model, weights)
    model.generation_config = _generation_config(base, model.generation_config)
    params = sum(t.numel() for t in {id(t): t for t in weights.values()}.values())
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(tmp), state_dict=dict(weights))  # it pops what it wrote
        processor.save_pretrained(str(tmp))
        info = {**info, "dtype": str(dtype).removeprefix("torch."), "parameters": params}
        (tmp / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n")
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return info


def check_out(out: Path) -> None:
    """An export never mixes with or replaces other files."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(f"{out}: exists and is not empty; choose another --out")


def _single_dtype(weights: dict[str, torch.Tensor]) -> torch.dtype:
    dtypes = {t.dtype for t in weights.values() if t.is_floating_point()}
    if len(dtypes) != 1:
        raise RunDirError(f"checkpoint weights: expected one floating dtype, got {dtypes}")
    return dtypes.pop()


def _check_names(model: Any, weights: dict[str, torch.Tensor]) -> None:
    """The checkpoint must be this architecture: same names and shapes as the base."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    wrong = sorted(
        n for n in set(expected) & set(weights) if tuple(weights[n].shape) != expected[n]
    )
    if missing or extra or wrong:
        raise RunDirError(
            "checkpoint weights do not fit the base model's architecture: "
            f"missing {missing[:3]}, unexpected {extra[:3]}, other shape {wrong[:3]} "
            f"({len(missing)}/{len(extra)}/{len(wrong)}); was the run's base model replaced?"
        )


def _generation_config(base: Path, default: Any) -> Any:
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(base)
    except OSError:  # the base has none: transformers' default from the config
        return default
