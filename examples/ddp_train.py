"""A small PyTorch DDP training script: CPU, gloo, synthetic data.

Run it with asynctorchx (2 processes on this machine)::

    asynctorchx run -s local_cwd dist.ddp -j 1x2 --script examples/ddp_train.py

``dist.ddp`` starts it under ``torchrun``, which sets ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT``. Each rank fits a linear model ``y = X w + b`` on its
own shard of a fixed synthetic data set; DDP averages the gradients over gloo. Rank 0
prints the loss every ``--log_every`` steps and writes a checkpoint (model and optimizer
state, step, final loss) with ``torch.save`` to ``--checkpoint``, default
``$TORCHX_CHECKPOINT`` or ``ddp_checkpoint.pt`` in the working directory.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="DDP on synthetic data (CPU, gloo)")
    parser.add_argument("--steps", type=int, default=300, help="training steps")
    parser.add_argument("--batch_size", type=int, default=32, help="samples per step and rank")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--log_every", type=int, default=50, help="print the loss every N steps")
    parser.add_argument(
        "--checkpoint",
        default=os.environ.get("TORCHX_CHECKPOINT", "ddp_checkpoint.pt"),
        help="where rank 0 writes the checkpoint",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same true weights and initial model on every rank
    features = 16
    true_w = torch.randn(features, 1)
    model = DistributedDataParallel(nn.Linear(features, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard
    loss = torch.tensor(0.0)
    for step in range(1, args.steps + 1):
        x = torch.randn(args.batch_size, features, generator=generator)
        y = x @ true_w + 0.5 + 0.01 * torch.randn(args.batch_size, 1, generator=generator)
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0 and (step % args.log_every == 0 or step == 1):
            print(f"step {step}/{args.steps} loss {loss.item():.6f}", flush=True)
    if rank == 0:
        torch.save(
            {
                "model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "step": args.steps,
                "loss": loss.item(),
                "world_size": world,
            },
            args.checkpoint,
        )
        print(f"wrote checkpoint {args.checkpoint} (final loss {loss.item():.6f})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
