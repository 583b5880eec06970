"""The model under test, identified from its files: weight files with their sizes,
tensor dtypes and shapes (from the safetensors headers), a full content hash on
request, the tokenizer's and chat template's hashes, and the engine that served it.

The quick identity reads only the headers (a few KB per file), so it costs nothing
on a 16 GB checkpoint and still changes when any tensor's name, dtype or shape
does; a weight that changes in value alone needs the full hash (`full=True`,
`cua-rl eval --full-hash`), which reads every byte. A safetensors header is
an 8-byte little-endian length and that many bytes of JSON (the format's
specification); it is read here directly, so an evaluation host that only talks to
a vLLM server elsewhere needs neither torch nor the safetensors package.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from cua_rl.inference.config import TINY, ModelServersConfig

MAX_HEADER = 100 * 1024 * 1024
"""Largest safetensors header read (the format's own limit)."""
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
)
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
PROCESSOR_FILES = (
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
)
CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (ValueError naming the file if it is not
    one)."""
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER:
            raise ValueError(
                f"{path}: safetensors header of {length} bytes (at most {MAX_HEADER} expected)"
            )
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: safetensors header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: safetensors header is not a JSON object")
    return header


def _weight_entry(path: Path) -> tuple[dict[str, Any], list[str]]:
    """One weight file's entry and its `name dtype shape` lines."""
    header = safetensors_header(path)
    lines = []
    dtypes: Counter[str] = Counter()
    for name, info in sorted(header.items()):
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        dtypes[str(info.get("dtype"))] += 1
        lines.append(f"{path.name} {name} {info.get('dtype')} {info.get('shape')}")
    entry = {
        "file": path.name,
        "bytes": path.stat().st_size,
        "tensors": len(lines),
        "dtypes": dict(sorted(dtypes.items())),
    }
    return entry, lines


def _hash_of(folder: Path, names: tuple[str, ...]) -> str | None:
    present = [folder / n for n in names if (folder / n).is_file()]
    if not present:
        return None
    return _digest([f"{p.name} {sha256_file(p)}" for p in present])


def chat_template_hash(folder: Path) -> str | None:
    """sha256 of the chat template: its own file, else `chat_template` of
    tokenizer_config.json (where older checkpoints keep it)."""
    own = _hash_of(folder, TEMPLATE_FILES)
    if own is not None:
        return own
    config = folder / "tokenizer_config.json"
    try:
        template = json.loads(config.read_text()).get("chat_template")
    except (OSError, ValueError, AttributeError):
        return None
    return hashlib.sha256(json.dumps(template).encode()).hexdigest() if template else None


def folder_identity(folder: Path, *, full: bool = False) -> dict[str, Any]:
    """The identity of a Hugging Face folder (see the module docstring)."""
    weights = sorted(folder.glob("*.safetensors"))
    entries, lines, problems = [], [], []
    for path in weights:
        try:
            entry, tensor_lines = _weight_entry(path)
        except (OSError, ValueError) as exc:
            problems.append(str(exc))
            continue
        entries.append(entry)
        lines += tensor_lines
    others = sorted(p.name for p in folder.glob("*") if p.suffix in (".bin", ".pt", ".gguf"))
    out: dict[str, Any] = {
        "path": str(folder),
        "weights": entries,
        "quick_id": _digest([f"{e['file']} {e['bytes']}" for e in entries] + lines)[:32],
        "tokenizer_hash": _hash_of(folder, TOKENIZER_FILES),
        "chat_template_hash": chat_template_hash(folder),
        "processor_hash": _hash_of(folder, PROCESSOR_FILES),
        "config_hash": _hash_of(folder, ("config.json", "generation_config.json")),
    }
    if others:
        out["other_weight_files"] = others
    if problems:
        out["problems"] = problems
    if full:
        out["content_hash"] = _digest(
            [f"{p.name} {sha256_file(p)}" for p in [*weights, *(folder / n for n in others)]]
        )
    return out


def model_folder(policy: ModelServersConfig, tiny_dir: Path | None) -> Path | None:
    """The folder the policy's weights are read from, if it is on this machine: the
    tiny model's, a checkpoint directory, or a hub id already in the local hub cache."""
    if policy.model == TINY:
        if tiny_dir is not None:
            return tiny_dir
        from cua_rl.inference.launcher import default_tiny_dir

        return default_tiny_dir()
    path = Path(policy.model).expanduser()
    if path.is_dir():
        return path
    try:  # a hub id: its snapshot in the local cache, never a download
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(policy.model, local_files_only=True))
    except (ImportError, OSError, ValueError):  # not installed, not cached, not a repo id
        return None


def engine_identity(policy: ModelServersConfig, timeout_s: float = 60.0) -> dict[str, Any]:
    """The serving engine and its version (vLLM's is asked of its own interpreter)."""
    from importlib import metadata

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    out: dict[str, Any] = {"engine": policy.engine}
    if policy.urls:
        out["urls"] = list(policy.urls)
        out["note"] = "servers started elsewhere: their version is not known here"
        return out
    if policy.engine == "hf":
        out |= {"transformers": version("transformers"), "torch": version("torch")}
        return out
    from cua_rl.errors import ConfigError
    from cua_rl.inference.vllm_engine import resolve_vllm_python

    try:
        python = resolve_vllm_python(policy.python)
        answer = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        out["vllm"] = answer.stdout.strip() or None
        out["python"] = python
    except (ConfigError, OSError, subprocess.TimeoutExpired) as exc:
        out["vllm"] = None
        out["error"] = str(exc)[:300]
    return out


def model_section(
    policy: ModelServersConfig, tiny_dir: Path | None, *, full: bool = False
) -> dict[str, Any]:
    """The manifest's `model`: name, engine, and the folder's identity when the
    weights are on this machine."""
    out: dict[str, Any] = {"name": policy.model, "engine": engine_identity(policy)}
    folder = model_folder(policy, tiny_dir)
    if folder is None or not folder.is_dir():
        out["identity"] = None
        out["note"] = (
            "weights not on this machine (a hub id not in the local cache, or "
            "servers started elsewhere): identified by name only"
        )
        return out
    out["identity"] = folder_identity(folder, full=full)
    return out
