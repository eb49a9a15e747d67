#!/usr/bin/env python3
"""PyTorch reference for `graft train transformer --task bible --tokenizer sentencepiece`: the
same model, tokenization, batch rule, optimizer and schedule, for a number of steps; writes
metrics.jsonl in nn::Trainer's format so that `graft plot` draws it beside graft's run.

Tokenization: graft's own SentencePiece models and vocabularies, read from a graft run
directory (--vocab-from: src_spm.model, src_vocab.txt, tgt_spm.model, tgt_vocab.txt). graft's
ids are <pad> <bos> <eos> <unk> followed by SentencePiece's pieces 1.. in order, so id =
piece id + 3 and SentencePiece's <unk> (0) is graft's <unk> (3).

Model (models/transformer.cpp): embeddings ~ N(0, 1/C) with a zero <pad> row, scaled by
sqrt(C), plus sinusoidal positions and dropout; torch.nn.Transformer with norm_first (pre-norm,
a final LayerNorm on both stacks, as graft's pre-norm stacks), ReLU feed-forward; logits =
h . E_tgt^T (tied output); label-smoothed cross-entropy averaged over target tokens. Adam
(lr 1, betas 0.9/0.98, eps 1e-9) under the Noam schedule lr = scale C^-0.5 min(n^-0.5,
n w^-1.5); gradient norm clipped at 1. Batches: data::token_batches (shuffle, sort by cost =
max(source, target + 1) within pools of about 50 batches, fill each batch while sentences x
its widest cost <= --max-tokens, shuffle the batches), with Python's random draws.
--init picks the stack weights as graft's --init does: xavier (torch.nn.Transformer's reset:
Xavier uniform on every matrix) or layers (each layer's own reset: nn.Linear's Kaiming uniform,
MultiheadAttention's Xavier in-projection and zero biases), so both sides start from the same
distributions; only the random streams differ.

  .venv-torch/bin/python bench/reference/transformer_bible.py --data datasets/bible-en-es \
      --vocab-from runs/tf-bible --steps 100 --run-dir runs/torch-tf-bible
After training: the teacher-forced dev cross-entropy, then greedy decoding of the first
--test-size test pairs (as graft's test decoding: at most 2 x the longest dev/test reference +
10 tokens, stop at <eos>), detokenized by SentencePiece into RUN_DIR/test_greedy.txt, one line
per pair, for `graft bleu RUN_DIR/test_greedy.txt datasets/bible-en-es/test.tsv` to score with
the code that scores graft's own test_greedy.txt. Prints one JSON line.
"""
import argparse
import json
import math
import os
import random
import sys
import time

sys.dont_write_bytecode = True
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

PAD, BOS, EOS, UNK = 0, 1, 2, 3


def read_tsv(path, limit):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            fields = line.rstrip("\n").split("\t")
            if n == 0 and fields[0] == "key":
                continue
            if len(fields) >= 2 and fields[-2] and fields[-1]:
                pairs.append((fields[-2], fields[-1]))
            if 0 < limit <= len(pairs):
                break
    return pairs


class Side:
    """One language's SentencePiece model with graft's ids (piece id + 3)."""

    def __init__(self, run_dir, side):
        self.sp = spm.SentencePieceProcessor(model_file=os.path.join(run_dir, f"{side}_spm.model"))
        with open(os.path.join(run_dir, f"{side}_vocab.txt"), encoding="utf-8") as f:
            self.size = sum(1 for _ in f)
        assert self.size == self.sp.get_piece_size() + 3, "vocabulary file and SentencePiece model disagree"

    def encode(self, text):
        ids = [i + 3 if i > 0 else UNK for i in self.sp.encode(text)]
        return ids or [UNK]

    def decode(self, ids):  # graft ids -> text; <pad> <bos> <eos> dropped, <unk> kept as piece 0
        return self.sp.decode([i - 3 if i > UNK else 0 for i in ids if i not in (PAD, BOS, EOS)])


