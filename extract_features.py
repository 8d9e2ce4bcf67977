"""Extract pre-computed feature vectors from a BERT encoder (the original `extract_features.py`),
or one sentence vector per line (`--pooling`).

Input: one example per line, `text_a` or `text_a ||| text_b`. Output: one JSON object per line,
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": j, "values": [...]}]}]}`,
values rounded to 6 decimals, exactly as the original writes it (`linex_index` sic).

With `--pooling=cls|mean|max` (and `--normalize`): one vector per line from the last layer
(`modeling.layers.pooling`; `--layers`, the token features' layers, is refused with it, but for
-1, the layer it pools), computed
by the graph of the embedding SavedModel (`bert_runner.serving.embedding.EmbeddingExport`: the fast
tokenizer, rows sorted by length). `--output_format=jsonl` writes
`{"linex_index": i, "text": line, "embedding": [...]}` per line; `npy` writes the float32 array
[lines, hidden_size] to `--output_file` (`X.npy`) and the lines, in order, to `X.txt`. No output
may be `--input_file`.
"""
import json
import os
import re
import time

from absl import flags, logging

from bert_runner import cli, distribution, flag_ranges, flags as run_flags
from bert_runner.flag_ranges import PAIR, ModeRule, at_least, mode, ranged

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "init_checkpoint", "vocab_file", "do_lower_case")
run_flags.define_embedding_flags()

flags.DEFINE_string("input_file", None, "")
flags.DEFINE_string("output_file", None, "")
# The model's number of layers bounds them, checked once it is loaded.
ranged(flags.DEFINE_string("layers", "-1,-2,-3,-4", ""), flag_ranges.layer_indexes())
flags.DEFINE_enum(
    "output_format", "jsonl", ["jsonl", "npy"],
    "With --pooling: jsonl (one JSON object per line) or npy (--output_file=X.npy holds the "
    "float32 vectors, X.txt the lines).")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer "
    "than this will be truncated, and sequences shorter than this will be padded."),
    at_least(3, PAIR))
ranged(flags.DEFINE_integer("batch_size", 32, "Batch size for predictions."), at_least(1))
flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
flags.DEFINE_string("master", None, "If using a TPU, the address of the master.")
ranged(flags.DEFINE_integer(
    "num_tpu_cores", 8, "Only used if `use_tpu` is True. Total number of TPU cores to use."),
    at_least(1).when("use_tpu"))
mode(ModeRule(("output_format", "normalize"), ("pooling",), lambda pooling: pooling is not None,
              "with --pooling", "without it extract_features writes the original's JSON lines of "
              "token vectors"))
mode(ModeRule(("layers",), ("pooling",), lambda pooling: pooling is None,
              "without --pooling or as -1", "--pooling pools the last layer",
              # -1, the layer --pooling pools anyway: taken
              anyway=lambda name, value: value.replace(" ", "") == "-1"))
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
                # A short last batch is filled up with copies of its rows, whose outputs are
                # not written: every call has the same shape, so the model is traced once.
                arrays = [np.resize(np.array([c[k] for c in converted], np.int32),
                                    (min(batch_size, len(examples)), max_seq_length))
                          for k in (1, 2, 3)]
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


# Lines per call of the embedding graph: its rows are sorted by length within a call, and the
# vectors of a call ([lines, hidden_size]) are copied once per model call of it.
_LINES_PER_CALL = 4096


def _not_over_input(path, output_file, input_file, what):
    """Refuses to write `path` (`what` of --output_file) where it is --input_file (a link to it,
    or another spelling of its path): the input would be replaced by what was computed from it."""
    if input_file and os.path.realpath(path) == os.path.realpath(input_file):
        raise ValueError(f"--output_file={output_file} would write {what} over --input_file="
                         f"{input_file}: choose another --output_file")


def lines_file(output_file, input_file=None):
    """Where `--output_format=npy` writes the lines: X.npy -> X.txt (not over `input_file`)."""
    if not output_file.endswith(".npy"):
        raise ValueError(f"--output_file={output_file}: --output_format=npy writes a .npy file "
                         "(X.npy, with the lines in X.txt)")
    path = output_file[: -len(".npy")] + ".txt"
    _not_over_input(path, output_file, input_file, f"its lines ({path})")
    return path


def check_input_file(input_file):
    """Refuses, before the model is loaded, an --input_file that cannot be read (missing, a
    directory, no permission), naming the flag."""
    from bert_runner.results import file_error_reason

    try:
        with open(input_file, "rb"):
            pass
    except OSError as e:
        raise ValueError(f"--input_file={input_file} cannot be read ({file_error_reason(e)})") \
            from None


def check_output_files(output_file, input_file, output_format=None):
    """Refuses, before any work, outputs that would replace --input_file: --output_file itself
    (every mode), and with `output_format` "npy" its lines file (`lines_file`)."""
    _not_over_input(output_file, output_file, input_file, "its output")
    if output_format == "npy":
        lines_file(output_file, input_file)


