"""A stand-in for a run: launches vLLM replicas with `replica_set` and holds them.

Prints the replicas' URLs as one JSON line once they are ready, then serves until its
standard input closes (a clean stop), or until it is killed (the replicas must then
follow it, by the owner's death signal). Usage: vllm_owner.py POOL_CONFIG_JSON LOG_DIR.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from cua_rl.inference.config import ModelServersConfig
from cua_rl.inference.launcher import replica_set
from cua_rl.inference.server_auth import TOKEN_ENV


async def main(config_json: str, log_dir: str) -> None:
    cfg = ModelServersConfig.model_validate_json(config_json)
    # the test's credential (from the environment), so the test can update weights
    async with replica_set(
        cfg, name="vllm", log_dir=Path(log_dir), token=os.environ[TOKEN_ENV]
    ) as replicas:
        print(json.dumps(replicas.urls), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
