"""ELECTRA against BERT at equal CPU time, in miniature, on the bundled novels.

The ELECTRA paper's central claim (Clark et al. 2020, Table 1): at the same model size, data and
pre-training compute, replaced-token detection gives a better encoder than BERT's masked LM, most
of all for small models. `python demo.py --electra` tests it at this machine's scale: the demo's
small BERT (masked LM + next sentence prediction, as the demo pre-trains it) and an ELECTRA
discriminator of exactly the same size (hidden size, layers, heads, feed-forward width,
vocabulary, embedding width = hidden size) with its generator at the original's default 0.25 of
the width, pre-trained on the same records for the same CPU seconds of training steps, then each
fine-tuned with several seeds on the demo's four tasks, beside a row fine-tuned from random
weights and the tasks' majority/chance baselines.

This module holds the comparison: the rows, the tasks, the paper's figures, the CPU budget
arithmetic and the tables (markdown), and `run`, its stages (demo.py parses the flags and calls
it; experiments.demo_pipeline runs the scripts).
"""
import dataclasses
import json
import math
import os
import re
import shutil
import textwrap

from demo_data.who_questions import count_questions
from experiments.demo_pipeline import (
    Start, shown, stage_data, stage_pretraining_data, stage_vocab, steps_per_log, task_baselines,
    write_text)

# The paper's GLUE dev scores at equal pre-training compute (BERT, ELECTRA). Small and Base are
# Table 1 (same size, data and training FLOPs); Large is the pair cited with them for this
# experiment.
PAPER = (("Small", 75.1, 79.9), ("Base", 82.2, 85.1), ("Large", 87.2, 89.0))

# The original ELECTRA's default generator width (configure_pretraining.py
# `generator_hidden_size`), as a fraction of the discriminator's; its layers: all of them.
GENERATOR_HIDDEN_FRACTION = 0.25
GENERATOR_LAYERS_FRACTION = 1.0

# CPU seconds of training steps each pre-training gets by default (`--electra_cpu_budget`): about
# the demo's 1,500 BERT steps, and the whole command took 20 to 23 minutes on the project's
# 2-core machine shared with other work, well inside the 45 it must fit in
# (docs/electra_experiment.md). --quick's only checks that every stage runs.
CPU_BUDGET = 240.0
QUICK_CPU_BUDGET = 2.0

# Training steps of the calibration runs and the steps per logged loop: the CPU time between the
# first and the last log line is the steps' alone (the first loop also starts the process and
# traces the step, so it is left out).
CALIBRATION_STEPS = 120
CALIBRATION_LOOP = 20
QUICK_CALIBRATION_STEPS = 6
QUICK_CALIBRATION_LOOP = 2


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """One pre-training of the comparison: its folder, its config file (the demo's BERT config,
    or `electra_config` of it) and run_pretraining.py's extra flags."""
    name: str
    folder: str
    config_file: str
    flags: tuple = ()


PRETRAININGS = (
    Pretraining("BERT (MLM + NSP)", "bert", "bert_config.json"),
    Pretraining("ELECTRA", "electra", "electra_config.json",
                (("pretraining_objective", "electra"),)),
)
NO_PRETRAINING = "No pre-training"
ROWS = tuple(p.name for p in PRETRAININGS) + (NO_PRETRAINING,)


@dataclasses.dataclass(frozen=True)
class Task:
    """A column: one of the demo's fine-tuning tasks and the metric the table shows of it."""
    key: str
    title: str
    script: str
    metric: str
    percent: bool  # an accuracy in [0, 1], shown in percent (F1s are reported in percent)


TASKS = (
    Task("next_sentence", "next sentence (SWAG-like) dev acc", "run_swag.py", "eval_accuracy",
         True),
    Task("which_novel", "which novel (SST-2-like) dev acc", "run_classifier.py", "eval_accuracy",
         True),
    Task("who_questions", "who questions (SQuAD-like) F1", "run_squad.py", "f1", False),
    Task("names_places", "names and places (NER) dev F1", "run_ner.py", "eval_f1", False),
)


def electra_config(bert_config, generator_fraction=GENERATOR_HIDDEN_FRACTION):
    """The ELECTRA run's bert_config.json (a dict): the BERT `bert_config` as the discriminator,
    unchanged (its activation too, so that only the objective differs), embedding tables as wide
    as the hidden layers (no projection), and the generator's fractions."""
    return {**bert_config, "embedding_size": bert_config["hidden_size"],
            "generator_hidden_size": generator_fraction,
            "generator_layers": GENERATOR_LAYERS_FRACTION}


