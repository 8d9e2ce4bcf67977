"""Create masked LM / next sentence TF examples for BERT (the original's flags and records).

    python create_pretraining_data.py --input_file=corpus.txt --output_file=out.tfrecord \\
      --vocab_file=vocab/uncased_L-12_H-768_A-12/vocab.txt --do_lower_case=True \\
      --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 \\
      --random_seed=12345 --dupe_factor=5

Input: one sentence per line, a blank line between documents. See `bert_tasks.pretraining.data.pipeline` for
the two orderings (the original's, and chunked/parallel with --chunk_size_mb and --num_workers).
"""
import sys

from absl import flags
from absl import logging

from bert_runner import cli
from bert_runner.flag_ranges import PAIR_OF_SENTENCES, CrossRule, at_least, cross, ranged, within
from bert_tasks.pretraining import beam_pipelines
from bert_tasks.pretraining.data import dynamic_masking, pipeline
from bert_tasks.pretraining.data.processing import WorkerError

flags.DEFINE_string("input_file", None,
                    "Input raw text file (or comma-separated list of files).")
flags.DEFINE_string("output_file", None,
                    "Output TF example file (or comma-separated list of files).")
flags.DEFINE_string("vocab_file", None,
                    "The vocabulary file that the BERT model was trained on.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether to lower case the input text. Should be True for uncased models and "
                  "False for cased models.")
flags.DEFINE_bool("do_whole_word_mask", False,
                  "Whether to use whole word masking rather than per-WordPiece masking.")
ranged(flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length."),
       at_least(5, PAIR_OF_SENTENCES))
ranged(flags.DEFINE_integer("max_predictions_per_seq", 20,
                            "Maximum number of masked LM predictions per sequence."),
       at_least(1))
# Any integer: it seeds Python's random.Random, all this script uses.
flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
ranged(flags.DEFINE_integer("dupe_factor", 10,
                            "Number of times to duplicate the input data (with different masks)."),
       at_least(1))
ranged(flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability."),
       dynamic_masking.masked_lm_prob_range())
ranged(flags.DEFINE_float("short_seq_prob", 0.1,
                          "Probability of creating sequences which are shorter than the maximum "
                          "length."), within(0, 1))
# New flags.
ranged(flags.DEFINE_float("chunk_size_mb", 0.0,
                   "0 (default): the original's ordering, whole corpus in memory, one process. "
                   "> 0: process the text in chunks of about this many MB (cut at document "
                   "boundaries), each shuffled with its own seed; memory bounded by the chunk "
                   "size; output independent of --num_workers."), at_least(0))
ranged(flags.DEFINE_integer("num_workers", 1,
                            "Processes for --chunk_size_mb > 0 (one chunk per process at a "
                            "time)."), at_least(1))
flags.DEFINE_enum("tokenizer", "auto", ["auto", "fast", "faithful"],
                  "Word-piece tokenizer: 'fast' (tensorflow-text, identical word-pieces), "
                  "'faithful' (pure Python FullTokenizer) or 'auto' (fast when available).")

ranged(flags.DEFINE_float("mask_token_prob", 0.8,
                          "Share of the word-pieces chosen for prediction that become [MASK] (the "
                          "paper's Table 8 ablation; the original's 80%). Decided per word-piece, "
                          "also with --do_whole_word_mask."), within(0, 1))
ranged(flags.DEFINE_float("random_token_prob", 0.1,
                          "Share that become a random vocab entry; the rest, 1 - mask_token_prob "
                          "- random_token_prob, keep their token."), within(0, 1))
flags.DEFINE_bool("next_sentence_prediction", True,
                  "False: data for the paper's 'No NSP' ablation: B is always the actual "
                  "continuation of A in the same document (a one-sentence chunk is a single "
                  "segment), and records have no next_sentence_labels feature.")
beam_pipelines.define_flags()

flags.DEFINE_enum("pretraining_objective", "mlm", ["mlm", "ltr"],
                  "mlm: the original's masked LM records (with next sentence labels unless "
                  "--next_sentence_prediction=false). ltr: records of a left-to-right language "
                  "model (the paper's 'LTR & No NSP', Table 5): [CLS] text [SEP] from one "
                  "document, unmasked, one segment, no next_sentence_labels; the masking and "
                  "next-sentence flags are not used.")

flags.DEFINE_integer("max_sequences_per_row", 1,
                     "More than 1: packed records, up to this many sentence pairs in each row of "
                     "max_seq_length tokens instead of padding (bert_tasks/pretraining/data/"
                     "packing.py; run_pretraining.py reads either kind). max_predictions_per_seq "
                     "is then each row's capacity of masked tokens. 1: the original's records.",
                     lower_bound=1)
cross(dynamic_masking.MASKING_RATES)
cross(CrossRule(
    ("max_predictions_per_seq", "max_seq_length"),
    lambda predictions, seq: predictions <= seq - 3,
    lambda predictions, seq: (f"max_predictions_per_seq must be between 1 and max_seq_length - 3 "
                              f"= {seq - 3}, the number of maskable positions"),
    "must be <= max_seq_length - 3"))
cross(CrossRule(
    ("num_workers", "chunk_size_mb"),
    lambda workers, chunk: workers == 1 or chunk > 0,
    lambda workers, chunk: (f"--num_workers={workers} needs --chunk_size_mb > 0: the original's "
                            "ordering (one global shuffle, random next sentences from the whole "
                            "corpus) is sequential"),
    "more than 1 needs --chunk_size_mb > 0"))

FLAGS = flags.FLAGS


def main(_):
    opts = pipeline.Options(**{name: FLAGS[name].value
                               for name in pipeline.Options.__dataclass_fields__})
    try:
        if FLAGS.runner and opts.max_sequences_per_row > 1:
            raise ValueError("--max_sequences_per_row=%d with --runner: records of the Beam "
                             "pipeline are not packed: pack with a local run"
                             % opts.max_sequences_per_row)
        if FLAGS.runner:
            beam_pipelines.make_pretraining_data(
                opts, FLAGS.runner, FLAGS.beam_pipeline_options)
        else:
            pipeline.write_records(opts)
    except WorkerError as e:
        logging.error("%s", e)
        sys.exit(1)


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("output_file")
    flags.mark_flag_as_required("vocab_file")
    cli.run_script(main)
