r"""Accuracy after conversion, measured: a fine-tuned classifier's dev accuracy as a SavedModel
(`export_model.py`) in float32 and with bfloat16 weights (`--mixed_precision=bf16`), as LiteRT at
each precision and on ONNX Runtime, on the same rows, with the size on disk of each. With
--pooling, an encoder's sentence vectors instead: their cosine to the float32 SavedModel's.

    python -m bench.export_accuracy --task_name=sst-2 --data_dir=$DATA \
      --bert_config_file=$MODEL/bert_config.json --vocab_file=$MODEL/vocab.txt \
      --checkpoint=/tmp/novels_output --max_seq_length=64
    python -m bench.export_accuracy --pooling=mean --normalize --data_dir=$DATA --task_name=sst-2 \
      --checkpoint=$HF_MODEL_DIR --max_seq_length=128      # a sentence encoder's vectors

Rows: the task's dev examples (--max_rows first ones). Full int8 is calibrated on the first
`litert.CALIBRATION_TEXTS` training texts (train.tsv): the calibration set comes from the
training data, never from the rows it is measured on. Every model is the file `export_model.py`
writes (the same functions); each answers the rows in batches of --batch_size, a full-int8
LiteRT model one text per call (its export.json's `texts_per_call`, as its clients must call it).
A precision the export refuses (full int8 whose outputs its check finds too far from float's) is
listed with the reason.

Columns: accuracy (the majority baseline beside it), agreement (rows whose predicted label is the
SavedModel's), max |p - p_SavedModel| over rows and labels; for --pooling, the mean and the
lowest cosine between a text's vector and the SavedModel's.
"""
import collections
import os
import tempfile
import time

import numpy as np
from absl import flags

from bench import harness

flags.DEFINE_string("task_name", "sst-2", "The classifier's task (its processor reads the data).")
flags.DEFINE_string("data_dir", None, "The task's data: dev rows are measured, train rows "
                    "calibrate full int8.")
flags.DEFINE_string("bert_config_file", None, "The model's config (optional with a Hugging Face "
                    "directory as --checkpoint).")
flags.DEFINE_string("vocab_file", None, "The model's vocab.txt (optional, as above).")
flags.DEFINE_bool("do_lower_case", True, "The model's casing.")
flags.DEFINE_string("checkpoint", None, "The fine-tuned classifier (export_model.py's "
                    "--checkpoint), or with --pooling any encoder checkpoint.")
flags.DEFINE_integer("max_seq_length", 128, "As the model was fine-tuned.")
flags.DEFINE_enum("pooling", None, ["cls", "mean", "max"], "Measure a sentence-embedding "
                  "export of the encoder instead of a classifier.")
flags.DEFINE_bool("normalize", False, "With --pooling: L2-normalise the vectors.")
flags.DEFINE_list("quantizations", ["float32", "float16", "dynamic_int8", "int8"],
                  "LiteRT precisions to measure.")
flags.DEFINE_bool("bfloat16", True, "Measure the SavedModel exported with bfloat16 weights "
                  "(export_model.py --mixed_precision=bf16). On a CPU without bfloat16 units "
                  "its matmuls are converted to float32 and back: slow, with the same values.")
flags.DEFINE_bool("onnx", True, "Measure the ONNX export too (when tf2onnx and onnxruntime are "
                  "installed).")
flags.DEFINE_integer("max_rows", None, "Measure the first N dev rows (default: all).")
flags.DEFINE_integer("batch_size", 32, "Rows per call.")
FLAGS = flags.FLAGS


PACKAGES = ("tensorflow", "keras", "ai-edge-litert", "tf2onnx", "onnxruntime")


def dir_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def batches(rows, size):
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def texts_of(examples):
    """(text_a list, text_b list or None)."""
    a = [e.text_a for e in examples]
    pairs = any(e.text_b for e in examples)
    return a, ([e.text_b or "" for e in examples] if pairs else None)


