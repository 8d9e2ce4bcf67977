"""Export a trained model: a SavedModel that takes raw text and returns a fine-tuned classifier's
probabilities or a sentence vector, or the encoder in Hugging Face's layout.

    python export_model.py --task_name=MRPC --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --do_lower_case=True --max_seq_length=128 \
      --checkpoint=/tmp/mrpc_output/ --export_dir=/tmp/mrpc_serving/1

    python export_model.py --format=embedding --pooling=mean --normalize ...
    python export_model.py --format=huggingface ... --export_dir=/tmp/my_bert_hf

Signatures and outputs: see `bert_runner/export.py` (`serving_default(text_a)`, `pairs(text_a, text_b)`);
the Hugging Face layout: `modeling.hf_checkpoint.save_hf_model`.
"""
from absl import flags, logging

from bert_runner import cli, flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "do_lower_case")
run_flags.define_embedding_flags()

flags.DEFINE_enum(
    "format", "classifier", ["classifier", "embedding", "huggingface"],
    "classifier: raw text -> a fine-tuned classifier's probabilities (SavedModel). embedding: raw "
    "text -> one vector per text, by --pooling and --normalize (SavedModel). huggingface: the "
    "encoder as config.json, model.safetensors and vocab.txt, for transformers' "
    "BertModel.from_pretrained.")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated. Use the value the model was fine-tuned with.")
flags.DEFINE_string("task_name", None, "The name of the task the model was fine-tuned on "
                    "(gives the label names and their number); --format=classifier only.")
flags.DEFINE_string(
    "checkpoint", None,
    "The model: a run_classifier output_dir (its latest ckpt-N), a ckpt-N prefix, or an "
    "original-layout TF1 checkpoint (a classifier's, with output_weights/output_bias, for "
    "--format=classifier); for --format=embedding and huggingface any checkpoint holding the "
    "encoder, or a Hugging Face model directory (then --bert_config_file and --vocab_file are "
    "optional).")
flags.DEFINE_enum(
    "mixed_precision", None, ["bf16"],
    "bf16: serve in bfloat16 with the weights stored in bfloat16 (half the size; LayerNorm and "
    "softmax in float32): about 2x faster on CPUs with bfloat16 units, probabilities within "
    "bfloat16 rounding. Default: float32, the original's values. SavedModel formats only.")
flags.DEFINE_string(
    "export_dir", None,
    "The directory to create (must not exist), e.g. <serving model dir>/<version>.")


def main(_):
    from bert_runner import export, startup

    # The Hugging Face layout has no sequence length: any the config's positions allow.
    max_seq_length = None if FLAGS.format == "huggingface" else FLAGS.max_seq_length
    files = startup.model_files(FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.checkpoint,
                                max_seq_length, flag="--checkpoint")
    config = files.config
    startup.load_tokenizer(files.vocab_file, FLAGS.do_lower_case, FLAGS.checkpoint, config,
                           files.config_file)
    if FLAGS.format == "classifier":
        from bert_tasks.classifier import processors

        if not FLAGS.task_name:
            raise ValueError("--task_name is required with --format=classifier")
        if FLAGS.task_name.lower() == "multilabel":
            raise ValueError("--task_name=multilabel: this version exports single-label "
                             "classifiers (softmax over the labels) only, not a multi-label "
                             "model's sigmoid outputs")
        processor = processors.get_processor(FLAGS.task_name)
        model = export.load_classifier(config, processor.num_labels, FLAGS.checkpoint,
                                       task_name=FLAGS.task_name, config_file=files.config_file)
    else:
        if FLAGS.format == "embedding" and not FLAGS.pooling:
            raise ValueError("--format=embedding needs --pooling=cls, mean or max")
        model = export.load_encoder(config, FLAGS.checkpoint, config_file=files.config_file)
    if FLAGS.format == "huggingface":
        from modeling.hf_checkpoint import save_hf_model

        save_hf_model(model, FLAGS.export_dir, files.vocab_file, FLAGS.do_lower_case)
        logging.info("Wrote the encoder in Hugging Face's layout to %s", FLAGS.export_dir)
        return
    if FLAGS.mixed_precision == "bf16":
        from modeling.inference import with_bfloat16_weights

        model = with_bfloat16_weights(model)
    if FLAGS.format == "classifier":
        export.export_classifier(model, files.vocab_file, FLAGS.do_lower_case,
                                 FLAGS.max_seq_length, processor.get_labels(), FLAGS.export_dir)
    else:
        export.export_embedding(model, files.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
                                FLAGS.pooling, FLAGS.normalize, FLAGS.export_dir)


if __name__ == "__main__":
    for name in ("checkpoint", "export_dir"):
        flags.mark_flag_as_required(name)
    run_flags.require_model_files("bert_config_file", "vocab_file", checkpoint="checkpoint")
    cli.run(main)
