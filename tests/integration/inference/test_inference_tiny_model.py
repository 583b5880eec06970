"""The tiny checkpoint loads like real weights and is reproducible from its seed."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.model


def test_loads_through_from_pretrained(tiny_model_dir: Path) -> None:
    from transformers import (
        AutoModelForImageTextToText,
        AutoProcessor,
        Qwen3VLForConditionalGeneration,
    )

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    assert isinstance(model, Qwen3VLForConditionalGeneration)
    assert type(processor).__name__ == "Qwen3VLProcessor"
    tok = processor.tokenizer
    for token in [
        "<|im_start|>",
        "<|im_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "<|endoftext|>",
    ]:
        assert len(tok.encode(token, add_special_tokens=False)) == 1, token
    assert model.config.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert 1_000_000 < sum(p.numel() for p in model.parameters()) < 10_000_000


def test_chat_template_renders_images_and_tools(tiny_model_dir: Path) -> None:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    messages = [
        {"role": "system", "content": "You operate a computer."},
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:..."}},
            {"type": "text", "text": "Click OK"},
        ]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "computer_use", "arguments": {"action": "left_click"}}}]},
    ]  # fmt: skip
    tools = [{"type": "function", "function": {"name": "computer_use", "parameters": {}}}]
    text = processor.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=True
    )
    assert text.startswith("<|im_start|>system\nYou operate a computer.\n\n# Tools")
    assert "<|vision_start|><|image_pad|><|vision_end|>Click OK<|im_end|>" in text
    call = '{"name": "computer_use", "arguments": {"action": "left_click"}}'
    assert f"<tool_call>\n{call}\n</tool_call>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_same_seed_same_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from cua_rl.inference.tiny_model import build_tiny_model

    again = build_tiny_model(tmp_path / "again", seed=0).path
    other = build_tiny_model(tmp_path / "other", seed=1).path
    a = load_file(str(tiny_model_dir / "model.safetensors"))
    b = load_file(str(again / "model.safetensors"))
    c = load_file(str(other / "model.safetensors"))
    assert a.keys() == b.keys() == c.keys()
    assert all(a[k].equal(b[k]) for k in a)
    assert not all(a[k].equal(c[k]) for k in a)
    tokenizer_json = (tiny_model_dir / "tokenizer.json").read_bytes()
    assert tokenizer_json == (again / "tokenizer.json").read_bytes()
