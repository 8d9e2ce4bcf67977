"""Export a trained model: a SavedModel that takes raw text and returns what the model's script
predicts (a classifier's probabilities, a SQuAD answer's logits, NER entities, SWAG endings'
probabilities) or a sentence vector; or the model in Hugging Face's layout (a fine-tuned run's
with its head, as transformers' class for it).

    python export_model.py --task_name=MRPC --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 \
      --checkpoint=/tmp/mrpc_output/ --export_dir=/tmp/mrpc_serving/1

    python export_model.py --format=squad --max_seq_length=384 --checkpoint=/tmp/squad_base/ ...
    python export_model.py --format=ner --checkpoint=/tmp/ner_output/ ...
    python export_model.py --format=swag --checkpoint=/tmp/swag_output/ ...
    python export_model.py --format=embedding --pooling=mean --normalize ...
    python export_model.py --format=huggingface ... --export_dir=/tmp/my_bert_hf

Each --format is declared by its owner (`bert_runner.serving.registry`): a task's in its own
package (`bert_tasks/<task>/serving.py`; signatures and outputs in its `raw_text.py`), the
embedding, Hugging Face, LiteRT and ONNX formats in `bert_runner/serving/formats.py`;
docs/export.md. `predict.py
--model=EXPORT_DIR` answers from any SavedModel of them.
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import PAIR, ModeRule, at_least, mode, ranged, within
from bert_runner.serving import registry
from bert_runner.serving.formats import QUANTIZATIONS
from bert_tasks.ner.tags import entity_types_rule
from bert_tasks.serving import register_all

FORMATS = register_all()

run_flags.define_bert_flags("bert_config_file", "vocab_file", "do_lower_case")
run_flags.define_embedding_flags()

flags.DEFINE_enum(
    "format", "classifier", FORMATS,
    ". ".join("%s: %s" % (name, registry.get(name).help) for name in FORMATS) + ".")
flags.DEFINE_enum(
    "quantization", "float32", QUANTIZATIONS,
    "--format=litert: float32, float16 (weights), dynamic_int8 (weights in int8, activations "
    "quantised per call) or int8 (weights and activations, calibrated on --calibration_file). "
    "--format=onnx: float32 or dynamic_int8 (ONNX Runtime's quantize_dynamic).")
flags.DEFINE_string(
    "calibration_file", None,
    "--format=litert --quantization=int8: training texts, one per line (a tab between the texts "
    "of a pair); the first 200 calibrate the activation ranges.")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated. Use the value the model was fine-tuned with (left out: the one its "
    "run.json records)."), at_least(3, PAIR))
flags.DEFINE_string("task_name", None, "The name of the task the model was fine-tuned on "
                    "(gives the label names and their number); --format=classifier, litert or "
                    "onnx. Default: the task of the run_classifier run that wrote --checkpoint "
                    "(its run.json).")
# run_classifier's, for its models.
flags.DEFINE_list(
    "labels", None,
    "--task_name=multilabel: the label set in the model's order. Default: the label_list.txt "
    "run_classifier wrote beside the checkpoint.")
ranged(flags.DEFINE_float(
    "multi_label_threshold", 0.5,
    "--task_name=multilabel: a label is predicted where its sigmoid probability is at least this."),
    within(0, 1, low_open=True, high_open=True))
flags.DEFINE_bool(
    "long_documents", False,
    "--format=classifier: a text longer than max_seq_length is cut into run_classifier's windows "
    "(--doc_stride) and their logits aggregated (--window_aggregation), as run_classifier "
    "--long_documents predicts. Default: truncation.")
flags.DEFINE_enum(
    "window_aggregation", "mean", ["mean", "max", "first"],
    "With --long_documents: how the windows' logits make a text's (run_classifier's flag).")
# run_squad's, for its models (--doc_stride also for --long_documents).
ranged(flags.DEFINE_integer(
    "doc_stride", None,
    "Word-pieces between the starts of consecutive windows: --format=squad (default 128, "
    "run_squad's) and --long_documents (default 64, run_classifier's); left out: the one the "
    "run's run.json records."),
    at_least(1, words="at least"))
ranged(flags.DEFINE_integer(
    "max_query_length", 64,
    "--format=squad: questions are cut to this many word-pieces (run_squad's flag; left out: "
    "the one the run's run.json records)."),
    at_least(1))
ranged(flags.DEFINE_integer(
    "n_best_size", 20, "--format=squad: the n-best size of the answers' post-processing."),
    at_least(1))
ranged(flags.DEFINE_integer(
    "max_answer_length", 30, "--format=squad: the longest answer, in word-pieces."), at_least(1))
flags.DEFINE_bool(
    "full_width_windows", False,
    "--format=squad, onnx or litert of a SQuAD run: keep run_squad.py's windows of "
    "max_seq_length, whose padding's positions its n-best draws (and then drops), instead of "
    "running each group of windows at its own length (the default, several times faster for "
    "short contexts; the answers differ only where padding outscores every real position: "
    "docs/export.md).")
flags.DEFINE_bool(
    "version_2_with_negative", False,
    "--format=squad: the model was trained on SQuAD 2.0 (an answer may be no answer).")
flags.DEFINE_float(
    "null_score_diff_threshold", None,
    "--format=squad with --version_2_with_negative: no answer where null_score - best_non_null "
    "is greater than this. Default: the model's: 0.0 (the original BERT's), -2.75 for ELECTRA's "
    "head (the original ELECTRA's qa_na_threshold).")
# run_ner's.
ranged(flags.DEFINE_list(
    "entity_types", None,
    "--format=ner: the entity types in label order (run_ner's flag). Default: the label_list.txt "
    "run_ner wrote beside the checkpoint."), entity_types_rule())
flags.DEFINE_string(
    "checkpoint", None,
    "The model: the output_dir of the --format's script (run_classifier, run_squad, run_ner, "
    "run_swag: its latest ckpt-N; its run.json must name that script), a ckpt-N prefix, or an "
    "original-layout TF1 checkpoint holding that script's head; for --format=embedding and "
    "huggingface any checkpoint holding the encoder, or a Hugging Face model directory. "
    "--bert_config_file and --vocab_file are optional with a Hugging Face directory (its own) "
    "and with a run's output_dir or a checkpoint in it (the bert_config.json the run wrote, the "
    "vocabulary it read).")
flags.DEFINE_enum(
    "mixed_precision", None, ["bf16"],
    "bf16: serve in bfloat16 with the weights stored in bfloat16 (half the size; LayerNorm and "
    "softmax in float32): about 2x faster on CPUs with bfloat16 units, probabilities within "
    "bfloat16 rounding. Default: float32, the original's values. SavedModel formats only.")
flags.DEFINE_bool(
    "encoder_only", False,
    "--format=huggingface: the encoder alone (BertModel, ElectraModel), not a fine-tuned run's "
    "model with its head nor a pre-training checkpoint's heads.")
flags.DEFINE_string(
    "export_dir", None,
    "The directory to create (must not exist), e.g. <serving model dir>/<version>.")
mode(ModeRule(("window_aggregation",), ("long_documents",), bool, "with --long_documents",
              "without it every text is truncated to max_seq_length"))
# --task_name left out is the run's (its run.json, followed in `main`, which checks these rules
# again with it): a multi-label run's threshold and labels are given without it.
mode(ModeRule(("multi_label_threshold",), ("task_name",),
              lambda task: task is None or task.lower() == "multilabel",
              "with --task_name=multilabel",
              "the other tasks predict one label by its highest probability"))
mode(ModeRule(("quantization", "calibration_file"), ("format",),
              lambda fmt: fmt in ("litert", "onnx"), "with --format=litert or onnx",
              "the other formats keep the model's float32 weights"))
mode(ModeRule(("calibration_file",), ("quantization",), lambda q: q == "int8",
              "with --quantization=int8", "only full int8 calibrates activation ranges"))
# Each format's own flags: given to another format they would silently do nothing.
mode(ModeRule(("task_name",), ("format",), lambda fmt: fmt in registry.CLASSIFIER_FORMATS,
              "with --format=classifier, litert or onnx", "the other formats' models have no "
              "GLUE task"))
mode(ModeRule(("labels",), ("format", "task_name"),
              lambda fmt, task: (fmt in registry.CLASSIFIER_FORMATS
                                 and (task is None or task.lower() == "multilabel")),
              "with --task_name=multilabel", "the other tasks' labels are the task's own"))
mode(ModeRule(("long_documents",), ("format",), lambda fmt: fmt == "classifier",
              "with --format=classifier", "the other formats cut every text to max_seq_length"))
# --format=onnx and litert take the run's task's flags (its run.json's task; the task checks
# them); --format=huggingface writes a SQuAD run's windows and answer settings to export.json.
SQUAD_FORMATS = ("squad", "onnx", "litert", "huggingface")
mode(ModeRule(("doc_stride",), ("format", "long_documents"),
              lambda fmt, long_documents: fmt in SQUAD_FORMATS or long_documents,
              "with --format=squad, onnx, litert, huggingface or --long_documents",
              "without them there are no windows"))
mode(ModeRule(("max_query_length", "n_best_size", "max_answer_length", "version_2_with_negative",
               "null_score_diff_threshold"), ("format",), lambda fmt: fmt in SQUAD_FORMATS,
              "with --format=squad, onnx, litert or huggingface",
              "the other formats answer no questions"))
mode(ModeRule(("full_width_windows",), ("format",), lambda fmt: fmt in ("squad", "onnx", "litert"),
              "with --format=squad, onnx or litert", "the other formats have no SQuAD windows"))
mode(ModeRule(("null_score_diff_threshold",), ("version_2_with_negative",), bool,
              "with --version_2_with_negative", "v1.1 answers every question"))
mode(ModeRule(("entity_types",), ("format",), lambda fmt: fmt in ("ner", "onnx", "litert"),
              "with --format=ner, onnx or litert", "the other formats tag no entities"))
mode(ModeRule(("encoder_only",), ("format",), lambda fmt: fmt == "huggingface",
              "with --format=huggingface", "the other formats serve a head or a pooled vector"))
mode(ModeRule(("pooling", "normalize"), ("format",),
              lambda fmt: fmt in ("embedding", "huggingface", "litert", "onnx"),
              "with --format=embedding, huggingface, litert or onnx",
              "the other formats serve their task's head, not a pooled vector"))


def main(_):
    import tensorflow as tf

    from bert_runner import startup
    from bert_runner.serving import provenance
    from bert_runner.serving.export_config import ExportConfig
    from bert_runner.runs.model_files import model_files

    config = run_flags.config_from_flags(ExportConfig, given=run_flags.given_names())
    # Every format writes a new directory: refused before a checkpoint is read, not after.
    # (gfile: a SavedModel may go to a bucket)
    if tf.io.gfile.exists(config.export_dir):
        raise FileExistsError(f"{config.export_dir} already exists: choose a new --export_dir")
    serving_format = registry.get(config.format)
    config = provenance.follow_run_record(config)
    run_flags.check_rules_again(config)  # with the values the run's record gave
    max_seq_length = config.max_seq_length if serving_format.needs_sequence_length else None
    files = model_files(config.bert_config_file, config.vocab_file, config.checkpoint,
                        max_seq_length, flag="--checkpoint")
    startup.load_tokenizer(files.vocab_file, config.do_lower_case, config.checkpoint,
                           files.config, files.config_file)
    serving_format.export(config, files)


if __name__ == "__main__":
    for name in ("checkpoint", "export_dir"):
        flags.mark_flag_as_required(name)
    run_flags.require_model_files("bert_config_file", "vocab_file", checkpoint="checkpoint")
    cli.run_script(main)
