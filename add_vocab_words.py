"""Add your words to a checkpoint's vocabulary: each becomes one word-piece and one row.

    python add_vocab_words.py --vocab_file=$BERT_BASE_DIR/vocab.txt \\
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \\
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --words_file=my_words.txt \\
      --output_dir=/tmp/bert_with_my_words

    python add_vocab_words.py --init_checkpoint=/models/all-MiniLM-L6-v2 \\
      --words_file=my_words.txt --output_dir=/tmp/minilm_with_my_words

Input: the checkpoint (either layout, or a Hugging Face directory) with its vocab.txt and
bert_config.json (a Hugging Face directory's, or a run's output_dir's, when not given), and a text
file of words, one a line. The words take the [unusedN] slots first (same vocab size, same
shapes), then are appended (the word embeddings and, with the masked-LM head, its output bias
grow). Output, in --output_dir: vocab.txt, bert_config.json (vocab_size updated) and
bert_model.ckpt in the original layout (the encoder, and the pre-training heads the checkpoint
has), which every script's --init_checkpoint reads. See docs/vocab_words.md.
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import ranged, seed
from bert_tasks.pretraining.vocab_building import add_words

flags.DEFINE_string("vocab_file", None,
                    "The checkpoint's vocab.txt (default: a Hugging Face directory's, a run's).")
flags.DEFINE_string("bert_config_file", None,
                    "The checkpoint's bert_config.json (its vocab_size must be the number of "
                    "lines of --vocab_file; default: a Hugging Face directory's config.json, a "
                    "run's bert_config.json).")
flags.DEFINE_string("init_checkpoint", None,
                    "The checkpoint: an original-layout bert_model.ckpt, a ckpt-N of this "
                    "project's pre-training or a Hugging Face directory, holding the encoder and "
                    "any of the pre-training heads (model weights only; its optimizer state is "
                    "dropped).")
flags.DEFINE_string("words_file", None,
                    "The words to add, one a line, as the tokenizer sees them (lower case with "
                    "--do_lower_case); a word given twice is added once.")
flags.DEFINE_string("output_dir", None,
                    "Where vocab.txt, bert_config.json and bert_model.ckpt are written.")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether the model's text is lower-cased (uncased models): then a word with "
                  "capitals or accents is refused, as no text could reach it. Left out: the "
                  "casing --init_checkpoint records (a Hugging Face directory's "
                  "tokenizer_config.json), else True.")
flags.DEFINE_enum("new_word_init", "mean_of_pieces", list(add_words.INIT_CHOICES),
                  "A new word's embedding row and output bias: mean_of_pieces, the mean of those "
                  "of the word-pieces the old vocab splits it into; random, an appended row drawn "
                  "as the original initialises (truncated normal, stddev initializer_range; bias "
                  "0) and an [unusedN] slot's row kept as it is.")
ranged(flags.DEFINE_integer("random_seed", 12345,
                            "Seed of the rows drawn by --new_word_init=random."), seed())

FLAGS = flags.FLAGS


def main(_):
    options = {name: FLAGS[name].value for name in add_words.Options.__dataclass_fields__}
    if not FLAGS["do_lower_case"].present:  # the checkpoint's recorded casing, else True
        options["do_lower_case"] = None
    add_words.extend_checkpoint(add_words.Options(**options))


if __name__ == "__main__":
    for name in ("init_checkpoint", "words_file", "output_dir"):
        flags.mark_flag_as_required(name)
    run_flags.require_model_files("bert_config_file", "vocab_file")
    cli.run_script(main)
