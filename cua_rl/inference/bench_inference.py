"""`cua-rl bench inference`: throughput and latency of the hf engine and vLLM, side by side.

Each engine serves the tiny checkpoint from one replica that this command launches the
way a run does (`model_servers`), and answers policy-shaped requests: a turn with three
screenshots at the rollout's default resolution, one sample with logprobs, a fixed
number of new tokens (64 distinct prompts in turn). At each concurrency level, that
many clients send requests back to back for a fixed time; the figures are completed
requests per second and the median and 99th-percentile latency. Every level is
bounded in time, so the whole bench is too: about engines x (start-up + levels x
(seconds + the slowest request)).
"""

from __future__ import annotations

import asyncio
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from cua_rl.command_output import emit_json

ENGINES = ("hf", "vllm")
DISTINCT_REQUESTS = 64
"""Requests cycle through this many different prompts."""


def policy_requests(count: int) -> list[list[dict[str, Any]]]:
    """`count` distinct policy turns, each with three screenshots of the size actors send
    (a 1920x1080 screen resized to the rollout's pixel budget, JPEG as the guest sends).

    Distinct images keep vLLM's prefix and multimodal caches from answering repeats,
    which a run's turns rarely are; built before timing starts."""
    from PIL import Image, ImageDraw

    from cua_rl.agent import policy_messages
    from cua_rl.agent.images import encode_image, resized_image_size
    from cua_rl.rollout.config import EpisodeConfig

    episode = EpisodeConfig()
    size = resized_image_size((1920, 1080), episode.min_pixels, episode.max_pixels)
    requests = []
    for r in range(count):
        shots = []
        for i, color in enumerate(("white", "lightgray", "beige")):
            image = Image.new("RGB", size, color)
            ImageDraw.Draw(image).rectangle((100 + 7 * r, 80 + 40 * i, 700, 500),
                                            fill=(40 + r % 200, 90, 160))
            buf = io.BytesIO()
            image.save(buf, format="JPEG", quality=episode.screenshot_quality)
            shots.append(encode_image(buf.getvalue(), min_pixels=episode.min_pixels,
                                      max_pixels=episode.max_pixels))
        requests.append(policy_messages(f"Open menu number {r}.", ["Action: click",
                                                                  "Action: type"], shots,
                                         (1920, 1080)))
    return requests


def summarize(latencies_s: list[float], wall_s: float) -> dict[str, float]:
    """rps, p50_ms, p99_ms of one level (zeros when nothing completed)."""
    if not latencies_s:
        return {"rps": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "requests": 0}
    ordered = sorted(latencies_s)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"rps": round(len(ordered) / wall_s, 3),
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(p99 * 1000, 1), "requests": len(ordered)}


async def run_level(url: str, requests: list[list[dict[str, Any]]], concurrency: int,
                    seconds: float, max_tokens: int, timeout_s: float) -> dict[str, float]:
    """`concurrency` clients send requests back to back until `seconds` have passed."""
    from cua_rl.inference.client import InferenceClient

    client = InferenceClient(url, timeout_s=timeout_s)
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + seconds
    latencies: list[float] = []
    counter = iter(range(10**9))

    async def worker() -> None:
        while loop.time() < end:
            messages = requests[next(counter) % len(requests)]
            sent = loop.time()
            await client.chat(messages, temperature=1.0, max_tokens=max_tokens)
            latencies.append(loop.time() - sent)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    finally:
        await client.close()
    return summarize(latencies, loop.time() - start)


async def bench_engine(engine: str, model_dir: Path, work: Path, levels: list[int],
                       seconds: float, max_tokens: int, ready_timeout_s: float
                       ) -> dict[str, dict[str, float]]:
    from cua_rl.inference.config import ModelServersConfig
    from cua_rl.inference.launcher import model_servers

    cfg = ModelServersConfig(engine=engine, model=str(model_dir), replicas=1, threads=2,
                             ready_timeout_s=ready_timeout_s)
    requests = policy_requests(DISTINCT_REQUESTS)
    async with model_servers(cfg, name=engine, log_dir=work / "logs") as urls:
        await run_level(urls[0], requests[-1:], 1, 0.0, max_tokens, 600.0)  # warm-up
        return {str(c): await run_level(urls[0], requests, c, seconds, max_tokens, 600.0)
                for c in levels}


async def run_bench(engines: list[str], model_dir: Path | None, levels: list[int],
                    seconds: float, max_tokens: int,
                    ready_timeout_s: float) -> dict[str, Any]:
    from cua_rl.inference.vllm_engine import resolve_vllm_python

    if "vllm" in engines:
        resolve_vllm_python()  # fail in one line before starting anything
    with tempfile.TemporaryDirectory(prefix="cua-rl-bench-inference-") as tmp:
        work = Path(tmp)
        if model_dir is None:  # output quality does not matter here, only its length
            from cua_rl.inference.tiny_model import build_tiny_model

            model_dir = build_tiny_model(work / "tiny", seed=0, primed=False).path
        return {e: await bench_engine(e, model_dir, work, levels, seconds, max_tokens,
                                      ready_timeout_s) for e in engines}


@click.command("inference")
@click.option("--engines", default=",".join(ENGINES), show_default=True,
              help="Comma-separated engines to compare.")
@click.option("--concurrency", default="1,8,32", show_default=True,
              help="Comma-separated numbers of concurrent clients.")
@click.option("--seconds", type=click.FloatRange(min=0.1), default=20.0, show_default=True,
              help="Time each concurrency level sends requests for.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=32, show_default=True,
              help="New tokens per request (the random tiny model rarely stops earlier).")
@click.option("--model", "model_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Checkpoint to serve (default: a tiny random Qwen3-VL).")
@click.option("--ready-timeout", type=click.FloatRange(min=1), default=400.0,
              show_default=True, help="Deadline for a replica to start.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_inference(engines: str, concurrency: str, seconds: float, max_tokens: int,
                    model_dir: Path | None, ready_timeout: float, as_json: bool) -> None:
    """Requests/s and p50/p99 latency of policy-shaped requests, hf and vLLM side by side."""
    from cua_rl.errors import ConfigError

    chosen = [e.strip() for e in engines.split(",") if e.strip()]
    if unknown := sorted(set(chosen) - set(ENGINES)):
        raise click.BadParameter(f"unknown engines {unknown}; expected some of {ENGINES}",
                                 param_hint="--engines")
    try:
        levels = [int(c) for c in concurrency.split(",")]
    except ValueError:
        raise click.BadParameter("expected integers like 1,8,32",
                                 param_hint="--concurrency") from None
    if not levels or min(levels) < 1:
        raise click.BadParameter("expected positive integers", param_hint="--concurrency")
    start = time.monotonic()
    try:
        result = asyncio.run(run_bench(chosen, model_dir, levels, seconds, max_tokens,
                                       ready_timeout))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit_json(result)
        return
    for engine, by_level in result.items():
        for level, figures in by_level.items():
            click.echo(f"{engine:>5} c={level:>3}: {figures['rps']:7.2f} req/s  "
                       f"p50 {figures['p50_ms']:8.1f} ms  p99 {figures['p99_ms']:8.1f} ms  "
                       f"({figures['requests']} requests)")
    click.echo(f"total {time.monotonic() - start:.0f} s")