def cpu_seconds_per_step(marks):
    """CPU seconds per training step from `marks`, [(step, CPU seconds of the process)] at the
    training log lines: the slope between the first and the last (the first line comes after
    the process's start and the step's tracing, which the budget leaves out). ValueError with
    fewer than two lines or no step between them."""
    if len(marks) < 2 or marks[-1][0] <= marks[0][0]:
        raise ValueError(f"need two training log lines at different steps to time a step, got "
                         f"{marks}")
    (first_step, first_cpu), (last_step, last_cpu) = marks[0], marks[-1]
    return (last_cpu - first_cpu) / (last_step - first_step)


def steps_for_budget(cpu_budget, seconds_per_step, minimum=1):
    """The training steps that spend `cpu_budget` CPU seconds at `seconds_per_step` (rounded
    down, at least `minimum`)."""
    if seconds_per_step <= 0:
        raise ValueError(f"CPU seconds per step must be positive, got {seconds_per_step}")
    return max(minimum, int(cpu_budget / seconds_per_step))


def mean_std(values):
    """(mean, sample standard deviation: n - 1 in the denominator, 0 for one value)."""
    values = list(values)
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def shown_value(task, value):
    """A metric as the table shows it: accuracies in percent, F1 as the scripts report it."""
    return 100.0 * value if task.percent else value


def seed_averages(by_task):
    """Per seed index, the mean over the tasks (GLUE's score is such a mean): `by_task` is
    {task key: [values per seed]} (shown units); seeds missing in a task are left out."""
    count = min(len(v) for v in by_task.values())
    return [sum(v[i] for v in by_task.values()) / len(by_task) for i in range(count)]


def _cell(values):
    if not values:
        return "-"
    mean, std = mean_std(values)
    return f"{mean:.1f} ± {std:.1f}" if len(values) > 1 else f"{mean:.1f}"


def _difference(a, b):
    """mean(a) - mean(b) ± its standard error, sqrt(s_a²/n_a + s_b²/n_b)."""
    if not a or not b:
        return "-"
    (mean_a, std_a), (mean_b, std_b) = mean_std(a), mean_std(b)
    error = math.sqrt(std_a ** 2 / len(a) + std_b ** 2 / len(b))
    return f"{mean_a - mean_b:+.1f} ± {error:.1f}"


def _markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def results_table(results, baselines=()):
    """The measured table (markdown).

    results: {row name: {task key: [metric per seed]}} in the scripts' units (accuracies in
      [0, 1], F1 in [0, 100]); a row or task not run is left out or shown "-".
    baselines: [(name, {task key: value in the table's units, or None})].
    Cells are mean ± sample std over the seeds; "mean of the tasks" averages each seed's four
    scores, as GLUE's score averages its tasks; "ELECTRA − BERT" is the difference of the means ±
    its standard error.
    """
    header = ["fine-tuned from"] + [t.title for t in TASKS] + ["mean of the tasks"]
    in_units = {row: {t.key: [shown_value(t, v) for v in by_task[t.key]]
                      for t in TASKS if by_task.get(t.key)}
                for row, by_task in results.items()}
    rows = []
    for name in ROWS:
        if name not in in_units:
            continue
        by_task = in_units[name]
        complete = len(by_task) == len(TASKS)
        rows.append([name] + [_cell(by_task.get(t.key, [])) for t in TASKS]
                    + [_cell(seed_averages(by_task)) if complete else "-"])
    electra, bert = (in_units.get(p.name, {}) for p in reversed(PRETRAININGS))
    if electra and bert:
        both = len(electra) == len(bert) == len(TASKS)
        rows.append(["ELECTRA − BERT (± s.e.)"]
                    + [_difference(electra.get(t.key, []), bert.get(t.key, [])) for t in TASKS]
                    + [_difference(seed_averages(electra), seed_averages(bert)) if both else "-"])
    for name, values in baselines:
        cells = ["-" if values.get(t.key) is None else f"{values[t.key]:.1f}" for t in TASKS]
        known = [values[t.key] for t in TASKS if values.get(t.key) is not None]
        rows.append([f"*{name}*"] + cells
                    + [f"{sum(known) / len(known):.1f}" if len(known) == len(TASKS) else "-"])
    return _markdown(header, rows)


def paper_table():
    """The paper's GLUE dev scores at equal pre-training compute (markdown)."""
    return _markdown(["ELECTRA paper, GLUE dev, equal pre-training compute", "BERT", "ELECTRA",
                      "ELECTRA − BERT"],
                     [[size, f"{bert:.1f}", f"{electra:.1f}",
                       f"{electra - bert:+.1f}"] for size, bert, electra in PAPER])


