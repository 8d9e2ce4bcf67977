"""Learn a WordPiece vocab.txt from text, in the original release's layout.

    python build_vocab.py --input_file='corpus/*.txt' --output_file=my_vocab/vocab.txt \\
      --vocab_size=30522 --do_lower_case=True --num_workers=4

Input: text files, the pre-training input format (one sentence per line; blank lines are fine).
Output: `vocab.txt` with [PAD]=0, [unused0..98], [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103,
[unused99..], then the learned tokens; `FullTokenizer`, `FastBertTokenizer` and every script here
read it. Words are split by the original BasicTokenizer, tokens learned by tensorflow-text's
WordPiece learner; see docs/build_vocab.md and `vocab_building`.
"""
import sys

from absl import flags
from absl import logging

from bert_runner import cli
from bert_runner.flag_ranges import CrossRule, at_least, cross, ranged
from bert_tasks.pretraining import beam_pipelines
from bert_tasks.pretraining.data.processing import WorkerError
from bert_tasks.pretraining.vocab_building import building, layout

flags.DEFINE_string("input_file", None,
                    "Input text files: comma-separated files or glob patterns.")
flags.DEFINE_string("output_file", None,
                    "The vocab.txt to write (written to a temporary name, then renamed).")
flags.DEFINE_integer("vocab_size", 30522,
                     "Lines of the vocab, reserved tokens included (fewer only when the text has "
                     "too few tokens seen --min_count times; a warning says so).")
flags.DEFINE_bool("do_lower_case", True,
                  "Lower-case and strip accents (uncased models); False keeps case (cased).")
# The ranges below are those building.check_options refuses, said the same way.
ranged(flags.DEFINE_integer("num_unused", layout.ORIGINAL_NUM_UNUSED,
                            "[unusedN] slots. The original's 994 put [UNK] [CLS] [SEP] [MASK] at "
                            "100-103 and real tokens from 999; any value >= 99 keeps 100-103."),
       at_least(0))
flags.DEFINE_string("reserved_tokens", "",
                    "Comma-separated extra tokens to reserve after the unused slots, e.g. "
                    "'[URL],[EMAIL]'.")
ranged(flags.DEFINE_integer("max_input_lines", 0,
                            "Read only the first this many lines of the input (0: all of it)."),
       at_least(0, "0: all lines"))
ranged(flags.DEFINE_integer("max_input_words", 1_000_000,
                            "The learner uses this many most frequent distinct words; the word "
                            "table holds at most twice as many, which bounds memory (about 0.3 GB "
                            "per million)."), at_least(1))
ranged(flags.DEFINE_integer("min_count", 10,
                            "No token seen fewer times is learned (the learner's lower "
                            "threshold)."), at_least(1))
ranged(flags.DEFINE_integer("max_unique_chars", 1000,
                            "Characters that get a token: the most frequent this many (raise it "
                            "for Chinese); words with other characters are not learned from."),
       at_least(1))
ranged(flags.DEFINE_integer("num_workers", 1,
                            "Processes that split the text into words (the reading process "
                            "merges)."), at_least(1))
beam_pipelines.define_flags()
cross(CrossRule(
    ("runner", "max_input_lines"),
    lambda runner, lines: not runner or lines == 0,
    lambda runner, lines: (f"--max_input_lines={lines} reads a prefix of the input, which "
                           f"--runner={runner} (one shard per file) cannot: cut the files first "
                           "(head -n)"),
    "0 with --runner"))

FLAGS = flags.FLAGS


def main(_):
    opts = building.Options(**{name: FLAGS[name].value
                               for name in building.Options.__dataclass_fields__})
    try:
        if FLAGS.runner:
            beam_pipelines.build_vocab(opts, FLAGS.runner, FLAGS.beam_pipeline_options)
        else:
            building.build_vocab(opts)
    except WorkerError as e:
        logging.error("%s", e)
        sys.exit(1)


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("output_file")
    cli.run_script(main)
