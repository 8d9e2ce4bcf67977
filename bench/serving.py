r"""Serving on CPU, raw text in, each task's answers out, every format against transformers: for
the classifier, the tagger (NER) and SQuAD, our SavedModel (float32 and bfloat16), ONNX Runtime
(float32 and dynamic int8) and LiteRT at each precision, each answered through `predict.py`'s own
`Predictor`, against transformers on the Hugging Face export of the same model; same weights,
same inputs, same threads, one process.

    python -m bench.serving --num_threads=2     # BERT-Base; classifier, NER and SQuAD
    python -m bench.serving --tasks=squad --litert=dynamic_int8 --nobfloat16
    python -m bench.serving --config=tiny --inputs=8 --repeats=1 --warmup=1   # smoke run

Each task's model is BERT-Base (--config) with random weights (--seed; the original's
initializer), its head the task's: 2 labels; the tags O, B-/I-PER, LOC, ORG, MISC; start and
end logits. Its exports are the files `export_model.py` writes (the same functions); each
contender answers the task's inputs as `predict.py` prints them (`Predictor.predict`: tokenizer,
windows and post-processing included):
  SavedModel (default) the task's raw-text SavedModel as export_model.py writes it by default
                       (--format=classifier, ner, squad: SQuAD's windows at their own length).
  SavedModel (--full_width_windows)  SQuAD's with run_squad.py's windows of max_seq_length.
  SavedModel bf16      the same with bfloat16 weights (--mixed_precision=bf16; --bfloat16): for
                       CPUs with bfloat16 units (AMX, AVX512_BF16).
  ONNX Runtime <q>     --format=onnx --quantization=<q> (float32, dynamic_int8: ONNX Runtime's
                       quantize_dynamic), onnxruntime's CPU provider behind the task's module.
  LiteRT <q>           --format=litert --quantization=<q> (--litert): the classifier's raw-text
                       graph (one text a call); the tagger's and SQuAD's graph on token ids at
                       [1, max_seq_length] behind the task's module. Full int8 is the
                       classifier's only (calibrated on --calibration_inputs other sentences,
                       one text a call); the tasks refuse it.
  HF pipeline          transformers on `export_model.py --format=huggingface`'s directory of the
                       same model (BertForSequenceClassification, BertForTokenClassification,
                       BertForQuestionAnswering) with its fast tokenizer: pipeline("text-
                       classification", top_k=None), pipeline("token-classification",
                       aggregation_strategy="first"), and pipeline("question-answering") where
                       the installed transformers has it (4.x). transformers 5 removed that one:
                       there the peer is what it did, written out (bench/hf_question_answering.py):
                       the fast tokenizer's windows (--doc_stride, offsets), the model, and each
                       question's best span of at most 30 word-pieces inside its context. The
                       pipeline itself, beside transformers 5 elsewhere:
                         python -m venv --system-site-packages /tmp/hf4
                         /tmp/hf4/bin/pip install "transformers>=4.57,<5"
                         USE_TF=0 /tmp/hf4/bin/python -m bench.serving --tasks=squad
SQuAD's exports run each group of windows at its own length (export_model.py's default); the
"--full_width_windows" contender is run_squad's own windows of max_seq_length. (Random weights
give the padding's positions logits as high as the text's, so its n-best is often all padding
and its answer "empty", as run_squad's would be.)

Agreement, before timing, with the float32 SavedModel on every input: the classifier's label
(and its largest probability difference), NER's entities (type and character span), SQuAD's
answer text. The answers of random weights are not accuracy: the per-task accuracy of each
format on real data is bench/export_accuracy.py's (docs/export.md).

Inputs: --input's Austen sentences for the classifier and NER (shuffled with --seed); the
questions and contexts of --squad_file for SQuAD. Each round runs every contender in turn on the
same --inputs inputs: at batch 1, one call per input, each timed (latency p50 and p99 over all
timed calls); at --batch_size, the inputs in calls of that many (throughput: inputs/s, median of
the rounds). --warmup untimed rounds first. For the contenders that run an engine behind our
module or tokenizer (ONNX Runtime's session, a LiteRT interpreter), each batch-1 call's seconds
inside that engine too: their p50 ("engine p50"), and the ratio to the peer a module costing
nothing would give ("ceiling"): where the ceiling is under a goal, the engine's arithmetic, not
our code around it, is what keeps the contender from it. Threads: --num_threads intra-op and
inter-op for TensorFlow and torch (and the peer's Rust tokenizer, `harness.set_threads`),
intra-op for onnxruntime and LiteRT. A contender whose package is missing is left out with a
line saying so.
Last, `predict.py`'s first answer of every format: the seconds from starting it with one input
to its exit (median of --first_answer_runs), what a one-off user waits for, and where they go,
from predict.py's own log lines (`--verbosity=0`): loading the export (`Predictor(...)`, no call
made), its first call (building and optimising the signature's graph, or tracing the task's
module around an ONNX or LiteRT graph, then computing), and the rest (Python, importing
TensorFlow, reading the inputs, printing).
"""
import glob
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time

