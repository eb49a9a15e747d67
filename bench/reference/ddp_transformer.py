#!/usr/bin/env python3
"""PyTorch DDP (gloo) on the Transformer workload of ../shared/bench-ref/transformer.py.

The same model, data and optimizer as that script (d 256, 4 heads, 3+3 layers, FFN 1024,
vocab 8000, batch 32 x 64 tokens, Adam 1e-4), the global batch split over the processes,
gradients averaged by DistributedDataParallel over gloo. Launch with torchrun:

    torchrun --standalone --nproc_per_node 2 bench/reference/ddp_transformer.py --threads 1

Prints one JSON line (rank 0): global target tokens per second over the timed steps.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as distributed
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--warmup", type=int, default=2)
args = p.parse_args()
torch.set_num_threads(args.threads)
distributed.init_process_group("gloo")
rank, world = distributed.get_rank(), distributed.get_world_size()

D, H, LAYERS, FFN, V, B, L = 256, 4, 3, 1024, 8000, 32, 64
assert B % world == 0, "the global batch must split evenly"


class Seq2SeqTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(V, D)
        self.tgt_emb = nn.Embedding(V, D)
        pos = torch.arange(L).unsqueeze(1)
        div = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
        pe = torch.zeros(L, D)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.drop = nn.Dropout(0.1)
        self.tf = nn.Transformer(D, H, LAYERS, LAYERS, FFN, 0.1, batch_first=True)
        self.out = nn.Linear(D, V)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(L))

    def embed(self, emb, x):
        return self.drop(emb(x) * math.sqrt(D) + self.pe[: x.size(1)])

    def forward(self, src, tgt_in):
        y = self.tf(self.embed(self.src_emb, src), self.embed(self.tgt_emb, tgt_in),
                    tgt_mask=self.causal[: tgt_in.size(1), : tgt_in.size(1)])
        return self.out(y)


torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
src = torch.randint(2, V, (B, L), generator=g)
tgt = src.flip(1)
tgt_in = torch.cat([torch.full((B, 1), 1), tgt[:, :-1]], dim=1)
share = B // world
rows = slice(rank * share, (rank + 1) * share)
src, tgt, tgt_in = src[rows], tgt[rows], tgt_in[rows]

model = nn.parallel.DistributedDataParallel(Seq2SeqTransformer())
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
model.train()
times = []
for s in range(args.warmup + args.steps):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(src, tgt_in).reshape(-1, V), tgt.reshape(-1))
    loss.backward()
    opt.step()
    if s >= args.warmup:
        times.append(time.perf_counter() - t0)
step_s = sum(times) / len(times)
if rank == 0:
    with open("/proc/self/status") as f:
        rss = next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmHWM:"))
    print(json.dumps({"name": "transformer_ddp", "torch": torch.__version__, "ranks": world,
                      "threads": args.threads, "step_ms": round(step_s * 1e3, 1),
                      "tgt_tokens_per_s": round(B * L / step_s, 1), "peak_rss_mib": round(rss),
                      "loss": round(loss.item(), 4)}))
distributed.destroy_process_group()
