"""A stand-in for a run: launches vLLM replicas with `model_servers` and holds them.

Prints the replicas' URLs as one JSON line once they are ready, then serves until its
standard input closes (a clean stop), or until it is killed (the replicas must then
follow it, by the owner's death signal). Usage: vllm_owner.py POOL_CONFIG_JSON LOG_DIR.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import model_servers


async def main(config_json: str, log_dir: str) -> None:
    cfg = ModelServersConfig.model_validate_json(config_json)
    async with model_servers(cfg, name="vllm", log_dir=Path(log_dir)) as urls:
        print(json.dumps(urls), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
