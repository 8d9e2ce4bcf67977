"""The range of every numeric (and list) flag of every script, checked when the flags are parsed.

    flag_ranges.register(flags.FLAGS)     # bert_runner.cli.run does it, before absl parses

A bad value is refused before any work, and before TensorFlow is imported: absl runs the
validators registered here once every flag is parsed, and `bert_runner.cli` turns its error into
one line and exit code 2:

    run_classifier.py: error: flag --learning_rate=-1.0: must be > 0

`RULES` maps a flag name to its `Rule` (the range and the message, one text for both); a name
that means something else in one script is keyed `(script file name, flag name)` there, and a
`None` rule there means "no rule in that script". `CROSS_RULES` are the few rules between flags
(the SQuAD window's room for the question, the masking rates' sum, ...). `register` registers a
validator for each rule whose flags the running script defines, and appends the range to the
flag's help ("(must be > 0)"), so that `--helpfull` lists it.

A rule `only_with` other flags applies only when each of them that the script defines is set:
`--learning_rate` of a run without `--do_train` is never used, and is not refused.

Ranges come from how the code uses each flag. Where the code already checks a flag (the data
generators' `check_options`, SQuAD's window settings, NER's windows), the rule here refuses the
same values with the same words, so that a user never sees two different messages for one
value. Left to the code, because they need more than the flags: `build_vocab.py --vocab_size`
against the reserved tokens (`building.check_options`), `max_seq_length` against the config's
`max_position_embeddings`, `--layers` against the model's layers, `--choices` and the form of
`--seeds` (the scripts' own validators).
"""
import dataclasses
import os
import re
import sys
import weakref
from typing import Any, Callable, Optional, Tuple

from absl import flags

# NumPy's seed range: keras.utils.set_random_seed refuses anything else.
_MAX_SEED = 2**32 - 1
_LAYER_INDEX = re.compile(r"\s*-?\d+\s*")


@dataclasses.dataclass(frozen=True)
class Rule:
    """The values one flag accepts: `check(value)` is true for them, `text` says which ("must be
    > 0"), in the refusal and in the help. None (no value given) is always accepted: required
    flags are checked by absl. `only_with`: flags that must be set for the rule to apply."""

    text: str
    check: Callable[[Any], bool]
    only_with: Tuple[str, ...] = ()

    def when(self, *flag_names):
        """This rule, applied only when every flag of `flag_names` the script defines is set."""
        return dataclasses.replace(self, only_with=self.only_with + flag_names)

    def applies(self, flag_values):
        return all(flag_values[name].value for name in self.only_with if name in flag_values)

    def accepts(self, value):
        try:
            return bool(self.check(value))
        except (TypeError, ValueError):
            return False


def at_least(minimum, why=None, words=">="):
    """Integers (or floats) >= `minimum`; `why` is said after the range, in parentheses;
    `words` is how the range is said ("at least", where the code's own check says so)."""
    text = f"must be {words} {minimum}" + (f" ({why})" if why else "")
    return Rule(text, lambda value: value >= minimum)


def above(bound):
    """Values > `bound` (NaN is not)."""
    return Rule(f"must be > {bound}", lambda value: value > bound)


def within(low, high, low_open=False, high_open=False):
    """Values in the interval from `low` to `high`, each end closed unless said open."""
    text = "must be in %s%s, %s%s" % ("(" if low_open else "[", low, high, ")" if high_open else "]")
    return Rule(text, lambda value: (low < value if low_open else low <= value)
                and (value < high if high_open else value <= high))


def _seed_list(values):
    """--seeds: the integers among `values` in the seed range (run_classifier's own validator
    refuses what is not an integer, and repeated seeds)."""
    for value in values:
        try:
            seed = int(value)
        except ValueError:
            continue
        if not 0 <= seed <= _MAX_SEED:
            return False
    return True