import numpy as np
from absl import app, flags

from bench import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Named encoder shapes: BERT-Base (the target) and a small one for quick runs.
CONFIGS = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512),
}
TASKS = ("classifier", "ner", "squad")
CLASSIFIER_LABELS = ["0", "1"]
ENTITY_TYPES = ["PER", "LOC", "ORG", "MISC"]
BASELINE = "HF pipeline"
# The contender each task's export_model.py command gives without options, and SQuAD's flag
# that keeps run_squad.py's windows.
DEFAULT, FULL_WIDTH = "SavedModel (default)", "--full_width_windows"
MAX_ANSWER_LENGTH = 30  # run_squad's default, the peer's too
# Whose versions the machine line and the figures name (those installed).
PACKAGES = ("tensorflow", "tensorflow-text", "keras", "tokenizers", "torch", "transformers",
            "ai-edge-litert", "onnxruntime", "tf2onnx")

flags.DEFINE_list("tasks", list(TASKS), "Tasks to time: classifier, ner, squad.")
flags.DEFINE_enum("config", "base", sorted(CONFIGS),
                  "Encoder shape (512 positions, 2 token types).")
flags.DEFINE_string("input", "data/austen/*.txt", "Glob of UTF-8 text files, paragraphs separated "
                    "by blank lines: the classifier's and NER's sentences.")
flags.DEFINE_string("squad_file", "data/austen_squad/dev-v1.1.json",
                    "SQuAD-format JSON: SQuAD's questions and contexts.")
flags.DEFINE_string("vocab_file", "vocab/uncased_L-12_H-768_A-12/vocab.txt",
                    "Uncased WordPiece vocab.")
flags.DEFINE_integer("max_seq_length", 128, "The classifier's and NER's sequence length.")
flags.DEFINE_integer("squad_max_seq_length", 384, "SQuAD's windows (run_squad's default).")
flags.DEFINE_integer("doc_stride", 128, "SQuAD's window stride (run_squad's default).")
flags.DEFINE_integer("first_answer_runs", 3, "predict.py's first answer: runs per format (0: not "
                     "timed).", lower_bound=0)
flags.DEFINE_integer("batch_size", 32, "Inputs per call for the throughput figures.")
flags.DEFINE_integer("inputs", 64, "Inputs per round (batch-1 calls and throughput).")
flags.DEFINE_integer("repeats", 3, "Timed rounds.")
flags.DEFINE_integer("warmup", 1, "Untimed rounds before them.")
flags.DEFINE_list("litert", ["float32", "float16", "dynamic_int8", "int8"],
                  "LiteRT precisions to time (empty: none; int8: the classifier only).")
flags.DEFINE_list("onnx", ["float32", "dynamic_int8"],
                  "ONNX Runtime precisions to time (empty: none).")
flags.DEFINE_integer("calibration_inputs", 100, "Sentences calibrating the classifier's LiteRT "
                     "int8 (none of the timed ones).")
flags.DEFINE_bool("peer", True, "Time transformers on the Hugging Face export.")
flags.DEFINE_bool("bfloat16", True, "Also time the SavedModel exported with bfloat16 weights.")
flags.DEFINE_integer("num_threads", os.cpu_count(), "Threads of every contender (see above).")
flags.DEFINE_integer("seed", 0, "Seed of the weights and of the sentence order.")
FLAGS = flags.FLAGS


