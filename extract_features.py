"""Extract pre-computed feature vectors from a BERT encoder (the original `extract_features.py`).

Input: one example per line, `text_a` or `text_a ||| text_b`. Output: one JSON object per line,
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": j, "values": [...]}]}]}`,
values rounded to 6 decimals, exactly as the original writes it (`linex_index` sic).
"""
import json
import os
import re
import time

from absl import flags, logging

from bert_runner import cli, flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "init_checkpoint", "vocab_file", "do_lower_case")

flags.DEFINE_string("input_file", None, "")
flags.DEFINE_string("output_file", None, "")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer "
    "than this will be truncated, and sequences shorter than this will be padded.")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
flags.DEFINE_string("master", None, "If using a TPU, the address of the master.")
flags.DEFINE_integer(
    "num_tpu_cores", 8, "Only used if `use_tpu` is True. Total number of TPU cores to use.")
flags.DEFINE_enum(
    "mixed_precision", None, ["bf16"],
    "bf16: compute in bfloat16 with the weights stored in bfloat16 (LayerNorm and softmax in "
    "float32); about 2x faster on CPUs with bfloat16 units, values within bfloat16 rounding "
    "(~1e-2). Default: float32, the original's values.")
flags.DEFINE_bool(
    "use_one_hot_embeddings", False,
    "If True, tf.one_hot will be used for embedding lookups, otherwise tf.nn.embedding_lookup "
    "will be used. On TPUs, this should be True since it is much faster.")

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(input_file):
    """Yields `(unique_id, text_a, text_b or None)`, unique_id = 0-based line index.

    A line that is not valid UTF-8 raises ValueError naming the file and line (the original's
    `convert_to_unicode` dropped its bad bytes without a word).
    """
    with open(input_file, "rb") as reader:
        for unique_id, raw in enumerate(reader):
            try:
                # The original reads through GFile, which drops '\r' (spec/data.md §0).
                line = raw.replace(b"\r", b"").decode("utf-8").strip()
            except UnicodeDecodeError as e:
                raise ValueError("%s:%d: not valid UTF-8 (%s)"
                                 % (input_file, unique_id + 1, e)) from None
            match = _PAIR.match(line)
            if match:
                yield unique_id, match.group(1), match.group(2)
            else:
                yield unique_id, line, None


def convert_example(text_a, text_b, tokenizer, max_seq_length):
    """`[CLS] a [SEP] (b [SEP])` → (tokens, input_ids, input_mask, input_type_ids), zero-padded."""
    from vocab import packing

    tokens_b = tokenizer.tokenize(text_b) if text_b else None
    tokens, type_ids = packing.pack_pair(tokenizer.tokenize(text_a), tokens_b, max_seq_length)
    return (tokens, *packing.pad_inputs(
        tokenizer.convert_tokens_to_ids(tokens), type_ids, max_seq_length))


def feature_record(unique_id, tokens, layer_outputs, layer_indexes):
    """One output line's object; `layer_outputs[j]` is float `[S, H]` for `layer_indexes[j]`."""
    features = []
    for i, token in enumerate(tokens):
        layers = [
            {"index": index, "values": [round(float(x), 6) for x in output[i]]}
            for index, output in zip(layer_indexes, layer_outputs)
        ]
        features.append({"token": token, "layers": layers})
    return {"linex_index": unique_id, "features": features}


def check_layer_indexes(layer_indexes, config, bert_config_file):
    """Each `--layers` index must name one of the config's layers (-1: the last)."""
    num_layers = config.num_hidden_layers
    for index in layer_indexes:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"--layers index {index} is outside the {num_layers} layers of "
                             f"{bert_config_file} (-{num_layers} to {num_layers - 1})")


def extract(model, tokenizer, examples, output_file, layer_indexes, max_seq_length, batch_size,
            input_file=None):
    """Runs the encoder over `examples` (of `read_examples` of `input_file`) and writes JSON
    lines to `output_file` atomically; returns their number. No example (an empty input file)
    writes an empty output, as the original, with a warning."""
    import numpy as np
    import tensorflow as tf

    @tf.function
    def forward(ids, mask, types):
        # Only real tokens are written, so the encoder skips the padding (same values there).
        outputs = model({"input_ids": ids, "input_mask": mask, "token_type_ids": types},
                        skip_padding=True)
        return [tf.cast(outputs["all_encoder_layers"][i], tf.float32) for i in layer_indexes]

    tmp = f"{output_file}.tmp-{os.getpid()}"
    start, written = time.time(), 0
    try:
        with open(tmp, "w", encoding="utf-8") as writer:
            for begin in range(0, len(examples), batch_size):
                batch = examples[begin : begin + batch_size]
                converted = [convert_example(a, b, tokenizer, max_seq_length)
                             for _, a, b in batch]
                arrays = [np.array([c[k] for c in converted], np.int32) for k in (1, 2, 3)]
                outputs = [o.numpy() for o in forward(*arrays)]
                for row, ((unique_id, _, _), conv) in enumerate(zip(batch, converted)):
                    record = feature_record(unique_id, conv[0], [o[row] for o in outputs],
                                            layer_indexes)
                    writer.write(json.dumps(record) + "\n")
                written += len(batch)
                elapsed = time.time() - start
                logging.info(
                    "%d/%d examples, %.1f examples/s, ETA %.0f s", written, len(examples),
                    written / elapsed, (len(examples) - written) * elapsed / written)
        os.replace(tmp, output_file)
    finally:
        if os.path.exists(tmp):  # interrupted or failed: no half-written output stays
            os.remove(tmp)
    if written:
        logging.info("Wrote %d examples to %s", written, output_file)
    else:
        logging.warning("%s holds no lines: wrote an empty output file %s",
                        input_file or "the input", output_file)
    return written


def main(_):
    from modeling import BertModel
    from bert_runner import checkpoints, startup

    if FLAGS.use_tpu:
        logging.warning("--use_tpu: extract_features runs on the default device here.")
    layer_indexes = [int(x) for x in FLAGS.layers.split(",")]
    config = startup.load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    check_layer_indexes(layer_indexes, config, FLAGS.bert_config_file)
    tokenizer = startup.load_tokenizer(
        FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.init_checkpoint, config, FLAGS.bert_config_file)
    examples = list(read_examples(FLAGS.input_file))  # a bad line is refused before any work
    model = BertModel(config, use_one_hot_embeddings=FLAGS.use_one_hot_embeddings)
    # The whole encoder, or a refusal naming the checkpoint and the config.
    checkpoints.initialize_from_checkpoint(model, FLAGS.init_checkpoint,
                                           config_file=FLAGS.bert_config_file)
    if FLAGS.mixed_precision == "bf16":
        from modeling.inference import with_bfloat16_weights

        model = with_bfloat16_weights(model)
    extract(model, tokenizer, examples, FLAGS.output_file, layer_indexes, FLAGS.max_seq_length,
            FLAGS.batch_size, input_file=FLAGS.input_file)


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("vocab_file")
    flags.mark_flag_as_required("bert_config_file")
    flags.mark_flag_as_required("init_checkpoint")
    flags.mark_flag_as_required("output_file")
    cli.run(main)
