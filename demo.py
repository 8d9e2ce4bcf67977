"""The whole pipeline in one command, on the bundled Jane Austen novels, on CPU, in minutes.

    python demo.py                      # 316 s measured on 2 CPU cores (docs/demo.md)
    python demo.py --quick              # tiny steps: every stage runs (DEMO_QUICK=1 too)
    python demo.py --table5             # instead: the paper's Table 5 in miniature
    python demo.py --electra            # instead: BERT against ELECTRA at equal CPU time

Each stage runs one of the project's command-line scripts as a subprocess (so the demo also
proves the CLIs) in `--output_dir`, prints its command so that it can be re-run, shows its
progress, and prints its metrics beside their baselines and where its outputs are:

1. data: the six novels become the one-sentence-per-line corpus, one document per novel
   (`bert_tasks.pretraining.data.corpus`); the sentence task "Pride and Prejudice (0) or Emma
   (1)?" in GLUE SST-2 layout, the next-sentence choice task in SWAG CSV layout and the
   names-and-places task in CoNLL-2003 layout are written.
2. `build_vocab.py`: a 2,000-piece uncased WordPiece vocabulary learned from the corpus (or
   `--vocab_file`), and the small BERT's config (L=2, H=128, A=2, I=256, its vocab_size).
3. `create_pretraining_data.py`: masked-LM / next-sentence TFRecords from the corpus (pairs of
   128 word-pieces, 20 masked).
4. `run_pretraining.py`: pre-trains the small BERT from scratch (1,500 steps at batch 32), writes
   an original-layout checkpoint (`--save_tf1_checkpoint`), evaluates masked-LM and next-sentence
   accuracy, printed beside the most frequent masked token's and the majority label's.
5. `run_classifier.py --task_name=sst-2`: fine-tunes it on the novel task; dev accuracy, and
   test accuracy from the GLUE submission file against the labels the demo kept.
6. `run_squad.py`: fine-tunes it on the bundled "who" questions (`data/austen_squad/`), predicts
   the held-out ones and prints the official EM/F1.
7. `run_swag.py`: fine-tunes the classifier further on a SWAG-style task made from the novels
   (which of four sentences comes next?); dev and test accuracy beside the 25% chance and the
   accuracy of matching words.
8. `run_ner.py`: fine-tunes the pre-trained checkpoint to tag the characters' names and the
   places in the novels (labelled by a list of them, `demo_data.names_and_places`),
   trained on early chapters and scored on later ones with conlleval; entity F1 beside the
   every-word-O and capitalised-word baselines.
9. `run_ner.py` again, the same command without `--init_checkpoint`: the same model fine-tuned
   from random weights; both F1s are printed, with what pre-training adds.
10. `extract_features.py`: the last two layers' vectors for a few sentences.

`--table5` runs `experiments.table5` instead: three pre-training objectives on the same
data, each fine-tuned on three of these tasks, printed beside the paper's Table 5
(docs/run_pretraining.md). `--electra` runs `experiments.electra` instead: the demo's BERT and
an ELECTRA of the same size pre-trained for the same CPU seconds, each fine-tuned with several
seeds on the demo's tasks, beside random weights and the ELECTRA paper's figures
(docs/electra_experiment.md).
TensorFlow is not imported here, only in the stages' processes.
`python demo.py --write_squad_data=data/austen_squad` re-creates the bundled SQuAD files from
the novels (the test suite checks that they are identical).
"""
import collections
import contextlib
import csv
import dataclasses
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional

from absl import flags

from bert_runner import cli
from demo_data import NOVELS, first_documents, read_novel
from demo_data.names_and_places import capitalised_word_tags, names_and_places_conll
from demo_data.next_sentence import next_sentence_choice_csvs, word_overlap_accuracy
from experiments import electra as electra_experiment
from experiments.table5 import (
    NOTE as TABLE5_NOTE, PRETRAININGS, ROWS, miniature_table, paper_table)
from demo_data.which_novel import novel_task_tsvs
from demo_data.who_questions import (
    count_questions, first_questions, make_squad_data, squad_json)
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus

ROOT = os.path.dirname(os.path.abspath(__file__))
SQUAD_DATA = os.path.join(ROOT, "data", "austen_squad")
# Marks a folder as the demo's, so that a re-run may clear it (and no other folder).
MARKER = ".bert_demo"

flags.DEFINE_string("output_dir", None,
                    "Work directory for every stage's data and outputs; cleared if it holds an "
                    "earlier demo run, refused if it holds anything else. Default: ./demo_output "
                    "(./table5_output with --table5, ./electra_output with --electra, which keeps "
                    "its folder and reuses the finished runs in it).")
flags.DEFINE_bool("table5", False,
                  "Instead of the demo: the paper's Table 5 in miniature. Pre-trains the model "
                  "three ways on the same data for the same steps (masked LM + next sentence, "
                  "masked LM alone, left-to-right LM), fine-tunes each (and the left-to-right "
                  "one with a BiLSTM on top, and random weights) on the next-sentence, "
                  "which-novel and who-question tasks, and prints the table beside the paper's.")
flags.DEFINE_bool("electra", False,
                  "Instead of the demo: BERT against ELECTRA at equal CPU time. Pre-trains the "
                  "demo's BERT (masked LM + next sentence) and an ELECTRA discriminator of the "
                  "same size (generator 0.25 of its width) on the same records for the same CPU "
                  "seconds of training steps (--electra_cpu_budget), fine-tunes each and random "
                  "weights on the demo's four tasks with --electra_seeds, and prints and writes "
                  "(electra_results.md) the table beside the ELECTRA paper's. Finished runs in "
                  "--output_dir are reused.")
flags.DEFINE_float("electra_cpu_budget", None,
                   "With --electra: the CPU seconds of training steps each pre-training gets "
                   "(its steps: this divided by the CPU seconds per step measured for its "
                   f"objective). Default: {electra_experiment.CPU_BUDGET:g} "
                   f"({electra_experiment.QUICK_CPU_BUDGET:g} with --quick).")
flags.DEFINE_list("electra_seeds", ["1", "2", "3"],
                  "With --electra: the fine-tuning seeds of every row and task.")
flags.register_validator("electra_cpu_budget", lambda v: v is None or v > 0,
                         "--electra_cpu_budget must be a positive number of CPU seconds")
flags.register_validator(
    "electra_seeds", lambda v: bool(v) and all(re.fullmatch(r"\d+", s) for s in v)
    and len(set(v)) == len(v), "--electra_seeds must be distinct non-negative integers, e.g. 1,2,3")
flags.DEFINE_bool("quick", os.environ.get("DEMO_QUICK", "").lower() in ("1", "true", "yes"),
                  "Tiny data and a few steps per stage: checks the pipeline in one to two minutes, "
                  "without meaningful metrics. Default: true when the environment variable "
                  "DEMO_QUICK is 1.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocabulary (uncased) to use instead of the one the demo learns from "
                    "the novels with build_vocab.py; its size is the model's vocab_size.")
flags.DEFINE_string("write_squad_data", None,
                    "Only write the bundled SQuAD files (train-v1.1.json, dev-v1.1.json) made from "
                    "the novels to this folder, then exit.")
FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Scale:
    """How much data and how many steps each stage gets."""
    pretraining_novels: tuple
    pretraining_chapters: Optional[int]  # the first chapters of each novel; None: all
    vocab_size: int                # build_vocab.py --vocab_size
    vocab_min_count: int           # build_vocab.py --min_count
    intermediate_size: int         # the model's feed-forward width (MODEL holds the rest)
    dupe_factor: int
    pretraining_seq_length: int
    max_predictions_per_seq: int
    pretraining_batch: int
    pretraining_steps: int
    pretraining_learning_rate: float
    sentences_per_label: tuple     # (train, dev, test) sentences per novel
    classifier_seq_length: int
    classifier_batch: int
    classifier_epochs: float
    squad_questions: tuple         # (train, dev) first questions; None: all the bundled ones
    squad_seq_length: int
    squad_doc_stride: int
    squad_query_length: int
    squad_batch: int
    squad_epochs: float
    swag_examples: tuple           # (train, dev, test) examples of the next-sentence choice task
    swag_seq_length: int
    swag_batch: int
    swag_epochs: float
    ner_chapters: tuple            # (train, dev) chapters of each task novel, after the title
    ner_seq_length: int
    ner_batch: int
    ner_epochs: float
    eval_steps: int


FULL = Scale(
    pretraining_novels=NOVELS, pretraining_chapters=None, vocab_size=2000, vocab_min_count=10,
    intermediate_size=256, dupe_factor=1, pretraining_seq_length=128, max_predictions_per_seq=20,
    pretraining_batch=32, pretraining_steps=1500, pretraining_learning_rate=5e-4,
    sentences_per_label=(800, 200, 100), classifier_seq_length=64, classifier_batch=32,
    classifier_epochs=3.0, squad_questions=(None, None), squad_seq_length=128,
    squad_doc_stride=64, squad_query_length=48, squad_batch=16, squad_epochs=3.0,
    swag_examples=(2800, 350, 350), swag_seq_length=64, swag_batch=16, swag_epochs=1.0,
    ner_chapters=(2, 2), ner_seq_length=64, ner_batch=32, ner_epochs=15.0, eval_steps=25)
# --table5: the settings it was measured with (docs/run_pretraining.md).
TABLE5 = dataclasses.replace(FULL, intermediate_size=512, swag_epochs=2.0)
QUICK = Scale(
    pretraining_novels=("persuasion",), pretraining_chapters=3, vocab_size=400, vocab_min_count=2,
    intermediate_size=256, dupe_factor=1, pretraining_seq_length=64, max_predictions_per_seq=10,
    pretraining_batch=8, pretraining_steps=4, pretraining_learning_rate=3e-4,
    sentences_per_label=(16, 8, 8), classifier_seq_length=32, classifier_batch=8,
    classifier_epochs=1.0, squad_questions=(16, 8), squad_seq_length=64, squad_doc_stride=32,
    squad_query_length=24, squad_batch=8, squad_epochs=1.0, swag_examples=(16, 8, 8),
    swag_seq_length=32, swag_batch=8, swag_epochs=1.0, ner_chapters=(1, 1), ner_seq_length=32,
    ner_batch=16, ner_epochs=1.0, eval_steps=2)

# BERT-Base's settings but 2 layers of width 128 and a feed-forward width of 256 or 512
# (`Scale.intermediate_size`): trains on CPU in minutes. The encoder's arithmetic is most of a
# pre-training step, and the feed-forward layers most of that: at 256 a step takes a quarter less
# time than at 512, with the same masked-LM and a better next-sentence accuracy after 1,500
# steps (docs/demo.md).
MODEL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
             hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
             max_position_embeddings=128, type_vocab_size=2, initializer_range=0.02)

FEATURE_SENTENCES = (
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife.",
    "Emma Woodhouse, handsome, clever, and rich, seemed to unite some of the best blessings of "
    "existence.",
    "Who danced with Elizabeth? ||| Mr. Darcy danced with Elizabeth.",
)