def read_sentences(pattern, count, seed):
    """`count` sentences (str) of the files' paragraphs, in a seeded random order."""
    sentences = []
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8") as f:
            for paragraph in re.split(r"\n\s*\n", f.read()):
                text = " ".join(paragraph.split())
                sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])", text)
                              if len(s.split()) >= 3]
    if len(sentences) < count:
        raise SystemExit("%s: %d sentences, %d needed" % (pattern, len(sentences), count))
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def read_questions(path, count):
    """`count` predict.py inputs "question<TAB>context" of a SQuAD file (repeated if short)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    pairs = [" ".join(qa["question"].split()) + "\t" + " ".join(p["context"].split())
             for article in data for p in article["paragraphs"] for qa in p["qas"]]
    return (pairs * (count // len(pairs) + 1))[:count]


class Task:
    """One task's model, exports and answers (`kind`: its model's; `fmt`: its SavedModel's
    --format)."""

    def __init__(self, name):
        self.name = name
        self.kind, self.fmt = {"classifier": ("classifier", "classifier"),
                               "ner": ("token", "ner"), "squad": ("span", "squad")}[name]
        self.labels = {"classifier": CLASSIFIER_LABELS, "squad": None}.get(name)
        if name == "ner":
            from bert_tasks.ner import tags

            self.labels = tags.label_list(ENTITY_TYPES)
        self.max_seq_length = (FLAGS.squad_max_seq_length if name == "squad"
                               else FLAGS.max_seq_length)

    def build_model(self, sizes, seed):
        """The task's model with random weights (the original's initializer, seeded)."""
        import keras

        from modeling import BertConfig, families

        keras.utils.set_random_seed(seed)
        config = BertConfig(**sizes, vocab_size=30522, max_position_embeddings=512,
                            type_vocab_size=2, hidden_act="gelu")
        model = families.build_model(self.kind, config,
                                     *(() if self.labels is None else (len(self.labels),)))
        ids = np.ones((1, 8), np.int32)
        model({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})  # its weights
        return model

    def squad_settings(self, trim_windows):
        from bert_tasks.squad.task import PostprocessOptions

        return (FLAGS.doc_stride, 64, PostprocessOptions(max_answer_length=MAX_ANSWER_LENGTH),
                trim_windows)

    def export_saved_model(self, model, export_dir, trim_windows=True):
        """`export_model.py --format=<task>`'s SavedModel of `model` (SQuAD's windows at their
        own length, as by default, unless `trim_windows` is False: --full_width_windows)."""
        vocab, seq = FLAGS.vocab_file, self.max_seq_length
        if self.name == "classifier":
            from bert_tasks.classifier import raw_text

            return raw_text.export_classifier(model, vocab, True, seq, self.labels, export_dir)
        if self.name == "ner":
            from bert_tasks.ner import raw_text

            return raw_text.export_ner(model, vocab, True, seq, self.labels, export_dir)
        from bert_tasks.squad import raw_text

        doc_stride, max_query_length, options, trim = self.squad_settings(trim_windows)
        return raw_text.export_squad(model, vocab, True, seq, doc_stride, max_query_length,
                                     options, export_dir, trim)

    def convertible(self, model):
        """The `registry.Convertible` export_model.py --format=onnx and litert convert."""
        if self.name == "classifier":
            from bert_tasks.classifier import raw_text

            return raw_text.convertible(model, self.labels)
        if self.name == "ner":
            from bert_tasks.ner import raw_text

            return raw_text.convertible(model, self.labels)
        from bert_tasks.squad import raw_text

        return raw_text.convertible(model, self.max_seq_length,
                                    *self.squad_settings(True))

    def key(self, result):
        """What agreement compares of a predict.py result: the label, the entities (type,
        characters), the answer text."""
        if self.name == "classifier":
            return result["label"]
        if self.name == "ner":
            return tuple((e["label"], e["start"], e["end"]) for e in result["entities"])
        return result["answer"].strip()


def hf_runner(task, directory):
    """transformers on the Hugging Face export `directory`: inputs -> results keyed as ours."""
    import transformers

    if task.name == "classifier":
        pipe = transformers.pipeline("text-classification", model=directory, device="cpu",
                                     top_k=None)

        def classify(texts):
            results = pipe(texts, batch_size=len(texts), truncation=True,
                           max_length=task.max_seq_length)
            return [{"label": max(r, key=lambda s: s["score"])["label"],
                     "probabilities": {s["label"]: s["score"] for s in r}} for r in results]

        return classify
    if task.name == "ner":
        pipe = transformers.pipeline("token-classification", model=directory, device="cpu",
                                     aggregation_strategy="first")

        def tag(texts):
            return [{"entities": [{"label": e["entity_group"], "start": e["start"],
                                   "end": e["end"]} for e in found]}
                    for found in pipe(texts, batch_size=len(texts))]

        return tag
    from transformers.pipelines import SUPPORTED_TASKS

    if "question-answering" in SUPPORTED_TASKS:  # transformers 4
        pipe = transformers.pipeline("question-answering", model=directory, device="cpu")

        def answer(inputs):
            questions, contexts = zip(*(text.split("\t") for text in inputs))
            found = pipe(question=list(questions), context=list(contexts),
                         max_seq_len=task.max_seq_length, doc_stride=FLAGS.doc_stride,
                         max_answer_len=MAX_ANSWER_LENGTH, batch_size=len(inputs))
            return [{"answer": r["answer"]} for r in (found if isinstance(found, list)
                                                      else [found])]

        return answer
    from bench.hf_question_answering import HfQuestionAnswering

    peer = HfQuestionAnswering(directory, task.max_seq_length, FLAGS.doc_stride,
                               MAX_ANSWER_LENGTH)
    return lambda inputs: peer(*map(list, zip(*(text.split("\t") for text in inputs))))


def directory_mb(path):
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
               for f in fs) / 1e6


def build_runners(task, model, calibration, tmp):
    """({name: inputs -> predict.py results}, {name: MB on disk}, {name: the export's directory,
    ours only}); contenders whose packages are missing, or that a task refuses, are left out
    with a line saying so."""
    from bert_runner.serving import conversion, litert, onnx
    from bert_runner.serving.predictor import Predictor
    from modeling import checkpoint as checkpoints

    exports = {}
    exports[DEFAULT] = task.export_saved_model(model, os.path.join(tmp, "saved"))
    if task.name == "squad":
        exports[f"SavedModel ({FULL_WIDTH})"] = task.export_saved_model(
            model, os.path.join(tmp, "saved_full_width"), trim_windows=False)
    if FLAGS.bfloat16:
        from modeling.inference import with_bfloat16_weights

        exports["SavedModel bf16"] = task.export_saved_model(
            with_bfloat16_weights(model), os.path.join(tmp, "saved_bf16"))
    convertible = task.convertible(model)
    for quantization in FLAGS.onnx:
        name = f"ONNX Runtime {quantization}"
        try:
            exports[name] = os.path.dirname(onnx.write_onnx(
                convertible, FLAGS.vocab_file, True, task.max_seq_length,
                os.path.join(tmp, "onnx_" + quantization), quantization))
        except ValueError as e:  # the ONNX packages are missing
            print(f"{name} left out: {e}")
        conversion.release_memory()
    for quantization in FLAGS.litert:
        name, directory = f"LiteRT {quantization}", os.path.join(tmp, "litert_" + quantization)
        start = time.perf_counter()
        try:
            if convertible.litert_ids:
                if quantization == "int8":
                    raise ValueError("full int8 is calibrated on a classifier's texts")
                litert.write_ids_litert(convertible, FLAGS.vocab_file, True, task.max_seq_length,
                                        quantization, directory)
            else:
                module = litert.text_module(convertible, FLAGS.vocab_file, True,
                                            task.max_seq_length)
                litert.write_litert(module, quantization, directory, calibration)
        except ValueError as e:  # refused (full int8's accuracy check, a task's int8)
            print(f"{name} left out: {e}")
            continue
        print(f"{name}: converted in {time.perf_counter() - start:.0f} s", flush=True)
        exports[name] = directory
        conversion.release_memory()
    runners, sizes, served = {}, {}, {}
    for name, directory in exports.items():
        try:
            predictor = Predictor(directory, num_threads=FLAGS.num_threads)
        except ValueError as e:  # ai-edge-litert or onnxruntime missing
            print(f"{name} left out: {e}")
            continue
        runners[name], sizes[name] = predictor.predict, directory_mb(directory)
        served[name] = directory
    if FLAGS.peer:
        try:
            directory = checkpoints.write_hugging_face(model, os.path.join(tmp, "hf"),
                                                       FLAGS.vocab_file, True, head=True,
                                                       labels=task.labels)
            runners[BASELINE], sizes[BASELINE] = hf_runner(task, directory), directory_mb(
                os.path.join(directory, "model.safetensors"))
        except ImportError as e:
            print(f"{BASELINE} left out: {e}")
    return runners, sizes, served


def agreement(task, runners, inputs):
    """Lines: each contender's answers against the float32 SavedModel's on `inputs`."""
    reference = DEFAULT
    expected = runners[reference](inputs)
    lines = []
    for name, run in runners.items():
        got = run(inputs)
        same = np.mean([task.key(a) == task.key(b) for a, b in zip(got, expected)])
        line = f"  {name:26s} {same:7.1%} of {len(inputs)} {task.name} answers the same"
        if task.name == "classifier":
            difference = max(abs(a["probabilities"][label] - b["probabilities"][label])
                             for a, b in zip(got, expected) for label in task.labels)
            line += f", max |p - p_{reference}| {difference:.1e}"
        lines.append(line)
    return reference, lines


class EngineClock:
    """While installed (`with`), the seconds spent inside an inference engine: onnxruntime's
    `InferenceSession.run` and a LiteRT signature runner's call, wrapped in this process. What a
    task's module (tokenizer, windows, answers) adds to a call around an engine is the call's
    time less these; a SavedModel's or the peer's calls run no such engine."""

    def __init__(self):
        self.seconds = 0.0
        self._wrapped = []

    def __enter__(self):
        for cls, name in self._entry_points():
            original = getattr(cls, name)

            def timed(*args, _original=original, **kwargs):
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start

            setattr(cls, name, timed)
            self._wrapped.append((cls, name, original))
        return self

    def __exit__(self, *exc_info):
        for cls, name, original in reversed(self._wrapped):
            setattr(cls, name, original)
        self._wrapped.clear()

    @staticmethod
    def _entry_points():
        """(class, method) of each installed engine's call."""
        import importlib

        points = []
        for module, cls, name in (("onnxruntime", "InferenceSession", "run"),
                                  ("ai_edge_litert.interpreter", "SignatureRunner", "__call__"),
                                  ("tensorflow.lite.python.interpreter", "SignatureRunner",
                                   "__call__")):
            try:
                points.append((getattr(importlib.import_module(module), cls), name))
            except (ImportError, AttributeError):
                pass
        return points


