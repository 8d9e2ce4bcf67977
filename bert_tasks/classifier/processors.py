"""Task processors: GLUE/XNLI TSV files -> InputExamples.

The original four (CoLA, MNLI, MRPC, XNLI) give exactly the original's examples (same guids, same
text fields, same placeholders); the other GLUE tasks follow the same conventions on the official
GLUE file layouts (as written by the GLUE download script).

Each task is declared by one `TsvSplit` per split: which file, which columns hold the texts, the
label and the guid. Every row must have as many columns as the file's header (or the declared
count for header-less files); labels are checked against the task's label list while reading, so
bad input fails with its file and line instead of deep inside feature conversion.
"""
import dataclasses
import os
from typing import Mapping, Optional, Tuple

import tensorflow as tf

from bert_tasks.classifier import files
from bert_tasks.classifier.features import InputExample


@dataclasses.dataclass(frozen=True)
class TsvSplit:
    """Where the examples of one split sit in its TSV file.

    Attributes:
      filenames: candidate file names under data_dir, the first that exists is read.
      set_type: guid prefix ("train", "dev", "dev_matched", "test", ...).
      text_a, text_b: column indices of the texts; text_b None for single-sentence tasks.
      label: column index of the label; None for unlabelled test files (placeholder label).
      guid_column: column whose value follows the prefix in the guid; None: the row's 0-based
        position in the file, header row included (so the first data row is 1 after a header).
      index_column: column holding the id that GLUE submission files use (test splits).
      header: whether row 0 is a header (skipped).
      num_columns: column count of header-less files (files with a header use the header's).
      keep_if: (column, value): only rows with that value there are examples (XNLI language).
      label_aliases: label spellings mapped to the task's names (XNLI's "contradictory").
    """
    filenames: Tuple[str, ...]
    set_type: str
    text_a: int
    text_b: Optional[int] = None
    label: Optional[int] = None
    guid_column: Optional[int] = None
    index_column: Optional[int] = None
    header: bool = True
    num_columns: Optional[int] = None
    keep_if: Optional[Tuple[int, str]] = None
    label_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _pair_split(filename, set_type, text_a, text_b, label=None, **kwargs):
    return TsvSplit((filename,), set_type, text_a, text_b, label, **kwargs)


class DataProcessor:
    """Base class of the task processors (original API: get_*_examples, get_labels).

    Subclasses set the class attributes below. `labels` None marks a regression task (one output,
    float label).
    """
    name = None             # task name as printed in messages, e.g. "MRPC"
    labels = None           # tuple of label names; None for regression
    submission_name = None  # GLUE leaderboard file stem, e.g. "MNLI-m"; None: no submission file
    train = dev = test = None  # TsvSplit, or None when the task has no such split
    is_multi_label = False  # several labels per example (MultiLabelProcessor)
    ranks_candidates = False  # evaluated as ranked candidate lists too (RerankProcessor)

    @property
    def is_regression(self):
        return self.labels is None

    @property
    def num_labels(self):
        """Width of the classifier output: 1 for regression."""
        return 1 if self.is_regression else len(self.labels)

    def get_labels(self):
        """list of str label names, or None for a regression task."""
        return None if self.is_regression else list(self.labels)

    def get_train_examples(self, data_dir):
        """list of InputExample for the train set."""
        return self._examples(data_dir, self.train, "train")

    def get_dev_examples(self, data_dir):
        """list of InputExample for the dev set."""
        return self._examples(data_dir, self.dev, "dev")

    def get_test_examples(self, data_dir):
        """list of InputExample for prediction, with placeholder labels."""
        return self._examples(data_dir, self.test, "test")

    @classmethod
    def _read_tsv(cls, input_file):
        """Rows (lists of str) of a TSV file: the original's helper, for custom processors.

        Quotes are literal, as in every call of the original (`quotechar=None`).
        """
        return [row for _, row in files.read_tsv_lines(input_file)]

    def _missing_split_error(self, which):
        return NotImplementedError("%s has no %s set" % (self.name, which))

    def _examples(self, data_dir, split, which):
        if split is None:
            raise self._missing_split_error(which)
        paths = [os.path.join(data_dir, name) for name in split.filenames]
        path = next((p for p in paths if tf.io.gfile.exists(p)), None)
        if path is None:
            raise FileNotFoundError("%s %s set not found: expected %s"
                                    % (self.name, which, " or ".join(paths)))
        lines = files.read_tsv_lines(path)
        if not lines:
            raise ValueError("%s: empty file, expected the %s %s set" % (path, self.name, which))
        num_columns = len(lines[0][1]) if split.header else split.num_columns
        examples = []
        for position, (line_number, row) in enumerate(lines):
            if split.header and position == 0:
                continue
            if len(row) != num_columns:
                raise ValueError("%s:%d: expected %d tab-separated columns, got %d"
                                 % (path, line_number, num_columns, len(row)))
            if split.keep_if is not None and row[split.keep_if[0]] != split.keep_if[1]:
                continue
            examples.append(self._example(split, position, row, "%s:%d" % (path, line_number)))
        return examples

    def _example(self, split, position, row, where):
        if split.label is None:
            label = "0" if self.is_regression else self.labels[0]
        else:
            label = split.label_aliases.get(row[split.label], row[split.label])
            self._check_label(label, where)
        guid_id = position if split.guid_column is None else row[split.guid_column]
        return InputExample(
            guid="%s-%s" % (split.set_type, guid_id),
            text_a=row[split.text_a],
            text_b=None if split.text_b is None else row[split.text_b],
            label=label,
            index=None if split.index_column is None else row[split.index_column])

    def _check_label(self, label, where):
        if self.is_regression:
            try:
                float(label)
            except ValueError:
                raise ValueError("%s: %s score %r is not a number"
                                 % (where, self.name, label)) from None
        elif label not in self.labels:
            raise ValueError("%s: unknown %s label %r; expected one of %s"
                             % (where, self.name, label, ", ".join(map(repr, self.labels))))


