"""The paper's Table 5 (the pre-training ablation) in miniature, on the bundled novels.

The paper pre-trains BERT-Base three ways on the same data for the same steps: BERT (masked LM
+ next sentence prediction), "No NSP" (masked LM alone) and "LTR & No NSP" (a left-to-right
language model, as OpenAI GPT), and fine-tunes each; "+ BiLSTM" adds a randomly initialised
BiLSTM on top of the LTR model during fine-tuning. `python demo.py --table5` does the same with
the demo's small model, vocabulary and tasks, and adds a row fine-tuned from random weights (no
pre-training) as the floor. This module holds what the command prints and runs: the rows, the
flags that make each, the paper's figures and the tables.
"""
import dataclasses

# Paper, Table 5: dev results of BERT-Base pre-trained each way (MNLI-m, QNLI, MRPC, SST-2:
# accuracy; SQuAD v1.1: F1).
PAPER_COLUMNS = ("MNLI-m", "QNLI", "MRPC", "SST-2", "SQuAD F1")
PAPER_ROWS = {
    "BERT (MLM + NSP)": (84.4, 88.4, 86.7, 92.7, 88.5),
    "No NSP": (83.9, 84.9, 86.5, 92.6, 87.9),
    "LTR & No NSP": (82.1, 84.3, 77.5, 92.1, 77.8),
    "+ BiLSTM": (82.1, 84.1, 75.7, 91.6, 84.9),
}


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """One pre-training objective: its folder and the flags that select it."""
    folder: str
    description: str
    data_flags: tuple         # create_pretraining_data.py, (name, value) pairs
    pretraining_flags: tuple  # run_pretraining.py


PRETRAININGS = (
    Pretraining("table5/bert", "masked LM + next sentence", (), ()),
    Pretraining("table5/no_nsp", "masked LM alone (No NSP)",
                (("next_sentence_prediction", False),), (("next_sentence_prediction", False),)),
    Pretraining("table5/ltr", "left-to-right LM (LTR & No NSP)",
                (("pretraining_objective", "ltr"),), (("pretraining_objective", "ltr"),)),
)


@dataclasses.dataclass(frozen=True)
class Row:
    """A row of the table: which pre-training it fine-tunes from (None: random weights) and its
    extra fine-tuning flags."""
    name: str
    pretraining: object       # a `Pretraining`, or None
    fine_tuning_flags: tuple = ()

    @property
    def folder(self):
        """Where its fine-tuning outputs go: beside its pre-training's, or their own folder."""
        if self.pretraining is None:
            return "table5/random_init"
        suffix = "_bilstm" if dict(self.fine_tuning_flags).get("bilstm_on_top") else ""
        return self.pretraining.folder + suffix


ROWS = (
    Row("BERT (MLM + NSP)", PRETRAININGS[0]),
    Row("No NSP", PRETRAININGS[1]),
    Row("LTR & No NSP", PRETRAININGS[2]),
    Row("+ BiLSTM", PRETRAININGS[2], (("bilstm_on_top", True),)),
    Row("No pre-training", None),
)

# The demo's tasks that stand in for the paper's columns, and how each is scored here.
COLUMNS = (
    ("next sentence (SWAG-like), dev acc", "sentence pairs: MNLI, QNLI, MRPC"),
    ("which novel (SST-2-like), dev acc", "SST-2"),
    ("who questions (SQuAD-like), F1", "SQuAD F1"),
)


def format_table(header, rows, first_column="", digits=1):
    """A plain-text table: `rows` are (name, values) with values floats (or None: not run)."""
    width = max([len(first_column)] + [len(name) for name, _ in rows])
    widths = [max(len(h), digits + 4) for h in header]
    lines = [f"{first_column:<{width}}  " + "  ".join(
        f"{h:>{w}}" for h, w in zip(header, widths))]
    for name, values in rows:
        cells = ["-" if v is None else f"{v:.{digits}f}" for v in values]
        lines.append(f"{name:<{width}}  " + "  ".join(
            f"{c:>{w}}" for c, w in zip(cells, widths)))
    return "\n".join(lines)


def paper_table():
    return format_table(PAPER_COLUMNS, list(PAPER_ROWS.items()), "Paper, Table 5 (BERT-Base)")


def miniature_table(results, baselines=()):
    """`results`: {row name: (next sentence accuracy, which novel accuracy, who questions F1)},
    accuracies in [0, 1] and F1 in [0, 100] as the scripts report them; printed in percent, as
    the paper's. Rows in `ROWS` order; a row without results is left out. `baselines`: rows
    [(name, values in percent, None where none applies)] after them."""
    rows = [(row.name, [None if v is None else (100 * v if i < 2 else v)
                        for i, v in enumerate(results[row.name])])
            for row in ROWS if row.name in results]
    rows += [(f"Baseline: {name}", list(values)) for name, values in baselines]
    return format_table([c for c, _ in COLUMNS], rows, "Here (L=2, H=128, the novels)")


NOTE = """\
What a few minutes of 2 CPU cores can show, and what they cannot:
* The model is 2 layers of width 128, pre-trained for the demo's steps (minutes) on the bundled
  novels (4 MB; a part of them with --quick); BERT-Base is 12 layers of 768, 1M steps of 256
  sequences of up to 512 tokens on 3.3 billion words. Each figure here is one fine-tuning run
  with one seed: differences of a few points between rows are not evidence, only large gaps
  are.
* The tasks stand in for the paper's: which novel a sentence is from is single-sentence
  classification as SST-2 (the paper's rows hardly differ on it either); the who-questions are
  span extraction as SQuAD, where the paper's LTR model lost most (no right context for a
  token's start and end) and the BiLSTM won part of it back; the next-sentence choice is a
  sentence-pair task as MNLI, QNLI and MRPC, where the paper found next sentence prediction
  helped (QNLI: 88.4 with it, 84.9 without).
* The row fine-tuned from random weights shows how much any of this pre-training gives.
"""
