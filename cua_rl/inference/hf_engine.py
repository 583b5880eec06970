"""Batched generation with transformers and our own sampling loop (the `hf` engine).

Why our own loop instead of `model.generate`: the learner needs the exact
logprob of every sampled token under the distribution it was drawn from
(sampling.py), and `generate` keeps M-RoPE state on the model object
(`rope_deltas`), which is unsafe for batches of unrelated prompts.

One call of `HFEngine.generate` serves several requests at once: prompts are
left-padded into one prefill, each request's prompt row is then repeated `n`
times in the KV cache, and all rows decode together; finished rows leave the
batch. Every token of one call is produced by the same weights: weight swaps
happen between calls only (the server's gate, hf_server.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from PIL import Image

from cua_rl.inference.sampling import SamplingParams, make_generator, sample_token


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One chat request: OpenAI-style messages with images already decoded, in order."""

    messages: list[dict[str, Any]]
    images: list[Image.Image]
    params: SamplingParams
    tools: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class GeneratedChoice:
    """One sampled continuation; `logprobs[i]` is the behavior logprob of `token_ids[i]`."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finish_reason: Literal["stop", "length"]


@dataclass(frozen=True, slots=True)
class GenerationResult:
    prompt_token_ids: tuple[int, ...]
    choices: tuple[GeneratedChoice, ...]


def load_model(path: str | Path, attn_implementation: str = "sdpa") -> Any:
    """Load a Qwen3-VL (or any image-text-to-text) checkpoint for CPU float32 inference."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(
        str(path), dtype=torch.float32, attn_implementation=attn_implementation
    )
    return model.eval()


class HFEngine:
    """Holds a model + processor and turns requests into sampled choices (blocking calls)."""

    def __init__(self, model_dir: str | Path, attn_implementation: str = "sdpa") -> None:
        from transformers import AutoProcessor

        self.model_dir = Path(model_dir)
        self.attn_implementation = attn_implementation
        self.processor = AutoProcessor.from_pretrained(str(model_dir))
        self.tokenizer = self.processor.tokenizer
        self.model = load_model(model_dir, attn_implementation)
        self.stop_token_ids = self._stop_token_ids()

    def _stop_token_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        for token in ("<|im_end|>", "<|endoftext|>"):
            token_id = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, int) and token_id != self.tokenizer.unk_token_id:
                ids.add(token_id)
        return frozenset(ids)

    def swap_model(self, model: Any) -> None:
        """Replace the weights; the caller guarantees no `generate` call is running."""
        self.model = model

    def render_prompt(self, request: GenerationRequest) -> str:
        return self.processor.apply_chat_template(
            request.messages, tools=request.tools, tokenize=False, add_generation_prompt=True
        )

    def encode(self, requests: list[GenerationRequest]) -> dict[str, torch.Tensor]:
        """Left-padded processor inputs for a batch of prompts (images flattened in order)."""
        texts = [self.render_prompt(r) for r in requests]
        images = [image for r in requests for image in r.images]
        self.tokenizer.padding_side = "left"
        return self.processor(text=texts, images=images or None, padding=True, return_tensors="pt")

    @torch.inference_mode()
    def generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        model = self.model  # one reference for the whole call: never mixed weights
        inputs = self.encode(requests)
        attention_mask = inputs["attention_mask"]
        position_ids, _ = model.model.get_rope_index(
            inputs["input_ids"],
            mm_token_type_ids=inputs["mm_token_type_ids"],
            image_grid_thw=inputs.get("image_grid_thw"),
            attention_mask=attention_mask,
        )
        out = model(**inputs, position_ids=position_ids, use_cache=True, logits_to_keep=1)
        # Row r of the decode batch belongs to request owner[r].
        owner = [i for i, r in enumerate(requests) for _ in range(r.params.n)]
        index = torch.tensor(owner, dtype=torch.long)
        cache = out.past_key_values
        cache.reorder_cache(index)
        logits = out.logits[index, -1, :]
        attention_mask = attention_mask[index]
        next_pos = (position_ids.amax(dim=(0, 2)) + 1)[index]
        generators = [make_generator(r.params.seed) for r in requests]

        tokens: list[list[int]] = [[] for _ in owner]
        logprobs: list[list[float]] = [[] for _ in owner]
        finish: list[str | None] = [None for _ in owner]
        active = list(range(len(owner)))
        while active:
            step_tokens: list[int] = []
            for pos, row in enumerate(active):
                params = requests[owner[row]].params
                token, logprob = sample_token(logits[pos], params, generators[owner[row]])
                tokens[row].append(token)
                logprobs[row].append(logprob)
                step_tokens.append(token)
                finish[row] = self._finish_reason(tokens[row], params)
            keep = [pos for pos, row in enumerate(active) if finish[row] is None]
            if not keep:
                break
            if len(keep) < len(active):
                keep_index = torch.tensor(keep, dtype=torch.long)
                cache.reorder_cache(keep_index)
                attention_mask = attention_mask[keep_index]
                next_pos = next_pos[keep_index]
                step_tokens = [step_tokens[pos] for pos in keep]
                active = [active[pos] for pos in keep]
            attention_mask = torch.cat(
                [attention_mask, torch.ones(len(active), 1, dtype=attention_mask.dtype)], dim=1
            )
            step_positions = next_pos.view(1, -1, 1).expand(3, -1, 1)
            out = model(
                input_ids=torch.tensor(step_tokens, dtype=torch.long).view(-1, 1),
                attention_mask=attention_mask,
                position_ids=step_positions,
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
        return self._results(requests, inputs, owner, tokens, logprobs, finish)

    def _finish_reason(self, tokens: list[int], params: SamplingParams) -> str | None:
        if tokens[-1] in self.stop_token_ids:
            return "stop"
        if params.stop and _find_stop(self._decode(tokens), params.stop) is not None:
            return "stop"
        if len(tokens) >= params.max_tokens:
            return "length"
        return None

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)

    def _results(
        self,
        requests: list[GenerationRequest],
        inputs: dict[str, torch.Tensor],
        owner: list[int],
        tokens: list[list[int]],
        logprobs: list[list[float]],
        finish: list[str | None],
    ) -> list[GenerationResult]:
        choices: list[list[GeneratedChoice]] = [[] for _ in requests]
        for row, request_index in enumerate(owner):
            text = self._decode(tokens[row])
            cut = _find_stop(text, requests[request_index].params.stop)
            if cut is not None:
                text = text[:cut]
            choices[request_index].append(
                GeneratedChoice(
                    token_ids=tuple(tokens[row]),
                    logprobs=tuple(logprobs[row]),
                    text=text,
                    finish_reason=finish[row] or "length",  # type: ignore[arg-type]  # the generation loop writes only the Literal's reasons
                )
            )
        results = []
        for i, request_choices in enumerate(choices):
            mask = inputs["attention_mask"][i].bool()
            prompt_ids = tuple(inputs["input_ids"][i][mask].tolist())
            results.append(GenerationResult(prompt_ids, tuple(request_choices)))
        return results


def _find_stop(text: str, stop: tuple[str, ...]) -> int | None:
    """Index of the earliest stop string in `text` (the text is cut there, OpenAI-style)."""
    hits = [i for s in stop if (i := text.find(s)) >= 0]
    return min(hits) if hits else None