def sinusoids(n, C):
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, C, 2, dtype=torch.float32) * (-math.log(10000.0) / C))
    pe = torch.zeros(n, C)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class Model(nn.Module):
    def __init__(self, Vs, Vt, C, H, L, Fd, p, max_len, init):
        super().__init__()
        self.C = C
        self.src_embed = nn.Embedding(Vs, C, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(Vt, C, padding_idx=PAD)
        for e in (self.src_embed, self.tgt_embed):
            nn.init.normal_(e.weight, 0.0, C ** -0.5)
            with torch.no_grad():
                e.weight[PAD].zero_()
        self.register_buffer("pe", sinusoids(max_len, C))
        self.drop = nn.Dropout(p)
        self.core = nn.Transformer(C, H, L, L, Fd, p, batch_first=True, norm_first=True)
        if init == "layers":  # undo nn.Transformer's Xavier reset: each layer's own initialisation
            for m in self.core.modules():
                if isinstance(m, nn.Linear):
                    m.reset_parameters()
            for m in self.core.modules():
                if isinstance(m, nn.MultiheadAttention):
                    m._reset_parameters()  # Xavier in_proj, zero in_proj and out_proj biases

    def embed(self, table, ids):  # [B, L] -> [B, L, C]
        return self.drop(table(ids) * math.sqrt(self.C) + self.pe[: ids.size(1)])

    def forward(self, src, tgt_in):  # -> logits [B, T, V]
        src_pad, tgt_pad = src.eq(PAD), tgt_in.eq(PAD)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1))
        h = self.core(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt_in), tgt_mask=causal,
                      src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                      memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return F.linear(h, self.tgt_embed.weight)

    @torch.no_grad()
    def greedy(self, src, max_len):  # src [B, S] -> lists of output ids (without <eos>)
        src_pad = src.eq(PAD)
        memory = self.core.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)
        out = torch.full((src.size(0), 1), BOS, dtype=torch.long)
        done = torch.zeros(src.size(0), dtype=torch.bool)
        for _ in range(max_len):
            T = out.size(1)
            h = self.core.decoder(self.embed(self.tgt_embed, out), memory,
                                  tgt_mask=nn.Transformer.generate_square_subsequent_mask(T), tgt_is_causal=True,
                                  memory_key_padding_mask=src_pad)
            nxt = F.linear(h[:, -1], self.tgt_embed.weight).argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
            out = torch.cat([out, nxt.unsqueeze(1)], 1)
            done |= nxt.eq(EOS)
            if bool(done.all()):
                break
        hyps = []
        for row in out[:, 1:].tolist():
            hyps.append(row[:row.index(EOS)] if EOS in row else [i for i in row if i != PAD])
        return hyps


