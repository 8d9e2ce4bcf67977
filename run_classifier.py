"""Fine-tune BERT on a GLUE or XNLI sentence (pair) classification task: the original
`run_classifier.py` (same flags, TFRecords and output files), on one device, many GPUs or a TPU,
resumable, with `--seeds` to run several seeds and summarise their spread; new: documents longer
than max_seq_length in windows (`--long_documents`) and several labels per example
(`--task_name=multilabel`)."""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import (
    PAIR, CrossRule, ModeRule, above, at_least, cross, mode, ranged, within)

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint", "do_lower_case")

flags.DEFINE_string(
    "data_dir", None,
    "The input data dir. Should contain the .tsv files (or other data files) for the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated, and sequences shorter than this will be padded."), at_least(3, PAIR))
run_flags.define_split_flags()
run_flags.define_finetuning_flags()
run_flags.define_packing_flag()
run_flags.define_tpu_flags()
run_flags.define_run_flags()
run_flags.define_seeds_flag()

flags.DEFINE_bool(
    "long_documents", False,
    "Write an example longer than max_seq_length as overlapping windows (--doc_stride) instead of "
    "truncating it: training uses every window with the example's label; evaluation and "
    "prediction aggregate the windows' logits per example (--window_aggregation). Examples that "
    "fit give the same records as without it.")
ranged(flags.DEFINE_integer(
    "doc_stride", 64,
    "With --long_documents: word-pieces between the starts of consecutive windows (run_squad's "
    "meaning); less than the window length makes them overlap."), at_least(1, words="at least"))
flags.DEFINE_enum(
    "window_aggregation", "mean", ["mean", "max", "first"],
    "With --long_documents: how the windows' logits make an example's: mean (every window votes; "
    "the evidence is spread over the document), max (per class, the strongest window; one "
    "passage decides), first (the first window's: truncation, as without windows).")
flags.DEFINE_list(
    "labels", None,
    "--task_name=multilabel: the label set, comma-separated, in the order of test_results.tsv's "
    "columns. Default: the sorted labels of train.tsv (a run without --do_train needs it: the "
    "training run's label_list.txt).")
# 0 or 1 would predict every label or none.
ranged(flags.DEFINE_float(
    "multi_label_threshold", 0.5,
    "--task_name=multilabel: a label is predicted where its sigmoid probability is at least this."),
    within(0, 1, low_open=True, high_open=True))
# The LSTM on top would read across a packed row's examples.
cross(CrossRule(
    ("max_sequences_per_row", "bilstm_on_top"),
    lambda per_row, bilstm: per_row == 1 or not bilstm,
    lambda per_row, bilstm: ("--bilstm_on_top reads whole rows, across packed examples: leave "
                             "--max_sequences_per_row out"),
    "1 with --bilstm_on_top"))
flags.DEFINE_string(
    "teacher", None,
    "Distil: the output_dir (or a ckpt-N) of a run_classifier.py run of the same --task_name and "
    "vocabulary, whose softened probabilities the model learns beside the labels "
    "(--distillation_weight), on the training set and --unlabeled_file. Its logits are computed "
    "once and kept in output_dir/teacher_logits.npz.")
flags.DEFINE_string(
    "teacher_bert_config_file", None,
    "With --teacher: its config. Default: the bert_config.json in the teacher's output_dir.")
ranged(flags.DEFINE_float(
    "distillation_temperature", 2.0,
    "With --teacher: both models' logits are divided by this before the softmax (higher: the "
    "teacher's smaller probabilities weigh more); the soft loss is scaled by its square."),
    above(0))
ranged(flags.DEFINE_float(
    "distillation_weight", 0.5,
    "With --teacher: the soft loss's weight; the labels' cross-entropy gets 1 minus it (1: the "
    "teacher alone, as Turc et al.'s pre-trained distillation)."), within(0, 1))
flags.DEFINE_string(
    "unlabeled_file", None,
    "With --teacher: more training text of the domain, one example a line (text_a<TAB>text_b for "
    "a pair task), labelled by the teacher alone.")
ranged(flags.DEFINE_integer(
    "init_from_teacher_stride", 0,
    "With --teacher and no --init_checkpoint: start the student from the teacher, its layer i "
    "from the teacher's layer i * stride (DistilBERT: 2), embeddings, pooler and classifier as "
    "they are. The student's --bert_config_file is the teacher's with fewer layers."),
    at_least(0))
mode(ModeRule(("teacher_bert_config_file", "distillation_temperature", "distillation_weight",
               "unlabeled_file", "init_from_teacher_stride"), ("teacher",), bool,
              "with --teacher", "without it the model learns the labels alone"))
mode(ModeRule(("teacher", "teacher_bert_config_file", "distillation_temperature",
               "distillation_weight", "unlabeled_file", "init_from_teacher_stride"), ("do_train",),
              bool, "with --do_train", "the teacher teaches in training; evaluation and prediction "
              "use the student's checkpoints"))
cross(CrossRule(
    ("init_from_teacher_stride", "init_checkpoint"),
    lambda stride, checkpoint: not (stride and checkpoint),
    lambda stride, checkpoint: ("the student starts from the teacher's layers or from "
                                "--init_checkpoint, not both: leave one out"),
    "0 with --init_checkpoint"))
# The teacher's logits are one per example; a packed row holds several.
cross(CrossRule(
    ("max_sequences_per_row", "teacher"),
    lambda per_row, teacher: per_row == 1 or not teacher,
    lambda per_row, teacher: "--teacher distils unpacked rows: leave --max_sequences_per_row out",
    "1 with --teacher"))
mode(ModeRule(("doc_stride", "window_aggregation"), ("long_documents",), bool,
              "with --long_documents", "without it every example is truncated to max_seq_length"))
mode(ModeRule(("multi_label_threshold",), ("task_name",),
              lambda task: (task or "").lower() == "multilabel", "with --task_name=multilabel",
              "the other tasks predict one label by its highest probability"))


def main(_):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import make_task

    run = RunConfig.from_flags()
    teacher = start = None
    if FLAGS.teacher:
        from bert_tasks.classifier import distillation
        from bert_runner.plan import resolve_start

        # The student's starting point, resolved once (and handed on): the teacher is checked
        # against its config and vocabulary.
        start = resolve_start(run, FLAGS.max_seq_length)
        teacher = distillation.load_teacher(
            run_flags.config_from_flags(distillation.DistillationSettings), run, FLAGS.task_name,
            start[0].files)
    task = make_task(FLAGS.task_name, FLAGS.max_seq_length, FLAGS.data_dir, labels=FLAGS.labels,
                     threshold=FLAGS.multi_label_threshold, long_documents=FLAGS.long_documents,
                     doc_stride=FLAGS.doc_stride, window_aggregation=FLAGS.window_aggregation,
                     teacher=teacher)
    driver.run_command(task, run, seeds=run_flags.seeds_of(FLAGS), start=start)


if __name__ == "__main__":
    for name in ("data_dir", "task_name", "output_dir"):
        flags.mark_flag_as_required(name)
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
