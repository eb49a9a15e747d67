#!/usr/bin/env python3
"""PyTorch reference for `graft train seq2seq` on the date task: the same model, data, batches
and optimizer, trained until the validation exact match reaches --target.

The model mirrors models/seq2seq.cpp with --cell lstm (--bidirectional optional) and
--attention bahdanau or none:
  encoder   Embedding(Vs, E, pad 0) -> LSTM(E, H or H/2 per direction), packed by length
  init      the decoder starts from the encoder's final (h, c), directions concatenated [B, H]
  bahdanau  e_s = v . tanh(W s_{t-1} + U h_s) (W: no bias; v ~ U(+-1/sqrt(A))), padding masked,
            c_t = sum_s softmax(e)_s h_s; s_t = LSTMCell([emb(y_{t-1}); c_t], s_{t-1})
            h~_t = tanh(W_c [c_t; s_t]) (W_c: no bias); logits = W_out h~_t
  none      s_t = LSTMCell(emb(y_{t-1}), s_{t-1}); logits = W_out s_t
  loss      cross-entropy summed over target tokens (each target + <eos>) / their count
Adam (lr 2e-3, betas 0.9/0.999, eps 1e-8), gradient norm clipped to 5, batches of --batch
sentences bucketed like data::bucket_batches (shuffle, sort by source length within pools of
50 batches, cut, shuffle the batches; a new order each epoch). Every --eval-every steps: greedy
decoding of the validation pairs (batches of 64, at most 2 x longest test target + 10 tokens),
exact match = the output equals the reference. The wall time counts from the start of main()
and includes the evaluations, as graft's reached_target_wall_s does.

Data: the TSV files of `graft data prepare date --seed N` (the pairs `--task date --seed N`
trains on); characters are the tokens, as with graft's --tokenizer char.

  .venv-torch/bin/python bench/reference/seq2seq_dates.py --data datasets/date --seed 1
Prints one JSON line. With --run-dir DIR it also writes DIR/metrics.jsonl in nn::Trainer's
format (step, loss, elapsed, items; evaluations as eval_exact), which `graft plot` draws beside
graft's own runs:
  graft plot runs/graft-date runs/torch-date --labels graft,PyTorch --x time --out docs/dates
"""
import argparse
import json
import math
import os
import random
import sys
import time

sys.dont_write_bytecode = True
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

PAD, BOS, EOS, UNK = 0, 1, 2, 3


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")[-2:]) for line in f if line.strip()]


class CharVocab:
    def __init__(self, texts):
        chars = sorted({c for t in texts for c in t})
        self.itos = ["<pad>", "<bos>", "<eos>", "<unk>"] + chars
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def encode(self, text):
        return [self.stoi.get(c, UNK) for c in text]


