"""`StepSample`s -> Qwen3-VL model inputs, packed by length into micro-batches.

Invariant: the prompt tokens of a sample are exactly the ones the serving engine
conditioned on. Messages go through the servers' own request parsing
(`openai_schema.parse_request` / `decode_images`, as hf_server.py does), are rendered
by the processor's chat template with the generation prompt (as
`HFEngine.render_prompt` does), and are tokenized one sample at a time by the same
processor, so the ids do not depend on what a sample is batched with. The sampled
response ids are appended verbatim, never re-tokenized from text.

Micro-batches are right-padded; `response_mask` marks the response tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cua_rl.inference.openai_schema import decode_images, parse_request
from cua_rl.types import StepSample

ImageResolver = Callable[[str], str]
"""Turns an image reference that is not a data URL (a screenshot hash) into a data URL."""


@dataclass(frozen=True, slots=True)
class EncodedSample:
    """One sample as token ids and vision tensors (no padding)."""

    input_ids: torch.Tensor
    """(L,) prompt ids followed by the response ids."""
    prompt_len: int
    mm_token_type_ids: torch.Tensor
    """(L,) 1 on image placeholder tokens; Qwen3-VL's M-RoPE index needs it."""
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    behavior_logprobs: torch.Tensor
    """(R,) float32, one per response token."""
    advantage: float

    @property
    def length(self) -> int:
        return int(self.input_ids.numel())

    @property
    def response_len(self) -> int:
        return self.length - self.prompt_len


@dataclass(frozen=True, slots=True)
class MicroBatch:
    """Right-padded model inputs of several samples plus flat per-token training data.

    Flat tensors list response tokens row by row, in sequence order: the order in
    which a boolean mask over (B, L) selects them.
    """

    inputs: dict[str, torch.Tensor]
    """Model kwargs: input_ids, attention_mask, mm_token_type_ids, pixel_values, image_grid_thw."""
    response_mask: torch.Tensor
    """(B, L) bool, True on response tokens."""
    behavior_logprobs: torch.Tensor
    """(N,) flat behavior logprobs of the response tokens."""
    advantages: torch.Tensor
    """(N,) the sample's advantage repeated on each of its response tokens."""
    seq_index: torch.Tensor
    """(N,) row of each response token, for sequence-level (GSPO) reductions."""
    sample_ids: tuple[int, ...]
    """Positions of the rows' samples in the batch they were packed from."""
    token_weights: torch.Tensor
    """(N,) aggregation weight of each response token (`loss.sample_token_weights`)."""

    @property
    def num_tokens(self) -> int:
        return int(self.behavior_logprobs.numel())

    @property
    def num_sequences(self) -> int:
        return len(self.sample_ids)

    def to(self, device: torch.device | str) -> MicroBatch:
        inputs = {k: v.to(device) for k, v in self.inputs.items()}
        return MicroBatch(
            inputs,
            self.response_mask.to(device),
            self.behavior_logprobs.to(device),
            self.advantages.to(device),
            self.seq_index.to(device),
            self.sample_ids,
            self.token_weights.to(device),
        )


@dataclass(frozen=True, slots=True)
class TrainUnit:
    """One forward/backward of a mini-batch: a micro-batch with the proximal (and
    reference) logprobs taken before the update, and its loss weight (0 for a repeat
    that only keeps the ranks in step)."""

    batch: MicroBatch
    prox: torch.Tensor
    ref: torch.Tensor | None
    weight: float


def render_prompt(
    processor: Any, messages: Sequence[dict[str, Any]], resolve_image: ImageResolver | None = None
) -> tuple[str, list[Any]]:
    """Chat-template text and decoded images of a prompt, exactly as the hf server builds them."""
    messages = [_resolve(m, resolve_image) for m in messages] if resolve_image else messages
    request = parse_request({"messages": list(messages)})
    images = decode_images(request)
    dumped = [m.model_dump(exclude_none=True) for m in request.messages]
    text = processor.apply_chat_template(
        dumped, tools=None, tokenize=False, add_generation_prompt=True
    )
    return text, images