def sentence_vectors(module, examples):
    """float32 [len(examples), H]: `module` (an `EmbeddingExport`) over `examples` (of
    `read_examples`), `_LINES_PER_CALL` lines at a time."""
    import numpy as np
    import tensorflow as tf

    chunks = []
    start = time.time()
    for begin in range(0, len(examples), _LINES_PER_CALL):
        batch = examples[begin : begin + _LINES_PER_CALL]
        # An empty text_b is the single-sentence encoding (the original's `if tokens_b:`).
        outputs = module.serve_pairs(tf.constant([a for _, a, _ in batch]),
                                     tf.constant([b or "" for _, _, b in batch]))
        chunks.append(outputs["embedding"].numpy())
        done = begin + len(batch)
        logging.info("%d/%d lines, %.1f lines/s", done, len(examples),
                     done / (time.time() - start))
    return np.concatenate(chunks) if chunks else np.zeros(
        [0, module.width], np.float32)


def write_sentence_vectors(vectors, examples, output_file, output_format, input_file=None):
    """Writes `vectors` [N, H] of `examples` atomically: JSON lines, or X.npy with X.txt."""
    import numpy as np

    def line(a, b):
        return a if b is None else f"{a} ||| {b}"

    def write_lines(f):
        for _, a, b in examples:
            f.write((line(a, b) + "\n").encode("utf-8"))

    def write_jsonl(f):
        for (i, a, b), vector in zip(examples, vectors):
            record = {"linex_index": i, "text": line(a, b),
                      "embedding": [round(float(x), 6) for x in vector]}
            f.write((json.dumps(record) + "\n").encode("utf-8"))

    if output_format == "npy":
        outputs = {output_file: lambda f: np.save(f, vectors),
                   lines_file(output_file, input_file): write_lines}
    else:
        outputs = {output_file: write_jsonl}
    tmps = {path: f"{path}.tmp-{os.getpid()}" for path in outputs}
    try:
        for path, write in outputs.items():
            with open(tmps[path], "wb") as f:
                write(f)
        for path, tmp in tmps.items():
            os.replace(tmp, path)
    finally:
        for tmp in tmps.values():
            if os.path.exists(tmp):  # failed: no half-written output stays
                os.remove(tmp)
    if examples:
        logging.info("Wrote %d vectors of %d values to %s", *vectors.shape, " and ".join(outputs))
    else:
        logging.warning("%s holds no lines: wrote an empty output file %s",
                        input_file or "the input", output_file)


def main(_):
    from modeling import families
    from bert_runner import results, startup
    from bert_runner.runs import checkpoints
    from bert_runner.runs.model_files import model_files

    # Refused before the model runs (a file in the way, no permission), naming the flag.
    check_input_file(FLAGS.input_file)
    results.check_writable_dir(os.path.dirname(os.path.abspath(FLAGS.output_file)), "output_file")
    check_output_files(FLAGS.output_file, FLAGS.input_file,
                       FLAGS.output_format if FLAGS.pooling else None)
    if FLAGS.use_tpu:
        logging.warning("--use_tpu: extract_features runs on the default device here.")
    files = model_files(FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.init_checkpoint,
                        FLAGS.max_seq_length)
    config = files.config
    layer_indexes = [int(x) for x in FLAGS.layers.split(",")]
    if FLAGS.pooling is None:
        check_layer_indexes(layer_indexes, config, files.config_file)
    tokenizer = startup.load_tokenizer(
        files.vocab_file, FLAGS.do_lower_case, FLAGS.init_checkpoint, config, files.config_file)
    examples = list(read_examples(FLAGS.input_file))  # a bad line is refused before any work
    model = families.build_model("encoder", config, use_one_hot_embeddings=FLAGS.use_one_hot_embeddings)
    # The whole encoder, or a refusal naming the checkpoint and the config.
    checkpoints.initialize_from_checkpoint(model, FLAGS.init_checkpoint,
                                           config_file=files.config_file)
    if FLAGS.mixed_precision == "bf16":
        from modeling.inference import with_bfloat16_weights

        distribution.warn_if_bfloat16_is_emulated()
        model = with_bfloat16_weights(model)
    if FLAGS.pooling is None:
        extract(model, tokenizer, examples, FLAGS.output_file, layer_indexes,
                FLAGS.max_seq_length, FLAGS.batch_size, input_file=FLAGS.input_file)
        return
    from bert_runner.serving.embedding import EmbeddingExport
    from vocab.fast_tokenizer import FastBertTokenizer

    module = EmbeddingExport(model, FastBertTokenizer(files.vocab_file, FLAGS.do_lower_case),
                             FLAGS.max_seq_length, FLAGS.pooling, FLAGS.normalize,
                             rows_per_call=FLAGS.batch_size)
    write_sentence_vectors(sentence_vectors(module, examples), examples, FLAGS.output_file,
                           FLAGS.output_format, input_file=FLAGS.input_file)


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("output_file")
    flags.mark_flag_as_required("init_checkpoint")
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
