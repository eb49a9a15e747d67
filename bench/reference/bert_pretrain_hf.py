#!/usr/bin/env python3
"""Hugging Face reference for `graft train bert-pretrain`: transformers.BertForPreTraining trained
on the directory `graft train bert-pretrain --export DIR` writes (tools/bert_export.h), i.e. on
graft's own examples, in graft's batch order, from graft's initial weights, with graft's
optimizer and schedule; writes metrics.jsonl in nn::Trainer's format (`graft plot` draws both
runs) and the trained model as a save_pretrained directory (RUN_DIR/model, with vocab.txt) that
`graft train bert-finetune --init-hf RUN_DIR/model` fine-tunes.

  graft train bert-pretrain --size mini --steps 2000 --export runs/bert-export --run-dir runs/bert-graft
  .venv-torch/bin/pip install transformers
  .venv-torch/bin/python bench/reference/bert_pretrain_hf.py --export runs/bert-export --run-dir runs/bert-hf

What matches graft (tools/cmd_bert.cpp): step s reads examples s*B .. s*B+B-1 of the exported
epoch orders, padded to the batch's longest with [PAD] (attention mask = ids != [PAD]); loss =
masked-LM cross-entropy (mean over the masked tokens) + next-sentence cross-entropy (mean over the
pairs), HF's own BertForPreTraining loss; AdamW (betas 0.9/0.999, eps 1e-8) with decoupled weight
decay on every parameter (graft has no no-decay group); lr = peak * e/w for e < w, then
peak * (T - e)/(T - w) (graft's LinearWarmupDecay, e = steps taken); gradient norm clipped
at the exported clip norm. Evaluation: the exported held-out examples in batches of 64, eval loss
(mean of the batches' loss), masked-LM accuracy over all masked tokens, NSP accuracy over pairs,
as graft's pretrain_eval. Dropout masks are each framework's own. Prints one JSON line at the end.

Long runs: every --checkpoint-every steps the state (model, AdamW, schedule, torch's RNG, the step
and the elapsed time) is saved to RUN_DIR/checkpoint.pt (written to a temporary file, then
renamed over the old one); --resume continues from it (metrics.jsonl keeps its lines up to the
checkpoint's step) and continues the same losses as an uninterrupted run. Without --resume a
RUN_DIR that holds a checkpoint is refused.
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.dont_write_bytecode = True
import torch  # noqa: E402
from transformers import BertForPreTraining  # noqa: E402


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def batch(examples, pad_id):
    """Padded tensors of examples (graft's pad_examples): ids, types, mask, MLM labels, NSP labels."""
    T = max(len(e["input_ids"]) for e in examples)
    B = len(examples)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    types = torch.zeros((B, T), dtype=torch.long)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for b, e in enumerate(examples):
        n = len(e["input_ids"])
        ids[b, :n] = torch.tensor(e["input_ids"])
        types[b, :n] = torch.tensor(e["token_type_ids"])
        for pos, orig in e["masked"]:
            labels[b, pos] = orig
    nsp = torch.tensor([e["next_sentence_label"] for e in examples], dtype=torch.long)
    return ids, types, ids.ne(pad_id).long(), labels, nsp


@torch.no_grad()
def evaluate(model, examples, pad_id):
    model.eval()
    loss, batches, mlm_ok, mlm_n, nsp_ok = 0.0, 0, 0, 0, 0
    for i in range(0, len(examples), 64):
        ids, types, mask, labels, nsp = batch(examples[i:i + 64], pad_id)
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
                    next_sentence_label=nsp)
        loss += float(out.loss)
        batches += 1
        sel = labels.ne(-100)
        mlm_ok += int(out.prediction_logits.argmax(-1)[sel].eq(labels[sel]).sum())
        mlm_n += int(sel.sum())
        nsp_ok += int(out.seq_relationship_logits.argmax(-1).eq(nsp).sum())
    model.train()
    return {"loss": loss / max(batches, 1), "mlm_accuracy": mlm_ok / max(mlm_n, 1),
            "nsp_accuracy": nsp_ok / max(len(examples), 1)}


