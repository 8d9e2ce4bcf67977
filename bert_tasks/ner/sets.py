"""One CoNLL file as run_ner.py uses it: its documents and windows, kept together so
predictions can be turned back into tags on its words.

    data = NerSet.read(conll.split_file(data_dir, "dev"))
    data.check_labels(label_list)
    windowed = data.windowed(tokenizer, 128)   # a new set; `data` stays as read
    windowed.windows  # what predicted label ids come back for, in record order
"""
import dataclasses
from typing import List, Optional

from absl import logging

from bert_tasks.ner import conll, features, tags


@dataclasses.dataclass(frozen=True)
class NerSet:
    """A read CoNLL file.

    Attributes:
      path: str, the file.
      documents: list of `bert_tasks.ner.conll.Document`.
      scheme: "IOB1" or "IOB2", the file's tag scheme (`bert_tasks.ner.tags.scheme_of`); predictions are
        written in it.
      windows: list of `bert_tasks.ner.features.Window` in a set `windowed` made, else None.
    """
    path: str
    documents: List[conll.Document]
    scheme: str
    windows: Optional[List[features.Window]] = None

    @classmethod
    def read(cls, path):
        documents = conll.read_conll_file(path)
        sentences = conll.sentences_of(documents)
        scheme = tags.scheme_of([c[-1] for c in s.columns] for s in sentences)
        logging.info("%s: %d documents, %d sentences, %d words, %s tags", path, len(documents),
                     len(sentences), sum(len(s.words) for s in sentences), scheme)
        return cls(path, documents, scheme)

    @property
    def sentences(self):
        return conll.sentences_of(self.documents)

    def check_labels(self, label_list):
        """Raises ValueError naming file:line for a tag outside `label_list`."""
        features.check_labels(self.sentences, label_list, self.path)

    def windowed(self, tokenizer, max_seq_length, document_context=True):
        """This set with the windows the records are written from (`bert_tasks.ner.features`)."""
        windows = list(features.make_windows(self.documents, tokenizer, max_seq_length,
                                             document_context))
        logging.info("%s: %d windows of %d word-pieces", self.path, len(windows), max_seq_length)
        return dataclasses.replace(self, windows=windows)
