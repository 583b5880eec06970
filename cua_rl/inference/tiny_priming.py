"""Format priming of the tiny model: a short supervised warm-up on synthetic chats.

A randomly initialized model samples random tokens, so every policy step is a
parse error and every reward-model vote is unparseable: a quickstart run would
then train on nothing. A few minutes of teacher forcing on the answer formats
(tiny_priming_data.py) make temperature-1 samples mostly well-formed and still
random, so rewards, votes and advantages vary as in a real run.

Inputs are built as the hf server builds them: messages go through the server's
request parsing and image decoding, the processor renders them with the chat
template and the generation prompt, and the canonical tokenization of the target
answer plus `<|im_end|>` is appended. The loss covers only those answer tokens.

Invariant: the same model, processor, seed and settings give bit-identical
weights (fixed example list and batch order, fixed step count, fixed thread
count; no wall-clock budget).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from cua_rl.inference.openai_schema import decode_images, parse_request
from cua_rl.inference.tiny_priming_data import PrimingExample, generate_examples

log = logging.getLogger(__name__)

THREADS = 1
"""Fixed, not "all cores", so CPU reductions split the same way on every machine; and
one, because on 2 cores shared with other processes 2 threads measured 4-5x slower
(threads spin at barriers while a core is taken)."""
PROGRESS_EVERY = 20
"""Progress messages per priming run (one every steps/20 steps): the build takes
minutes, and a user should see it move."""
_TAIL = 7
"""`<|im_end|>\\n<|im_start|>assistant\\n` (7 tokens with the tiny BPE): the prompt's
last tokens, always plain text, trained with gradients."""


@dataclass(frozen=True, slots=True)
class PrimingConfig:
    """Warm-up budget. The defaults are the best measured so far (~4 min on one
    thread of a busy 2-core machine): policy samples ~80% parseable, votes ~100%;
    500 steps took half the time but left only ~45% of samples parseable."""

    steps: int = 1000
    """Optimizer steps; each trains the answers of one prompt."""
    answers: int = 16
    """Target answers per prompt, decoded together on the prompt's shared KV cache."""
    lr: float = 1e-2
    warmup_steps: int = 10
    grad_clip: float = 1.0


@dataclass(frozen=True, slots=True)
class PrimingReport:
    steps: int
    first_loss: float
    last_loss: float
    """Mean loss of the last 10 steps (nats per answer token)."""


@dataclass(frozen=True, slots=True)
class _Encoded:
    prompt: dict[str, torch.Tensor]
    """Processor output of the prompt alone (batch of 1)."""
    answers: torch.Tensor
    """(K, R) answer ids, each ending in <|im_end|>, right-padded."""
    answer_mask: torch.Tensor
    """(K, R) True on real answer tokens."""


def render_prompt(processor: Any, messages: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Processor inputs of a prompt, built exactly as the hf server builds them."""
    request = parse_request({"messages": messages})
    images = decode_images(request)
    dumped = [m.model_dump(exclude_none=True) for m in request.messages]
    text = processor.apply_chat_template(
        dumped, tools=None, tokenize=False, add_generation_prompt=True
    )
    return dict(processor(text=[text], images=images or None, return_tensors="pt"))


def encode_example(processor: Any, example: PrimingExample, pad_id: int) -> _Encoded:
    """The prompt's inputs and the canonical tokenization of each answer + <|im_end|>."""
    tokenizer = processor.tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ids = [tokenizer.encode(r, add_special_tokens=False) + [end] for r in example.responses]
    width = max(len(a) for a in ids)
    answers = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.bool)
    for i, a in enumerate(ids):
        answers[i, : len(a)] = torch.tensor(a)
        mask[i, : len(a)] = True
    return _Encoded(render_prompt(processor, example.messages), answers, mask)