def main():
    t0 = time.perf_counter()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export", required=True, help="the directory of graft train bert-pretrain --export")
    p.add_argument("--run-dir", required=True, help="metrics.jsonl, results.json and model/ go here")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=0, help="stop after N steps (0: the exported run's)")
    p.add_argument("--eval-every", type=int, default=-1, help="-1: the exported run's")
    p.add_argument("--checkpoint-every", type=int, default=250, help="0: no checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from RUN_DIR/checkpoint.pt")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    with open(os.path.join(a.export, "settings.json")) as f:
        s = json.load(f)
    torch.manual_seed(s["seed"])
    train = read_jsonl(os.path.join(a.export, "train.jsonl"))
    held_out = read_jsonl(os.path.join(a.export, "eval.jsonl"))
    order = [i for line in read_jsonl(os.path.join(a.export, "epochs.jsonl")) for i in line]
    total, B, w = s["steps"], s["batch"], s["warmup"]
    steps = a.steps or total
    eval_every = s["eval_every"] if a.eval_every < 0 else a.eval_every
    assert len(order) >= steps * B, "the export's epochs do not cover the steps"
    model = BertForPreTraining.from_pretrained(os.path.join(a.export, "init"))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], betas=tuple(s["adam_betas"]), eps=s["adam_eps"],
                            weight_decay=s["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda e: e / w if e < w else max(0.0, (total - e) / (total - w)))
    os.makedirs(a.run_dir, exist_ok=True)
    ckpt, metrics = os.path.join(a.run_dir, "checkpoint.pt"), os.path.join(a.run_dir, "metrics.jsonl")
    start, before = 0, 0.0  # the checkpoint's step and the seconds of earlier sessions
    if os.path.exists(ckpt) and not a.resume:
        sys.exit(f"{ckpt} exists: pass --resume to continue that run (or use another --run-dir)")
    if a.resume and os.path.exists(ckpt):
        c = torch.load(ckpt, weights_only=False)
        model.load_state_dict(c["model"])
        opt.load_state_dict(c["optimizer"])
        sched.load_state_dict(c["scheduler"])
        torch.set_rng_state(c["rng"])
        start, before = c["step"], c["elapsed"]
        kept = [l for l in open(metrics, encoding="utf-8") if json.loads(l)["step"] <= start]
        with open(metrics, "w", encoding="utf-8") as f:
            f.writelines(kept)
        print(f"resumed at step {start} ({before:.0f} s of training before)", file=sys.stderr)
    t0 -= before
    log = open(metrics, "a" if start else "w", encoding="utf-8")

    def save_checkpoint(step):
        log.flush()
        tmp = ckpt + f".tmp.{os.getpid()}"
        torch.save({"step": step, "elapsed": time.perf_counter() - t0, "model": model.state_dict(),
                    "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                    "rng": torch.get_rng_state()}, tmp)
        os.replace(tmp, ckpt)

    ev = {}
    for step in range(start + 1, steps + 1):
        rows = order[(step - 1) * B: step * B]
        ids, types, mask, labels, nsp = batch([train[i] for i in rows], s["pad_id"])
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
                    next_sentence_label=nsp)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip_grad_norm"])
                     if s["clip_grad_norm"] > 0 else 0.0)
        lr = opt.param_groups[0]["lr"]
        opt.step()
        sched.step()
        log.write(json.dumps({"step": step, "loss": float(out.loss), "lr": lr, "elapsed": time.perf_counter() - t0,
                              "items": len(rows), "grad_norm": norm}) + "\n")
        if eval_every > 0 and step % eval_every == 0 or step == steps:
            ev = evaluate(model, held_out, s["pad_id"])
            log.write(json.dumps({"step": step, "elapsed": time.perf_counter() - t0,
                                  **{"eval_" + k: v for k, v in ev.items()}}) + "\n")
            log.flush()
        if a.checkpoint_every > 0 and step % a.checkpoint_every == 0 and step < steps:
            save_checkpoint(step)
    log.close()
    if not ev:  # resumed at the last step
        ev = evaluate(model, held_out, s["pad_id"])
    train_s = time.perf_counter() - t0
    model.save_pretrained(os.path.join(a.run_dir, "model"), safe_serialization=True)
    shutil.copy(os.path.join(a.export, "vocab.txt"), os.path.join(a.run_dir, "model", "vocab.txt"))
    import transformers
    r = {"workload": "bert_pretrain", "framework": "transformers", "transformers": transformers.__version__,
         "torch": torch.__version__, "threads": a.threads, "steps": steps, "batch": B,
         "train_wall_s": round(train_s, 1), "eval_loss": round(ev["loss"], 4),
         "eval_mlm_accuracy": round(ev["mlm_accuracy"], 4), "eval_nsp_accuracy": round(ev["nsp_accuracy"], 4)}
    with open(os.path.join(a.run_dir, "results.json"), "w") as f:
        json.dump(r, f, indent=1)
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
