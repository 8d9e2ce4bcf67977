"""Export a fine-tuned classifier as a SavedModel that takes raw text and returns probabilities.

    python export_model.py --task_name=MRPC --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 \
      --checkpoint=/tmp/mrpc_output/ --export_dir=/tmp/mrpc_serving/1

Signatures and outputs: see `bert_runner/export.py` (`serving_default(text_a)`, `pairs(text_a, text_b)`).
"""
from absl import flags

from bert_runner import cli, flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "do_lower_case")

flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated. Use the value the model was fine-tuned with.")
flags.DEFINE_string("task_name", None, "The name of the task the model was fine-tuned on "
                    "(gives the label names and their number).")
flags.DEFINE_string(
    "checkpoint", None,
    "The fine-tuned classifier: a run_classifier output_dir (its latest ckpt-N), a ckpt-N prefix, "
    "or an original-layout TF1 classifier checkpoint (model.ckpt-N with output_weights/"
    "output_bias).")
flags.DEFINE_enum(
    "mixed_precision", None, ["bf16"],
    "bf16: serve in bfloat16 with the weights stored in bfloat16 (half the size; LayerNorm and "
    "softmax in float32): about 2x faster on CPUs with bfloat16 units, probabilities within "
    "bfloat16 rounding. Default: float32, the original's values.")
flags.DEFINE_string(
    "export_dir", None,
    "The SavedModel directory to create (must not exist), e.g. <serving model dir>/<version>.")


def main(_):
    from bert_tasks.classifier import processors
    from bert_runner import export, startup

    processor = processors.get_processor(FLAGS.task_name)
    config = startup.load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    startup.load_tokenizer(FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.checkpoint, config,
                           FLAGS.bert_config_file)
    model = export.load_classifier(config, processor.num_labels, FLAGS.checkpoint,
                                   task_name=FLAGS.task_name, config_file=FLAGS.bert_config_file)
    if FLAGS.mixed_precision == "bf16":
        from modeling.inference import with_bfloat16_weights

        model = with_bfloat16_weights(model)
    export.export_classifier(model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                             processor.get_labels(), FLAGS.export_dir)


if __name__ == "__main__":
    for name in ("bert_config_file", "vocab_file", "task_name", "checkpoint", "export_dir"):
        flags.mark_flag_as_required(name)
    cli.run(main)
