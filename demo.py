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
import csv
import dataclasses
import json
import os
import re
import shutil
import sys

from absl import flags

from bert_runner import cli
from demo_data import NOVELS
from demo_data.names_and_places import capitalised_word_tags
from demo_data.next_sentence import word_overlap_accuracy
from demo_data.who_questions import count_questions, make_squad_data, squad_json
from experiments import electra
from experiments.demo_pipeline import (
    PRETRAINED, RANDOM, Pipeline, Scale, Start, shown, stage_data, stage_pretraining_data,
    stage_vocab, steps_per_log, task_baselines, write_text)
from experiments.table5 import (
    NOTE as TABLE5_NOTE, PRETRAININGS, ROWS, miniature_table, paper_table)

# The folder of the scripts and data/: this file's, as the command named it (the printed commands
# show the scripts relative to the current folder). Not experiments/'s parent: Python imports
# that from where a symlinked demo.py leads.
ROOT = os.path.dirname(os.path.abspath(__file__))
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
                   f"objective). Default: {electra.CPU_BUDGET:g} "
                   f"({electra.QUICK_CPU_BUDGET:g} with --quick).")
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


# --- Stages 4 to 10 (1 to 3 are experiments.demo_pipeline's: --table5 and --electra run them
# too). ---

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
    stage_vocab(pipe, scale, FLAGS.vocab_file)
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
    baselines, footnote = task_baselines(pipe, squad, tagger=False)
    print("\n" + paper_table() + "\n\n" + miniature_table(results, [
        (name, [values.get(key) for key in ("next_sentence", "which_novel", "who_questions")])
        for name, values in baselines]) + "\n")
    print(footnote + "\n")
    print(TABLE5_NOTE)


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
    pipe = Pipeline(ROOT, work_dir, num_stages=2 + 2 * len(PRETRAININGS) + 3 * len(ROWS)
                    if FLAGS.table5 else 3 + 2 * len(electra.PRETRAININGS)
                    + len(electra.ROWS) * len(electra.TASKS)
                    if FLAGS.electra else 10)
    title = ("Table 5 in miniature" if FLAGS.table5 else "against ELECTRA at equal CPU time"
             if FLAGS.electra else "demo")
    print(f"BERT {title}{' (--quick)' if FLAGS.quick else ''}: every stage runs one of the "
          f"project's scripts in {shown(work_dir)}; logs in {shown(pipe.path('logs'))}/")
    if FLAGS.table5:
        table5(pipe, scale)
        return
    if FLAGS.electra:
        electra.compare_at_equal_cpu(pipe, scale, [int(seed) for seed in FLAGS.electra_seeds],
                                     cpu_budget=FLAGS.electra_cpu_budget, quick=FLAGS.quick,
                                     vocab_file=FLAGS.vocab_file)
        return
    test_labels, squad, swag_labels, ner_sentences = stage_data(pipe, scale)
    stage_vocab(pipe, scale, FLAGS.vocab_file)
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
    cli.run_script(main)
