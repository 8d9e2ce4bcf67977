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

This module holds what the command computes and prints without running anything: the rows, the
tasks, the paper's figures, the CPU budget arithmetic and the tables (markdown). demo.py runs the
stages.
"""
import dataclasses
import math
import textwrap

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
    shown = {row: {t.key: [shown_value(t, v) for v in by_task[t.key]]
                   for t in TASKS if by_task.get(t.key)}
             for row, by_task in results.items()}
    rows = []
    for name in ROWS:
        if name not in shown:
            continue
        by_task = shown[name]
        complete = len(by_task) == len(TASKS)
        rows.append([name] + [_cell(by_task.get(t.key, [])) for t in TASKS]
                    + [_cell(seed_averages(by_task)) if complete else "-"])
    electra, bert = (shown.get(p.name, {}) for p in reversed(PRETRAININGS))
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
