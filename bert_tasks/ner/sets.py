"""One CoNLL file as run_ner.py uses it: its documents and windows, kept together so
predictions can be turned back into tags on its words.

    data = NerSet.read(conll.split_file(data_dir, "dev"))
    data.check_labels(label_list)
    data.make_windows(tokenizer, 128)
    data.windows      # what predicted label ids come back for, in record order
"""
import dataclasses
from typing import List, Optional

from absl import logging

from bert_tasks.ner import conll, features, tags


@dataclasses.dataclass
class NerSet:
    """A read CoNLL file.

    Attributes:
      path: str, the file.
      documents: list of `bert_tasks.ner.conll.Document`.
      scheme: "IOB1" or "IOB2", the file's tag scheme (`bert_tasks.ner.tags.scheme_of`); predictions are
        written in it.
      windows: list of `bert_tasks.ner.features.Window` once `make_windows` has run.
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

    def make_windows(self, tokenizer, max_seq_length, document_context=True):
        """Makes the windows the records are written from (`bert_tasks.ner.features`); returns
        them."""
        self.windows = list(features.make_windows(self.documents, tokenizer, max_seq_length,
                                                  document_context))
        logging.info("%s: %d windows of %d word-pieces", self.path, len(self.windows),
                     max_seq_length)
        return self.windows
