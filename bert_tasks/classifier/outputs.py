"""Output files of run_classifier: eval_results.txt, test_results.tsv, GLUE submission files.

All are written to a temporary name and renamed, so a reader never sees half a file.
"""
import os

import numpy as np

from modeling.checkpoint.files import write_text_atomic

# The score range of a regression task's GLUE file: the scale its gold scores are on.
SCORE_RANGES = {"STS-B": (0.0, 5.0)}


def write_test_results(path, probabilities, num_actual_examples):
    """Writes `test_results.tsv` as the original: one line per real example, no header, no id.

    Args:
      path: str, output file.
      probabilities: [num_rows, num_classes] array-like (num_classes 1 for regression scores);
        rows past `num_actual_examples` (TPU padding) are dropped.
      num_actual_examples: int, the number of real examples.
    Each line is the row's values as `str(numpy.float32)` joined by tabs, e.g.
    "0.796392\t0.20360796".
    """
    rows = np.asarray(probabilities, dtype=np.float32)
    if rows.ndim != 2 or len(rows) < num_actual_examples:
        raise ValueError("expected at least %d rows of probabilities, got shape %s"
                         % (num_actual_examples, rows.shape))
    text = "".join("\t".join(str(p) for p in row) + "\n" for row in rows[:num_actual_examples])
    write_text_atomic(path, text)


def predicted_values(outputs, is_regression):
    """Per-example predictions from the model's per-class outputs.

    Args:
      outputs: [num_rows, num_classes] logits or probabilities ([num_rows, 1] or [num_rows] scores
        for regression).
      is_regression: bool.
    Returns:
      [num_rows] int64 class ids (argmax), or float32 scores.
    """
    outputs = np.asarray(outputs)
    if is_regression:
        return outputs.reshape(len(outputs)).astype(np.float32)
    return np.argmax(outputs, axis=-1)


def write_glue_submission(output_dir, processor, examples, predictions):
    """Writes the GLUE leaderboard file of the task, e.g. `MRPC.tsv`, `MNLI-m.tsv`, `AX.tsv`.

    Args:
      output_dir: str.
      processor: the task's DataProcessor (gives the file name and label names).
      examples: the test examples, as returned by `get_test_examples`.
      predictions: from `predicted_values`: class ids, or scores for regression (STS-B); rows
        past the examples (TPU padding) are ignored.
    Returns:
      str, the path written. Lines: header "index\\tprediction", then the test file's index and the
      predicted label name (or the score as `str(numpy.float32)`, clipped to the task's
      `SCORE_RANGES`: a regression head is unbounded), in test file order.
    """
    if processor.submission_name is None:
        raise ValueError("%s has no GLUE submission file" % processor.name)
    if len(predictions) < len(examples):
        raise ValueError("%d test examples but only %d predictions"
                         % (len(examples), len(predictions)))
    if processor.is_regression and processor.name in SCORE_RANGES:
        predictions = np.clip(np.asarray(predictions, np.float32), *SCORE_RANGES[processor.name])
    lines = ["index\tprediction\n"]
    for example, prediction in zip(examples, predictions):
        if processor.is_regression:
            value = str(np.float32(prediction))
        else:
            value = processor.labels[int(prediction)]
        lines.append("%s\t%s\n" % (example.index, value))
    path = os.path.join(output_dir, processor.submission_name + ".tsv")
    write_text_atomic(path, "".join(lines))
    return path
