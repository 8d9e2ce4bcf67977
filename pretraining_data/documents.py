"""Lines of text -> documents of tokenized sentences (token ids), as the original reads them.

The original, per line: `line.strip()`; an empty (or whitespace-only) line starts a new document;
otherwise the line's word-pieces, if any, are appended to the current document as one sentence.
A line that tokenizes to nothing (only control characters, say) is dropped without starting a
document. Empty documents are dropped later, by `InstanceBuilder.create_training_instances`.
"""
import logging

from pretraining_data.reading import InputError
from vocab import tokenization

TOKENIZERS = ("auto", "fast", "faithful")


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
        self._tokenize_batch = None
        if kind != "faithful":
            self._tokenize_batch = _fast_tokenize_batch(vocab_file, do_lower_case, kind == "fast")
        self.kind = "fast" if self._tokenize_batch else "faithful"

    def tokenize_ids(self, texts):
        """list[str] -> list[list[int]]: the word-piece ids of each text."""
        if self._tokenize_batch is None:
            pieces = map(self.full_tokenizer.tokenize, texts)
        else:
            pieces = self._tokenize_batch(texts)
        vocab = self.vocab
        return [[vocab[p] for p in text_pieces] for text_pieces in pieces]


def _fast_tokenize_batch(vocab_file, do_lower_case, required):
    """`vocab.fast_tokenizer`'s tokenize_batch for this vocab, or None if it is not available."""
    try:
        from vocab import fast_tokenizer
        return fast_tokenizer.FastBertTokenizer(vocab_file, do_lower_case).tokenize_batch
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
        num_lines += len(lines)
        stripped = [line.strip() for line in lines]
        token_ids = iter(line_tokenizer.tokenize_ids([text for text in stripped if text]))
        for text in stripped:
            if not text:
                documents.append([])
                continue
            ids = next(token_ids)
            if ids:
                documents[-1].append(ids)
    return documents, num_lines