_BINARY = ("0", "1")
_NLI = ("contradiction", "entailment", "neutral")
_ENTAILMENT = ("entailment", "not_entailment")


class ColaProcessor(DataProcessor):
    """CoLA: train/dev have no header (4 columns: source, label, original mark, sentence)."""
    name, labels, submission_name = "CoLA", _BINARY, "CoLA"
    train = TsvSplit(("train.tsv",), "train", text_a=3, label=1, header=False, num_columns=4)
    dev = TsvSplit(("dev.tsv",), "dev", text_a=3, label=1, header=False, num_columns=4)
    test = TsvSplit(("test.tsv",), "test", text_a=1, index_column=0)


class MrpcProcessor(DataProcessor):
    """MRPC: `Quality #1-ID #2-ID #1-String #2-String`; test has `index` in place of Quality."""
    name, labels, submission_name = "MRPC", _BINARY, "MRPC"
    train = _pair_split("train.tsv", "train", 3, 4, label=0)
    dev = _pair_split("dev.tsv", "dev", 3, 4, label=0)
    test = _pair_split("test.tsv", "test", 3, 4, index_column=0)


class MnliProcessor(DataProcessor):
    """MNLI matched: sentence1/sentence2 in columns 8/9, gold_label last."""
    name, labels, submission_name = "MNLI", _NLI, "MNLI-m"
    train = _pair_split("train.tsv", "train", 8, 9, label=-1, guid_column=0)
    dev = _pair_split("dev_matched.tsv", "dev_matched", 8, 9, label=-1, guid_column=0)
    test = _pair_split("test_matched.tsv", "test", 8, 9, guid_column=0, index_column=0)


class MnliMismatchedProcessor(MnliProcessor):
    """MNLI mismatched (not in the original): the same train set, the mismatched dev/test sets."""
    name, submission_name = "MNLI-mm", "MNLI-mm"
    dev = _pair_split("dev_mismatched.tsv", "dev_mismatched", 8, 9, label=-1, guid_column=0)
    test = _pair_split("test_mismatched.tsv", "test", 8, 9, guid_column=0, index_column=0)


class DiagnosticProcessor(DataProcessor):
    """AX, the GLUE diagnostic set: predict only, with a model fine-tuned on MNLI (same labels).

    The GLUE download script saves it as `diagnostic/diagnostic.tsv`, the GLUE site as `AX.tsv`.
    """
    name, labels, submission_name = "AX", _NLI, "AX"
    test = TsvSplit(("diagnostic.tsv", "AX.tsv"), "test", text_a=1, text_b=2, guid_column=0,
                    index_column=0)

    def _missing_split_error(self, which):
        return NotImplementedError("AX is a test-only diagnostic set (no %s set): fine-tune on "
                                   "MNLI, then predict with --task_name=AX" % which)


class XnliProcessor(DataProcessor):
    """XNLI: MultiNLI machine-translated for training, XNLI dev rows of one language for eval.

    The original hard-codes language "zh"; other languages are a constructor argument here. There
    is no test set, as in the original.
    """
    name, labels = "XNLI", _NLI

    def __init__(self, language="zh"):
        self.language = language
        self.train = TsvSplit(("multinli/multinli.train.%s.tsv" % language,), "train", 0, 1,
                              label=2, label_aliases={"contradictory": "contradiction"})
        self.dev = TsvSplit(("xnli.dev.tsv",), "dev", 6, 7, label=1, keep_if=(0, language))

    def _missing_split_error(self, which):
        return NotImplementedError("XNLI has no %s set (the original has none either)" % which)