def token_batches(cost, max_tokens, rng, pool=50):
    n = len(cost)
    per_batch = max(1, max_tokens * n // sum(max(c, 1) for c in cost))
    chunk = min(n, per_batch * pool)
    order = list(range(n))
    rng.shuffle(order)
    for c in range(0, n, chunk):
        order[c:c + chunk] = sorted(order[c:c + chunk], key=lambda i: cost[i])
    batches, widest = [[]], 0
    for i in order:
        w = max(widest, cost[i])
        if batches[-1] and (len(batches[-1]) + 1) * w > max_tokens:
            batches.append([])
            widest = cost[i]
        else:
            widest = w
        batches[-1].append(i)
    rng.shuffle(batches)
    return batches


def pad(seqs):
    T = max(len(s) for s in seqs)
    return torch.tensor([s + [PAD] * (T - len(s)) for s in seqs], dtype=torch.long)


def main():
    t0 = time.perf_counter()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="datasets/bible-en-es (train.tsv, dev.tsv)")
    p.add_argument("--vocab-from", required=True, help="a graft run directory with *_spm.model and *_vocab.txt")
    p.add_argument("--train-size", type=int, default=0, help="first N training pairs (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--init", choices=("xavier", "layers"), default="xavier", help="stack weights (graft's --init)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=400)
    p.add_argument("--lr-scale", type=float, default=1.0)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--valid-size", type=int, default=200, help="dev pairs for the validation cross-entropy")
    p.add_argument("--test-size", type=int, default=500, help="test pairs to decode (0: none)")
    p.add_argument("--run-dir", default="")
    p.add_argument("--load-graft", default="", help="start from a graft run's model.safetensors (with --steps 0: "
                   "evaluate and decode graft's model with this code)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)

    src_side, tgt_side = Side(a.vocab_from, "src"), Side(a.vocab_from, "tgt")
    train = read_tsv(os.path.join(a.data, "train.tsv"), a.train_size)
    dev = read_tsv(os.path.join(a.data, "dev.tsv"), a.valid_size)
    test = read_tsv(os.path.join(a.data, "test.tsv"), a.test_size) if a.test_size > 0 else []
    xs = [src_side.encode(s) for s, _ in train]
    ys = [tgt_side.encode(t) for _, t in train]
    dx, dy = [src_side.encode(s) for s, _ in dev], [tgt_side.encode(t) for _, t in dev]
    tx, ty = [src_side.encode(s) for s, _ in test], [tgt_side.encode(t) for _, t in test]
    max_out = 2 * max(len(y) for y in dy + ty) + 10  # graft's default --max-out
    max_len = max([len(s) + 2 for s in xs + ys + dx + tx] + [max_out + 2])
    model = Model(src_side.size, tgt_side.size, a.d_model, a.heads, a.layers, a.ffn, a.dropout, max_len, a.init)
    if a.load_graft:  # graft names the parameters as PyTorch does; its stacks are our `core`
        from safetensors.torch import load_file
        sd = {("core." + k if k.startswith(("encoder.", "decoder.")) else k): v
              for k, v in load_file(a.load_graft).items() if k != "pos.pe"}
        model.load_state_dict(sd, strict=False)
        missing = set(model.state_dict()) - set(sd) - {"pe"}
        assert not missing, f"{a.load_graft} lacks {sorted(missing)}"
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    C, w = a.d_model, a.warmup
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda n: a.lr_scale * C ** -0.5 * min((n + 1) ** -0.5, (n + 1) * w ** -1.5))
    cost = [max(len(x), len(y) + 1) for x, y in zip(xs, ys)]
    log = None
    if a.run_dir:
        os.makedirs(a.run_dir, exist_ok=True)
        log = open(os.path.join(a.run_dir, "metrics.jsonl"), "w")
    batches, step, tokens, first_step_s, first_n = [], 0, 0, None, 0
    model.train()
    while step < a.steps:
        if not batches:
            batches = token_batches(cost, a.max_tokens, rng)
        idx = batches.pop(0)
        src = pad([xs[i] for i in idx])
        tgt_in = pad([[BOS] + ys[i] for i in idx])
        tgt_out = pad([ys[i] + [EOS] for i in idx])
        n = int(tgt_out.ne(PAD).sum())
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1), ignore_index=PAD,
                               label_smoothing=a.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        step += 1
        tokens += n
        now = time.perf_counter() - t0
        if first_step_s is None:
            first_step_s, first_n = now, n
        if log:
            log.write(json.dumps({"step": step, "loss": loss.item(), "lr": lr, "elapsed": now, "items": n}) + "\n")
    train_s = time.perf_counter() - t0
    model.eval()  # teacher-forced validation cross-entropy (no smoothing), as graft's eval nll
    with torch.no_grad():
        s, k = 0.0, 0
        for i in range(0, len(dx), 64):
            tgt_out = pad([y + [EOS] for y in dy[i:i + 64]])
            lg = model(pad(dx[i:i + 64]), pad([[BOS] + y for y in dy[i:i + 64]]))
            s += float(F.cross_entropy(lg.reshape(-1, lg.size(-1)), tgt_out.reshape(-1), ignore_index=PAD,
                                       reduction="sum"))
            k += int(tgt_out.ne(PAD).sum())
    if log:
        log.write(json.dumps({"step": step, "elapsed": time.perf_counter() - t0, "eval_nll": s / k}) + "\n")
        log.close()
    t_dec, decode_s = time.perf_counter(), 0.0
    if test:
        hyps = [None] * len(tx)
        order = sorted(range(len(tx)), key=lambda i: len(tx[i]))  # similar lengths per batch
        for i in range(0, len(order), 16):
            part = order[i:i + 16]
            for j, h in zip(part, model.greedy(pad([tx[j] for j in part]), max_out)):
                hyps[j] = tgt_side.decode(h)
        decode_s = time.perf_counter() - t_dec
        if a.run_dir:
            with open(os.path.join(a.run_dir, "test_greedy.txt"), "w", encoding="utf-8") as f:
                f.write("".join(h + "\n" for h in hyps))
    print(json.dumps({
        "workload": "transformer_bible", "framework": "torch", "torch": torch.__version__, "seed": a.seed,
        "threads": a.threads, "params": sum(q.numel() for q in model.parameters()), "steps": step,
        "target_tokens": tokens, "train_wall_s": round(train_s, 2), "first_step_s": round(first_step_s or 0, 2),
        "tokens_per_s_after_first": round((tokens - first_n) / max(train_s - (first_step_s or 0), 1e-9), 1),
        "dev_nll": s / k, "test_examples": len(test), "test_decode_s": round(decode_s, 2)}))


if __name__ == "__main__":
    main()
