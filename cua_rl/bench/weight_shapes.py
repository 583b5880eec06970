"""What a policy weight sync sends, shaped like the paper's model, without its weights.

`qwen3_vl_8b_manifest()` is the weight-link manifest (`weight_transfer.manifest`'s
entries) of Qwen3-VL-8B (Instruct and Thinking share it): its 750 tensors in
`named_parameters()` order, written out from the published config (text: 36 decoder
layers, hidden 4096, MLP 12288, 32 query and 8 key/value heads of 128, vocabulary
151936, an untied head; vision: 27 blocks, hidden 1152, MLP 4304, a merger and 3
deepstack mergers into 4096). It was checked against transformers' model built from
that config on the meta device (same names and shapes) and sums to the 8,767,123,696
parameters of learner/model_shapes.py (a unit test holds that).

`bench_manifest(nbytes)` is the part `bench weight-sync` sends when asked for fewer
bytes than the whole model: the model's blocks with its vision blocks spread among
its text layers in the model's proportion (27 to 36), so any prefix carries the
model's mix of large matrices and small norms and biases; the embedding, head and
mergers follow them. It stops at the first tensor that reaches `nbytes`, and starts
over (names suffixed `#2`, ...) when asked for more than the model.
"""

from __future__ import annotations

import math
from typing import Any

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
VOCAB, HIDDEN, MLP, LAYERS, HEAD_DIM, KV_HEADS = 151936, 4096, 12288, 36, 128, 8
V_HIDDEN, V_MLP, V_DEPTH, V_PATCH, V_POSITIONS, DEEPSTACK = 1152, 4304, 27, 16, 2304, 3
MERGED = 4 * V_HIDDEN
"""A merger's input: 2x2 patches merged."""

Shapes = list[tuple[str, list[int]]]


def _vision_block(i: int) -> Shapes:
    p = f"model.visual.blocks.{i}."
    return [
        (p + "norm1.weight", [V_HIDDEN]),
        (p + "norm1.bias", [V_HIDDEN]),
        (p + "norm2.weight", [V_HIDDEN]),
        (p + "norm2.bias", [V_HIDDEN]),
        (p + "attn.qkv.weight", [3 * V_HIDDEN, V_HIDDEN]),
        (p + "attn.qkv.bias", [3 * V_HIDDEN]),
        (p + "attn.proj.weight", [V_HIDDEN, V_HIDDEN]),
        (p + "attn.proj.bias", [V_HIDDEN]),
        (p + "mlp.linear_fc1.weight", [V_MLP, V_HIDDEN]),
        (p + "mlp.linear_fc1.bias", [V_MLP]),
        (p + "mlp.linear_fc2.weight", [V_HIDDEN, V_MLP]),
        (p + "mlp.linear_fc2.bias", [V_HIDDEN]),
    ]


def _merger(prefix: str, norm: int) -> Shapes:
    return [
        (prefix + "norm.weight", [norm]),
        (prefix + "norm.bias", [norm]),
        (prefix + "linear_fc1.weight", [MERGED, MERGED]),
        (prefix + "linear_fc1.bias", [MERGED]),
        (prefix + "linear_fc2.weight", [HIDDEN, MERGED]),
        (prefix + "linear_fc2.bias", [HIDDEN]),
    ]


def _text_layer(i: int) -> Shapes:
    p = f"model.language_model.layers.{i}."
    kv = KV_HEADS * HEAD_DIM
    return [
        (p + "self_attn.q_proj.weight", [HIDDEN, HIDDEN]),
        (p + "self_attn.k_proj.weight", [kv, HIDDEN]),
        (p + "self_attn.v_proj.weight", [kv, HIDDEN]),
        (p + "self_attn.o_proj.weight", [HIDDEN, HIDDEN]),
        (p + "self_attn.q_norm.weight", [HEAD_DIM]),
        (p + "self_attn.k_norm.weight", [HEAD_DIM]),
        (p + "mlp.gate_proj.weight", [MLP, HIDDEN]),
        (p + "mlp.up_proj.weight", [MLP, HIDDEN]),
        (p + "mlp.down_proj.weight", [HIDDEN, MLP]),
        (p + "input_layernorm.weight", [HIDDEN]),
        (p + "post_attention_layernorm.weight", [HIDDEN]),
    ]


def _head() -> tuple[Shapes, Shapes]:
    """(the vision tower's tensors outside its blocks, the text model's outside its layers)."""
    vision = [
        ("model.visual.patch_embed.proj.weight", [V_HIDDEN, 3, 2, V_PATCH, V_PATCH]),
        ("model.visual.patch_embed.proj.bias", [V_HIDDEN]),
        ("model.visual.pos_embed.weight", [V_POSITIONS, V_HIDDEN]),
    ]
    mergers = _merger("model.visual.merger.", V_HIDDEN)
    for k in range(DEEPSTACK):
        mergers += _merger(f"model.visual.deepstack_merger_list.{k}.", MERGED)
    return vision + mergers, [("model.language_model.embed_tokens.weight", [VOCAB, HIDDEN])]


def _entries(shapes: Shapes, dtype: str) -> list[dict[str, Any]]:
    return [{"name": n, "shape": s, "dtype": dtype} for n, s in shapes]


def qwen3_vl_8b_manifest(dtype: str = "bfloat16") -> list[dict[str, Any]]:
    """The whole model's manifest, in its `named_parameters()` order (see module doc)."""
    vision_rest, embed = _head()
    shapes = vision_rest[:3]
    for i in range(V_DEPTH):
        shapes += _vision_block(i)
    shapes += vision_rest[3:] + embed
    for i in range(LAYERS):
        shapes += _text_layer(i)
    shapes += [("model.language_model.norm.weight", [HIDDEN]), ("lm_head.weight", [VOCAB, HIDDEN])]
    return _entries(shapes, dtype)


def entry_bytes(entry: dict[str, Any]) -> int:
    return math.prod(entry["shape"]) * DTYPE_BYTES[entry["dtype"]]


def interleaved_manifest(dtype: str = "bfloat16") -> list[dict[str, Any]]:
    """The model's tensors with vision blocks spread among text layers (module doc)."""
    blocks = [((i + 0.5) / LAYERS, _text_layer(i)) for i in range(LAYERS)]
    blocks += [((i + 0.5) / V_DEPTH, _vision_block(i)) for i in range(V_DEPTH)]
    shapes: Shapes = []
    for _, block in sorted(blocks, key=lambda b: b[0]):
        shapes += block
    vision_rest, embed = _head()
    shapes += (
        vision_rest
        + embed
        + [("model.language_model.norm.weight", [HIDDEN]), ("lm_head.weight", [VOCAB, HIDDEN])]
    )
    return _entries(shapes, dtype)


def bench_manifest(nbytes: int, dtype: str = "bfloat16") -> list[dict[str, Any]]:
    """At least `nbytes` of the model's tensors, up to the first that reaches it."""
    if nbytes <= 0:
        raise ValueError(f"expected a positive number of bytes, got {nbytes}")
    model = interleaved_manifest(dtype)
    out: list[dict[str, Any]] = []
    total = 0
    for k in range(1, nbytes // sum(map(entry_bytes, model)) + 2):  # passes over the model
        for entry in model:
            name = entry["name"] if k == 1 else f"{entry['name']}#{k}"
            out.append({**entry, "name": name})
            total += entry_bytes(entry)
            if total >= nbytes:
                return out
    raise AssertionError("unreachable: the passes cover nbytes")