class Sst2Processor(DataProcessor):
    """SST-2: `sentence label`; test `index sentence`."""
    name, labels, submission_name = "SST-2", _BINARY, "SST-2"
    train = TsvSplit(("train.tsv",), "train", text_a=0, label=1)
    dev = TsvSplit(("dev.tsv",), "dev", text_a=0, label=1)
    test = TsvSplit(("test.tsv",), "test", text_a=1, index_column=0)


class QqpProcessor(DataProcessor):
    """QQP: `id qid1 qid2 question1 question2 is_duplicate`; test `id question1 question2`."""
    name, labels, submission_name = "QQP", _BINARY, "QQP"
    train = _pair_split("train.tsv", "train", 3, 4, label=5, guid_column=0)
    dev = _pair_split("dev.tsv", "dev", 3, 4, label=5, guid_column=0)
    test = _pair_split("test.tsv", "test", 1, 2, guid_column=0, index_column=0)


class _IndexedPairProcessor(DataProcessor):
    """Tasks laid out as `index text_a text_b label`, test `index text_a text_b`."""
    train = _pair_split("train.tsv", "train", 1, 2, label=3, guid_column=0)
    dev = _pair_split("dev.tsv", "dev", 1, 2, label=3, guid_column=0)
    test = _pair_split("test.tsv", "test", 1, 2, guid_column=0, index_column=0)


class QnliProcessor(_IndexedPairProcessor):
    """QNLI: `index question sentence label`."""
    name, labels, submission_name = "QNLI", _ENTAILMENT, "QNLI"


class RteProcessor(_IndexedPairProcessor):
    """RTE: `index sentence1 sentence2 label`."""
    name, labels, submission_name = "RTE", _ENTAILMENT, "RTE"


class WnliProcessor(_IndexedPairProcessor):
    """WNLI: `index sentence1 sentence2 label`."""
    name, labels, submission_name = "WNLI", _BINARY, "WNLI"


class StsbProcessor(DataProcessor):
    """STS-B, regression: sentences in columns 7/8, the 0-5 similarity score in column 9."""
    name, labels, submission_name = "STS-B", None, "STS-B"
    train = _pair_split("train.tsv", "train", 7, 8, label=9, guid_column=0)
    dev = _pair_split("dev.tsv", "dev", 7, 8, label=9, guid_column=0)
    test = _pair_split("test.tsv", "test", 7, 8, guid_column=0, index_column=0)


# The multi-label layout's column names and the separator of the `labels` column.
MULTI_LABEL_COLUMNS = ("text_a", "text_b", "labels", "index")
LABEL_SEPARATOR = ","


class RerankProcessor(DataProcessor):
    """A cross-encoder reranker (new): `query passage label` with a header row (test: `query
    passage`), label 1 where the passage answers the query, 0 where not. A query's candidates are
    its consecutive rows, in the first stage's order (BM25's, an embedding model's): evaluation
    ranks each list by the model's probability of "1" against that order (`ranks_candidates`)."""
    name, labels = "RERANK", _BINARY
    ranks_candidates = True
    train = _pair_split("train.tsv", "train", 0, 1, 2)
    dev = _pair_split("dev.tsv", "dev", 0, 1, 2)
    test = _pair_split("test.tsv", "test", 0, 1)