def latency_rounds(runners, inputs, batch_size, repeats, warmup):
    """({name: [seconds of each batch-1 call]}, {name: [seconds of each batch-1 call inside an
    engine, `EngineClock`]}, {name: [seconds per round at batch_size]})."""
    clock = EngineClock()

    def measure(run):
        latencies, engine = [], []
        for text in inputs:
            clock.seconds = 0.0
            latencies.append(harness.wall_seconds(lambda text=text: run([text])))
            engine.append(clock.seconds)
        return latencies, engine, harness.wall_seconds(lambda: [
            run(inputs[i:i + batch_size]) for i in range(0, len(inputs), batch_size)])

    with clock:
        figures = harness.time_rounds(runners, repeats, warmup, measure, progress=True)
    return ({name: [s for latencies, _, _ in values for s in latencies]
             for name, values in figures.items()},
            {name: [s for _, engine, _ in values for s in engine]
             for name, values in figures.items()},
            {name: [seconds for _, _, seconds in values] for name, values in figures.items()})


def report(task_name, latencies, engine, rounds, sizes_mb, count):
    """The table: batch-1 p50/p99 latency, the engine's part of the p50 call and the ceiling it
    sets, batch throughput, ratios to the HF peer; its rows written as JSON lines too."""
    p50 = {name: np.percentile(values, 50) * 1e3 for name, values in latencies.items()}
    p99 = {name: np.percentile(values, 99) * 1e3 for name, values in latencies.items()}
    # The engine's seconds of the calls (`EngineClock`), where the contender runs one.
    engine_p50 = {name: np.percentile(values, 50) * 1e3 for name, values in engine.items()
                  if any(values)}
    throughput = {name: count / statistics.median(values) for name, values in rounds.items()}
    print(f"batch 1: {len(next(iter(latencies.values())))} calls each; batch "
          f"{FLAGS.batch_size}: median of {FLAGS.repeats} rounds after {FLAGS.warmup} warm-up; "
          f"engine: the p50 of each call's time inside onnxruntime or LiteRT, and the p50 ratio "
          f"a module around it that cost nothing would give (its ceiling)")
    base = BASELINE if BASELINE in p50 else DEFAULT
    print(f"| contender | MB | p50 ms | p99 ms | engine p50 ms | ceiling vs {base} | inputs/s "
          f"@{FLAGS.batch_size} | p50 vs {base} | inputs/s vs {base} |\n"
          f"|---|---|---|---|---|---|---|---|---|")
    for name in latencies:
        engine_ms, ceiling = ((f"{engine_p50[name]:.1f}", f"{p50[base] / engine_p50[name]:.2f}x")
                              if name in engine_p50 else ("", ""))
        print(f"| {name} | {sizes_mb.get(name, 0):.1f} | {p50[name]:.1f} | {p99[name]:.1f} | "
              f"{engine_ms} | {ceiling} | {throughput[name]:.1f} | {p50[base] / p50[name]:.2f}x | "
              f"{throughput[name] / throughput[base]:.2f}x |")
    harness.write_results("serving", [
        {"task": task_name, "contender": name, "mb": sizes_mb.get(name, 0),
         "p50_ms": p50[name], "p99_ms": p99[name], "inputs_per_s": throughput[name],
         "baseline": base, "p50_vs_baseline": p50[base] / p50[name],
         "inputs_per_s_vs_baseline": throughput[name] / throughput[base],
         **({"engine_p50_ms": engine_p50[name],
             "engine_ceiling_vs_baseline": p50[base] / engine_p50[name]}
            if name in engine_p50 else {})}
        for name in latencies], FLAGS.num_threads, PACKAGES)
    return p50, engine_p50, base