def _layer_indexes(text):
    """--layers of extract_features: comma-separated integers, e.g. -1,-2,-3,-4 (extract_features
    reads them with int(); the model's number of layers bounds them, checked there)."""
    return all(_LAYER_INDEX.fullmatch(part) for part in text.split(","))


_PAIR = "[CLS] A [SEP] B [SEP]"
_TRAINING = ("do_train",)

# flag name, or (script, flag name) -> Rule, or None: no rule in that script.
RULES = {
    # The schedule and the training loop (bert_runner.flags, run_pretraining.py): used only when
    # training; `Trainer` is built for evaluation too, so gradient_accumulation_steps always is.
    "learning_rate": above(0).when(*_TRAINING),
    "num_train_epochs": above(0).when(*_TRAINING),
    ("run_ner_feature_based.py", "num_train_epochs"): at_least(1),
    "num_train_steps": at_least(1).when(*_TRAINING),
    "num_warmup_steps": at_least(0).when(*_TRAINING),
    "warmup_proportion": within(0, 1).when(*_TRAINING),
    "save_checkpoints_steps": at_least(1).when(*_TRAINING),
    "iterations_per_loop": at_least(1).when(*_TRAINING),
    "keep_checkpoint_max": at_least(1).when(*_TRAINING),
    "gradient_accumulation_steps": at_least(1),
    "peak_tflops": above(0).when(*_TRAINING),
    "num_tpu_cores": at_least(1).when("use_tpu"),
    "random_seed": within(0, _MAX_SEED),
    # Any integer seeds Python's random.Random, all create_pretraining_data uses.
    ("create_pretraining_data.py", "random_seed"): None,
    "seeds": Rule(f"each seed must be in [0, {_MAX_SEED}]", _seed_list),
    # Batch sizes: each only with the split it batches (run_ner_feature_based has no do_* flags).
    "train_batch_size": at_least(1).when(*_TRAINING),
    "eval_batch_size": at_least(1).when("do_eval"),
    "predict_batch_size": at_least(1).when("do_predict"),
    "batch_size": at_least(1),
    # Sequence lengths: the special tokens of each layout (the config's max_position_embeddings
    # is checked against the config file at start-up).
    "max_seq_length": at_least(3, _PAIR),
    ("run_ner.py", "max_seq_length"): at_least(3, "[CLS] word [SEP]", words="at least"),
    ("run_ner_feature_based.py", "max_seq_length"): at_least(
        3, "[CLS] word [SEP]", words="at least"),
    ("create_pretraining_data.py", "max_seq_length"): at_least(
        5, f"{_PAIR} with at least one token each in A and B"),
    ("run_pretraining.py", "max_seq_length"): at_least(
        5, f"{_PAIR} with at least one token each in A and B"),
    ("run_squad.py", "max_seq_length"): None,  # CROSS_RULES: room for the question
    # Pre-training data (create_pretraining_data.py and the pre-training task's data pipeline).
    "max_predictions_per_seq": at_least(1),
    # 0 is refused: the instances mask max(1, round(len * masked_lm_prob)) tokens, so 0 would
    # still mask one per sequence (pipeline.check_options, for callers in Python, accepts it).
    "masked_lm_prob": within(0, 1, low_open=True),
    "mask_token_prob": within(0, 1),
    "random_token_prob": within(0, 1),
    "dupe_factor": at_least(1),
    "short_seq_prob": within(0, 1),
    "chunk_size_mb": at_least(0),
    "num_workers": at_least(1),
    "max_eval_steps": at_least(1).when("do_eval"),
    # SQuAD (run_squad.py).
    "doc_stride": at_least(1, words="at least"),
    "max_query_length": at_least(1),
    "n_best_size": at_least(1).when("do_predict"),
    "max_answer_length": at_least(1).when("do_predict"),
    # run_classifier's multilabel task: 0 or 1 would predict every label or none.
    "multi_label_threshold": within(0, 1, low_open=True, high_open=True),
    # run_checkpoint_sweep.py.
    "checkpoint_every": at_least(1),
    # The feature-based NER tagger (run_ner_feature_based.py).
    "lstm_units": at_least(1),
    # build_vocab.py (the pre-training task's vocab_building checks them the same way).
    "num_unused": at_least(0),
    "max_input_lines": at_least(0, "0: all lines"),
    "max_input_words": at_least(1),
    "min_count": at_least(1),
    "max_unique_chars": at_least(1),
    # extract_features.py.
    "layers": Rule("must be comma-separated layer indexes, e.g. -1,-2,-3,-4 (-1: the last layer)",
                   _layer_indexes),
}