class MultiLabelProcessor(DataProcessor):
    """Several labels per example (new): `train.tsv`, `dev.tsv`, `test.tsv` with a header row
    naming the columns `text_a`, `text_b` (optional), `labels` (train and dev) and `index`
    (optional; test) in any order. `labels` holds the example's labels joined by "," (empty: no
    label applies).

    The label set is `labels` (`--labels`) in that order, fixed at construction; a processor
    without one reads only the training file (`train_labels` gives its sorted labels, the set a
    training run takes). Labels outside the set are refused with file and line.
    """
    name, submission_name, is_multi_label = "multilabel", None, True

    def __init__(self, labels=None):
        self.labels = tuple(labels) if labels else None
        if self.labels and len(set(self.labels)) != len(self.labels):
            raise ValueError("--labels has a repeated label: %s" % ",".join(self.labels))
        if self.labels and not all(label.strip() for label in self.labels):
            raise ValueError("--labels has an empty label: %s (two commas in a row?)"
                             % ",".join(self.labels))

    @property
    def is_regression(self):
        return False

    @property
    def num_labels(self):
        return len(self._label_set())

    def _label_set(self):
        """The labels; raises ValueError while they are not settled (no --labels, no training)."""
        if self.labels is None:
            raise ValueError("the multilabel task's label set is unknown: pass --labels (the "
                             "training run's label_list.txt, comma-separated) when not training")
        return self.labels

    def train_labels(self, data_dir):
        """The sorted labels of the training file."""
        path, rows = self._rows(data_dir, "train.tsv", "train")
        labels = tuple(sorted({label for _, row, _ in rows for label in row[1]}))
        if not labels:
            raise ValueError("%s: no example has a label: the label set would be empty" % path)
        return labels

    def get_train_examples(self, data_dir):
        _, rows = self._rows(data_dir, "train.tsv", "train")
        if self.labels is None:
            return self._checked(rows, "train", self.train_labels(data_dir))
        return self._checked(rows, "train")

    def get_dev_examples(self, data_dir):
        self._label_set()
        return self._checked(self._rows(data_dir, "dev.tsv", "dev")[1], "dev")

    def get_test_examples(self, data_dir):
        self._label_set()
        return self._checked(self._rows(data_dir, "test.tsv", "test", need_labels=False)[1],
                             "test")

    def _rows(self, data_dir, filename, set_type, need_labels=True):
        """(path, [(where, (text_a, labels tuple, text_b, index), position)])."""
        path = os.path.join(data_dir, filename)
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError("multilabel %s set not found: expected %s" % (set_type, path))
        lines = files.read_tsv_lines(path)
        if not lines:
            raise ValueError("%s: empty file, expected a header row naming the columns %s"
                             % (path, ", ".join(MULTI_LABEL_COLUMNS)))
        header = lines[0][1]
        unknown = [name for name in header if name not in MULTI_LABEL_COLUMNS]
        required = ["text_a"] + (["labels"] if need_labels else [])
        missing = [name for name in required if name not in header]
        if unknown or missing or len(set(header)) != len(header):
            raise ValueError("%s:1: the header must name the columns text_a, labels (train and "
                             "dev), text_b and index (optional), each once; got %s"
                             % (path, ", ".join(map(repr, header))))
        column = {name: header.index(name) for name in header}
        rows = []
        for position, (line_number, row) in enumerate(lines[1:], start=1):
            where = "%s:%d" % (path, line_number)
            if len(row) != len(header):
                raise ValueError("%s: expected %d tab-separated columns, got %d"
                                 % (where, len(header), len(row)))
            labels = ()
            if "labels" in column:
                labels = tuple(label.strip() for label in row[column["labels"]].split(
                    LABEL_SEPARATOR) if label.strip())
                repeated = sorted({label for label in labels if labels.count(label) > 1})
                if repeated:
                    raise ValueError("%s: label %s given twice" % (where, ", ".join(repeated)))
            get = lambda name: row[column[name]] if name in column else None
            rows.append((where, (get("text_a"), labels, get("text_b"), get("index")), position))
        return path, rows

    def _checked(self, rows, set_type, label_set=None):
        label_set = label_set or self.labels
        examples = []
        for where, (text_a, labels, text_b, index), position in rows:
            unknown = [label for label in labels if label not in label_set]
            if unknown:
                raise ValueError("%s: unknown label(s) %s; the label set is %s"
                                 % (where, ", ".join(map(repr, unknown)),
                                    ", ".join(map(repr, label_set))))
            examples.append(InputExample(guid="%s-%d" % (set_type, position), text_a=text_a,
                                         text_b=text_b, label=labels, index=index))
        return examples


# Keyed by the lower-cased --task_name, as the original's `processors` dict.
PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "mnli-mm": MnliMismatchedProcessor,
    "ax": DiagnosticProcessor,
    "sst-2": Sst2Processor,
    "qqp": QqpProcessor,
    "qnli": QnliProcessor,
    "rte": RteProcessor,
    "wnli": WnliProcessor,
    "sts-b": StsbProcessor,
    "multilabel": MultiLabelProcessor,
    "rerank": RerankProcessor,
}


def get_processor(task_name, labels=None):
    """The processor instance for `task_name` (case-insensitive); `labels` is the multilabel
    task's label set (`--labels`), refused for the other tasks, whose labels are fixed."""
    key = task_name.lower()
    if key not in PROCESSORS:
        raise ValueError("Task not found: %s (known tasks: %s)"
                         % (task_name, ", ".join(sorted(PROCESSORS))))
    if key == "multilabel":
        return MultiLabelProcessor(labels)
    if labels:
        raise ValueError("--labels is for --task_name=multilabel; %s has its own labels: %s"
                         % (task_name, ", ".join(PROCESSORS[key]().get_labels() or ["(a score)"])))
    return PROCESSORS[key]()
