"""Fine-tune BERT into a sentence-embedding model: pairs of a query and its positive passage (and
optionally hard negatives) in, the encoder trained with in-batch negatives (each query's softmax
over the scaled cosine similarities to every passage of the batch: sentence-transformers'
MultipleNegativesRankingLoss); evaluation by retrieval (recall@1/@10, MRR@10, nDCG@10), printed
beside the starting model's and a random order's.

    python run_sentence_embeddings.py --init_checkpoint=all-MiniLM-L6-v2/ \
      --train_file=pairs/train.jsonl --eval_file=pairs/dev.jsonl --do_train --do_eval \
      --output_dir=/tmp/embeddings

The checkpoints hold the encoder alone (extract_features.py --pooling and export_model.py
--format=embedding load them); training also writes output_dir/sentence_transformers, the model
in Hugging Face's layout with sentence-transformers' pooling files. docs/sentence_embeddings.md.
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import TRAINING, ModeRule, above, at_least, mode, ranged

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "train_file", None,
    "Training pairs: JSON lines ({\"query\": ..., \"positive\": ..., \"negatives\": [...]}) for "
    "a .jsonl/.json name, else TSV (query<TAB>positive[<TAB>negative ...], no header). Every "
    "line has the same number of hard negatives (none is fine).")
flags.DEFINE_string(
    "eval_file", None,
    "Evaluation pairs in the same formats: its queries retrieve among every distinct passage of "
    "it (and of --corpus_file); a query's positives are its relevant passages.")
flags.DEFINE_string(
    "corpus_file", None,
    "More passages for the retrieval evaluation (distractors), one per line.")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum length of each text (query or passage) in word-pieces, [CLS] and [SEP] "
    "included; longer texts are truncated."), at_least(2, "[CLS] A [SEP]"))
flags.DEFINE_enum(
    "pooling", "mean", ["cls", "mean", "max"],
    "The text's vector from the last layer: mean (over the real tokens, as sentence-transformers "
    "models), cls (the [CLS] row) or max (element-wise over the real tokens).")
flags.DEFINE_bool(
    "normalize", True,
    "The saved model divides each vector by its L2 norm (sentence-transformers' Normalize), so "
    "a dot product is the cosine the model was trained on.")
ranged(flags.DEFINE_float(
    "similarity_scale", 20.0,
    "The cosine similarities are multiplied by this before the softmax (the inverse "
    "temperature; sentence-transformers' default 20)."), above(0).when(*TRAINING))
flags.DEFINE_bool(
    "symmetric_loss", False,
    "Also train each positive to pick its query among the batch's queries, and average the two "
    "losses (sentence-transformers' MultipleNegativesSymmetricRankingLoss).")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate retrieval on --eval_file.")
# Every other pair of the batch is a negative: larger batches train better embeddings.
ranged(flags.DEFINE_integer(
    "train_batch_size", 32,
    "Pairs per training step (all replicas together): each query's in-batch negatives are the "
    "other pairs' passages, so larger is better."), at_least(1).when(*TRAINING))
ranged(flags.DEFINE_integer("eval_batch_size", 32, "Texts encoded per evaluation step."),
       at_least(1).when("do_eval"))
run_flags.define_finetuning_flags(learning_rate=2e-5)
run_flags.define_tpu_flags()
run_flags.define_run_flags()
mode(ModeRule(("train_file", "similarity_scale", "symmetric_loss"), ("do_train",), bool,
              "with --do_train", "without it nothing is trained"))
mode(ModeRule(("eval_file", "corpus_file"), ("do_eval",), bool, "with --do_eval",
              "without it nothing is evaluated"))


def main(_):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.embeddings.task import SentenceEmbeddingTask

    task = SentenceEmbeddingTask(
        FLAGS.max_seq_length, FLAGS.train_file, FLAGS.eval_file, FLAGS.corpus_file,
        pooling=FLAGS.pooling, normalize=FLAGS.normalize, scale=FLAGS.similarity_scale,
        symmetric=FLAGS.symmetric_loss, train_batch_size=FLAGS.train_batch_size,
        accumulation=FLAGS.gradient_accumulation_steps)
    driver.run_command(task, RunConfig.from_flags())


if __name__ == "__main__":
    flags.mark_flag_as_required("output_dir")
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
