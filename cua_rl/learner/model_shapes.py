"""How big a model is, for sizing a cluster before anything is downloaded.

A plan (`cua-rl config show --plan`) needs parameter counts and the few dimensions
that set activation memory. They come from a local `config.json` (the model is
built on the meta device: shapes only, no weights, no memory) or, for the models
the presets name, from the table below: no hub access at plan time.

The table's counts were made the same way, from each model's published
`config.json`, and agree with the published sizes (Qwen3-VL-8B 8.77 B, Qwen3-8B
8.19 B, Qwen3-4B 4.02 B); the Thinking and Instruct variants share a shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelShape:
    """What memory estimates need to know of a model."""

    params: int
    """Parameters, tied ones counted once."""
    largest_param: int
    """Elements of the largest single tensor (DeepSpeed's ZeRO-3 `largest_layer_params`:
    the one tensor a rank gathers whole; the embedding here)."""
    hidden: int
    intermediate: int
    layers: int
    vocab: int
    source: str
    """Where the figures came from (a config.json path, or `table`)."""


_QWEN3_VL_8B = (8_767_123_696, 622_329_856, 4096, 12288, 36, 151936)
_QWEN3_8B = (8_190_735_360, 622_329_856, 4096, 12288, 36, 151936)
_QWEN3_4B = (4_022_468_096, 388_956_160, 2560, 9728, 36, 151936)
KNOWN_MODELS: dict[str, tuple[int, int, int, int, int, int]] = {
    "qwen3-vl-8b-thinking": _QWEN3_VL_8B,
    "qwen3-vl-8b-instruct": _QWEN3_VL_8B,
    "qwen3-8b": _QWEN3_8B,
    "qwen3-4b": _QWEN3_4B,
    "qwen3-4b-instruct-2507": _QWEN3_4B,
    "qwen3-4b-thinking-2507": _QWEN3_4B,
}
"""Lower-cased hub name (without the organisation) -> (params, largest tensor,
hidden, intermediate, layers, vocab) of the language model plus vision tower."""


def model_shape(model: str) -> ModelShape | None:
    """The shape of a checkpoint directory (its config.json) or of a model in the
    table; None when neither applies (the plan then says so)."""
    config = Path(model).expanduser() / "config.json"
    if config.is_file():
        return shape_from_config(config)
    known = KNOWN_MODELS.get(model.rsplit("/", 1)[-1].lower())
    if known is None:
        return None
    params, largest, hidden, intermediate, layers, vocab = known
    return ModelShape(params, largest, hidden, intermediate, layers, vocab, "table")


def shape_from_config(config: Path) -> ModelShape:
    """Count a local model's parameters by building it on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    cfg = AutoConfig.from_pretrained(str(config.parent))
    text = getattr(cfg, "text_config", cfg)
    auto = AutoModelForImageTextToText if hasattr(cfg, "vision_config") else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    unique = {id(p): p.numel() for p in model.parameters()}
    return ModelShape(
        sum(unique.values()),
        max(unique.values()),
        text.hidden_size,
        text.intermediate_size,
        text.num_hidden_layers,
        text.vocab_size,
        str(config),
    )
