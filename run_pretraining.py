"""Pre-train BERT (masked LM + next sentence prediction) from TFRecords: the original
`run_pretraining.py`, on one device, many GPUs, many workers or a TPU, resumable.

The first record of each input file is checked against the flags and bert_config.json before
anything else (`bert_tasks.pretraining.data.validation`); records without next_sentence_labels (made with
`create_pretraining_data.py --next_sentence_prediction=false`) train the masked LM alone.
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import (
    PAIR_OF_SENTENCES, TRAINING, CrossRule, ModeRule, above, at_least, cross, mode, ranged)
from bert_tasks.pretraining.data import dynamic_masking, electra_masking

FLAGS = flags.FLAGS

run_flags.define_bert_flags(
    "bert_config_file", "output_dir", "init_checkpoint", "vocab_file", "do_lower_case")

flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated, and sequences shorter than this will be padded. Must match data "
    "generation."), at_least(5, PAIR_OF_SENTENCES))
ranged(flags.DEFINE_integer(
    "max_predictions_per_seq", 20,
    "Maximum number of masked LM predictions per sequence. Must match data generation. "
    "--pretraining_objective=electra on records without masks (the original ELECTRA's): the "
    "slots each sequence has, by default the original's int((masked_lm_prob + 0.005) * "
    "max_seq_length)."),
    at_least(1))
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
ranged(flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training."),
       at_least(1).when(*TRAINING))
ranged(flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval."),
       at_least(1).when("do_eval"))
ranged(flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam."),
       above(0).when(*TRAINING))
ranged(flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps."),
       at_least(1).when(*TRAINING))
ranged(flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps."),
       at_least(0).when(*TRAINING))
run_flags.define_checkpoint_flags()
ranged(flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps."),
       at_least(1).when("do_eval"))
flags.DEFINE_bool(
    "next_sentence_prediction", None,
    "Train (and evaluate) the next sentence prediction head. Default: when the records have "
    "next_sentence_labels. False: the masked LM alone (the paper's 'No NSP' ablation; make its "
    "data with create_pretraining_data.py --next_sentence_prediction=false).")
flags.DEFINE_enum(
    "pretraining_objective", "mlm", ["mlm", "ltr", "electra"],
    "mlm: the original's masked LM (with next sentence prediction as the records say). ltr: a "
    "left-to-right language model (the paper's 'LTR & No NSP', Table 5; OpenAI GPT's "
    "objective): causal self-attention, every next token predicted, on records of "
    "create_pretraining_data.py --pretraining_objective=ltr. Recorded in "
    "output_dir/bert_config.json, from which every script builds the same model. electra: "
    "ELECTRA's replaced-token detection (google-research/electra): a small masked-LM generator "
    "fills the masked positions, the discriminator tells every token original or replaced; "
    "--bert_config_file is the original's --hparams JSON, an ELECTRA run's bert_config.json or "
    "a BERT config (the discriminator). Its defaults differ: --learning_rate=5e-4 and "
    "--train_batch_size=128 unless given (docs/electra.md).")
# The original ELECTRA's hparams of these names (configure_pretraining.py).
ranged(flags.DEFINE_float(
    "gen_weight", 1.0, "ELECTRA: the weight of the generator's masked-LM loss in the total."),
    at_least(0))
ranged(flags.DEFINE_float(
    "disc_weight", 50.0, "ELECTRA: the weight of the discriminator's loss in the total."),
    at_least(0))
ranged(flags.DEFINE_float(
    "temperature", 1.0, "ELECTRA: the temperature of the generator's softmax it samples from."),
    above(0))
# configure_pretraining.py's defaults where they differ from BERT's run_pretraining.py's.
ELECTRA_DEFAULTS = {"learning_rate": 5e-4, "train_batch_size": 128}
run_flags.define_tpu_flags()
run_flags.define_run_flags()
dynamic_masking.define_flags()
mode(ModeRule(("gen_weight", "disc_weight", "temperature"), ("pretraining_objective",),
              lambda objective: objective == "electra", "with --pretraining_objective=electra",
              "the other objectives have no generator"))
# The left-to-right model and ELECTRA have no next-sentence loss.
cross(CrossRule(
    ("pretraining_objective", "next_sentence_prediction"),
    lambda objective, nsp: objective == "mlm" or not nsp,
    lambda objective, nsp: (f"--pretraining_objective={objective} trains no next sentence "
                            "prediction: leave --next_sentence_prediction out"),
    "not with --pretraining_objective=ltr or electra"))
# Records carry their masks; these flags (at create_pretraining_data's defaults otherwise) are
# dynamic masking's. ELECTRA masks records without masks (the original ELECTRA's) at
# --masked_lm_prob, the original's mask_prob (`electra_masking`); whether they have masks shows
# only in the records, where a --masked_lm_prob they would ignore is refused.
_MASKING_DEFAULTS = (False, 0.15, 0.8, 0.1, 0.1)
cross(CrossRule(
    ("input_format", "pretraining_objective", "do_whole_word_mask", "masked_lm_prob",
     "mask_token_prob", "random_token_prob", "short_seq_prob"),
    lambda fmt, objective, *values: fmt != "records" or all(
        value == default or (name == "masked_lm_prob" and objective == "electra")
        for name, value, default in zip(
            ("do_whole_word_mask", "masked_lm_prob", "mask_token_prob", "random_token_prob",
             "short_seq_prob"), values, _MASKING_DEFAULTS)),
    lambda fmt, objective, *values: (
        "--input_format=records: the records carry their masks (make them with "
        "create_pretraining_data.py and these flags); the masking flags apply to "
        "--input_format=text or unmasked_records, and --masked_lm_prob also to "
        "--pretraining_objective=electra on records without masks (the original ELECTRA's)"),
    "the masking flags need --input_format=text or unmasked_records (--masked_lm_prob: or "
    "--pretraining_objective=electra)"))
# Dynamic masking makes masked sentence pairs; the LTR model reads one unmasked segment.
cross(CrossRule(
    ("input_format", "pretraining_objective"),
    lambda fmt, objective: fmt == "records" or objective != "ltr",
    lambda fmt, objective: (f"--input_format={fmt} makes masked sentence pairs for the "
                            "masked LM; --pretraining_objective=ltr reads the records of "
                            "create_pretraining_data.py --pretraining_objective=ltr "
                            "(--input_format=records)"),
    "records with --pretraining_objective=ltr"))


def run():
    """Runs what the flags ask for and returns the `Trainer` (its `.model` holds the weights)."""
    from bert_tasks.pretraining.ltr_task import LtrPretrainingTask
    from bert_tasks.pretraining.task import PretrainingTask
    from bert_runner import driver
    from bert_runner.run_config import RunConfig

    dynamic_input = None
    masking = run_flags.config_from_flags(dynamic_masking.MaskingOptions).dynamic()
    if masking is not None:  # --input_format=text|unmasked_records: masks made in tf.data
        dynamic_input = dynamic_masking.DynamicInput(
            masking, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
    if FLAGS.pretraining_objective == "electra":
        from bert_tasks.pretraining.electra_task import ElectraPretrainingTask
        for name, value in ELECTRA_DEFAULTS.items():
            if not FLAGS[name].present:
                FLAGS[name].value = value
        task = ElectraPretrainingTask(
            FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, FLAGS.input_file,
            FLAGS.num_train_steps, FLAGS.num_warmup_steps, FLAGS.max_eval_steps,
            FLAGS.gen_weight, FLAGS.disc_weight, FLAGS.temperature,
            masking=electra_masking.ElectraMasking(
                FLAGS.vocab_file, FLAGS.masked_lm_prob,
                run_flags.given_value("max_predictions_per_seq")),
            dynamic_input=dynamic_input)
    elif FLAGS.pretraining_objective == "ltr":
        task = LtrPretrainingTask(FLAGS.max_seq_length, FLAGS.input_file, FLAGS.num_train_steps,
                                  FLAGS.num_warmup_steps, FLAGS.max_eval_steps, dynamic_input)
    else:
        task = PretrainingTask(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                               FLAGS.next_sentence_prediction, FLAGS.input_file,
                               FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                               FLAGS.max_eval_steps, dynamic_input)
    return driver.run_command(task, RunConfig.from_flags()).trainer


def main(_):
    run()


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    run_flags.require_model_files("bert_config_file")
    flags.mark_flag_as_required("output_dir")
    cli.run_script(main)
