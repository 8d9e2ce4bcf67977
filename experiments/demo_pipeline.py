"""The machinery of demo.py's stages, which its experiments (`--table5`, `--electra`:
experiments/electra.py) run too.

`Pipeline` runs each stage's script as a subprocess in the work folder, prints its command and
progress and times it (wall and CPU seconds); `Scale` is how much data and how many steps the
stages get, `Start` where a fine-tuning starts. The first three stages are here because every
command runs them (the data, the vocabulary and the pre-training records), and so are the demo
tasks' baselines, which Table 5 and the ELECTRA comparison print; demo.py holds the demo's other
stages. TensorFlow is not imported here, only in the stages' processes.
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
import signal
import subprocess
import sys
import time
from typing import Optional

from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus
from demo_data import first_documents, read_novel
from demo_data.names_and_places import capitalised_word_tags, names_and_places_conll
from demo_data.next_sentence import next_sentence_choice_csvs, word_overlap_accuracy
from demo_data.which_novel import novel_task_tsvs
from demo_data.who_questions import first_questions, squad_json


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
    """Runs the stages' commands in `work_dir`, logging each to `work_dir/logs/<name>.log`.

    root: the folder of the scripts and of data/ (demo.py's).
    """

    def __init__(self, root, work_dir, num_stages):
        self.root = root
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
        command = ["python", shown(os.path.join(self.root, script))] + args
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
                [sys.executable, os.path.join(self.root, script)] + args, stdout=subprocess.PIPE,
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


# --- Where the stages start, and the stages every command runs. ---

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
        bundled = os.path.join(pipe.root, "data", "austen_squad", f"{split}-v1.1.json")
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


def stage_vocab(pipe, scale, vocab_file=None):
    """Learns the WordPiece vocabulary from the corpus (or takes `vocab_file`, --vocab_file) and
    writes the model's config with its size. A vocabulary of a few thousand pieces makes the
    masked LM's softmax and the embedding table small: most of a step is then the encoder's."""
    if vocab_file:
        pipe.header(f"Vocabulary: --vocab_file={vocab_file}")
        pipe.vocab_file, times = os.path.abspath(vocab_file), (0.0, 0.0)
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


def task_baselines(pipe, squad, tagger=True):
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