def steps_per_log(num_examples, batch_size, epochs):
    """`--iterations_per_loop` for about 5 progress lines over the run's training steps (the
    scripts log once per loop), computed as the scripts compute their step count."""
    return max(1, int(num_examples / batch_size * epochs) // 5)


# --- Data the demo writes at run time. ---

def write_text(path, text):
    """Writes through a temporary name, so no stage ever reads a half-written file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


# --- Running the stages. ---

# Log lines worth showing while a stage runs: progress, training steps, what was written.
_PROGRESS = re.compile(
    r"(step \d+/\d+|\| ETA|Wrote |wrote \d+ features|Predicted \d+ features|\d+/\d+ examples|"
    r"Running (training|evaluation|prediction)|Num (split )?examples|Num steps)")
# The trainer's log line after each loop of training steps (bert_runner/trainer.py `_log`).
_TRAINING_STEP = re.compile(r"\bstep (\d+)/\d+ loss ")
# Scripts whose outputs their command and input file determine: --electra reuses them.
DATA_SCRIPTS = ("build_vocab.py", "create_pretraining_data.py")
_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


def shown(path):
    """`path` as the printed commands spell it: relative to the current folder when inside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


# How long an interrupted stage may take to remove its incomplete outputs before it is killed.
_STAGE_STOP_SECONDS = 120


@contextlib.contextmanager
def _stopped_with(process):
    """Passes an interruption of this script (Ctrl-C, `kill`) on to the stage's `process` and
    waits for it to remove its incomplete outputs: a signal sent to this process alone would
    otherwise leave the stage running on (SIGINT) or wait for it to finish (SIGTERM)."""
    try:
        yield
    except KeyboardInterrupt as interruption:
        if process.poll() is None:
            process.send_signal(getattr(interruption, "signum", signal.SIGINT))
            try:
                process.wait(timeout=_STAGE_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        raise


class Pipeline:
    """Runs the stages' commands in `work_dir`, logging each to `work_dir/logs/<name>.log`."""

    def __init__(self, work_dir, num_stages):
        self.work_dir = work_dir
        self.num_stages = num_stages
        self.done = []          # (stage title, (wall seconds, CPU seconds), metrics text)
        self.start = time.monotonic()
        # --electra keeps its folder: the vocabulary and the records are not made again.
        self.reuse_data_stages = False

    def path(self, *parts):
        return os.path.join(self.work_dir, *parts)

    def header(self, title):
        print(f"\n[{len(self.done) + 1}/{self.num_stages}] {title}  "
              f"(at {time.monotonic() - self.start:.0f} s)", flush=True)

    def run(self, name, script, marks=None, **flag_values):
        """Runs `python <script> --flag=value ...`, echoing its progress lines.

        marks: a list to which each training log line ("step N/M loss ...") appends (N, the
        process's CPU seconds at that line), to time the steps apart from the process's start.
        Returns (wall seconds, CPU seconds) of the command. Exits the demo with the log's tail if
        the command fails. With `reuse_data_stages`, a data script whose same command finished
        on the same input (logs/<name>.done) is not run again: its recorded times are returned.
        """
        args = [f"--{k}={v}" for k, v in flag_values.items()]
        command = ["python", shown(os.path.join(ROOT, script))] + args
        print("  $ " + shlex.join(command), flush=True)
        log_path = self.path("logs", name + ".log")
        done_path = self.path("logs", name + ".done")
        reusable = self.reuse_data_stages and script in DATA_SCRIPTS
        done = reusable and {"command": command,
                             "input_sha256": _file_sha256(flag_values.get("input_file"))}
        if (reusable and os.path.exists(done_path)
                and os.path.exists(flag_values.get("output_file", ""))):
            with open(done_path, encoding="utf-8") as f:
                recorded = json.load(f)
            if {k: recorded.get(k) for k in done} == done:
                print(f"    reused: the same command finished on the same input "
                      f"({shown(log_path)})", flush=True)
                return tuple(recorded["times"])
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
        start, cpu_start = time.monotonic(), _children_cpu_seconds()
        tail = collections.deque(maxlen=25)
        with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
                [sys.executable, os.path.join(ROOT, script)] + args, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, env=env) as process, \
                _stopped_with(process):
            for line in process.stdout:
                log.write(line)
                tail.append(line.rstrip())
                step = _TRAINING_STEP.search(line) if marks is not None else None
                if step:
                    cpu = process_cpu_seconds(process.pid)
                    if cpu is not None:
                        marks.append((int(step.group(1)), cpu))
                if _PROGRESS.search(line):
                    message = _ABSL_PREFIX.sub("", line.rstrip())
                    print(f"    {time.monotonic() - start:5.0f} s  {message}", flush=True)
        if process.returncode:
            print("\n".join("  | " + line for line in tail), file=sys.stderr)
            sys.exit(f"demo: {script} failed (exit status {process.returncode}); "
                     f"full log: {shown(log_path)}")
        times = time.monotonic() - start, _children_cpu_seconds() - cpu_start
        if reusable:
            write_text(done_path, json.dumps({**done, "times": times}) + "\n")
        return times

    def report(self, title, times, metrics, outputs):
        """Prints and records a finished stage; `times` = (wall seconds, CPU seconds)."""
        print(f"  done in {times[0]:.0f} s ({times[1]:.0f} s CPU): {metrics}\n"
              f"  outputs: {outputs}", flush=True)
        self.done.append((title, times, metrics))

    def summary(self):
        total = time.monotonic() - self.start
        cpu = time.process_time() + _children_cpu_seconds()
        print(f"\nAll {len(self.done)} stages done in {total:.0f} s, {cpu:.0f} s CPU "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs).")
        width = max(len(title) for title, *_ in self.done)
        print(f"  {'stage':<{width}}  wall s  CPU s")
        for title, (wall, cpu), metrics in self.done:
            print(f"  {title:<{width}}  {wall:6.0f}  {cpu:5.0f}  {metrics}")
        print(f"Outputs and logs: {shown(self.work_dir)}")


def process_cpu_seconds(pid):
    """The user + system CPU seconds of a running process, all its threads (/proc/<pid>/stat's
    utime and stime); None where /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command's name: state is field 3 of stat(5), utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _file_sha256(path):
    if not path or not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def prepare_work_dir(work_dir, keep=False):
    """Creates `work_dir` (with `logs/`), clearing an earlier demo run's (keeping it with `keep`:
    --electra reuses its finished runs); refuses other folders."""
    if os.path.isdir(work_dir) and os.listdir(work_dir):
        if not os.path.exists(os.path.join(work_dir, MARKER)):
            sys.exit(f"demo: --output_dir={work_dir} is not empty and not an earlier demo's "
                     f"folder: choose another --output_dir")
        if not keep:
            shutil.rmtree(work_dir)
    os.makedirs(os.path.join(work_dir, "logs"), exist_ok=True)
    write_text(os.path.join(work_dir, MARKER), "Made by demo.py; cleared by its next run (kept "
               "by --electra, which reuses its finished runs).\n")


def read_eval_report(output_dir):
    """({metric: float}, {metric: baseline text}) of a stage's evaluation: the eval_report.json
    the scripts write beside eval_results.txt (`bert_runner.results.write_eval_report`)."""
    from bert_runner import results

    report = results.read_eval_report(output_dir)
    if report is None:
        raise ValueError(f"{output_dir} has no eval_report.json: the stage evaluated nothing")
    return report["metrics"], report["baselines"]


@dataclasses.dataclass(frozen=True)
class Start:
    """Where a fine-tuning stage starts: the checkpoint of a pre-training run, or random weights.

    folder: where the stages' outputs go ("" for the demo's own run; Table 5 has one folder per
      row).
    pretraining: the folder whose `pretraining/` run it starts from (its bert_model.ckpt and, when
      the run wrote one, its bert_config.json); None: random weights (the demo's config, no
      --init_checkpoint).
    flags: more fine-tuning flags, (name, value) pairs (Table 5's `bilstm_on_top`).
    weights: False: random weights with the config of `pretraining` (the demo's comparison: the
      same command without --init_checkpoint).
    """
    label: str
    folder: str = ""
    pretraining: Optional[str] = ""
    flags: tuple = ()
    weights: bool = True

    def output(self, pipe, name):
        os.makedirs(pipe.path(self.folder), exist_ok=True)
        return pipe.path(self.folder, name)

    def log(self, name):
        return f"{self.folder.replace(os.sep, '_')}_{name}" if self.folder else name

    def model_flags(self, pipe, checkpoint=None):
        """--bert_config_file (the pre-training run's own when it wrote one: it records an LTR
        model's objective), --init_checkpoint (`checkpoint` if given) and `flags`."""
        config = pipe.path("bert_config.json")
        if self.pretraining is not None:
            pretraining = pipe.path(self.pretraining, "pretraining")
            if os.path.exists(os.path.join(pretraining, "bert_config.json")):
                config = os.path.join(pretraining, "bert_config.json")
            if self.weights:
                checkpoint = checkpoint or os.path.join(pretraining, "bert_model.ckpt")
        values = {"bert_config_file": shown(config)}
        if checkpoint:
            values["init_checkpoint"] = shown(checkpoint)
        return {**values, **dict(self.flags)}


PRETRAINED = Start("the pre-trained checkpoint")
RANDOM = Start("random weights, for comparison", folder="random_init", weights=False)


def stage_data(pipe, scale):
    pipe.header("Data: corpus, model config, the novel task")
    start, cpu_start = time.monotonic(), time.process_time()
    # One document per novel, as BooksCorpus's documents were books: next sentence prediction's
    # random B then always comes from another novel (names and style tell it apart), which a
    # model this small learns in a few minutes; with chapters as documents it did not.
    corpus = "".join(
        "".join(line + "\n" for line in first_documents(
            gutenberg_to_corpus(read_novel(n)), scale.pretraining_chapters).splitlines() if line)
        + "\n" for n in scale.pretraining_novels)
    write_text(pipe.path("corpus.txt"), corpus)
    os.makedirs(pipe.path("novels"), exist_ok=True)
    files, test_labels = novel_task_tsvs(scale.sentences_per_label)
    for name, text in files.items():
        write_text(pipe.path("novels", name), text)
    os.makedirs(pipe.path("next_sentence"), exist_ok=True)
    # The choice task starts from the classifier (stage 6): none of its sentences is one the
    # classifier was trained on.
    classifier_sentences = {line.split("\t")[0] for line in files["train.tsv"].splitlines()[1:]}
    files, swag_labels = next_sentence_choice_csvs(scale.swag_examples, classifier_sentences)
    for name, text in files.items():
        write_text(pipe.path("next_sentence", name), text)
    os.makedirs(pipe.path("names_and_places"), exist_ok=True)
    files, ner_sentences = names_and_places_conll(scale.ner_chapters)
    for name, text in files.items():
        write_text(pipe.path("names_and_places", name), text)
    squad = {}
    for split, limit in zip(("train", "dev"), scale.squad_questions):
        bundled = os.path.join(SQUAD_DATA, f"{split}-v1.1.json")
        if limit is None:
            squad[split] = bundled
        else:
            with open(bundled, encoding="utf-8") as f:
                squad[split] = pipe.path(f"squad-{split}.json")
                write_text(squad[split], squad_json(first_questions(json.load(f), limit)))
    write_text(pipe.path("sentences.txt"), "\n".join(FEATURE_SENTENCES) + "\n")
    documents = len(scale.pretraining_novels)
    pipe.report("data", (time.monotonic() - start, time.process_time() - cpu_start),
                f"{documents} novel(s) as documents, {len(corpus.splitlines()) - documents} "
                f"sentences, {len(corpus) / 1e6:.2f} MB",
                f"{shown(pipe.path('corpus.txt'))}, {shown(pipe.path('novels'))}/, "
                f"{shown(pipe.path('next_sentence'))}/, {shown(pipe.path('names_and_places'))}/")
    return test_labels, squad, swag_labels, ner_sentences


def stage_vocab(pipe, scale):
    """Learns the WordPiece vocabulary from the corpus (or takes --vocab_file) and writes the
    model's config with its size. A vocabulary of a few thousand pieces makes the masked LM's
    softmax and the embedding table small: most of a step is then the encoder's."""
    if FLAGS.vocab_file:
        pipe.header(f"Vocabulary: --vocab_file={FLAGS.vocab_file}")
        pipe.vocab_file, times = os.path.abspath(FLAGS.vocab_file), (0.0, 0.0)
    else:
        pipe.header("build_vocab.py: a WordPiece vocabulary learned from the corpus")
        pipe.vocab_file = pipe.path("vocab.txt")
        # No [unusedN] slots: ids 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK], every other id a piece.
        times = pipe.run(
            "build_vocab", "build_vocab.py", input_file=shown(pipe.path("corpus.txt")),
            output_file=shown(pipe.vocab_file), vocab_size=scale.vocab_size, num_unused=0,
            min_count=scale.vocab_min_count, do_lower_case=True)
    with open(pipe.vocab_file, encoding="utf-8") as f:
        tokens = f.read().splitlines()
    write_text(pipe.path("bert_config.json"),
               json.dumps({"vocab_size": len(tokens), **MODEL,
                           "intermediate_size": scale.intermediate_size}, indent=2) + "\n")
    pieces = [t for t in tokens if not t.startswith("[")]
    # The file ends with the least frequent pieces learned (after the single characters).
    rarest = [t for t in pieces if len(t.lstrip("#")) > 1][-8:]
    pipe.report("vocabulary", times,
                f"vocab_size {len(tokens)}; {sum(t.startswith('##') for t in pieces)} of the "
                f"pieces continue a word (##); the last learned: {' '.join(rarest)}",
                f"{shown(pipe.vocab_file)}, {shown(pipe.path('bert_config.json'))}")


def stage_pretraining_data(pipe, scale, start=PRETRAINED, objective=None, **data_flags):
    pipe.header(f"create_pretraining_data.py: {objective or 'masked LM / next sentence'} examples")
    output = start.output(pipe, "pretraining_data.tfrecord")
    times = pipe.run(
        start.log("create_pretraining_data"), "create_pretraining_data.py", **data_flags,
        input_file=shown(pipe.path("corpus.txt")), output_file=shown(output),
        vocab_file=shown(pipe.vocab_file), do_lower_case=True,
        max_seq_length=scale.pretraining_seq_length,
        max_predictions_per_seq=scale.max_predictions_per_seq, masked_lm_prob=0.15,
        random_seed=12345, dupe_factor=scale.dupe_factor)
    with open(pipe.path("logs", start.log("create_pretraining_data") + ".log"),
              encoding="utf-8") as f:
        written = re.findall(r"Wrote (\d+) total instances", f.read())
    pipe.report(start.log("create_pretraining_data"), times, f"{written[-1]} instances", shown(output))


def stage_pretraining(pipe, scale, start=PRETRAINED, objective=None, **pretraining_flags):
    """Returns the evaluation's accuracies, {metric: (value, baseline text)}."""
    pipe.header(f"run_pretraining.py: pre-train the small BERT from scratch"
                f"{' (' + objective + ')' if objective else ''}")
    output_dir = start.output(pipe, "pretraining")
    times = pipe.run(
        start.log("run_pretraining"), "run_pretraining.py", **pretraining_flags,
        input_file=shown(start.output(pipe, "pretraining_data.tfrecord")),
        output_dir=shown(output_dir),
        bert_config_file=shown(pipe.path("bert_config.json")), do_train=True, do_eval=True,
        train_batch_size=scale.pretraining_batch, eval_batch_size=scale.pretraining_batch,
        max_seq_length=scale.pretraining_seq_length,
        max_predictions_per_seq=scale.max_predictions_per_seq,
        num_train_steps=scale.pretraining_steps,
        # The masked LM first learns the words' frequencies, then (after a few hundred steps)
        # their contexts; at 1e-3 and 2e-3 it never left the first stage in 1,000 steps
        # (docs/demo.md).
        num_warmup_steps=scale.pretraining_steps // 20,
        learning_rate=scale.pretraining_learning_rate,
        iterations_per_loop=max(1, scale.pretraining_steps // 5),
        max_eval_steps=scale.eval_steps, save_tf1_checkpoint=True)
    # The baselines are computed by the task from the evaluated records: the most frequent
    # masked token, the majority next-sentence label.
    results, baselines = read_eval_report(output_dir)
    accuracies = {m: (v, baselines[m]) for m, v in results.items() if m.endswith("_accuracy")}
    pipe.report(start.log("run_pretraining"), times, ", ".join(
        f"{m.replace('_', ' ')} {v:.3f} (baseline: {b})" for m, (v, b) in accuracies.items())
                + f", loss {results['loss']:.3f} after {results['global_step']:.0f} steps",
                f"{shown(output_dir)}/ (eval_results.txt, bert_model.ckpt)")
    return accuracies


def stage_classifier(pipe, scale, test_labels, start=PRETRAINED):
    """Fine-tunes the novel classifier from `start`. Returns (dev accuracy, test accuracy)."""
    pipe.header(f"run_classifier.py: Pride and Prejudice (0) or Emma (1)? (SST-2 layout), "
                f"from {start.label}")
    output_dir = start.output(pipe, "classifier")
    times = pipe.run(
        start.log("run_classifier"), "run_classifier.py",
        task_name="sst-2", do_train=True, do_eval=True, do_predict=True,
        data_dir=shown(pipe.path("novels")), vocab_file=shown(pipe.vocab_file),
        **start.model_flags(pipe), max_seq_length=scale.classifier_seq_length, train_batch_size=scale.classifier_batch,
        eval_batch_size=32, predict_batch_size=32, learning_rate=3e-4,
        num_train_epochs=scale.classifier_epochs,
        iterations_per_loop=steps_per_log(2 * scale.sentences_per_label[0],
                                          scale.classifier_batch, scale.classifier_epochs),
        output_dir=shown(output_dir))
    results, _ = read_eval_report(output_dir)
    with open(os.path.join(output_dir, "SST-2.tsv"), encoding="utf-8") as f:
        predicted = [line.split("\t")[1].strip() for line in f.readlines()[1:]]
    test_accuracy = sum(p == l for p, l in zip(predicted, test_labels)) / len(test_labels)
    pipe.report(start.log("run_classifier"), times,
                f"dev accuracy {results['eval_accuracy']:.3f}, test accuracy {test_accuracy:.3f} "
                f"({len(test_labels)} sentences; chance 0.500)",
                f"{shown(output_dir)}/ (eval_results.txt, test_results.tsv, SST-2.tsv)")
    return results["eval_accuracy"], test_accuracy


def print_comparison(pretrained, random):
    """The tagger's dev F1 (overall, PER, LOC) from pre-trained and from random weights."""
    print("\n  names and places, fine-tuned from   dev F1    PER    LOC")
    for label, scores in (("the pre-trained checkpoint", pretrained),
                          ("random weights", random)):
        print(f"  {label:<34}" + "".join(f"{v:7.1f}" for v in scores))
    print(f"  {'pre-training adds':<34}" + "".join(
        f"{p - r:+7.1f}" for p, r in zip(pretrained, random)), flush=True)


def stage_squad(pipe, scale, squad, start=PRETRAINED):
    """Returns the official (exact match, F1)."""
    pipe.header(f"run_squad.py: who-questions on the novels (SQuAD v1.1 format), "
                f"from {start.label}")
    output_dir = start.output(pipe, "squad")
    with open(squad["train"], encoding="utf-8") as f:
        num_train = count_questions(json.load(f))
    times = pipe.run(
        start.log("run_squad"), "run_squad.py",
        vocab_file=shown(pipe.vocab_file), **start.model_flags(pipe), do_train=True, train_file=shown(squad["train"]),
        do_predict=True, predict_file=shown(squad["dev"]),
        train_batch_size=scale.squad_batch, predict_batch_size=32, learning_rate=3e-4,
        num_train_epochs=scale.squad_epochs,
        iterations_per_loop=steps_per_log(num_train, scale.squad_batch, scale.squad_epochs),
        max_seq_length=scale.squad_seq_length,
        doc_stride=scale.squad_doc_stride, max_query_length=scale.squad_query_length,
        output_dir=shown(output_dir))
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        scores = json.load(f)
    with open(squad["dev"], encoding="utf-8") as f:
        dev = json.load(f)
    with open(os.path.join(output_dir, "predictions.json"), encoding="utf-8") as f:
        predictions = json.load(f)
    examples = [(qa["question"], qa["answers"][0]["text"], predictions[qa["id"]])
                for article in dev["data"] for p in article["paragraphs"] for qa in p["qas"]][:3]
    for question, gold, predicted in examples:
        print(f"    {question}  gold: {gold!r}  predicted: {predicted!r}")
    pipe.report(start.log("run_squad"), times,
                f"exact match {scores['exact_match']:.1f}, F1 {scores['f1']:.1f} on "
                f"{count_questions(dev)} held-out questions",
                f"{shown(output_dir)}/ (predictions.json, nbest_predictions.json, "
                f"eval_results.json)")
    return scores["exact_match"], scores["f1"]


def newest_checkpoint(directory):
    """`directory/ckpt-<step>` with the highest step: the end of a stage's training."""
    steps = [int(m.group(1)) for m in map(re.compile(r"ckpt-(\d+)\.index$").match,
                                          os.listdir(directory)) if m]
    return os.path.join(directory, f"ckpt-{max(steps)}")


def stage_swag(pipe, scale, test_labels, start=PRETRAINED, checkpoint=None):
    """Fine-tunes the choice of the next sentence from `start` (or its `checkpoint`).
    Returns (dev accuracy, test accuracy)."""
    pipe.header(f"run_swag.py: which sentence comes next? (SWAG layout, 4 choices), from "
                f"{shown(checkpoint) if checkpoint else start.label}")
    output_dir = start.output(pipe, "swag")
    times = pipe.run(
        start.log("run_swag"), "run_swag.py",
        do_train=True, do_eval=True, do_predict=True,
        data_dir=shown(pipe.path("next_sentence")), vocab_file=shown(pipe.vocab_file),
        **start.model_flags(pipe, checkpoint),
        max_seq_length=scale.swag_seq_length, train_batch_size=scale.swag_batch,
        eval_batch_size=32, predict_batch_size=32, learning_rate=5e-5,
        num_train_epochs=scale.swag_epochs,
        iterations_per_loop=steps_per_log(scale.swag_examples[0], scale.swag_batch,
                                          scale.swag_epochs),
        output_dir=shown(output_dir))
    results, _ = read_eval_report(output_dir)
    with open(os.path.join(output_dir, "test_results.tsv"), encoding="utf-8") as f:
        probabilities = [[float(p) for p in line.split("\t")] for line in f]
    predicted = [row.index(max(row)) for row in probabilities]
    with open(pipe.path("next_sentence", "test.csv"), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for row, choice, label in list(zip(rows, predicted, test_labels))[:2]:
        print(f"    {row['sent1']} ...  predicted: {row[f'ending{choice}']!r} "
              f"({'right' if choice == label else 'wrong; true: ' + repr(row[f'ending{label}'])})")
    test_accuracy = sum(p == l for p, l in zip(predicted, test_labels)) / len(test_labels)
    pipe.report(start.log("run_swag"), times,
                f"dev accuracy {results['eval_accuracy']:.3f}, test accuracy {test_accuracy:.3f} "
                f"({len(test_labels)} examples; chance 0.250, word overlap "
                f"{word_overlap_accuracy(rows, test_labels):.3f})",
                f"{shown(output_dir)}/ (eval_results.txt, test_results.tsv)")
    return results["eval_accuracy"], test_accuracy


def stage_ner(pipe, scale, sentences, start=PRETRAINED):
    """Fine-tunes the names-and-places tagger from `start`. Returns the dev F1 (overall, PER,
    LOC)."""
    from bert_tasks.ner import conlleval

    pipe.header(f"run_ner.py: characters' names and places in the novels (CoNLL-2003 layout), "
                f"from {start.label}")
    output_dir = start.output(pipe, "names_and_places_ner")
    times = pipe.run(
        start.log("run_ner"), "run_ner.py",
        do_train=True, do_eval=True, data_dir=shown(pipe.path("names_and_places")),
        vocab_file=shown(pipe.vocab_file), **start.model_flags(pipe),
        max_seq_length=scale.ner_seq_length, train_batch_size=scale.ner_batch,
        eval_batch_size=32, learning_rate=3e-4, num_train_epochs=scale.ner_epochs,
        # About one window per sentence (longer ones take several).
        iterations_per_loop=steps_per_log(len(sentences["train.txt"]), scale.ner_batch,
                                          scale.ner_epochs),
        output_dir=shown(output_dir))
    results, _ = read_eval_report(output_dir)
    dev_sentences = sentences["dev.txt"]
    gold = [tags for _, tags in dev_sentences]
    baselines = {name: conlleval.metrics(conlleval.count_sequences(gold, predicted))["overall"]
                 for name, predicted in (
                     ("every word O", [["O"] * len(tags) for tags in gold]),
                     ("capitalised words as PER", [capitalised_word_tags(w)
                                                    for w, _ in dev_sentences]))}
    # Two dev sentences with names or places (columns: word, gold, predicted), the predicted
    # entities in brackets.
    with open(os.path.join(output_dir, "eval_predictions.txt"), encoding="utf-8") as f:
        blocks = [[line.split() for line in block.splitlines()] for block in f.read().split("\n\n")]
    with_entities = [b for b in blocks if b and b[0][0] != "-DOCSTART-"
                     and any(gold != "O" for _, gold, _ in b)]
    for block in with_entities[:2]:
        print("    " + " ".join(w if p == "O" else f"[{w}]{p[2:]}" for w, _, p in block[:30]))
    per_type = ", ".join(f"{t} {results[f'eval_f1_{t}']:.1f}" for t in ("PER", "LOC")
                         if f"eval_f1_{t}" in results)
    pipe.report(start.log("run_ner"), times,
                f"dev entity F1 {results['eval_f1']:.1f} ({per_type}; baselines: " + ", ".join(
                    f"{name} {scores['f1']:.1f}" for name, scores in baselines.items()) + ")",
                f"{shown(output_dir)}/ (eval_results.txt, eval_predictions.txt, "
                f"eval_conlleval.txt)")
    return tuple(results.get(f"eval_f1{t}", 0.0) for t in ("", "_PER", "_LOC"))


def stage_features(pipe):
    pipe.header("extract_features.py: contextual vectors of a few sentences")
    output = pipe.path("features.jsonl")
    times = pipe.run(
        "extract_features", "extract_features.py",
        input_file=shown(pipe.path("sentences.txt")), output_file=shown(output),
        vocab_file=shown(pipe.vocab_file), **PRETRAINED.model_flags(pipe), layers="-1,-2",
        max_seq_length=64, batch_size=8)
    with open(output, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    for record in records:
        tokens = [t["token"] for t in record["features"]]
        values = record["features"][0]["layers"][0]["values"]
        print(f"    line {record['linex_index']}: {len(tokens)} tokens "
              f"({' '.join(tokens[:8])} ...), layer -1 of [CLS]: [{values[0]}, {values[1]}, ...] "
              f"({len(values)} values)")
    pipe.report("extract_features", times,
                f"{len(records)} lines, layers -1 and -2, {len(values)} values per token",
                shown(output))


def table5(pipe, scale):
    """The paper's Table 5 in miniature (`experiments.table5`)."""
    test_labels, squad, swag_labels, _ = stage_data(pipe, scale)
    stage_vocab(pipe, scale)
    pretraining_accuracies = {}
    for pretraining in PRETRAININGS:
        start = Start("", folder=pretraining.folder, pretraining=pretraining.folder)
        stage_pretraining_data(pipe, scale, start, pretraining.description,
                               **dict(pretraining.data_flags))
        pretraining_accuracies[pretraining.description] = stage_pretraining(
            pipe, scale, start, pretraining.description, **dict(pretraining.pretraining_flags))
    results = {}
    for row in ROWS:
        start = Start(row.name, folder=row.folder, flags=row.fine_tuning_flags,
                      pretraining=row.pretraining and row.pretraining.folder)
        results[row.name] = (stage_swag(pipe, scale, swag_labels, start)[0],
                             stage_classifier(pipe, scale, test_labels, start)[0],
                             stage_squad(pipe, scale, squad, start)[1])
    pipe.summary()
    print("\nPre-training (same data and steps; accuracies beside their baselines):")
    for description, accuracies in pretraining_accuracies.items():
        print(f"  {description}: " + ", ".join(
            f"{m.replace('_', ' ')} {v:.3f} (baseline: {b})" for m, (v, b) in accuracies.items()))
    baselines, footnote = electra_baselines(pipe, squad, tagger=False)
    print("\n" + paper_table() + "\n\n" + miniature_table(results, [
        (name, [values.get(key) for key in ("next_sentence", "which_novel", "who_questions")])
        for name, values in baselines]) + "\n")
    print(footnote + "\n")
    print(TABLE5_NOTE)


# --- --electra: BERT against ELECTRA at equal CPU time (experiments/electra.py). ---

ELECTRA_DIR = "electra"


def _pretraining_flags(pipe, scale, pretraining, steps, output_dir, evaluate=True):
    """run_pretraining.py's flags: the demo's pre-training settings for both objectives (ELECTRA's
    own defaults, batch 128, would not be the same run), `steps` of them."""
    values = dict(
        pretraining.flags, input_file=shown(pipe.path(ELECTRA_DIR, "pretraining_data.tfrecord")),
        output_dir=shown(output_dir),
        bert_config_file=shown(pipe.path(ELECTRA_DIR, pretraining.config_file)),
        do_train=True, train_batch_size=scale.pretraining_batch,
        max_seq_length=scale.pretraining_seq_length,
        max_predictions_per_seq=scale.max_predictions_per_seq, num_train_steps=steps,
        num_warmup_steps=steps // 20, learning_rate=scale.pretraining_learning_rate)
    if evaluate:
        values.update(do_eval=True, eval_batch_size=scale.pretraining_batch,
                      max_eval_steps=scale.eval_steps)
    return values


def electra_calibrate(pipe, scale, pretraining):
    """CPU seconds per training step of `pretraining` on this machine: a short run, timed between
    its first and last training log lines. Kept in electra/calibration.json and reused while the
    settings are the same (the steps of the runs already made depend on it)."""
    pipe.header(f"run_pretraining.py: CPU seconds per step of {pretraining.name} (a short run)")
    steps, loop = ((electra_experiment.QUICK_CALIBRATION_STEPS,
                    electra_experiment.QUICK_CALIBRATION_LOOP) if FLAGS.quick else
                   (electra_experiment.CALIBRATION_STEPS, electra_experiment.CALIBRATION_LOOP))
    output_dir = pipe.path(ELECTRA_DIR, "calibration", pretraining.folder)
    values = _pretraining_flags(pipe, scale, pretraining, steps, output_dir, evaluate=False)
    with open(values["bert_config_file"], encoding="utf-8") as f:
        settings = {"flags": {k: v for k, v in values.items() if k != "output_dir"},
                    "config": json.load(f), "cpu": _cpu_name(), "iterations_per_loop": loop}
    path = pipe.path(ELECTRA_DIR, "calibration.json")
    recorded = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            recorded = json.load(f)
    earlier = recorded.get(pretraining.folder)
    if earlier and earlier["settings"] == settings:
        print(f"  reused: {earlier['seconds_per_step']:.4f} CPU s per step, measured earlier "
              f"({shown(path)}; delete it to measure again)", flush=True)
        pipe.report(f"calibrate {pretraining.folder}", (0.0, 0.0),
                    f"{earlier['seconds_per_step']:.4f} CPU s/step (earlier run)", shown(path))
        return earlier["seconds_per_step"]
    # A finished run there would be restored, not trained, and time nothing.
    shutil.rmtree(output_dir, ignore_errors=True)
    marks = []
    times = pipe.run(f"calibrate_{pretraining.folder}", "run_pretraining.py", marks=marks,
                     iterations_per_loop=loop, **values)
    seconds = electra_experiment.cpu_seconds_per_step(marks)
    recorded[pretraining.folder] = {"settings": settings, "seconds_per_step": seconds,
                                    "marks": marks}
    write_text(path, json.dumps(recorded, indent=2) + "\n")
    shutil.rmtree(output_dir, ignore_errors=True)  # its checkpoints are of no further use
    pipe.report(f"calibrate {pretraining.folder}", times,
                f"{seconds:.4f} CPU s per step (steps {marks[0][0]}-{marks[-1][0]}: "
                f"{marks[-1][1] - marks[0][1]:.1f} CPU s)", shown(path))
    return seconds


def _eval_metrics(output_dir):
    """`read_eval_report` without importing TensorFlow into this process: ({metric: value},
    {metric: baseline text}) of output_dir/eval_report.json."""
    path = os.path.join(output_dir, "eval_report.json")
    if not os.path.exists(path):
        raise ValueError(f"{output_dir} has no eval_report.json: the stage evaluated nothing")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    return report["metrics"], report["baselines"]


def _cpu_name():
    """The CPU's model name (the calibration is this machine's)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = re.findall(r"^model name\s*:\s*(.+)$", f.read(), re.M)
    except OSError:
        names = []
    return f"{names[0] if names else 'unknown CPU'} x{os.cpu_count()}"


def _flops_per_step(log):
    """The model's FLOPs per training step as the trainer logs them (its TFLOP/s over its
    steps/s, the last training line of the `log` text), or None."""
    lines = re.findall(r"([\d.]+) steps/s .* ([\d.]+) model TFLOP/s", log)
    if not lines:
        return None
    steps_per_s, tflops = map(float, lines[-1])
    return tflops * 1e12 / steps_per_s if steps_per_s else None


def electra_pretrain(pipe, scale, pretraining, budget_dir, seconds_per_step, budget):
    """Pre-trains `pretraining` for the steps that spend `budget` CPU seconds at
    `seconds_per_step`. Returns its row of the pre-training table (a dict)."""
    steps = electra_experiment.steps_for_budget(budget, seconds_per_step, minimum=4)
    pipe.header(f"run_pretraining.py: {pretraining.name}, {steps} steps "
                f"({budget:g} CPU s / {seconds_per_step:.4f} CPU s per step)")
    output_dir = pipe.path(budget_dir, pretraining.folder, "pretraining")
    os.makedirs(output_dir, exist_ok=True)
    marks = []
    name = f"{budget_dir.replace(os.sep, '_')}_{pretraining.folder}_run_pretraining"
    times = pipe.run(name, "run_pretraining.py", marks=marks,
                     iterations_per_loop=max(1, steps // 10),
                     **_pretraining_flags(pipe, scale, pretraining, steps, output_dir))
    with open(pipe.path("logs", name + ".log"), encoding="utf-8") as f:
        log = f.read()
    # What the run itself spent; a finished run restored (not trained) keeps its first record.
    timing_path = os.path.join(output_dir, "cpu_seconds.json")
    timing = {"per_step": None, "process_cpu": times[1], "wall": times[0], "reused": False,
              "resumed": "Resuming from" in log,
              "flops_per_step": _flops_per_step(log)}
    if len(marks) >= 2:
        timing["per_step"] = electra_experiment.cpu_seconds_per_step(marks)
    if "already holds a finished run" in log and os.path.exists(timing_path):
        with open(timing_path, encoding="utf-8") as f:
            timing = {**json.load(f), "reused": True}
    elif not timing["resumed"]:
        write_text(timing_path, json.dumps({**timing, "marks": marks}, indent=2) + "\n")
    results, baselines = _eval_metrics(output_dir)
    # The discriminator's precision and recall add little beside its accuracy and AUC.
    metrics = ", ".join(f"{m.replace('_', ' ')} {v:.3f} (baseline: {baselines[m]})"
                        for m, v in results.items()
                        if m in baselines and m not in ("disc_precision", "disc_recall"))
    flops = timing.get("flops_per_step")
    row = {"name": pretraining.name, "steps": steps, "calibration": seconds_per_step,
           "per_step": timing["per_step"], "process_cpu": timing["process_cpu"],
           "wall": timing["wall"], "reused": timing["reused"], "metrics": metrics,
           "gflops_per_step": flops and flops / 1e9}
    spent = ("-" if timing["per_step"] is None
             else f"{timing['per_step'] * steps:.0f} CPU s of training steps")
    pipe.report(name, times, f"{steps} steps, {spent}; {metrics}",
                f"{shown(output_dir)}/ (ckpt-{steps}, bert_config.json, eval_report.json)")
    return row


def electra_start(pipe, budget_dir, row):
    """(folder of the row's fine-tuning outputs, its model flags): the row's pre-training
    directory as --init_checkpoint with the bert_config.json that run wrote, or random weights
    with the demo's config."""
    for pretraining in electra_experiment.PRETRAININGS:
        if pretraining.name == row:
            pretrained = pipe.path(budget_dir, pretraining.folder, "pretraining")
            return os.path.join(budget_dir, pretraining.folder), {
                "bert_config_file": shown(os.path.join(pretrained, "bert_config.json")),
                "init_checkpoint": shown(pretrained)}
    return os.path.join(ELECTRA_DIR, "random_init"), {
        "bert_config_file": shown(pipe.path("bert_config.json"))}


def electra_fine_tune(pipe, scale, budget_dir, row, task, seeds, squad):
    """Fine-tunes `row`'s start on `task` once per seed (`--seeds`, or one run_squad.py per
    seed, which has no such flag). Returns the task's metric per seed."""
    folder, model = electra_start(pipe, budget_dir, row)
    pipe.header(f"{task.script}: {task.title}, from {row}, seeds {','.join(map(str, seeds))}")
    output_dir = pipe.path(folder, task.key)
    name = f"{folder.replace(os.sep, '_')}_{task.key}"
    # The demo's fine-tuning settings; the same layer-wise rates for both families (ELECTRA's
    # default would be 0.8): only the starting weights differ between rows.
    common = dict(vocab_file=shown(pipe.vocab_file), **model, layerwise_lr_decay=1.0,
                  do_train=True)
    if task.key != "who_questions":
        data, length, batch, learning_rate, epochs, examples, extra = {
            "next_sentence": ("next_sentence", scale.swag_seq_length, scale.swag_batch, 5e-5,
                              scale.swag_epochs, scale.swag_examples[0], {}),
            "which_novel": ("novels", scale.classifier_seq_length, scale.classifier_batch, 3e-4,
                            scale.classifier_epochs, 2 * scale.sentences_per_label[0],
                            {"task_name": "sst-2"}),
            "names_places": ("names_and_places", scale.ner_seq_length, scale.ner_batch, 3e-4,
                             scale.ner_epochs, _count_sentences(pipe.path(
                                 "names_and_places", "train.txt")), {}),
        }[task.key]
        times = pipe.run(
            name, task.script, **extra, **common, do_eval=True, eval_batch_size=32,
            data_dir=shown(pipe.path(data)), max_seq_length=length, train_batch_size=batch,
            learning_rate=learning_rate, num_train_epochs=epochs,
            iterations_per_loop=steps_per_log(examples, batch, epochs),
            seeds=",".join(map(str, seeds)), output_dir=shown(output_dir))
        values = [_eval_metrics(os.path.join(output_dir, f"seed_{seed}"))[0][task.metric]
                  for seed in seeds]
    else:
        with open(squad["train"], encoding="utf-8") as f:
            num_train = count_questions(json.load(f))
        wall = cpu = 0.0
        values = []
        for seed in seeds:
            seed_dir = os.path.join(output_dir, f"seed_{seed}")
            seed_times = pipe.run(
                f"{name}_seed_{seed}", task.script, **common, train_file=shown(squad["train"]),
                do_predict=True, predict_file=shown(squad["dev"]),
                train_batch_size=scale.squad_batch, predict_batch_size=32, learning_rate=3e-4,
                num_train_epochs=scale.squad_epochs,
                iterations_per_loop=steps_per_log(num_train, scale.squad_batch,
                                                  scale.squad_epochs),
                max_seq_length=scale.squad_seq_length, doc_stride=scale.squad_doc_stride,
                max_query_length=scale.squad_query_length, random_seed=seed,
                output_dir=shown(seed_dir))
            wall, cpu = wall + seed_times[0], cpu + seed_times[1]
            with open(os.path.join(seed_dir, "eval_results.json"), encoding="utf-8") as f:
                values.append(json.load(f)[task.metric])
        times = (wall, cpu)
    shown_values = [electra_experiment.shown_value(task, v) for v in values]
    mean, std = electra_experiment.mean_std(shown_values)
    pipe.report(name, times, f"{task.title} {mean:.1f} ± {std:.1f} (seeds: " + ", ".join(
        f"{v:.1f}" for v in shown_values) + ")", f"{shown(output_dir)}/seed_<seed>/")
    return values


def _count_sentences(conll_path):
    """The blank-line separated blocks of a CoNLL file (its sentences, and its -DOCSTART-
    lines): about the tagger's training windows, for its progress lines."""
    with open(conll_path, encoding="utf-8") as f:
        return sum(1 for block in f.read().split("\n\n") if block.strip())


def electra_baselines(pipe, squad, tagger=True):
    """The table's baseline rows, [(name, {task key: value in the table's units})], and a line
    saying what they are: the majority label (the most frequent training answer for the who
    questions, every word O for the tagger); a simple rule where the demo has one (word
    overlap, capitalised words as PER). `tagger=False`: without the tagger's (Table 5 has no
    tagger column)."""
    from bert_tasks.ner import conlleval
    from bert_tasks.squad.evaluate import evaluate

    with open(pipe.path("next_sentence", "val.csv"), encoding="utf-8", newline="") as f:
        choice_rows = list(csv.DictReader(f))
    choice_labels = [int(row["label"]) for row in choice_rows]
    with open(pipe.path("novels", "dev.tsv"), encoding="utf-8") as f:
        novel_labels = [line.rstrip("\n").split("\t")[1] for line in f.readlines()[1:]]
    with open(squad["train"], encoding="utf-8") as f:
        train = json.load(f)
    with open(squad["dev"], encoding="utf-8") as f:
        dev = json.load(f)
    answers = collections.Counter(qa["answers"][0]["text"] for article in train["data"]
                                  for p in article["paragraphs"] for qa in p["qas"])
    frequent = answers.most_common(1)[0][0]
    squad_f1 = evaluate(dev, {qa["id"]: frequent for article in dev["data"]
                              for p in article["paragraphs"] for qa in p["qas"]})["f1"]
    def majority(labels):
        return 100.0 * collections.Counter(labels).most_common(1)[0][1] / len(labels)

    baselines = [
        ("majority label", {
            "next_sentence": majority(choice_labels), "which_novel": majority(novel_labels),
            "who_questions": squad_f1}),
        ("a simple rule", {
            "next_sentence": 100.0 * word_overlap_accuracy(choice_rows, choice_labels)}),
    ]
    if tagger:
        with open(pipe.path("names_and_places", "dev.txt"), encoding="utf-8") as f:
            blocks = [[line.split() for line in block.splitlines() if line.strip()]
                      for block in f.read().split("\n\n")]
        sentences = [b for b in blocks if b and b[0][0] != "-DOCSTART-"]
        gold = [[tags[-1] for tags in b] for b in sentences]

        def ner_f1(predicted):
            return conlleval.metrics(conlleval.count_sequences(gold, predicted))["overall"]["f1"]

        baselines[0][1]["names_places"] = ner_f1([["O"] * len(tags) for tags in gold])
        baselines[1][1]["names_places"] = ner_f1([capitalised_word_tags([t[0] for t in b])
                                                 for b in sentences])
    footnote = (f"Baselines, on the same dev sets: *majority label*: the most frequent dev label "
                f"(the choice's chance is 25.0), for the who questions always the most frequent "
                f"training answer (\"{frequent}\")"
                + (", for the tagger every word O" if tagger else "")
                + "; *a simple rule*: the ending sharing the most words of 4+ letters with the "
                "context" + (", every capitalised word (not first in its sentence) as PER"
                             if tagger else "") + ".")
    return baselines, footnote


def electra(pipe, scale):
    """BERT against ELECTRA at equal CPU time (`experiments.electra`)."""
    budget = FLAGS.electra_cpu_budget or (electra_experiment.QUICK_CPU_BUDGET if FLAGS.quick
                                          else electra_experiment.CPU_BUDGET)
    seeds = [int(seed) for seed in FLAGS.electra_seeds]
    pipe.reuse_data_stages = True
    _, squad, _, _ = stage_data(pipe, scale)
    stage_vocab(pipe, scale)
    stage_pretraining_data(pipe, scale, Start("", folder=ELECTRA_DIR))
    with open(pipe.path("bert_config.json"), encoding="utf-8") as f:
        bert_config = json.load(f)
    write_text(pipe.path(ELECTRA_DIR, "bert_config.json"), json.dumps(bert_config, indent=2) + "\n")
    write_text(pipe.path(ELECTRA_DIR, "electra_config.json"), json.dumps(
        electra_experiment.electra_config(bert_config), indent=2) + "\n")
    per_step = {p.name: electra_calibrate(pipe, scale, p)
                for p in electra_experiment.PRETRAININGS}
    # Another budget pre-trains into another folder: the finished runs of each are kept.
    budget_dir = os.path.join(ELECTRA_DIR, f"cpu_{budget:g}s")
    runs = [electra_pretrain(pipe, scale, p, budget_dir, per_step[p.name], budget)
            for p in electra_experiment.PRETRAININGS]
    results = {}
    for row in electra_experiment.ROWS:
        results[row] = {task.key: electra_fine_tune(pipe, scale, budget_dir, row, task, seeds,
                                                    squad)
                        for task in electra_experiment.TASKS}
    pipe.summary()
    flops = [r["gflops_per_step"] for r in runs]
    baselines, footnote = electra_baselines(pipe, squad)
    text = "\n\n".join([
        f"## BERT against ELECTRA at equal CPU time ({budget:g} CPU s of pre-training steps "
        f"each, {_cpu_name()}; fine-tuning seeds {', '.join(map(str, seeds))})",
        electra_experiment.results_table(results, baselines), footnote,
        electra_experiment.pretraining_table(runs)
        + ("" if None in flops else "\n\nThe model's FLOPs per training step (the trainer's "
           "count): " + ", ".join(f"{r['name']} {r['gflops_per_step']:.1f} GFLOP"
                                  for r in runs) + "."),
        electra_experiment.paper_table(),
        electra_experiment.note(bert_config, batch=scale.pretraining_batch,
                                learning_rate=scale.pretraining_learning_rate)])
    path = pipe.path("electra_results.md")
    write_text(path, text + "\n")
    print("\n" + text)
    print(f"Written to {shown(path)}")


def main(argv):
    del argv
    if FLAGS.write_squad_data:
        os.makedirs(FLAGS.write_squad_data, exist_ok=True)
        for split, dataset in make_squad_data().items():
            path = os.path.join(FLAGS.write_squad_data, f"{split}-v1.1.json")
            write_text(path, squad_json(dataset))
            print(f"{path}: {count_questions(dataset)} questions")
        return
    if FLAGS.table5 and FLAGS.electra:
        sys.exit("demo: --table5 and --electra are two experiments: run one at a time")
    scale = QUICK if FLAGS.quick else TABLE5 if FLAGS.table5 else FULL
    work_dir = os.path.abspath(FLAGS.output_dir or (
        "./table5_output" if FLAGS.table5 else "./electra_output" if FLAGS.electra
        else "./demo_output"))
    prepare_work_dir(work_dir, keep=FLAGS.electra)
    # Table 5: data, vocabulary, 2 stages per pre-training, 3 fine-tunings per row. --electra:
    # data, vocabulary, records, a calibration and a pre-training per objective, a fine-tuning
    # per row and task.
    pipe = Pipeline(work_dir, num_stages=2 + 2 * len(PRETRAININGS) + 3 * len(ROWS)
                    if FLAGS.table5 else 3 + 2 * len(electra_experiment.PRETRAININGS)
                    + len(electra_experiment.ROWS) * len(electra_experiment.TASKS)
                    if FLAGS.electra else 10)
    title = ("Table 5 in miniature" if FLAGS.table5 else "against ELECTRA at equal CPU time"
             if FLAGS.electra else "demo")
    print(f"BERT {title}{' (--quick)' if FLAGS.quick else ''}: every stage runs one of the "
          f"project's scripts in {shown(work_dir)}; logs in {shown(pipe.path('logs'))}/")
    if FLAGS.table5:
        table5(pipe, scale)
        return
    if FLAGS.electra:
        electra(pipe, scale)
        return
    test_labels, squad, swag_labels, ner_sentences = stage_data(pipe, scale)
    stage_vocab(pipe, scale)
    stage_pretraining_data(pipe, scale)
    stage_pretraining(pipe, scale)
    stage_classifier(pipe, scale, test_labels)
    stage_squad(pipe, scale, squad)
    # From the classifier, whose encoder has learnt which words belong to which novel: the
    # choice's distractors come from the other novel (docs/demo.md).
    stage_swag(pipe, scale, swag_labels,
               checkpoint=newest_checkpoint(PRETRAINED.output(pipe, "classifier")))
    # The paper's claim in miniature: the same fine-tuning from the pre-trained checkpoint and from
    # random weights (same flags, steps and seed).
    pretrained = stage_ner(pipe, scale, ner_sentences)
    print_comparison(pretrained, stage_ner(pipe, scale, ner_sentences, RANDOM))
    stage_features(pipe)
    pipe.summary()


if __name__ == "__main__":
    cli.run(main)
