"""The `tiny` model: a randomly initialized Qwen3-VL checkpoint built locally.

It exists so that every code path that touches a model (processor, chat
template, vision tower, deepstack, M-RoPE, sampling, weight updates, learner
forward passes) runs on a CPU in seconds with no hub download. It is loaded
through the same `from_pretrained` calls as real weights, so nothing downstream
special-cases it. It does not solve tasks.

Invariant: the same seed produces byte-identical weights and tokenizer files.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cua_rl.inference.chat_template import QWEN3_VL_CHAT_TEMPLATE

# Qwen's added tokens, in Qwen's order. `special` tokens are dropped by
# `skip_special_tokens`; tool-call and thinking markers are kept in decoded text,
# as in the real tokenizer, because parsers read them.
_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)

_BPE_VOCAB_SIZE = 4000
"""Target size of the learned part of the vocabulary (before added tokens)."""

# A small corpus shaped like what the agent reads and writes: instructions,
# tool calls with coordinates, JSON, reasoning, Python. BPE learns merges for
# these so that prompts tokenize to realistic lengths.
_CORPUS_LINES: tuple[str, ...] = (
    "You are a helpful assistant that operates a computer to complete the user's task.",
    "Open the spreadsheet, select the column, and sort the rows in ascending order.",
    "Click the File menu, choose Save As, type the new name and press Enter.",
    "The screenshot shows a desktop with a terminal, a browser and a text editor.",
    "I will double click the icon at the top left corner of the screen.",
    'Action: {"name": "computer_use", "arguments": {"action": "left_click", '
    '"coordinate": [512, 384]}}',
    '{"name": "computer_use", "arguments": {"action": "type", "text": "hello world"}}',
    '{"name": "computer_use", "arguments": {"action": "key", "keys": ["ctrl", "s"]}}',
    '{"name": "computer_use", "arguments": {"action": "scroll", "pixels": -300}}',
    '{"name": "computer_use", "arguments": {"action": "terminate", "status": "success"}}',
    "The previous step was correct because the dialog opened as expected. \\boxed{1}",
    "The click missed the button, so the step did not help the task. \\boxed{-1}",
    "import pyautogui; pyautogui.click(960, 540); pyautogui.hotkey('ctrl', 'c')",
    "def main() -> None:\n    print('done')\n\nif __name__ == '__main__':\n    main()",
    "Thunderbird, LibreOffice Calc, Writer, Impress, GIMP, VLC, Chromium, VS Code.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 1920 1080 0.5 -1 +1 3.14 42 2025-01-01",
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen jugs.",
    "Step 3: the window is maximized; next, I should find the Format menu.",
    "Let me think about which element to click. The OK button is at the bottom.",
)


def _corpus() -> list[str]:
    """Agent-shaped lines plus Python's bundled reference docs (English prose and code).

    The docs ship with every CPython (`pydoc_data`), so no download is needed and
    BPE finds enough distinct pairs to fill the whole target vocabulary; a full
    vocabulary keeps the embedding shape, and so the seeded weights, fixed.
    """
    from pydoc_data.topics import topics

    return list(_CORPUS_LINES) * 20 + [topics[key] for key in sorted(topics)]


def build_tokenizer() -> Any:
    """Train a deterministic byte-level BPE with Qwen's pre-tokenizer and added tokens."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import Qwen2TokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_BPE_VOCAB_SIZE,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    vocab = tok.get_vocab()
    merges = [tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]
    hf_tok = Qwen2TokenizerFast(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        errors="replace",
    )
    hf_tok.add_tokens([AddedToken(t, special=s, normalized=False) for t, s in _ADDED_TOKENS])
    hf_tok.chat_template = QWEN3_VL_CHAT_TEMPLATE
    return hf_tok


def build_processor(tokenizer: Any) -> Any:
    """The Qwen3-VL processor with small pixel budgets so images cost few tokens on CPU."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    # patch 16 x merge 2 -> one LLM token per 32x32 pixels. Budget: 16..256 tokens/image.
    size = {"shortest_edge": 32 * 32 * 16, "longest_edge": 32 * 32 * 256}
    common: dict[str, Any] = dict(
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        size=size,
    )
    image_processor = Qwen2VLImageProcessor(**common)
    video_processor = Qwen3VLVideoProcessor(**common)
    return Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=QWEN3_VL_CHAT_TEMPLATE,
    )


def build_config(tokenizer: Any) -> Any:
    """A Qwen3-VL config a few million parameters large, ids taken from the tokenizer."""
    from transformers import Qwen3VLConfig

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t, _ in _ADDED_TOKENS}
    vocab_size = (len(tokenizer) + 63) // 64 * 64
    text_config = dict(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=32768,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5_000_000.0,
            "mrope_section": [8, 4, 4],  # sums to head_dim / 2
            "mrope_interleaved": True,
        },
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    vision_config = dict(
        depth=2,
        hidden_size=64,
        intermediate_size=128,
        num_heads=4,
        patch_size=16,
        spatial_merge_size=2,
        temporal_patch_size=2,
        out_hidden_size=128,  # = text hidden size
        num_position_embeddings=576,  # a 24x24 learned grid, interpolated per image
        deepstack_visual_indexes=[0, 1],  # one per text layer it feeds
    )
    return Qwen3VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


@dataclass(frozen=True, slots=True)
class TinyModel:
    path: Path
    num_parameters: int
    primed: bool = False


def build_tiny_model(
    out_dir: str | Path, seed: int = 0, primed: bool = False, priming_steps: int | None = None
) -> TinyModel:
    """Write a complete HF checkpoint dir (weights, config, tokenizer, processor).

    `primed` runs the format warm-up of tiny_priming.py in memory before anything
    is saved (`priming_steps`: its budget; None: PrimingConfig's), and the checkpoint
    is written to a sibling directory that is renamed into place at the end, so
    `out_dir` never holds a partial model (a reader that sees its config.json sees a
    complete checkpoint).
    """
    import torch
    from transformers import GenerationConfig, Qwen3VLForConditionalGeneration

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    processor = build_processor(tokenizer)
    config = build_config(tokenizer)
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).to(torch.float32).eval()
    if primed:
        from cua_rl.inference.tiny_priming import PrimingConfig, prime_tiny_model

        budget = PrimingConfig() if priming_steps is None else PrimingConfig(steps=priming_steps)
        prime_tiny_model(model, processor, seed=seed, cfg=budget)
    model.generation_config = GenerationConfig(
        eos_token_id=[config.text_config.eos_token_id, config.text_config.pad_token_id],
        pad_token_id=config.text_config.pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
    )
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    processor.save_pretrained(partial)
    if out.is_dir():  # replaced below: an empty directory or an older checkpoint only
        if any(out.iterdir()) and not (out / "config.json").is_file():
            shutil.rmtree(partial)
            raise FileExistsError(f"{out}: not empty and not a checkpoint; not replacing it")
        shutil.rmtree(out)
    os.replace(partial, out)
    return TinyModel(out, count_parameters(model), primed)


def count_parameters(model: Any) -> int:
    """Total parameter count (reported by the command so users see what they built)."""
    return sum(p.numel() for p in model.parameters())