def load_transformers_bert():
    """Imports Hugging Face's BERT (where transformers is installed) before TensorFlow: it imports
    torch._dynamo, whose LLVM aborts the process ("Option ... registered more than once") when
    TensorFlow's was loaded first; loaded before TensorFlow, both work."""
    try:
        import transformers.models.bert.modeling_bert  # noqa: F401
    except ImportError:
        pass


def main(argv):
    del argv
    load_transformers_bert()
    unknown = sorted(set(FLAGS.tasks) - set(TASKS))
    if unknown:
        raise app.UsageError(f"--tasks: {', '.join(unknown)} (tasks: {', '.join(TASKS)})")
    if len(FLAGS.tasks) > 1:
        # A task a process: each holds a dozen BERT-Base models, which its exit frees.
        import subprocess

        for name in FLAGS.tasks:
            subprocess.run([sys.executable, "-m", "bench.serving", *sys.argv[1:],
                            f"--tasks={name}"], check=True, cwd=ROOT)  # the last --tasks counts
        return
    harness.set_threads(FLAGS.num_threads)
    sizes = CONFIGS[FLAGS.config]
    sentences = read_sentences(FLAGS.input, FLAGS.inputs + FLAGS.calibration_inputs, FLAGS.seed)
    sentences, calibration = sentences[:FLAGS.inputs], sentences[FLAGS.inputs:]
    print(harness.describe_machine(FLAGS.num_threads, PACKAGES))
    print(f"model: {FLAGS.config} {sizes}, random weights (seed {FLAGS.seed})")
    for name in FLAGS.tasks:
        task = Task(name)
        inputs = read_questions(FLAGS.squad_file, FLAGS.inputs) if name == "squad" else sentences
        words = [len(text.split()) for text in inputs]
        print(f"\n## {name}: max_seq_length {task.max_seq_length}; {len(inputs)} inputs per "
              f"round ({statistics.median(words)} words median, {max(words)} max)", flush=True)
        model = task.build_model(sizes, FLAGS.seed)
        with tempfile.TemporaryDirectory() as tmp:
            runners, sizes_mb, directories = build_runners(task, model, calibration, tmp)
            reference, lines = agreement(task, runners, inputs)
            print(f"agreement with {reference}:\n" + "\n".join(lines))
            latencies, engine, rounds = latency_rounds(runners, inputs, FLAGS.batch_size,
                                                       FLAGS.repeats, FLAGS.warmup)
            first_answers = {contender: first_answer(directory, inputs[0],
                                                     FLAGS.first_answer_runs)
                             for contender, directory in directories.items()
                             if FLAGS.first_answer_runs}
        p50, engine_p50, base = report(name, latencies, engine, rounds, sizes_mb,
                                       len(inputs))
        if first_answers:
            print(f"predict.py's first answer (process start to its printed answer, one input; "
                  f"median of {FLAGS.first_answer_runs}), seconds:\n"
                  f"| contender | in all | load | first call | the rest: Python, imports |\n"
                  f"|---|---|---|---|---|\n"
                  + "\n".join(f"| {contender} | {parts['first_answer_s']:.2f} | "
                              f"{parts['load_s']:.1f} | {parts['first_call_s']:.2f} | "
                              f"{parts['rest_s']:.1f} |"
                              for contender, parts in first_answers.items()))
            harness.write_results("serving", [
                {"task": name, "contender": contender, **parts}
                for contender, parts in first_answers.items()], FLAGS.num_threads, PACKAGES)
        ours = {name: value for name, value in p50.items() if name != BASELINE}
        quantized = {n: v for n, v in ours.items() if "int8" in n or "float16" in n}
        bf16 = {n: v for n, v in ours.items() if "bf16" in n}
        floats = {n: v for n, v in ours.items() if n not in quantized and n not in bf16}
        for what, group in (("float32", floats), ("quantized", quantized), ("bf16", bf16)):
            if group and base == BASELINE:
                fastest = min(group, key=group.get)
                ceiling = (f" (its engine alone: {p50[base] / engine_p50[fastest]:.2f}x)"
                           if fastest in engine_p50 else "")
                print(f"fastest {what} at batch 1: {fastest}, {p50[base] / group[fastest]:.2f}x "
                      f"the {BASELINE}{ceiling}")


