"""A replica's end of weight links, in a process of its own (the two-process transfer
test): for each job on stdin (one JSON line: host, port, manifest, bucket_bytes,
out) it joins the learner's link, receives with the hf server's receiver
(`weight_transfer.receive`) or the vLLM side's (`cua_rl_vllm.receive_tensors`), and
saves what arrived to `out` for the test to compare.

Usage: python -m tests_support.weight_receiver hf|vllm < jobs
"""

from __future__ import annotations

import json
import sys

import torch


def main(kind: str) -> None:
    for line in sys.stdin:
        job = json.loads(line)
        if kind == "hf":
            from cua_rl.inference import weight_transfer as wt

            group = wt.open_link(job["host"], job["port"], rank=1, timeout_s=60)
            received = wt.receive(group, job["manifest"], job["bucket_bytes"])
        else:
            from cua_rl.inference.vllm_engine import SIDE_DIR

            sys.path.insert(0, str(SIDE_DIR))
            import cua_rl_vllm

            received = dict(
                cua_rl_vllm.receive_tensors(
                    job["host"], job["port"], job["manifest"], 60.0, job["bucket_bytes"]
                )
            )
        torch.save(received, job["out"])


if __name__ == "__main__":
    main(sys.argv[1])