def encode_sample(
    processor: Any, sample: StepSample, resolve_image: ImageResolver | None = None
) -> EncodedSample:
    """Tokenize one sample's prompt through the processor and append its response ids."""
    if len(sample.response_token_ids) != len(sample.behavior_logprobs):
        raise ValueError(
            f"sample has {len(sample.response_token_ids)} response tokens but "
            f"{len(sample.behavior_logprobs)} behavior logprobs"
        )
    if not sample.response_token_ids:
        raise ValueError("sample has no response tokens")
    text, images = render_prompt(processor, sample.messages, resolve_image)
    out = processor(text=[text], images=images or None, return_tensors="pt")
    prompt = out["input_ids"][0]
    response = torch.tensor(sample.response_token_ids, dtype=prompt.dtype)
    mm_types = out.get("mm_token_type_ids")
    mm_types = mm_types[0] if mm_types is not None else torch.zeros_like(prompt)
    return EncodedSample(
        input_ids=torch.cat([prompt, response]),
        prompt_len=int(prompt.numel()),
        mm_token_type_ids=torch.cat([mm_types, torch.zeros_like(response)]),
        pixel_values=out.get("pixel_values"),
        image_grid_thw=out.get("image_grid_thw"),
        behavior_logprobs=torch.tensor(sample.behavior_logprobs, dtype=torch.float32),
        advantage=float(sample.advantage),
    )


def pack_by_length(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group indices so that each group's padded size (rows x longest) fits `max_tokens`.

    Sorting by length first keeps padding small; an over-long item gets a group of
    its own. Groups come out longest first, so a memory problem shows on the first one.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    groups: list[list[int]] = []
    for i in order:
        group = groups[-1] if groups else None
        # Items arrive longest first, so the group's padded width is its first item's.
        if group and lengths[group[0]] * (len(group) + 1) <= max_tokens:
            group.append(i)
        else:
            groups.append([i])
    return groups


def collate(
    encoded: Sequence[EncodedSample],
    pad_token_id: int,
    sample_ids: Sequence[int] | None = None,
    weights: Sequence[float] | None = None,
) -> MicroBatch:
    """Right-pad encoded samples into one micro-batch (images concatenated in row order);
    `weights` gives each sample's per-token aggregation weight (default 1)."""
    weights = list(weights) if weights is not None else [1.0] * len(encoded)
    width = max(e.length for e in encoded)
    rows = len(encoded)
    input_ids = torch.full((rows, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((rows, width), dtype=torch.long)
    mm_types = torch.zeros((rows, width), dtype=torch.long)
    response_mask = torch.zeros((rows, width), dtype=torch.bool)
    for r, e in enumerate(encoded):
        input_ids[r, : e.length] = e.input_ids
        attention[r, : e.length] = 1
        mm_types[r, : e.length] = e.mm_token_type_ids
        response_mask[r, e.prompt_len : e.length] = True
    inputs = {"input_ids": input_ids, "attention_mask": attention, "mm_token_type_ids": mm_types}
    pixels = [e.pixel_values for e in encoded if e.pixel_values is not None]
    if pixels:
        inputs["pixel_values"] = torch.cat(pixels)
        inputs["image_grid_thw"] = torch.cat(
            [e.image_grid_thw for e in encoded if e.image_grid_thw is not None]
        )
    return MicroBatch(
        inputs=inputs,
        response_mask=response_mask,
        behavior_logprobs=torch.cat([e.behavior_logprobs for e in encoded]),
        advantages=torch.cat([torch.full((e.response_len,), e.advantage) for e in encoded]),
        seq_index=torch.cat(
            [torch.full((e.response_len,), r, dtype=torch.long) for r, e in enumerate(encoded)]
        ),
        sample_ids=tuple(sample_ids if sample_ids is not None else range(rows)),
        token_weights=torch.cat(
            [
                torch.full((e.response_len,), w, dtype=torch.float32)
                for e, w in zip(encoded, weights, strict=True)
            ]
        ),
    )


def build_micro_batches(
    encoded: Sequence[EncodedSample],
    max_tokens: int,
    pad_token_id: int,
    weights: Sequence[float] | None = None,
) -> list[MicroBatch]:
    """Pack encoded samples by length and collate each group (`weights`: per-sample
    aggregation weights, in the order of `encoded`)."""
    groups = pack_by_length([e.length for e in encoded], max_tokens)
    return [
        collate(
            [encoded[i] for i in g],
            pad_token_id,
            g,
            [weights[i] for i in g] if weights is not None else None,
        )
        for g in groups
    ]


def _resolve(message: dict[str, Any], resolve_image: ImageResolver) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        url = (part.get("image_url") or {}).get("url") if part.get("type") == "image_url" else None
        if url is not None and not url.startswith("data:"):
            part = {**part, "image_url": {**part["image_url"], "url": resolve_image(url)}}
        parts.append(part)
    return {**message, "content": parts}
