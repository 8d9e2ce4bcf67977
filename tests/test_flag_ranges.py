"""bert_runner.flag_ranges: every script refuses a flag out of its range when it parses its
flags, before any work (exit code 2, one line naming the flag, its value and the range), and
runs with its defaults. The scripts import no TensorFlow before their flags are parsed, so each
command here takes a fraction of a second (run_ner_feature_based's own --choices validator
imports TensorFlow: a few seconds); `--only_check_args` (absl's) stops after parsing."""
import json
import os
import re
import subprocess
import sys

import pytest
from absl import flags

from bert_runner import cli, flag_ranges
from conftest import ROOT
from refusals import assert_refused

# What each script requires (never read: every command here stops after parsing).
REQUIRED = {
    "run_classifier": ["--task_name=mrpc", "--data_dir=/data", "--vocab_file=/vocab.txt",
                       "--bert_config_file=/config.json", "--output_dir=/out"],
    "run_squad": ["--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                  "--output_dir=/out"],
    "run_swag": ["--data_dir=/data", "--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                 "--output_dir=/out"],
    "run_ner": ["--data_dir=/data", "--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                "--output_dir=/out"],
    "run_ner_feature_based": ["--data_dir=/data", "--vocab_file=/vocab.txt",
                              "--bert_config_file=/config.json", "--init_checkpoint=/ckpt",
                              "--output_dir=/out"],
    "run_pretraining": ["--input_file=/in.tfrecord", "--bert_config_file=/config.json",
                        "--output_dir=/out"],
    "create_pretraining_data": ["--input_file=/in.txt", "--output_file=/out.tfrecord",
                                "--vocab_file=/vocab.txt"],
    "build_vocab": ["--input_file=/in.txt", "--output_file=/vocab.txt"],
    "extract_features": ["--input_file=/in.txt", "--output_file=/out.jsonl",
                         "--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                         "--init_checkpoint=/ckpt"],
    "export_model": ["--vocab_file=/vocab.txt",
                     "--bert_config_file=/config.json", "--checkpoint=/ckpt", "--export_dir=/out"],
    "add_vocab_words": ["--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                        "--init_checkpoint=/ckpt", "--words_file=/words.txt",
                        "--output_dir=/out"],
    "demo": [],
    "run_sentence_embeddings": ["--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                                "--output_dir=/out"],
    "run_checkpoint_sweep": ["--pretraining_dirs=/pt", "--task_name=mrpc", "--data_dir=/data",
                             "--vocab_file=/vocab.txt", "--output_dir=/out"],
    "run_glue": ["--glue_dir=/glue", "--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                 "--output_dir=/out"],
    "run_squad_grid": ["--train_file=/train.json", "--predict_file=/dev.json",
                       "--vocab_file=/vocab.txt", "--bert_config_file=/config.json",
                       "--output_dir=/out"],
}
# The flags that turn on the rules that apply only with them (each script's that it defines).
EVERYTHING_ON = {
    "run_classifier": ["--do_train", "--do_eval", "--do_predict", "--use_tpu"],
    "run_squad": ["--do_train", "--do_predict", "--use_tpu"],
    "run_swag": ["--do_train", "--do_eval", "--do_predict", "--use_tpu"],
    "run_ner": ["--do_train", "--do_eval", "--do_predict", "--use_tpu"],
    "run_pretraining": ["--do_train", "--do_eval", "--use_tpu"],
    "extract_features": ["--use_tpu"],
    "run_sentence_embeddings": ["--do_train", "--do_eval", "--use_tpu"],
}


def parse(script, *args, env=None):
    """Runs `script` with its required flags and `args` up to flag parsing."""
    return subprocess.run(
        [sys.executable, str(ROOT / f"{script}.py"), *REQUIRED[script], *args,
         "--only_check_args"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})})


def _cross(*names):
    return names


# (script, bad flags, what is refused: a flag name (its own range) or a tuple of names (a rule
# between flags), the docs/errors.md row the command makes or None). Together they break every
# rule of flag_ranges once (test_every_rule_is_broken_by_a_case).
CASES = [
    ("run_classifier", ["--do_train", "--learning_rate=-2e-5"], ["learning_rate"],
     "flag-learning-rate-negative"),
    ("run_classifier",
     ["--do_train", "--do_eval", "--do_predict", "--num_train_epochs=0", "--warmup_proportion=1.5",
      "--save_checkpoints_steps=0", "--iterations_per_loop=0", "--log_steps=0",
      "--profile_steps=-1", "--keep_checkpoint_max=0",
      "--gradient_accumulation_steps=0", "--peak_tflops=0", "--use_tpu", "--num_tpu_cores=0",
      "--random_seed=-1", "--seeds=1,4294967296", "--eval_batch_size=0", "--predict_batch_size=0",
      "--max_seq_length=2", "--doc_stride=0", "--multi_label_threshold=1"],
     ["num_train_epochs", "warmup_proportion", "save_checkpoints_steps", "iterations_per_loop",
      "log_steps", "profile_steps", "keep_checkpoint_max", "gradient_accumulation_steps", "peak_tflops", "num_tpu_cores",
      "random_seed", "seeds", "eval_batch_size", "predict_batch_size", "max_seq_length",
      "doc_stride", "multi_label_threshold"], None),
    ("run_classifier", ["--do_train", "--max_sequences_per_row=4", "--bilstm_on_top"],
     [_cross("max_sequences_per_row", "bilstm_on_top")], None),
    ("run_classifier", ["--lora_rank=-1", "--lora_alpha=0"], ["lora_rank", "lora_alpha"], None),
    ("run_classifier", ["--do_train", "--layerwise_lr_decay=0"], ["layerwise_lr_decay"], None),
    ("run_classifier", ["--do_eval", "--max_sequences_per_row=4"],
     [_cross("max_sequences_per_row", "do_train")], None),
    ("run_classifier", ["--do_train", "--teacher=/t", "--distillation_temperature=0",
                        "--distillation_weight=1.5", "--init_from_teacher_stride=-1"],
     ["distillation_temperature", "distillation_weight", "init_from_teacher_stride"], None),
    ("run_classifier", ["--do_train", "--unlabeled_file=/u.txt", "--distillation_weight=0.3"],
     [_cross("teacher_bert_config_file", "distillation_temperature", "distillation_weight",
             "unlabeled_file", "init_from_teacher_stride", "teacher")], None),
    ("run_classifier", ["--do_train", "--teacher=/t", "--init_from_teacher_stride=2",
                        "--init_checkpoint=/c"],
     [_cross("init_from_teacher_stride", "init_checkpoint")], None),
    ("run_classifier", ["--do_train", "--teacher=/t", "--max_sequences_per_row=2"],
     [_cross("max_sequences_per_row", "teacher")], None),
    ("run_swag", ["--lora_alpha=16", "--lora_targets=all"],
     [_cross("lora_alpha", "lora_targets", "lora_rank")], None),
    ("run_sentence_embeddings", ["--do_train", "--max_seq_length=1", "--similarity_scale=0"],
     ["max_seq_length", "similarity_scale"], None),
    # Flags given outside their mode (flag_ranges.ModeRule).
    ("extract_features", ["--output_format=npy", "--normalize"],
     [_cross("output_format", "normalize", "pooling")], "flag-outside-its-mode"),
    ("extract_features", ["--pooling=mean", "--layers=-2"], [_cross("layers", "pooling")], None),
    ("run_classifier", ["--do_eval", "--teacher=/t", "--distillation_weight=0.3"],
     [_cross("teacher", "teacher_bert_config_file", "distillation_temperature",
             "distillation_weight", "unlabeled_file", "init_from_teacher_stride", "do_train")],
     None),
    ("run_sentence_embeddings", ["--do_eval", "--eval_file=/e.jsonl", "--train_file=/t.jsonl",
                                 "--symmetric_loss"],
     [_cross("train_file", "similarity_scale", "symmetric_loss", "do_train")], None),
    ("run_sentence_embeddings", ["--do_train", "--train_file=/t.jsonl", "--corpus_file=/c.txt"],
     [_cross("eval_file", "corpus_file", "do_eval")], None),
    ("run_classifier", ["--doc_stride=32", "--window_aggregation=max",
                        "--multi_label_threshold=0.3"],
     [_cross("doc_stride", "window_aggregation", "long_documents"),
      _cross("multi_label_threshold", "task_name")], None),
    ("export_model", ["--window_aggregation=max", "--quantization=float16"],
     [_cross("window_aggregation", "long_documents"),
      _cross("quantization", "calibration_file", "format")], None),
    ("export_model", ["--format=litert", "--quantization=float16", "--calibration_file=/in.txt"],
     [_cross("calibration_file", "quantization")], None),
    # Another format's flags: the model exported would silently ignore them.
    ("export_model", ["--format=swag", "--task_name=mrpc"], [_cross("task_name", "format")],
     None),
    ("export_model", ["--task_name=mrpc", "--labels=a"],
     [_cross("labels", "format", "task_name")], None),
    ("export_model", ["--format=embedding", "--long_documents"],
     [_cross("long_documents", "format")], None),
    ("export_model", ["--format=ner", "--entity_types=PER,LOC", "--doc_stride=8"],
     [_cross("doc_stride", "format", "long_documents")], None),
    ("run_pretraining", ["--do_train", "--temperature=2"],
     [_cross("gen_weight", "disc_weight", "temperature", "pretraining_objective")], None),
    ("run_squad", ["--do_predict", "--null_score_diff_threshold=-1"],
     [_cross("null_score_diff_threshold", "version_2_with_negative")], None),
    ("export_model", ["--format=squad", "--null_score_diff_threshold=-1"],
     [_cross("null_score_diff_threshold", "version_2_with_negative")], None),
    ("export_model", ["--format=ner", "--max_query_length=32"],
     [_cross("max_query_length", "n_best_size", "max_answer_length", "version_2_with_negative",
             "null_score_diff_threshold", "format")], None),
    ("export_model", ["--format=ner", "--full_width_windows"],
     [_cross("full_width_windows", "format")], None),
    ("export_model", ["--format=classifier", "--entity_types=PER"],
     [_cross("entity_types", "format")], None),
    ("export_model", ["--format=swag", "--pooling=mean"], [_cross("pooling", "normalize", "format")],
     None),
    ("export_model", ["--format=onnx", "--encoder_only"], [_cross("encoder_only", "format")],
     None),
    ("run_swag", ["--do_train", "--train_batch_size=30", "--gradient_accumulation_steps=4"],
     [_cross("gradient_accumulation_steps", "train_batch_size")], "flag-accumulation-uneven"),
    ("run_pretraining", ["--do_train", "--train_batch_size=0"], ["train_batch_size"],
     "flag-batch-size-zero"),
    ("run_pretraining",
     ["--do_train", "--do_eval", "--num_train_steps=0", "--num_warmup_steps=-1",
      "--max_eval_steps=0", "--max_seq_length=4", "--max_predictions_per_seq=0",
      "--input_format=text", "--pretraining_objective=ltr"],
     ["num_train_steps", "num_warmup_steps", "max_eval_steps", "max_seq_length",
      "max_predictions_per_seq", _cross("input_format", "pretraining_objective")], None),
    ("run_pretraining",
     ["--pretraining_objective=electra", "--gen_weight=-1", "--disc_weight=-0.5",
      "--temperature=0"], ["gen_weight", "disc_weight", "temperature"], None),
    ("run_swag", ["--max_seq_length=2"], ["max_seq_length"], "flag-max-seq-length-too-small"),
    ("run_squad", ["--max_seq_length=64", "--max_query_length=64"],
     [_cross("max_seq_length", "max_query_length")], "flag-squad-no-room-for-question"),
    ("run_squad",
     ["--do_predict", "--doc_stride=0", "--max_query_length=0", "--n_best_size=0",
      "--max_answer_length=0"],
     ["doc_stride", "max_query_length", "n_best_size", "max_answer_length"], None),
    ("run_ner", ["--max_seq_length=2"], ["max_seq_length"], None),
    ("run_ner", ["--entity_types=PER,LOC,PER"], ["entity_types"], "flag-entity-types-not-types"),
    ("export_model", ["--format=ner", "--entity_types=B-PER"], ["entity_types"], None),
    ("create_pretraining_data", ["--mask_token_prob=0.9", "--random_token_prob=0.2"],
     [_cross("mask_token_prob", "random_token_prob")], "flag-masking-rates-above-one"),
    ("create_pretraining_data",
     ["--max_seq_length=4", "--masked_lm_prob=0", "--mask_token_prob=1.5",
      "--random_token_prob=-0.1", "--dupe_factor=0", "--short_seq_prob=1.1", "--chunk_size_mb=-1",
      "--num_workers=0"],
     ["max_seq_length", "masked_lm_prob", "mask_token_prob", "random_token_prob", "dupe_factor",
      "short_seq_prob", "chunk_size_mb", "num_workers"], None),
    ("create_pretraining_data", ["--max_predictions_per_seq=126", "--num_workers=2"],
     [_cross("max_predictions_per_seq", "max_seq_length"), _cross("num_workers", "chunk_size_mb")],
     None),
    ("create_pretraining_data", ["--runner=DirectRunner", "--num_workers=2", "--chunk_size_mb=1"],
     [_cross("runner", "num_workers")], "flag-runner-with-num-workers"),
    ("build_vocab", ["--runner=DirectRunner", "--max_input_lines=10"],
     [_cross("runner", "max_input_lines")], None),
    ("create_pretraining_data", ["--beam_pipeline_options=--direct_num_workers=2"],
     [_cross("beam_pipeline_options", "runner")], None),
    ("run_pretraining", ["--do_whole_word_mask", "--masked_lm_prob=0.2"],
     [_cross("input_format", "pretraining_objective", "do_whole_word_mask", "masked_lm_prob",
             "mask_token_prob", "random_token_prob", "short_seq_prob")],
     "flag-masking-with-records"),
    ("run_pretraining", ["--pretraining_objective=ltr", "--next_sentence_prediction"],
     [_cross("pretraining_objective", "next_sentence_prediction")], None),
    ("run_ner_feature_based",
     ["--lstm_units=0", "--num_train_epochs=0", "--train_batch_size=0", "--predict_batch_size=0",
      "--learning_rate=0", "--max_seq_length=2", "--random_seed=4294967296"],
     ["lstm_units", "num_train_epochs", "train_batch_size", "predict_batch_size",
      "learning_rate", "max_seq_length", "random_seed"], "flag-lstm-units-zero"),
    ("build_vocab",
     ["--num_unused=-1", "--max_input_lines=-1", "--max_input_words=0", "--min_count=0",
      "--max_unique_chars=0", "--num_workers=0"],
     ["num_unused", "max_input_lines", "max_input_words", "min_count", "max_unique_chars",
      "num_workers"], None),
    ("extract_features", ["--layers=-1,,-2", "--batch_size=0", "--max_seq_length=2"],
     ["layers", "batch_size", "max_seq_length"], None),
    ("export_model", ["--max_seq_length=0"], ["max_seq_length"], None),
    ("run_checkpoint_sweep", ["--checkpoint_every=0"], ["checkpoint_every"], None),
    ("run_glue", ["--learning_rates=1e-5,0", "--epochs=0", "--train_batch_sizes=8,x",
                  "--restarts=0"], ["learning_rates", "epochs", "train_batch_sizes", "restarts"],
     None),
    ("run_glue", ["--gradient_accumulation_steps=3"],
     [_cross("gradient_accumulation_steps", "train_batch_sizes")], None),
]


@pytest.mark.parametrize("script,args,refused,case", CASES,
                         ids=[f"{c[0]}-{c[3] or i}" for i, c in enumerate(CASES)])
def test_a_flag_out_of_range_is_refused_at_parsing(script, args, refused, case):
    result = parse(script, *args)
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    # What the script says (TensorFlow, when a validator imports it, logs before).
    said = result.stderr[result.stderr.find(f"{script}.py: error: flag"):]
    assert said.startswith(f"{script}.py: error: flag"), result.stderr[-3000:]
    for what in refused:
        if isinstance(what, str):
            assert f"flag --{what}=" in said, (what, said)
        else:
            pattern = r"flags " + r", ".join(rf"{name}=[^,\n]*" for name in what) + ": "
            assert re.search(pattern, said), (what, said)
    # One line per refused rule, the first with the hint: nothing else was refused.
    lines = said.rstrip("\n").splitlines()
    assert len(lines) == len(refused), said
    assert lines[0].endswith("(--helpfull lists every flag with its range)"), said
    if case:
        assert_refused(result, case)


@pytest.fixture(scope="module")
def defaults_runs(tmp_path_factory):
    """{script: (its run with its defaults and every rule on, the file where it wrote the rules
    it declares)}: one command per script serves test_the_defaults_pass and declared_rules."""
    folder = tmp_path_factory.mktemp("rules")
    return {script: (parse(script, *EVERYTHING_ON.get(script, ()),
                           env={cli.FLAG_RULES_VARIABLE: str(folder / f"{script}.json")}),
                     folder / f"{script}.json")
            for script in sorted(REQUIRED)}


@pytest.mark.parametrize("script", sorted(REQUIRED))
def test_the_defaults_pass(defaults_runs, script):
    result, _ = defaults_runs[script]
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_rule_of_a_flag_the_run_does_not_use_is_not_applied():
    # Evaluation alone: the schedule, training batch and checkpoint flags are never read.
    result = parse("run_pretraining", "--do_eval", "--learning_rate=-1", "--num_train_steps=0",
                   "--num_warmup_steps=-1", "--train_batch_size=0", "--save_checkpoints_steps=0",
                   "--iterations_per_loop=0", "--keep_checkpoint_max=0", "--peak_tflops=-1",
                   "--num_tpu_cores=0")
    assert result.returncode == 0, result.stderr[-3000:]
    # Training alone: the prediction flags are never read.
    result = parse("run_squad", "--do_train", "--n_best_size=0", "--max_answer_length=0",
                   "--predict_batch_size=0")
    assert result.returncode == 0, result.stderr[-3000:]


def declared_rules(defaults_runs):
    """{script: [(kind, flag names, text)]}: the rules each script declares where it defines its
    flags (`flag_ranges.declared`, written by `cli.run_script` to BERT_FLAG_RULES_FILE)."""
    rules = {}
    for script, (result, path) in defaults_runs.items():
        assert result.returncode == 0, result.stderr[-3000:]
        rules[script] = [(kind, tuple(names), text)
                         for kind, names, text in json.loads(path.read_text())]
    return rules


def test_every_rule_is_broken_by_a_case(defaults_runs):
    """Each rule a script declares (a flag's range: by its flag and text, so that a script's own
    range of a shared name counts apart; a rule between flags: by its flags) is broken by a case
    above, in some script that declares it."""
    declared, broken = set(), set()
    for script, rules in declared_rules(defaults_runs).items():
        ranges = {names[0]: text for kind, names, text in rules if kind == "range"}
        declared |= {(names, text if kind == "range" else None) for kind, names, text in rules}
        for case_script, _, refused, _ in CASES:
            if case_script == script:
                broken |= {((what,), ranges.get(what)) if isinstance(what, str) else (what, None)
                           for what in refused}
    assert declared - broken == set(), "rules no case breaks"
    assert broken <= declared, "cases of rules no script declares"


@pytest.mark.parametrize("script,args", [
    ("extract_features", ["--pooling=mean", "--output_format=npy", "--output_file=/out.npy",
                          "--normalize"]),
    ("run_classifier", ["--long_documents", "--doc_stride=32", "--window_aggregation=max"]),
    ("run_classifier", ["--task_name=multilabel", "--multi_label_threshold=0.3"]),
    ("run_ner", ["--lora_rank=8", "--lora_alpha=16", "--lora_targets=all"]),
    ("run_classifier", ["--do_train", "--teacher=/t", "--distillation_weight=0.3",
                        "--unlabeled_file=/u.txt", "--init_from_teacher_stride=2"]),
    ("run_sentence_embeddings", ["--do_train", "--do_eval", "--train_file=/t.jsonl",
                                 "--eval_file=/e.jsonl", "--corpus_file=/c.txt",
                                 "--similarity_scale=10", "--symmetric_loss"]),
    ("extract_features", ["--layers=-2"]),
    ("export_model", ["--format=litert", "--quantization=int8", "--calibration_file=/in.txt"]),
    ("export_model", ["--task_name=multilabel", "--labels=a,b", "--long_documents",
                      "--doc_stride=32"]),
    # A run's task flags with the formats that take them: LiteRT's as ONNX's, and a SQuAD run's
    # windows and answer settings beside its Hugging Face directory (export.json).
    ("export_model", ["--format=litert", "--doc_stride=64", "--n_best_size=5",
                      "--full_width_windows"]),
    ("export_model", ["--format=litert", "--entity_types=PER,LOC"]),
    ("export_model", ["--format=huggingface", "--doc_stride=64", "--max_query_length=32",
                      "--version_2_with_negative", "--null_score_diff_threshold=-1"]),
])
def test_flags_given_in_their_mode_pass(script, args):
    result = parse(script, *args)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_ranges_are_in_the_help_and_checked_at_parsing():
    flag_values = flags.FlagValues()
    flags.DEFINE_bool("do_train", False, "Train.", flag_values=flag_values)
    rate = flag_ranges.ranged(
        flags.DEFINE_float("learning_rate", 5e-5, "The learning_rate.", flag_values=flag_values),
        flag_ranges.above(0).when(*flag_ranges.TRAINING))
    for name, default in (("max_seq_length", 384), ("max_query_length", 64)):
        flag_ranges.ranged(flags.DEFINE_integer(name, default, f"The {name}.",
                                                flag_values=flag_values), flag_ranges.at_least(1))
    flag_ranges.cross(flag_ranges.CrossRule(
        ("max_query_length", "max_seq_length"), lambda query, seq: seq > query + 3,
        lambda query, seq: "no room", "must be < max_seq_length - 3"), flag_values=flag_values)
    assert rate.name == "learning_rate"
    assert flag_values["learning_rate"].help == "The learning_rate. (must be > 0)"
    assert flag_values["max_query_length"].help == (
        "The max_query_length. (must be >= 1; must be < max_seq_length - 3)")
    assert [kind for kind, _, _ in flag_ranges.declared(flag_values)] == [
        "range", "range", "range", "cross"]
    flag_values(["prog", "--learning_rate=-1"])  # not training: not checked
    with pytest.raises(flags.IllegalFlagValueError, match=r"flag --learning_rate=-1.0: must be > 0"):
        flag_values(["prog", "--do_train", "--learning_rate=-1"])
    with pytest.raises(flags.IllegalFlagValueError,
                       match=r"flags max_query_length=64, max_seq_length=10: no room"):
        flag_values(["prog", "--learning_rate=1", "--max_seq_length=10"])


@pytest.mark.parametrize("layers,ok", [
    ("-1,-2,-3,-4", True), ("0", True), ("-1, -2", True), ("", False), ("-1,", False),
    ("last", False), ("1.5", False), ("--1", False)])
def test_layers_must_be_comma_separated_integers(layers, ok):
    assert flag_ranges.layer_indexes().accepts(layers) == ok


def test_a_partial_hugging_face_directory_says_what_it_lacks(tmp_path):
    # Without --vocab_file and --bert_config_file: not "--vocab_file is required" (the folder
    # has vocab.txt), but what the folder lacks.
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_classifier.py"), "--task_name=mrpc", "--data_dir=/data",
         "--output_dir=/out", f"--init_checkpoint={tmp_path}", "--only_check_args"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert_refused(result, "checkpoint-directory-neither-layout")
    assert "is required" not in result.stderr


def test_table7_choices_are_known_and_each_given_once():
    result = parse("run_ner_feature_based", "--choices=last,embeddings,last")
    assert result.returncode == 2 and "--choices names last more than once" in result.stderr
    result = parse("run_ner_feature_based", "--choices=last,top")
    assert result.returncode == 2 and "unknown --choices top" in result.stderr
