"""run_squad.py's window and answer flags with their ranges, for every script that runs SQuAD
(run_squad.py, run_squad_grid.py): the original's names, defaults and help. Loads no TensorFlow,
so the flags are checked before it is imported."""
from absl import flags

from bert_runner.flag_ranges import CrossRule, at_least, cross, ranged


def define_window_flags():
    """--max_seq_length, --doc_stride, --max_query_length and the room the question leaves."""
    flags.DEFINE_integer(
        "max_seq_length", 384,
        "The maximum total input sequence length after WordPiece tokenization. Sequences longer "
        "than this will be truncated, and sequences shorter than this will be padded.")
    # check_window_settings (features) says the same: the original loops forever without room.
    ranged(flags.DEFINE_integer(
        "doc_stride", 128,
        "When splitting up a long document into chunks, how much stride to take between chunks."),
        at_least(1, words="at least"))
    ranged(flags.DEFINE_integer(
        "max_query_length", 64,
        "The maximum number of tokens for the question. Questions longer than this will be "
        "truncated to this length."), at_least(1))
    cross(CrossRule(
        ("max_seq_length", "max_query_length"),
        lambda seq, query: seq > query + 3,
        lambda seq, query: (f"max_seq_length must be greater than max_query_length ({query}) + 3 "
                            "([CLS] question [SEP] context [SEP] with at least one context token)"),
        "must be greater than max_query_length + 3"))


def define_answer_flags():
    """--n_best_size and --max_answer_length (used only by a run that predicts)."""
    ranged(flags.DEFINE_integer(
        "n_best_size", 20,
        "The total number of n-best predictions to generate in the nbest_predictions.json output "
        "file."), at_least(1).when("do_predict"))
    ranged(flags.DEFINE_integer(
        "max_answer_length", 30,
        "The maximum length of an answer that can be generated. This is needed because the start "
        "and end predictions are not conditioned on one another."), at_least(1).when("do_predict"))