def pretraining_table(runs):
    """runs: [{name, steps, calibration (CPU s/step), per_step (CPU s/step in the run itself, or
    None), process_cpu, wall, metrics (text), reused (bool)}] -> markdown. "training CPU s" is the
    run's own CPU seconds per step times its steps: what the budget bought."""
    header = ["pre-training", "steps", "CPU s/step (calibration)",
              "CPU s/step (this run)", "training CPU s", "process CPU s", "wall s",
              "pre-training metrics (beside their baselines)"]
    rows = []
    for run in runs:
        per_step = run.get("per_step")
        rows.append([
            run["name"], str(run["steps"]), f"{run['calibration']:.4f}",
            "-" if per_step is None else f"{per_step:.4f}",
            "-" if per_step is None else f"{per_step * run['steps']:.0f}",
            f"{run['process_cpu']:.0f}" + (" (earlier run)" if run.get("reused") else ""),
            f"{run['wall']:.0f}", run["metrics"]])
    return _markdown(header, rows)


def note(bert_config, generator_fraction=GENERATOR_HIDDEN_FRACTION, batch=32,
         learning_rate=5e-4):
    """How to read the table: what was compared and what its spread allows (text)."""
    c = bert_config
    hidden = int(round(c["hidden_size"] * generator_fraction))
    bullets = (
        f"Both encoders are the demo's (L={c['num_hidden_layers']}, H={c['hidden_size']}, "
        f"A={c['num_attention_heads']}, I={c['intermediate_size']}, vocabulary "
        f"{c['vocab_size']}, embedding width = H, so no projection). ELECTRA's generator is "
        f"{generator_fraction:g} of the width (H={hidden}, {max(1, hidden // 64)} head, "
        f"I={4 * hidden}, {c['num_hidden_layers']} layers) and shares the embedding tables; only "
        "the discriminator is fine-tuned. Both read the same pre-training records (ELECTRA "
        f"ignores their next-sentence labels) at batch {batch}, learning rate "
        f"{learning_rate:g}, 1/20 of the steps as warm-up, for the same CPU seconds of training "
        "steps: each objective's CPU seconds per step were measured on this machine by a short "
        "run, and its steps are the budget divided by them.",
        "Fine-tuning is the same command for every row (the demo's settings; layer-wise "
        "learning-rate decay 1.0 for both families), one run per seed. Only the who questions "
        "differ by more than the starting weights: run_squad.py builds each family's own span "
        "head, BERT's linear start and end for BERT and random weights, the original ELECTRA's "
        "(the end conditioned on the start, an answerability classifier) for ELECTRA. Cells are "
        "mean ± sample "
        "std over the seeds; the difference row is ELECTRA's mean minus BERT's ± its standard "
        "error. One pre-training run per objective: the spread of pre-training itself is not in "
        "these numbers.",
        "The paper's figures are GLUE scores of models 25 to 600 times larger (14M to 335M "
        "parameters; about 0.55M here), pre-trained on billions of words for days: what can "
        "carry over is the direction of the gap and that it is largest for "
        "small models, not its size. A difference within about two standard errors is not "
        "evidence either way.",
    )
    return "How to read it:\n" + "\n".join(
        textwrap.fill(b, 96, initial_indent="* ", subsequent_indent="  ") for b in bullets) + "\n"


# --- Running it: `python demo.py --electra`'s stages. ---

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


def calibrate(pipe, scale, pretraining, quick):
    """CPU seconds per training step of `pretraining` on this machine: a short run, timed between
    its first and last training log lines. Kept in electra/calibration.json and reused while the
    settings are the same (the steps of the runs already made depend on it)."""
    pipe.header(f"run_pretraining.py: CPU seconds per step of {pretraining.name} (a short run)")
    steps, loop = ((QUICK_CALIBRATION_STEPS, QUICK_CALIBRATION_LOOP) if quick else
                   (CALIBRATION_STEPS, CALIBRATION_LOOP))
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
    seconds = cpu_seconds_per_step(marks)
    recorded[pretraining.folder] = {"settings": settings, "seconds_per_step": seconds,
                                    "marks": marks}
    write_text(path, json.dumps(recorded, indent=2) + "\n")
    shutil.rmtree(output_dir, ignore_errors=True)  # its checkpoints are of no further use
    pipe.report(f"calibrate {pretraining.folder}", times,
                f"{seconds:.4f} CPU s per step (steps {marks[0][0]}-{marks[-1][0]}: "
                f"{marks[-1][1] - marks[0][1]:.1f} CPU s)", shown(path))
    return seconds


def _eval_metrics(output_dir):
    """`bert_runner.results.read_eval_report` without importing TensorFlow into this process:
    ({metric: value}, {metric: baseline text}) of output_dir/eval_report.json."""
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


