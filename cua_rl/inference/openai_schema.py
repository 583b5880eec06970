"""Request/response shapes of `POST /v1/chat/completions` as our servers speak it.

A strict subset of OpenAI's chat completions, as vLLM serves it, plus two
fields the learner needs and vLLM also returns when asked
(`return_token_ids: true`): `choices[i].token_ids` (the sampled ids, including
the final stop token if one was sampled) and `prompt_token_ids`.
`choices[i].logprobs.content[j] = {token, logprob, bytes, top_logprobs: []}`
has one entry per id in `token_ids`, same order. Logprob semantics: sampling.py.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cua_rl.errors import RequestError

MAX_N = 64
MAX_TOKENS = 32768


class ImageURL(BaseModel):
    url: str
    """A `data:image/...;base64,` URL (the servers have no network access to fetch others)."""
    detail: str | None = None


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text", "image_url"]
    text: str | None = None
    image_url: ImageURL | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # tool_calls, tool_call_id, name, ...

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None


class ChatCompletionRequest(BaseModel):
    """The fields we honour; unknown fields are ignored, as OpenAI-compatible servers do."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    n: int = Field(default=1, ge=1, le=MAX_N)
    temperature: float = Field(default=1.0, ge=0.0, le=10.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=0)
    """Alternatives are not returned by the hf engine; only 0/None is accepted."""
    tools: list[dict[str, Any]] | None = None
    stream: Literal[False] = False
    return_token_ids: bool = True

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> list[str] | None:
        if isinstance(value, str):
            return [value]
        if value is not None and any(not s for s in value):
            raise ValueError("stop strings must be non-empty")
        return value

    def token_budget(self, default: int) -> int:
        return self.max_completion_tokens or self.max_tokens or default


def parse_request(payload: Any) -> ChatCompletionRequest:
    """Validate a JSON body, turning pydantic's first error into a RequestError naming the field."""
    if not isinstance(payload, dict):
        raise RequestError("body", "expected a JSON object")
    try:
        return ChatCompletionRequest.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or "body"
        raise RequestError(param, first["msg"]) from None


class ResponseLogprob(BaseModel):
    """One sampled token's entry; only `logprob` is used (it is what the learner needs)."""

    model_config = ConfigDict(extra="allow")

    logprob: float


class ResponseLogprobs(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: list[ResponseLogprob]


class ResponseMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: str | None = None


class ResponseChoice(BaseModel):
    """A choice as we request it: usually `logprobs: true` and `return_token_ids: true`,
    and then a choice without logprobs is a server that ignored the request, not a
    default (the client refuses it: `parse_chat_response`)."""

    model_config = ConfigDict(extra="allow")

    index: int | None = None
    message: ResponseMessage
    logprobs: ResponseLogprobs | None = None
    token_ids: list[int] | None = None
    finish_reason: str | None = None


class ChatCompletionResponse(BaseModel):
    """The part of a chat completion body the client reads (response validation)."""

    model_config = ConfigDict(extra="allow")

    choices: list[ResponseChoice] = Field(min_length=1)
    prompt_token_ids: list[int] | None = None


def response_problem(exc: ValidationError) -> str:
    """pydantic's first error as `choices.0.logprobs (Field required)`, for one-line errors."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return f"{where} ({first['msg']})"


def decode_images(request: ChatCompletionRequest) -> list[Any]:
    """All image parts as PIL images in prompt order (the order the chat template emits them)."""
    from PIL import Image

    images = []
    for i, message in enumerate(request.messages):
        if not isinstance(message.content, list):
            continue
        for j, part in enumerate(message.content):
            if part.type != "image_url":
                continue
            param = f"messages.{i}.content.{j}.image_url.url"
            if part.image_url is None:
                raise RequestError(f"messages.{i}.content.{j}.image_url", "missing")
            url = part.image_url.url
            if not url.startswith("data:image/") or ";base64," not in url:
                raise RequestError(param, "expected a data:image/...;base64, URL")
            try:
                raw = base64.b64decode(url.split(";base64,", 1)[1], validate=True)
                image = Image.open(io.BytesIO(raw))
                image.load()
            except (binascii.Error, OSError, ValueError) as exc:
                raise RequestError(param, f"not a decodable image ({exc})") from None
            images.append(image.convert("RGB"))
    return images


def error_body(message: str, param: str | None = None, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def logprobs_content(
    tokenizer: Any, token_ids: tuple[int, ...], logprobs: tuple[float, ...]
) -> list:
    """OpenAI's per-token logprob entries: decoded token text, logprob, UTF-8 bytes."""
    entries = []
    for token_id, logprob in zip(token_ids, logprobs, strict=True):
        raw = token_bytes(tokenizer, token_id)
        entries.append(
            {
                "token": raw.decode("utf-8", errors="replace"),
                "logprob": logprob,
                "bytes": list(raw),
                "top_logprobs": [],
            }
        )
    return entries


_BYTE_DECODER: dict[str, int] | None = None


def token_bytes(tokenizer: Any, token_id: int) -> bytes:
    """The raw bytes a byte-level BPE token stands for (added tokens: their UTF-8 text)."""
    global _BYTE_DECODER
    if _BYTE_DECODER is None:
        _BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}
    piece = tokenizer.convert_ids_to_tokens(token_id)
    if piece is None:
        return b""
    if token_id in tokenizer.added_tokens_decoder:
        return piece.encode("utf-8")
    try:
        return bytes(_BYTE_DECODER[c] for c in piece)
    except KeyError:  # not a byte-level vocabulary
        return tokenizer.decode([token_id]).encode("utf-8")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table used by byte-level BPE."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table
