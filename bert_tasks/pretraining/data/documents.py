"""Lines of text -> documents of tokenized sentences (token ids), as the original reads them.

The original, per line: `line.strip()`; an empty (or whitespace-only) line starts a new document;
otherwise the line's word-pieces, if any, are appended to the current document as one sentence.
A line that tokenizes to nothing (only control characters, say) is dropped without starting a
document. Empty documents are dropped later, by `InstanceBuilder.create_training_instances`.
"""
import itertools
import logging

import numpy as np

from bert_tasks.pretraining.data.reading import InputError
from vocab import tokenization

TOKENIZERS = ("auto", "fast", "faithful")


class TokenizedLines(object):
    """Tokenized lines in a few flat arrays: cheap to send to another process.

    Blank lines (document boundaries) are kept as positions; the other lines as their word-piece
    ids, concatenated.

    Args:
      ids: int32 array [total pieces]: the ids of the non-blank lines, one after the other.
      row_splits: int64 array [non-blank lines + 1]: line i has `ids[row_splits[i]:row_splits[i+1]]`
        (possibly none: a line of control characters, say).
      breaks: int64 array [blank lines]: for each blank line, the number of non-blank lines
        before it.
      num_lines: all lines, blank ones included (for statistics).
    """

    def __init__(self, ids, row_splits, breaks, num_lines):
        self.ids, self.row_splits, self.breaks, self.num_lines = ids, row_splits, breaks, num_lines

    def append_to(self, documents):
        """Adds these lines to `documents` as the original's reading loop does.

        Args:
          documents: list of documents (lists of sentences, each a non-empty list of int ids),
            not empty; the first lines continue its last document, each blank line starts a new
            one, lines without word-pieces are dropped.
        """
        ids, splits = self.ids.tolist(), self.row_splits.tolist()
        start = 0
        for k, stop in enumerate(self.breaks.tolist() + [len(splits) - 1]):
            if k:
                documents.append([])
            bounds = zip(splits[start:stop], splits[start + 1:stop + 1])
            documents[-1].extend(ids[a:b] for a, b in bounds if b > a)
            start = stop


class LineTokenizer(object):
    """Batches of lines -> lists of token ids; the original `FullTokenizer` word-pieces.

    Args:
      vocab_file: path of vocab.txt.
      do_lower_case: as `FullTokenizer`.
      kind: "faithful" (the pure-Python `FullTokenizer`), "fast" (`vocab.fast_tokenizer`, which
        gives identical word-pieces many times faster) or "auto" (fast if importable, else
        faithful).
    """

    def __init__(self, vocab_file, do_lower_case, kind="auto"):
        if kind not in TOKENIZERS:
            raise ValueError("tokenizer must be one of %s, got %r" % (TOKENIZERS, kind))
        self.full_tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
        self.vocab = self.full_tokenizer.vocab
        self._tokenize_batch_ids = None
        if kind != "faithful":
            self._tokenize_batch_ids = _fast_tokenize_batch_ids(
                vocab_file, do_lower_case, kind == "fast")
        self.kind = "fast" if self._tokenize_batch_ids else "faithful"

    def tokenize_lines(self, lines):
        """list[str] lines (not stripped) -> `TokenizedLines`."""
        stripped = [line.strip() for line in lines]
        texts = [text for text in stripped if text]
        breaks = np.array([i for i, text in enumerate(stripped) if not text], np.int64)
        breaks -= np.arange(len(breaks))  # blank lines before -> non-blank lines before
        if self._tokenize_batch_ids is None:
            vocab = self.vocab
            pieces = [[vocab[p] for p in self.full_tokenizer.tokenize(text)] for text in texts]
            ids = np.fromiter(itertools.chain.from_iterable(pieces), np.int32)
            row_splits = np.zeros(len(texts) + 1, np.int64)
            np.cumsum([len(p) for p in pieces], out=row_splits[1:])
        else:
            ids, row_splits = self._tokenize_batch_ids(texts)
        return TokenizedLines(ids, row_splits, breaks, len(lines))


def _fast_tokenize_batch_ids(vocab_file, do_lower_case, required):
    """`vocab.fast_tokenizer`'s tokenize_batch_ids for this vocab, or None if not available."""
    try:
        from vocab import fast_tokenizer
        tokenize_batch_ids = fast_tokenizer.FastBertTokenizer(
            vocab_file, do_lower_case).tokenize_batch_ids
        tokenize_batch_ids(["Trace the graph now (seconds), not during the first chunk."])
        return tokenize_batch_ids
    except (ImportError, AttributeError) as e:
        if required:
            raise InputError("--tokenizer=fast: vocab.fast_tokenizer is not usable: %s" % e)
        logging.warning("vocab.fast_tokenizer is not usable (%s); using the faithful tokenizer", e)
        return None


def build_documents(line_blocks, line_tokenizer):
    """Tokenizes lines into documents exactly as the original's reading loop.

    Args:
      line_blocks: iterable of lists of str lines (one stream; file boundaries do not matter).
      line_tokenizer: `LineTokenizer`.
    Returns:
      (documents, num_lines): documents as lists of sentences (non-empty lists of token ids),
      possibly including empty documents.
    """
    documents = [[]]
    num_lines = 0
    for lines in line_blocks:
        tokenized = line_tokenizer.tokenize_lines(lines)
        tokenized.append_to(documents)
        num_lines += tokenized.num_lines
    return documents, num_lines