def pretrain(pipe, scale, pretraining, budget_dir, seconds_per_step, budget):
    """Pre-trains `pretraining` for the steps that spend `budget` CPU seconds at
    `seconds_per_step`. Returns its row of the pre-training table (a dict)."""
    steps = steps_for_budget(budget, seconds_per_step, minimum=4)
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
        timing["per_step"] = cpu_seconds_per_step(marks)
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


def row_start(pipe, budget_dir, row):
    """(folder of the row's fine-tuning outputs, its model flags): the row's pre-training
    directory as --init_checkpoint with the bert_config.json that run wrote, or random weights
    with the demo's config."""
    for pretraining in PRETRAININGS:
        if pretraining.name == row:
            pretrained = pipe.path(budget_dir, pretraining.folder, "pretraining")
            return os.path.join(budget_dir, pretraining.folder), {
                "bert_config_file": shown(os.path.join(pretrained, "bert_config.json")),
                "init_checkpoint": shown(pretrained)}
    return os.path.join(ELECTRA_DIR, "random_init"), {
        "bert_config_file": shown(pipe.path("bert_config.json"))}


def fine_tune(pipe, scale, budget_dir, row, task, seeds, squad):
    """Fine-tunes `row`'s start on `task` once per seed (`--seeds`, or one run_squad.py per
    seed, which has no such flag). Returns the task's metric per seed."""
    folder, model = row_start(pipe, budget_dir, row)
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
    shown_values = [shown_value(task, v) for v in values]
    mean, std = mean_std(shown_values)
    pipe.report(name, times, f"{task.title} {mean:.1f} ± {std:.1f} (seeds: " + ", ".join(
        f"{v:.1f}" for v in shown_values) + ")", f"{shown(output_dir)}/seed_<seed>/")
    return values


def _count_sentences(conll_path):
    """The blank-line separated blocks of a CoNLL file (its sentences, and its -DOCSTART-
    lines): about the tagger's training windows, for its progress lines."""
    with open(conll_path, encoding="utf-8") as f:
        return sum(1 for block in f.read().split("\n\n") if block.strip())


def compare_at_equal_cpu(pipe, scale, seeds, cpu_budget=None, quick=False, vocab_file=None):
    """BERT against ELECTRA at equal CPU time, in `pipe`'s work folder: each of `seeds` (ints) is a
    fine-tuning seed of every row and task; `cpu_budget` the CPU seconds of training steps of
    each pre-training (default: CPU_BUDGET, QUICK_CPU_BUDGET with `quick`, which also shortens
    the calibration); `vocab_file` as demo.py's --vocab_file."""
    budget = cpu_budget or (QUICK_CPU_BUDGET if quick else CPU_BUDGET)
    pipe.reuse_data_stages = True
    _, squad, _, _ = stage_data(pipe, scale)
    stage_vocab(pipe, scale, vocab_file)
    stage_pretraining_data(pipe, scale, Start("", folder=ELECTRA_DIR))
    with open(pipe.path("bert_config.json"), encoding="utf-8") as f:
        bert_config = json.load(f)
    write_text(pipe.path(ELECTRA_DIR, "bert_config.json"), json.dumps(bert_config, indent=2) + "\n")
    write_text(pipe.path(ELECTRA_DIR, "electra_config.json"), json.dumps(
        electra_config(bert_config), indent=2) + "\n")
    per_step = {p.name: calibrate(pipe, scale, p, quick) for p in PRETRAININGS}
    # Another budget pre-trains into another folder: the finished runs of each are kept.
    budget_dir = os.path.join(ELECTRA_DIR, f"cpu_{budget:g}s")
    runs = [pretrain(pipe, scale, p, budget_dir, per_step[p.name], budget)
            for p in PRETRAININGS]
    results = {}
    for row in ROWS:
        results[row] = {task.key: fine_tune(pipe, scale, budget_dir, row, task, seeds, squad)
                        for task in TASKS}
    pipe.summary()
    flops = [r["gflops_per_step"] for r in runs]
    baselines, footnote = task_baselines(pipe, squad)
    text = "\n\n".join([
        f"## BERT against ELECTRA at equal CPU time ({budget:g} CPU s of pre-training steps "
        f"each, {_cpu_name()}; fine-tuning seeds {', '.join(map(str, seeds))})",
        results_table(results, baselines), footnote,
        pretraining_table(runs)
        + ("" if None in flops else "\n\nThe model's FLOPs per training step (the trainer's "
           "count): " + ", ".join(f"{r['name']} {r['gflops_per_step']:.1f} GFLOP"
                                  for r in runs) + "."),
        paper_table(),
        note(bert_config, batch=scale.pretraining_batch,
             learning_rate=scale.pretraining_learning_rate)])
    path = pipe.path("electra_results.md")
    write_text(path, text + "\n")
    print("\n" + text)
    print(f"Written to {shown(path)}")