def run_saved_model(export_dir, text_a, text_b, key):
    import tensorflow as tf

    model = tf.saved_model.load(export_dir)
    out = []
    for index in batches(list(range(len(text_a))), FLAGS.batch_size):
        inputs = {"text_a": tf.constant([text_a[i] for i in index])}
        if text_b is not None:
            inputs["text_b"] = tf.constant([text_b[i] for i in index])
        signature = model.signatures["pairs" if text_b is not None else "serving_default"]
        out.append(signature(**inputs)[key].numpy())
    return np.concatenate(out)


def run_litert(path, text_a, text_b, key):
    from bert_runner.serving import litert

    model = litert.interpreter(model_path=path)
    runner = model.get_signature_runner("pairs" if text_b is not None else "serving_default")
    # Called as a client must: a full-int8 model answers one text per call (its export.json),
    # larger calls get at-chance outputs.
    size = litert.texts_per_call(path) or FLAGS.batch_size
    out = []
    for index in batches(list(range(len(text_a))), size):
        inputs = {"text_a": np.array([text_a[i] for i in index])}
        if text_b is not None:
            inputs["text_b"] = np.array([text_b[i] for i in index])
        out.append(runner(**inputs)[key])
    return np.concatenate(out)


def run_onnx(export_dir, text_a, text_b, key):
    from bert_runner.serving import onnx

    model = onnx.OnnxTextModel(export_dir)
    out = []
    for index in batches(list(range(len(text_a))), FLAGS.batch_size):
        out.append(model([text_a[i] for i in index],
                         None if text_b is None else [text_b[i] for i in index])[key])
    return np.concatenate(out)


def main(argv):
    del argv
    from bert_runner.serving import embedding, litert, provenance
    from bert_tasks.classifier import processors, raw_text
    from bert_runner.runs.model_files import model_files
    from modeling.inference import with_bfloat16_weights

    files = model_files(FLAGS.bert_config_file, FLAGS.vocab_file, FLAGS.checkpoint,
                        FLAGS.max_seq_length, flag="--checkpoint")
    processor = processors.get_processor(FLAGS.task_name)
    dev = processor.get_dev_examples(FLAGS.data_dir)[:FLAGS.max_rows]
    train = processor.get_train_examples(FLAGS.data_dir)[:litert.CALIBRATION_TEXTS]
    text_a, text_b = texts_of(dev)
    calibration = [e.text_a if text_b is None else (e.text_a, e.text_b or "") for e in train]
    labels = processor.get_labels()
    if FLAGS.pooling:
        model = provenance.load_encoder(files.config, FLAGS.checkpoint,
                                        config_file=files.config_file)
        key, labels = "embedding", None
        convertible = embedding.convertible(model, FLAGS.pooling, FLAGS.normalize)
    else:
        if labels is None:
            raise ValueError("--task_name=%s is a regression task: this measures classifiers' "
                             "accuracy (or, with --pooling, vectors)" % FLAGS.task_name)
        model = raw_text.load_classifier(
            files.config, len(labels), FLAGS.checkpoint, task_name=FLAGS.task_name,
            config_file=files.config_file)
        key = "probabilities"
        convertible = raw_text.convertible(model, labels)
    gold = None if FLAGS.pooling else np.array([labels.index(e.label) for e in dev])
    print(f"{len(dev)} dev rows of {FLAGS.task_name} ({'pairs' if text_b else 'single texts'}), "
          f"max_seq_length {FLAGS.max_seq_length}; int8 calibrated on {len(calibration)} "
          f"training texts; model {FLAGS.checkpoint}")

    results = collections.OrderedDict()
    refused = {}

    def export_saved_model(served, saved_dir):
        if FLAGS.pooling:
            embedding.export_embedding(served, files.vocab_file, FLAGS.do_lower_case,
                                       FLAGS.max_seq_length, FLAGS.pooling, FLAGS.normalize,
                                       saved_dir)
        else:
            raw_text.export_classifier(served, files.vocab_file, FLAGS.do_lower_case,
                                       FLAGS.max_seq_length, labels, saved_dir)
        return run_saved_model(saved_dir, text_a, text_b, key), dir_size(saved_dir)

    with tempfile.TemporaryDirectory() as tmp:
        results["SavedModel float32"] = export_saved_model(model, os.path.join(tmp, "saved_model"))
        if FLAGS.bfloat16:
            results["SavedModel bf16"] = export_saved_model(
                with_bfloat16_weights(model), os.path.join(tmp, "saved_model_bf16"))
        module = litert.text_module(convertible, files.vocab_file, FLAGS.do_lower_case,
                                    FLAGS.max_seq_length)
        for quantization in FLAGS.quantizations:
            start = time.perf_counter()
            try:
                path = litert.write_litert(module, quantization,
                                           os.path.join(tmp, "litert_" + quantization),
                                           calibration)
            except ValueError as e:  # full int8 refused by its accuracy check: a result too
                refused["LiteRT " + quantization] = str(e)
                print(f"  LiteRT {quantization}: refused: {e}", flush=True)
                continue
            print(f"  LiteRT {quantization}: converted in {time.perf_counter() - start:.0f} s",
                  flush=True)
            results["LiteRT " + quantization] = (run_litert(path, text_a, text_b, key),
                                                 dir_size(path))
        if FLAGS.onnx:
            try:
                from bert_runner.serving import onnx

                onnx_dir = os.path.join(tmp, "onnx")
                onnx.write_onnx(convertible, files.vocab_file, FLAGS.do_lower_case,
                                FLAGS.max_seq_length, onnx_dir)
                results["ONNX float32"] = (run_onnx(onnx_dir, text_a, text_b, key),
                                           dir_size(os.path.join(onnx_dir, "model.onnx")))
            except ValueError as e:  # not installed: say so and go on
                print(f"  ONNX skipped: {e}")
    report(results, gold, refused)


