r"""Accuracy of each export format of a fine-tuned tagger, SQuAD or SWAG model, on real dev data:
each run (one per seed) exported by `export_model.py` itself in every --formats entry, each
export answering the dev inputs through `predict.py`'s `Predictor` (tokenizer, windows,
reassembly and answers as a user gets them), scored against the gold answers, with its agreement
with the float32 SavedModel of the same run. (The classifier's: bench/export_accuracy.py.)

    python -m bench.task_export_accuracy --task=ner --data_dir=$NAP \
      --checkpoints=/tmp/nap_minilm/seed_1,/tmp/nap_minilm/seed_2,/tmp/nap_minilm/seed_3
    python -m bench.task_export_accuracy --task=squad \
      --predict_file=data/austen_squad/dev-v1.1.json --checkpoints=/tmp/sq1,/tmp/sq2,/tmp/sq3
    python -m bench.task_export_accuracy --task=swag --data_dir=$SWAG \
      --checkpoints=/tmp/swag/seed_1,/tmp/swag/seed_2,/tmp/swag/seed_3

Scores: NER, entity F1 over the dev sentences (each sentence's words joined by spaces, an
entity right where its type and characters are the gold one's), the all-O baseline 0; SQuAD,
the official v1.1 exact match and F1 (a SQuAD v2.0 file: v2.0's); SWAG, the accuracy of the
chosen endings on val.csv, chance 25. Agreement: inputs whose answer (entities; answer text;
ending) is the float32 SavedModel's. Each figure: mean and standard
deviation over the runs. A format a run refuses is listed with the reason.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name: export_model.py flags beyond --checkpoint and --export_dir ("{task}": the run's format).
FORMATS = {
    "SavedModel float32": ["--format={task}"],
    "SavedModel bf16": ["--format={task}", "--mixed_precision=bf16"],
    "ONNX float32": ["--format=onnx"],
    "ONNX dynamic_int8": ["--format=onnx", "--quantization=dynamic_int8"],
    "LiteRT float32": ["--format=litert"],
    "LiteRT float16": ["--format=litert", "--quantization=float16"],
    "LiteRT dynamic_int8": ["--format=litert", "--quantization=dynamic_int8"],
}
REFERENCE = "SavedModel float32"

flags.DEFINE_enum("task", "ner", ["ner", "squad", "swag"],
                  "The runs' task (run_ner, run_squad or run_swag).")
flags.DEFINE_list("checkpoints", None, "The runs' output_dirs (one per seed).")
flags.DEFINE_string("data_dir", None, "--task=ner: the CoNLL directory (its dev.txt is scored); "
                    "--task=swag: the SWAG CSV directory (its val.csv).")
flags.DEFINE_string("predict_file", None, "--task=squad: the SQuAD dev file scored.")
flags.DEFINE_list("formats", list(FORMATS), "Formats to measure (%s)." % ", ".join(FORMATS))
flags.DEFINE_list("export_flags", [], "More export_model.py flags for every export, e.g. "
                  "--trim_windows.")
flags.DEFINE_integer("max_inputs", None, "Score the first N dev inputs (default: all).")
FLAGS = flags.FLAGS


def ner_inputs():
    """(texts, gold entities per text as {(type, start, end)}): the dev sentences' words joined by
    spaces, and their IOB2 chunks as character spans of that text."""
    from bert_tasks.ner import conll, tags as ner_tags

    sentences = conll.sentences_of(conll.read_conll_file(conll.split_file(FLAGS.data_dir, "dev")))
    texts, gold = [], []
    for sentence in sentences[:FLAGS.max_inputs]:
        starts, text = [], ""
        for word in sentence.words:
            starts.append(len(text) + (1 if text else 0))
            text += (" " if text else "") + word
        entities, current = set(), None
        for i, tag in enumerate(sentence.tags + ["O"]):
            prefix, kind = ner_tags.parse_tag(tag) or ("O", "")
            if current and (prefix != "I" or kind != current[0]):
                entities.add((current[0], starts[current[1]],
                              starts[i - 1] + len(sentence.words[i - 1])))
                current = None
            if prefix == "B" or (prefix == "I" and current is None):
                current = (kind, i)
        texts.append(text)
        gold.append(entities)
    return texts, gold


def ner_score(results, gold):
    """Entity F1 (percent) of predict.py's results against the gold entities."""
    found = [{(e["label"], e["start"], e["end"]) for e in r["entities"]} for r in results]
    right = sum(len(f & g) for f, g in zip(found, gold))
    predicted, wanted = sum(map(len, found)), sum(map(len, gold))
    precision, recall = right / max(predicted, 1), right / max(wanted, 1)
    return {"F1": 100 * 2 * precision * recall / max(precision + recall, 1e-12)}


def squad_inputs():
    """(question<TAB>context inputs, (the file's questions, their ids))."""
    from bert_tasks.squad import evaluate

    with open(FLAGS.predict_file, encoding="utf-8") as f:
        dataset = json.load(f)
    inputs, ids = [], []
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                inputs.append(qa["question"].replace("\t", " ") + "\t"
                              + paragraph["context"].replace("\t", " "))
                ids.append(qa["id"])
    limit = FLAGS.max_inputs or len(inputs)
    questions = evaluate.gold_answers(dataset, FLAGS.predict_file,
                                      require_answers=not evaluate.is_version_2(dataset))
    return inputs[:limit], (dataset, ids[:limit], questions)