@dataclasses.dataclass(frozen=True)
class CrossRule:
    """A rule between flags: `check(*values)` of `flag_names`; `message(*values)` says what is
    wrong (absl puts the flags and their values before it); `help` is appended to the help of
    the first flag. `scripts`: the scripts it applies to (None: each that defines every flag)."""

    flag_names: Tuple[str, ...]
    check: Callable[..., bool]
    message: Callable[..., str]
    help: str
    scripts: Optional[Tuple[str, ...]] = None


CROSS_RULES = (
    # The SQuAD task's check_window_settings: the original loops forever without room.
    CrossRule(
        ("max_seq_length", "max_query_length"),
        lambda seq, query: seq > query + 3,
        lambda seq, query: (f"max_seq_length must be greater than max_query_length ({query}) + 3 "
                            "([CLS] question [SEP] context [SEP] with at least one context token)"),
        "must be greater than max_query_length + 3",
        scripts=("run_squad.py",)),
    CrossRule(
        ("mask_token_prob", "random_token_prob"),
        lambda mask, random: mask + random <= 1.0 + 1e-9,
        lambda mask, random: (f"mask_token_prob plus random_token_prob is {mask + random:g}, more "
                              "than 1 (the rest, kept unchanged, cannot be negative)"),
        "mask_token_prob + random_token_prob must be <= 1"),
    CrossRule(
        ("max_predictions_per_seq", "max_seq_length"),
        lambda predictions, seq: predictions <= seq - 3,
        lambda predictions, seq: (f"max_predictions_per_seq must be between 1 and max_seq_length "
                                  f"- 3 = {seq - 3}, the number of maskable positions"),
        "must be <= max_seq_length - 3",
        scripts=("create_pretraining_data.py",)),
    CrossRule(
        ("num_workers", "chunk_size_mb"),
        lambda workers, chunk: workers == 1 or chunk > 0,
        lambda workers, chunk: (f"--num_workers={workers} needs --chunk_size_mb > 0: the "
                                "original's ordering (one global shuffle, random next sentences "
                                "from the whole corpus) is sequential"),
        "more than 1 needs --chunk_size_mb > 0",
        scripts=("create_pretraining_data.py",)),
    # The pre-training task's Beam pipelines: a Beam run's workers are the runner's.
    CrossRule(
        ("runner", "num_workers"),
        lambda runner, workers: not runner or workers == 1,
        lambda runner, workers: (f"--num_workers={workers} is for runs here; --runner={runner} "
                                 "runs on the runner's workers: set them in "
                                 "--beam_pipeline_options"),
        "with --runner, set the runner's workers in --beam_pipeline_options",
        scripts=("create_pretraining_data.py", "build_vocab.py")),
    CrossRule(
        ("runner", "max_input_lines"),
        lambda runner, lines: not runner or lines == 0,
        lambda runner, lines: (f"--max_input_lines={lines} reads a prefix of the input, which "
                               f"--runner={runner} (one shard per file) cannot: cut the files "
                               "first (head -n)"),
        "0 with --runner",
        scripts=("build_vocab.py",)),
    # bert_runner.packing: the LSTM on top would read across a packed row's examples.
    CrossRule(
        ("max_sequences_per_row", "bilstm_on_top"),
        lambda per_row, bilstm: per_row == 1 or not bilstm,
        lambda per_row, bilstm: ("--bilstm_on_top reads whole rows, across packed examples: "
                                 "leave --max_sequences_per_row out"),
        "1 with --bilstm_on_top",
        scripts=("run_classifier.py",)),
    # The left-to-right model has no next-sentence loss (the pre-training task's ltr_task).
    CrossRule(
        ("pretraining_objective", "next_sentence_prediction"),
        lambda objective, nsp: objective != "ltr" or not nsp,
        lambda objective, nsp: ("--pretraining_objective=ltr trains no next sentence prediction "
                                "(the paper's 'LTR & No NSP'): leave --next_sentence_prediction "
                                "out"),
        "not with --pretraining_objective=ltr",
        scripts=("run_pretraining.py",)),
    # run_pretraining.py: records carry their masks; these flags (at create_pretraining_data's
    # defaults otherwise) are dynamic masking's (the pre-training task's dynamic_masking).
    CrossRule(
        ("input_format", "do_whole_word_mask", "masked_lm_prob", "mask_token_prob",
         "random_token_prob", "short_seq_prob"),
        lambda fmt, *values: fmt != "records" or values == (False, 0.15, 0.8, 0.1, 0.1),
        lambda fmt, *values: ("--input_format=records: the records carry their masks (make them "
                              "with create_pretraining_data.py and these flags); the masking "
                              "flags apply to --input_format=text or unmasked_records"),
        "the masking flags need --input_format=text or unmasked_records",
        scripts=("run_pretraining.py",)),
    # Dynamic masking makes masked sentence pairs; the LTR model reads one unmasked segment.
    CrossRule(
        ("input_format", "pretraining_objective"),
        lambda fmt, objective: fmt == "records" or objective != "ltr",
        lambda fmt, objective: (f"--input_format={fmt} makes masked sentence pairs for the "
                                "masked LM; --pretraining_objective=ltr reads the records of "
                                "create_pretraining_data.py --pretraining_objective=ltr "
                                "(--input_format=records)"),
        "records with --pretraining_objective=ltr",
        scripts=("run_pretraining.py",)),
    # bert_runner.trainer.Trainer splits each batch into equal micro-batches.
    CrossRule(
        ("gradient_accumulation_steps", "train_batch_size"),
        lambda steps, batch: steps < 1 or batch % steps == 0,
        lambda steps, batch: (f"train_batch_size must be a multiple of "
                              f"gradient_accumulation_steps ({steps}): each batch is split into "
                              "that many equal micro-batches"),
        "must divide train_batch_size"),
)