class Bahdanau(nn.Module):
    def __init__(self, H, A):
        super().__init__()
        self.W = nn.Linear(H, A, bias=False)
        self.U = nn.Linear(H, A)
        k = 1.0 / math.sqrt(A)
        self.v = nn.Parameter(torch.empty(A).uniform_(-k, k))

    def forward(self, s, keys_proj, keys, pad_mask):  # s [B, H], keys [B, S, H] -> c [B, H]
        e = torch.tanh(keys_proj + self.W(s).unsqueeze(1)) @ self.v  # [B, S]
        w = F.softmax(e.masked_fill(pad_mask, -1e30), dim=1)
        return torch.bmm(w.unsqueeze(1), keys).squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, Vs, Vt, E, H, attention, bidirectional):
        super().__init__()
        self.H, self.attention, self.bi = H, attention, bidirectional
        self.src_embed = nn.Embedding(Vs, E, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(Vt, E, padding_idx=PAD)
        self.encoder = nn.LSTM(E, H // 2 if bidirectional else H, batch_first=True, bidirectional=bidirectional)
        self.cell = nn.LSTMCell(E + (H if attention == "bahdanau" else 0), H)
        if attention == "bahdanau":
            self.attn = Bahdanau(H, H)
            self.combine = nn.Linear(2 * H, H, bias=False)
        self.out = nn.Linear(H, Vt)

    def encode(self, src, lengths):  # src [B, S]
        packed = pack_padded_sequence(self.src_embed(src), lengths, batch_first=True, enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        keys, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))  # [B, S, H]
        if self.bi:  # [2, B, H/2] -> [B, H]
            h, c = torch.cat([h[0], h[1]], 1), torch.cat([c[0], c[1]], 1)
        else:
            h, c = h[0], c[0]
        mem = dict(keys=keys, pad=src.eq(PAD))
        if self.attention == "bahdanau":
            mem["proj"] = self.attn.U(keys)
        return mem, (h, c)

    def step(self, emb, state, mem):  # emb [B, E] -> h~ [B, H]
        if self.attention != "bahdanau":
            state = self.cell(emb, state)
            return state[0], state
        ctx = self.attn(state[0], mem["proj"], mem["keys"], mem["pad"])
        state = self.cell(torch.cat([emb, ctx], 1), state)
        return torch.tanh(self.combine(torch.cat([ctx, state[0]], 1))), state

    def forward(self, src, lengths, tgt_in):  # -> logits [B, T, V]
        mem, state = self.encode(src, lengths)
        emb = self.tgt_embed(tgt_in)
        hs = []
        for t in range(tgt_in.size(1)):
            h, state = self.step(emb[:, t], state, mem)
            hs.append(h)
        return self.out(torch.stack(hs, 1))

    @torch.no_grad()
    def greedy(self, src, lengths, max_len):
        mem, state = self.encode(src, lengths)
        B = src.size(0)
        prev = torch.full((B,), BOS, dtype=torch.long)
        out, done = [], torch.zeros(B, dtype=torch.bool)
        for _ in range(max_len):
            h, state = self.step(self.tgt_embed(prev), state, mem)
            prev = self.out(h).argmax(1)
            out.append(prev)
            done |= prev.eq(EOS)
            if bool(done.all()):
                break
        rows = torch.stack(out, 1).tolist()
        return [r[:r.index(EOS)] if EOS in r else r for r in rows]


def pad(seqs):
    T = max(len(s) for s in seqs)
    return torch.tensor([s + [PAD] * (T - len(s)) for s in seqs], dtype=torch.long)


def bucket_batches(lengths, batch, rng, pool=50):
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = batch * pool
    for c in range(0, len(order), chunk):
        order[c:c + chunk] = sorted(order[c:c + chunk], key=lambda i: lengths[i])  # stable
    batches = [order[i:i + batch] for i in range(0, len(order), batch)]
    rng.shuffle(batches)
    return batches


def exact_match(model, xs, ys, max_len):
    model.eval()
    hits = 0
    for i in range(0, len(xs), 64):
        part = xs[i:i + 64]
        lengths = torch.tensor([len(x) for x in part])
        for hyp, ref in zip(model.greedy(pad(part), lengths, max_len), ys[i:i + 64]):
            hits += hyp == ref
    model.train()
    return hits / len(xs)


def main():
    t0 = time.perf_counter()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder with train.tsv, dev.tsv, test.tsv")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--attention", default="bahdanau", choices=["bahdanau", "none"])
    p.add_argument("--bidirectional", type=int, default=1)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--clip", type=float, default=5.0)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--target", type=float, default=0.99)
    p.add_argument("--run-dir", default="", help="write metrics.jsonl (graft's format) here")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    train, dev, test = (read_tsv(os.path.join(a.data, f)) for f in ("train.tsv", "dev.tsv", "test.tsv"))
    sv, tv = CharVocab([s for s, _ in train]), CharVocab([t for _, t in train])
    xs = [sv.encode(s) for s, _ in train]
    ys = [tv.encode(t) for _, t in train]
    dx, dy = [sv.encode(s) for s, _ in dev], [tv.encode(t) for _, t in dev]
    tx, ty = [sv.encode(s) for s, _ in test], [tv.encode(t) for _, t in test]
    max_len = 2 * max(len(y) for y in ty) + 10  # as graft: 2 x the longest test target + 10

    model = Seq2Seq(len(sv.itos), len(tv.itos), a.embed, a.hidden, a.attention, bool(a.bidirectional))
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    src_len = [len(x) for x in xs]
    batches, step, tokens = [], 0, 0
    curve, reached_step, reached_wall = [], -1, 0.0
    log = None
    if a.run_dir:
        os.makedirs(a.run_dir, exist_ok=True)
        log = open(os.path.join(a.run_dir, "metrics.jsonl"), "w")
    while step < a.steps:
        if not batches:
            batches = bucket_batches(src_len, a.batch, rng)
        idx = batches.pop(0)
        src = pad([xs[i] for i in idx])
        lengths = torch.tensor([len(xs[i]) for i in idx])
        tgt_in = pad([[BOS] + ys[i] for i in idx])
        tgt_out = pad([ys[i] + [EOS] for i in idx])
        n = int(tgt_out.ne(PAD).sum())
        logits = model(src, lengths, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=PAD,
                               reduction="sum") / n
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        step += 1
        tokens += n
        if log:
            log.write(json.dumps({"step": step, "loss": loss.item(), "elapsed": time.perf_counter() - t0,
                                  "items": n}) + "\n")
        if a.eval_every and step % a.eval_every == 0:
            ex = exact_match(model, dx, dy, max_len)
            curve.append({"step": step, "exact": ex, "loss": round(loss.item(), 5),
                          "wall_s": round(time.perf_counter() - t0, 2)})
            if log:
                log.write(json.dumps({"step": step, "elapsed": time.perf_counter() - t0, "eval_exact": ex}) + "\n")
            if a.target > 0 and ex >= a.target:
                reached_step, reached_wall = step, time.perf_counter() - t0
                break
    train_s = time.perf_counter() - t0
    if log:
        log.close()
    test_exact = exact_match(model, tx, ty, max_len)
    print(json.dumps({
        "workload": "seq2seq_dates", "framework": "torch", "torch": torch.__version__, "seed": a.seed,
        "threads": a.threads, "attention": a.attention, "bidirectional": bool(a.bidirectional),
        "params": sum(p.numel() for p in model.parameters()), "steps": step, "target_tokens": tokens,
        "reached_target_step": reached_step, "reached_target_wall_s": round(reached_wall, 2),
        "train_wall_s": round(train_s, 2), "test_exact": test_exact, "curve": curve}))


if __name__ == "__main__":
    main()