def answer_loss(model: Any, example: _Encoded) -> torch.Tensor:
    """Mean cross-entropy of the answer tokens given the prompt (teacher forcing).

    The prompt is run once and its KV cache repeated for the K answers, as the hf
    engine does when it samples n choices. The prompt body (system text, images)
    runs without gradients, which halves the cost of a step; the closing
    `<|im_end|>\n<|im_start|>assistant\n` and the answers run with gradients, so
    the model still learns how to read the prompt body from its answer side.
    Positions follow the engine: M-RoPE ids of the prompt from `get_rope_index`,
    then text positions counting up from the prompt's largest one.
    """
    prompt = example.prompt
    positions, _ = model.model.get_rope_index(
        prompt["input_ids"],
        mm_token_type_ids=prompt["mm_token_type_ids"],
        image_grid_thw=prompt.get("image_grid_thw"),
        attention_mask=prompt["attention_mask"],
    )
    split = prompt["input_ids"].shape[1] - _TAIL
    with torch.no_grad():
        body = {**prompt, "input_ids": prompt["input_ids"][:, :split],
                "attention_mask": prompt["attention_mask"][:, :split],
                "mm_token_type_ids": prompt["mm_token_type_ids"][:, :split]}  # fmt: skip
        cache = model(
            **body, position_ids=positions[:, :, :split], use_cache=True, logits_to_keep=1
        ).past_key_values
    k, width = example.answers.shape
    cache.reorder_cache(torch.zeros(k, dtype=torch.long))
    tail = prompt["input_ids"][:, split:].expand(k, -1)
    steps = torch.arange(width).view(1, 1, -1)
    answer_positions = (positions.amax() + 1 + steps).expand(3, k, width)
    tail_positions = positions[:, :, split:].expand(3, k, _TAIL)
    attention = torch.cat([
        prompt["attention_mask"].expand(k, -1), example.answer_mask.long()
    ], dim=1)  # fmt: skip
    predictors = torch.zeros((k, _TAIL + width), dtype=torch.bool)
    predictors[:, _TAIL - 1] = True  # the last prompt token predicts the first answer token
    predictors[:, _TAIL : _TAIL + width - 1] = example.answer_mask[:, 1:]
    out = model(
        input_ids=torch.cat([tail, example.answers], dim=1), attention_mask=attention,
        position_ids=torch.cat([tail_positions, answer_positions], dim=2),
        past_key_values=cache, use_cache=True, logits_to_keep=predictors,
    )  # fmt: skip
    targets = example.answers[example.answer_mask]
    return torch.nn.functional.cross_entropy(out.logits.float(), targets)


def prime_tiny_model(
    model: Any, processor: Any, seed: int = 0, cfg: PrimingConfig | None = None
) -> PrimingReport:
    """Teacher-force `model` (in place) on synthetic chats so samples are well-formed.

    The vision tower stays frozen: the formats do not depend on image content,
    and skipping its backward pass saves time. Returns with the model in eval mode.
    """
    cfg = cfg or PrimingConfig()
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    visual = list(model.model.visual.parameters())
    try:
        for p in visual:
            p.requires_grad_(False)
        return _train(model, processor, seed, cfg)
    finally:
        for p in visual:
            p.requires_grad_(True)
        torch.set_num_threads(threads)
        model.eval()


def _train(model: Any, processor: Any, seed: int, cfg: PrimingConfig) -> PrimingReport:
    pad_id = processor.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    examples = generate_examples(cfg.steps, seed, answers=cfg.answers)
    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)

    def lr_factor(step: int) -> float:  # linear warm-up, then linear decay to 10%
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        return 1.0 - 0.9 * (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    model.train()
    losses: list[float] = []
    every = max(1, cfg.steps // PROGRESS_EVERY)
    for step, example in enumerate(examples, start=1):
        loss = answer_loss(model, encode_example(processor, example, pad_id))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
        if step % every == 0 or step == cfg.steps:
            log.info(
                "priming step %d/%d (loss %.3f)",
                step,
                cfg.steps,
                sum(losses[-every:]) / len(losses[-every:]),
            )
    return PrimingReport(cfg.steps, losses[0], sum(losses[-10:]) / len(losses[-10:]))
