"""Benchmark: `run_classifier.py --long_documents` against truncation to the first window, on a
"which novel?" task whose passages are longer than the window and whose first words name no one.

The task: passages of Pride and Prejudice (label 0) and Emma (1), in SST-2 layout. A passage is
the consecutive sentences of one chapter from a sentence start until it reaches --passage_words
words; it is kept when its first --name_free_words words hold none of the two novels' character
and place names and the rest holds one of its own novel's (so the evidence is mostly beyond the
first window), and when it starts at least --passage_words / 2 words after the last kept one.
Every 4th chapter goes to dev, the others to train, so no text is shared between them.

The model is a BERT of the demo's shape (L=2, H=128, A=2, I=512, the bundled uncased vocabulary)
from random initialisation, no pre-training: what it learns, it learns from the training set (the
names). The runs share the seed, learning rate and batch size:
  truncated         the original's truncation, --num_train_epochs;
  truncated_steps   the same, trained for as many steps as the windowed run (more epochs);
  windows           --long_documents, --num_train_epochs (an epoch is every window once);
  windows_max, windows_first   the windows model evaluated with --window_aggregation=max, first.

  python -m bench.classifier_long_documents                 # writes under /tmp/long_documents
"""
import json
import os
import random
import re
import subprocess
import sys
import time

from absl import flags

import vocab
from bench import harness
from demo_data import TASK_NOVELS, read_novel
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/long_documents", "Data, model config and runs go here.")
flags.DEFINE_integer("passage_words", 300, "Words of a passage (about 1.3 word-pieces each).")
flags.DEFINE_integer("name_free_words", 90, "Leading words of a passage that name no one "
                     "(about the first window of 128 word-pieces).")
flags.DEFINE_integer("max_seq_length", 128, "The window.")
flags.DEFINE_integer("doc_stride", 64, "--doc_stride of the windowed run.")
flags.DEFINE_integer("max_passages", None, "Keep the first N passages of each split, after the "
                     "shuffle (default: all).")
flags.DEFINE_float("num_train_epochs", 10.0, "Epochs of the windowed run and of the first "
                   "truncated run.")

# Character and place names of the two novels (whole words, case-sensitive).
NAMES = {
    "prideprejudice": (
        "Elizabeth Lizzy Eliza Darcy Bennet Bennets Jane Bingley Bingleys Wickham Lydia Collins "
        "Charlotte Lucas Lucases Kitty Catherine Gardiner Gardiners Longbourn Netherfield "
        "Pemberley Meryton Mary Hurst Georgiana Fitzwilliam Phillips Forster Rosings Hunsford"),
    "emma": (
        "Emma Knightley Woodhouse Woodhouses Harriet Weston Westons Elton Eltons Churchill "
        "Churchills Frank Fairfax Bates Martin Martins Hartfield Highbury Randalls Donwell Dixon "
        "Campbell Campbells Perry Goddard Smith Isabella John Enscombe Cole Coles Taylor"),
}
FIGURES = []  # a row per run, for harness.write_results
MODEL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
             hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
             max_position_embeddings=128, type_vocab_size=2, initializer_range=0.02)


def _words(text):
    return set(re.findall(r"[A-Za-z]+", text))


def passages(novel, passage_words, name_free_words):
    """[(chapter index, passage)] of `novel` (see the module docstring)."""
    all_names = {name for names in NAMES.values() for name in names.split()}
    own_names = set(NAMES[novel].split())
    chapters = [doc.split("\n") for doc in gutenberg_to_corpus(read_novel(novel)).split("\n\n")
                if doc.strip()]
    found = []
    for chapter_index, sentences in enumerate(chapters):
        lengths = [len(s.split()) for s in sentences]
        next_start = 0  # in words from the chapter's start
        for first in range(len(sentences)):
            start = sum(lengths[:first])
            if start < next_start:
                continue
            last, count = first, 0
            while last < len(sentences) and count < passage_words:
                count += lengths[last]
                last += 1
            if count < passage_words:
                break
            text = " ".join(sentences[first:last])
            head = " ".join(text.split()[:name_free_words])
            if _words(head) & all_names or not _words(text) & own_names:
                continue
            found.append((chapter_index, text))
            next_start = start + passage_words // 2
    return found