def squad_score(results, gold):
    from bert_tasks.squad import evaluate

    dataset, ids, questions = gold
    predictions = {qid: r["answer"] if r["answer"] != "empty" else "" for qid, r in
                   zip(ids, results)}
    kept = set(ids)
    questions = [(qid, answers) for qid, answers in questions if qid in kept]
    if evaluate.is_version_2(dataset):
        scores = evaluate.evaluate_v2(questions, predictions)
        return {"EM": scores["exact"], "F1": scores["f1"]}
    scores = evaluate.evaluate_v1(questions, predictions)
    return {"EM": scores["exact_match"], "F1": scores["f1"]}


def swag_inputs():
    """(context<TAB>ending... inputs, the labels) of --data_dir's val.csv; a `sent2` (the start
    every ending continues) is put before each ending, as run_swag's features join them."""
    from bert_tasks.swag import examples

    rows = examples.read_swag_examples(os.path.join(FLAGS.data_dir, examples.SPLIT_FILES["dev"]),
                                       "dev", require_label=True)[:FLAGS.max_inputs]
    return (["\t".join([row.context] + [" ".join(filter(None, (row.start_ending, ending)))
                                        for ending in row.endings]) for row in rows],
            [row.label for row in rows])


def swag_score(results, gold):
    """Accuracy (percent) of the chosen endings; chance is 25."""
    return {"accuracy": 100 * statistics.mean(r["choice"] == label
                                              for r, label in zip(results, gold))}


TASK_DATA = {"ner": (ner_inputs, ner_score), "squad": (squad_inputs, squad_score),
             "swag": (swag_inputs, swag_score)}


def key(result):
    if "choice" in result:
        return result["choice"]
    if "entities" in result:
        return tuple((e["label"], e["start"], e["end"]) for e in result["entities"])
    return result["answer"]


def export(checkpoint, name, export_dir):
    """export_model.py's export of `checkpoint` as `name` (FORMATS); its message if refused."""
    command = [sys.executable, os.path.join(ROOT, "export_model.py"),
               f"--checkpoint={checkpoint}", f"--export_dir={export_dir}",
               *(flag.format(task=FLAGS.task) for flag in FORMATS[name]), *FLAGS.export_flags]
    process = subprocess.run(command, capture_output=True, text=True)
    if process.returncode:
        return process.stderr.strip().splitlines()[-1]
    return None


def size_mb(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
               for f in fs) / 1e6


def main(argv):
    del argv
    from bert_runner.serving.predictor import Predictor
    from bert_tasks.serving import register_all

    register_all()
    read, score = TASK_DATA[FLAGS.task]
    inputs, gold = read()
    print(f"{len(inputs)} dev inputs of {FLAGS.task}; runs: {', '.join(FLAGS.checkpoints)}")
    figures = {name: [] for name in FLAGS.formats}  # [(scores, agreement, MB)] per run
    refused = {}
    for checkpoint in FLAGS.checkpoints:
        with tempfile.TemporaryDirectory() as tmp:
            answers = {}
            for name in [REFERENCE] + [n for n in FLAGS.formats if n != REFERENCE]:
                export_dir = os.path.join(tmp, name.replace(" ", "_"))
                start = time.perf_counter()
                problem = export(checkpoint, name, export_dir)
                if problem:
                    refused[name] = problem
                    print(f"  {checkpoint}, {name}: refused: {problem}", flush=True)
                    continue
                answers[name] = Predictor(export_dir, warm_up=False).predict(inputs)
                same = statistics.mean(key(a) == key(b) for a, b in
                                       zip(answers[name], answers[REFERENCE]))
                if name in figures:
                    figures[name].append((score(answers[name], gold), same, size_mb(export_dir)))
                print(f"  {checkpoint}, {name}: {score(answers[name], gold)}, agreement "
                      f"{same:.4f} ({time.perf_counter() - start:.0f} s)", flush=True)
    metrics = list(next(iter(v for v in figures.values() if v))[0][0])
    print(f"\n| format | MB | {' | '.join(m + ' (mean ± sd)' for m in metrics)} | agreement |")
    print("|---|---|" + "---|" * len(metrics) + "---|")
    rows = []
    for name, runs in figures.items():
        rows.append({"task": FLAGS.task, "format": name, "checkpoints": FLAGS.checkpoints,
                     "runs": [{"scores": scores, "agreement": same, "mb": mb}
                              for scores, same, mb in runs]})
        if not runs:
            rows[-1]["refused"] = refused.get(name, "not run")
            print(f"| {name} | | refused: {rows[-1]['refused']} |")
            continue
        cells = []
        for metric in metrics:
            values = [scores[metric] for scores, _, _ in runs]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            cells.append(f"{statistics.mean(values):.2f} ± {spread:.2f}")
        print(f"| {name} | {statistics.mean(r[2] for r in runs):.1f} | {' | '.join(cells)} | "
              f"{statistics.mean(r[1] for r in runs):.4f} |")
    harness.write_results("task_export_accuracy", rows, packages=(
        "tensorflow", "keras", "ai-edge-litert", "tf2onnx", "onnxruntime"))


if __name__ == "__main__":
    flags.mark_flag_as_required("checkpoints")
    harness.run(main)
