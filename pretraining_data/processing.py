"""One chunk of documents -> serialized records; the entry points of worker processes.

This module imports no TensorFlow, so `spawn`ed workers start in a fraction of a second. Workers
either get documents already tokenized by the parent (fast tokenizer: one TensorFlow graph in the
parent process) or raw lines that they tokenize with the pure-Python tokenizer.
"""
import dataclasses
import hashlib
import random

from pretraining_data.documents import LineTokenizer, build_documents
from pretraining_data.features import ExampleEncoder
from pretraining_data.instances import InstanceBuilder


@dataclasses.dataclass
class ChunkStats(object):
    """Counts for one chunk or, summed, a run."""
    num_lines: int = 0
    num_documents: int = 0  # non-empty documents
    num_instances: int = 0
    num_chunks: int = 0
    seconds: float = 0.0  # wall time of the whole run (set by `pipeline.run`)

    def add(self, other):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def chunk_seed(random_seed, chunk_index):
    """The seed of chunk `chunk_index`: `random_seed` for chunk 0, else a hash of both."""
    if chunk_index == 0:
        return random_seed
    digest = hashlib.sha256(b"%d/%d" % (random_seed, chunk_index)).digest()
    return int.from_bytes(digest[:8], "little")


class ChunkProcessor(object):
    """Documents of one chunk -> serialized records, in the original's order for that chunk.

    Args:
      opts: `pipeline.Options`.
      vocab: token -> id mapping in file order (`FullTokenizer.vocab`).
    """

    def __init__(self, opts, vocab):
        self.opts = opts
        self.builder = InstanceBuilder(
            vocab, opts.max_seq_length, opts.short_seq_prob, opts.masked_lm_prob,
            opts.max_predictions_per_seq, opts.do_whole_word_mask)
        self.encoder = ExampleEncoder(
            opts.max_seq_length, opts.max_predictions_per_seq, max(vocab.values()))

    def __call__(self, chunk_index, documents, num_lines, report=None):
        """Returns (records: list[bytes], ChunkStats).

        Args:
          chunk_index: selects the generator seed (`chunk_seed`).
          documents: from `build_documents`; consumed (shuffled, emptied of empty documents).
          num_lines: for the stats.
          report: optional progress callable, see `InstanceBuilder.create_training_instances`.
        """
        rng = random.Random(chunk_seed(self.opts.random_seed, chunk_index))
        records = self.builder.create_training_instances(
            documents, self.opts.dupe_factor, rng, report=report, convert=self.encoder.encode)
        return records, ChunkStats(num_lines, len(documents), len(records), 1)


_WORKER = {}


def init_worker(opts, tokenize):
    """Pool initializer. `tokenize`: the chunks will be raw lines, to tokenize here (faithful)."""
    line_tokenizer = LineTokenizer(opts.vocab_file, opts.do_lower_case, "faithful")
    _WORKER["tokenizer"] = line_tokenizer if tokenize else None
    _WORKER["processor"] = ChunkProcessor(opts, line_tokenizer.vocab)


def process_in_worker(chunk_index, payload):
    """`payload`: a list of lines, or (documents, num_lines) if the parent tokenized them."""
    if _WORKER["tokenizer"] is not None:
        payload = build_documents([payload], _WORKER["tokenizer"])
    return _WORKER["processor"](chunk_index, *payload)
