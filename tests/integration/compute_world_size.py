"""The DDP provider's program: one all-reduce over every rank, checked against WORLD_SIZE.

It stands in for TorchX's ``torchx.examples.apps.compute_world_size.main``, which needs
TorchX and Hydra where the job runs: each rank contributes 1 to a gloo all-reduce, so the
sum is the world size ``torchrun`` gave. Rank 0 prints ``world size: N``; a mismatch
exits non-zero.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist


def main() -> int:
    """Join the process group, all-reduce a 1 and compare with ``WORLD_SIZE``."""
    dist.init_process_group(backend="gloo")
    try:
        total = torch.ones(1)
        dist.all_reduce(total)
        expected = int(os.environ["WORLD_SIZE"])
        if dist.get_rank() == 0:
            print(f"world size: {int(total.item())}", flush=True)
        return 0 if int(total.item()) == expected else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