def write_task(data_dir, passage_words, name_free_words):
    """train.tsv and dev.tsv in SST-2 layout; returns {split: rows}."""
    rows = {"train": [], "dev": []}
    for label, novel in enumerate(TASK_NOVELS):
        for chapter_index, text in passages(novel, passage_words, name_free_words):
            rows["dev" if chapter_index % 4 == 3 else "train"].append((text, str(label)))
    os.makedirs(data_dir, exist_ok=True)
    for split, split_rows in rows.items():
        random.Random(12345).shuffle(split_rows)
        del split_rows[FLAGS.max_passages:]
        with open(os.path.join(data_dir, split + ".tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in split_rows))
    return rows


def run(work_dir, name, extra, epochs=None):
    """Runs run_classifier.py into work_dir/name (training unless `extra` says otherwise) and
    prints its dev accuracy, steps, time and command; returns eval_results and the seconds."""
    data_dir = os.path.join(work_dir, "data")
    command = [
        sys.executable, os.path.join(ROOT, "run_classifier.py"), "--task_name=sst-2",
        "--do_eval=true", f"--data_dir={data_dir}", f"--vocab_file={vocab.bundled_vocab_file()}",
        f"--bert_config_file={os.path.join(work_dir, 'bert_config.json')}",
        f"--max_seq_length={FLAGS.max_seq_length}", "--train_batch_size=32",
        "--learning_rate=3e-4", f"--num_train_epochs={epochs or FLAGS.num_train_epochs:g}",
        "--iterations_per_loop=1000", f"--output_dir={os.path.join(work_dir, name)}", *extra]
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if result.returncode:
        sys.exit(result.stderr[-3000:])
    with open(os.path.join(work_dir, name, "eval_results.txt"), encoding="utf-8") as f:
        values = dict(line.strip().split(" = ") for line in f)
    seconds = time.time() - started
    shown = " ".join(arg.replace(ROOT + "/", "") for arg in command[1:])
    print(f"{name}: eval_accuracy {values['eval_accuracy']}, global_step "
          f"{values['global_step']}, {seconds:.0f} s\n  python {shown}")
    FIGURES.append({"run": name, "eval_accuracy": float(values["eval_accuracy"]),
                    "global_step": int(values["global_step"]), "seconds": seconds,
                    "command": shown})
    return values


def main(_):
    work_dir = FLAGS.work_dir
    rows = write_task(os.path.join(work_dir, "data"), FLAGS.passage_words, FLAGS.name_free_words)
    with open(vocab.bundled_vocab_file(), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    with open(os.path.join(work_dir, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump({"vocab_size": vocab_size, **MODEL}, f, indent=2)
    for split, split_rows in rows.items():
        labels = [label for _, label in split_rows]
        print(f"{split}: {len(split_rows)} passages ({labels.count('0')} Pride and Prejudice, "
              f"{labels.count('1')} Emma)")
    dev_labels = [label for _, label in rows["dev"]]
    majority = max(dev_labels.count("0"), dev_labels.count("1")) / len(dev_labels)
    print(f"dev majority class: {majority:.4f}")
    windowed = ["--long_documents=true", f"--doc_stride={FLAGS.doc_stride}"]
    truncated = run(work_dir, "truncated", ["--do_train=true"])
    windows = run(work_dir, "windows", ["--do_train=true", *windowed])
    steps_ratio = int(windows["global_step"]) / int(truncated["global_step"])
    run(work_dir, "truncated_steps", ["--do_train=true"],
        epochs=round(FLAGS.num_train_epochs * steps_ratio))
    for how in ("max", "first"):
        run(work_dir, f"windows_{how}", [*windowed, f"--window_aggregation={how}",
                                         f"--init_checkpoint={os.path.join(work_dir, 'windows')}"])
    for figure in FIGURES:
        figure["dev_majority"] = majority
    harness.write_results("classifier_long_documents", FIGURES, packages=("tensorflow", "keras"))


if __name__ == "__main__":
    harness.run(main)