# predict.py's log lines (bert_runner.serving.predictor) of its load and of its first call.
_LOADED = re.compile(r"Loaded the \S+ export .* in ([0-9.]+) s$", re.M)
_ANSWERED = re.compile(r"Answered \d+ input\(s\) in ([0-9.]+) ms$", re.M)


def first_answer(export_dir, text, runs):
    """`predict.py --model=export_dir TEXT` started `runs` times: the medians of its seconds from
    start to exit (`first_answer_s`: what a one-off user waits for), of its load (`load_s`), of
    its first call (`first_call_s`) and of the rest (`rest_s`: Python, imports, printing)."""
    import subprocess

    environment = dict(os.environ, TF_NUM_INTRAOP_THREADS=str(FLAGS.num_threads),
                       TF_NUM_INTEROP_THREADS=str(FLAGS.num_threads))
    parts = []
    for _ in range(runs):
        start = time.perf_counter()
        process = subprocess.run([sys.executable, os.path.join(ROOT, "predict.py"),
                                  f"--model={export_dir}", "--verbosity=0", text], check=True,
                                 capture_output=True, text=True, env=environment)
        seconds = time.perf_counter() - start
        load = float(_LOADED.search(process.stderr).group(1))
        call = float(_ANSWERED.search(process.stderr).group(1)) / 1000
        parts.append({"first_answer_s": seconds, "load_s": load, "first_call_s": call,
                      "rest_s": seconds - load - call})
    return {key: statistics.median(run[key] for run in parts) for key in parts[0]}


if __name__ == "__main__":
    harness.run(main)