@dataclasses.dataclass(frozen=True)
class ModeRule:
    """Flags that act only in one mode of a script (`mode_flags`' values, `active(*values)`):
    given on the command line outside it, each is refused, as it would silently do nothing.
    `mode` says the mode ("with --pooling"), `why` what runs without it; `help` is appended to
    the help of each flag of `flag_names`."""

    flag_names: Tuple[str, ...]
    mode_flags: Tuple[str, ...]
    active: Callable[..., bool]
    mode: str
    why: str
    scripts: Tuple[str, ...]


MODE_RULES = (
    ModeRule(("output_format", "normalize"), ("pooling",), lambda pooling: pooling is not None,
             "with --pooling", "without it extract_features writes the original's JSON lines of "
             "token vectors", scripts=("extract_features.py",)),
    ModeRule(("doc_stride", "window_aggregation"), ("long_documents",), bool,
             "with --long_documents", "without it every example is truncated to max_seq_length",
             scripts=("run_classifier.py",)),
    ModeRule(("window_aggregation",), ("long_documents",), bool, "with --long_documents",
             "without it every text is truncated to max_seq_length", scripts=("export_model.py",)),
    ModeRule(("multi_label_threshold",), ("task_name",),
             lambda task: (task or "").lower() == "multilabel", "with --task_name=multilabel",
             "the other tasks predict one label by its highest probability",
             scripts=("run_classifier.py", "export_model.py")),
    ModeRule(("quantization", "calibration_file"), ("format",), lambda fmt: fmt == "litert",
             "with --format=litert", "the other formats keep the model's float32 weights",
             scripts=("export_model.py",)),
    ModeRule(("calibration_file",), ("quantization",), lambda q: q == "int8",
             "with --quantization=int8", "only full int8 calibrates activation ranges",
             scripts=("export_model.py",)),
)