def report(results, gold, refused):
    """Prints the table and the refused exports, and writes them as JSON lines."""
    reference = results["SavedModel float32"][0]
    figures = [{"model": name, "refused": reason} for name, reason in refused.items()]
    if gold is None:
        print(f"\n{'model':22s} {'size MB':>8s} {'mean cos':>9s} {'min cos':>9s}")
        ref = reference / np.linalg.norm(reference, axis=1, keepdims=True)
        for name, (vectors, size) in results.items():
            cos = np.sum(ref * vectors / np.linalg.norm(vectors, axis=1, keepdims=True), axis=1)
            print(f"{name:22s} {size / 1e6:8.1f} {cos.mean():9.6f} {cos.min():9.6f}")
            figures.append({"model": name, "size_mb": size / 1e6, "mean_cos": float(cos.mean()),
                            "min_cos": float(cos.min())})
        print_refused(refused)
        harness.write_results("export_accuracy", figures, packages=PACKAGES)
        return
    majority = np.bincount(gold).max() / len(gold)
    print(f"\n{'model':22s} {'size MB':>8s} {'accuracy':>9s} {'agreement':>10s} {'max |dp|':>9s}"
          f"   (majority baseline {majority:.4f})")
    ref_label = reference.argmax(axis=1)
    for name, (probabilities, size) in results.items():
        predicted = probabilities.argmax(axis=1)
        print(f"{name:22s} {size / 1e6:8.1f} {np.mean(predicted == gold):9.4f} "
              f"{np.mean(predicted == ref_label):10.4f} "
              f"{np.abs(probabilities - reference).max():9.2e}")
        figures.append({"model": name, "size_mb": size / 1e6,
                        "accuracy": float(np.mean(predicted == gold)),
                        "agreement": float(np.mean(predicted == ref_label)),
                        "max_abs_dp": float(np.abs(probabilities - reference).max()),
                        "majority": float(majority)})
    print_refused(refused)
    harness.write_results("export_accuracy", figures, packages=PACKAGES)


def print_refused(refused):
    for name, reason in refused.items():
        print(f"{name:22s} refused by the export: {reason}")


if __name__ == "__main__":
    flags.mark_flags_as_required(["data_dir", "checkpoint"])
    from bert_runner import cli  # the scripts' rules (exit codes, oneDNN): at the entry point

    harness.run(main, runner=cli.run_script)