def rule_for(script, flag_name):
    """The `Rule` of `flag_name` in `script` (a file name, e.g. "run_squad.py"), or None."""
    if (script, flag_name) in RULES:
        return RULES[(script, flag_name)]
    return RULES.get(flag_name)


def mode_rules_for(script, flag_values):
    """The `ModeRule`s of `script` whose flags `flag_values` all defines."""
    return [rule for rule in MODE_RULES if script in rule.scripts
            and all(name in flag_values for name in rule.flag_names + rule.mode_flags)]


def cross_rules_for(script, flag_values):
    """The `CrossRule`s of `script` whose flags `flag_values` all defines."""
    return [rule for rule in CROSS_RULES
            if (rule.scripts is None or script in rule.scripts)
            and all(name in flag_values for name in rule.flag_names)]


def _append_help(flag, texts):
    """Appends "(text; text)" to the help of `flag` (once)."""
    suffix = "(%s)" % "; ".join(texts)
    if not (flag.help or "").endswith(suffix):
        flag.help = f"{flag.help} {suffix}" if flag.help else suffix


def _single_checker(rule, flag_values):
    def check(value):
        if value is None or not rule.applies(flag_values) or rule.accepts(value):
            return True
        raise flags.ValidationError(rule.text)

    return check


def _cross_checker(rule):
    def check(values):
        args = [values[name] for name in rule.flag_names]
        if any(value is None for value in args) or rule.check(*args):
            return True
        raise flags.ValidationError(rule.message(*args))

    return check


def _mode_checker(rule, flag_values):
    def check(values):
        if rule.active(*[values[name] for name in rule.mode_flags]):
            return True
        given = [name for name in rule.flag_names if flag_values[name].present]
        if not given:
            return True
        raise flags.ValidationError(
            "%s only %s (%s): leave %s out" % (", ".join("--" + name for name in given),
                                              rule.mode, rule.why,
                                              "it" if len(given) == 1 else "them"))

    return check


_REGISTERED = weakref.WeakSet()


def register(flag_values, script=None):
    """Registers a validator on `flag_values` (an absl FlagValues, before it parses) for each
    rule of `script` (default: the running script's file name) whose flags it defines, and
    appends each range to its flag's help. Once per FlagValues; returns the flag names checked."""
    script = script or os.path.basename(sys.argv[0])
    checked = []
    if flag_values in _REGISTERED:
        return checked
    _REGISTERED.add(flag_values)
    names = {key if isinstance(key, str) else key[1] for key in RULES}
    helps = {}
    # Single-flag rules first: absl skips a cross rule whose flag already failed its own.
    for name in sorted(names):
        rule = rule_for(script, name)
        if rule is None or name not in flag_values:
            continue
        flags.register_validator(name, _single_checker(rule, flag_values),
                                 flag_values=flag_values)
        helps.setdefault(name, []).append(rule.text)
        checked.append(name)
    for rule in cross_rules_for(script, flag_values):
        flags.register_multi_flags_validator(list(rule.flag_names), _cross_checker(rule),
                                             flag_values=flag_values)
        helps.setdefault(rule.flag_names[0], []).append(rule.help)
        checked.extend(name for name in rule.flag_names if name not in checked)
    for rule in mode_rules_for(script, flag_values):
        flags.register_multi_flags_validator(list(rule.flag_names + rule.mode_flags),
                                             _mode_checker(rule, flag_values),
                                             flag_values=flag_values)
        for name in rule.flag_names:
            helps.setdefault(name, []).append("only " + rule.mode)
    for name, texts in helps.items():
        _append_help(flag_values[name], texts)
    return checked
