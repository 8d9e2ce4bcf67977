"""Pre-training ELECTRA (replaced-token detection): the original google-research/electra
`run_pretraining.py`'s `PretrainingModel` losses and `metric_fn`, on this project's records.

A small masked-LM generator fills the masked positions with tokens sampled from its softmax; the
discriminator (the model every task fine-tunes) labels every real token original or replaced.
total_loss = gen_weight x generator masked-LM loss + disc_weight x discriminator loss (1.0 and
50.0 by default). Masks come from the records (`create_pretraining_data.py`'s, their
next-sentence labels unused), or are drawn per batch by the original's rule for records that
carry none (the original ELECTRA's `build_pretraining_dataset.py`: `data.electra_masking`), or
by dynamic masking (`--input_format=text|unmasked_records`).
"""
import numpy as np
from absl import logging
from keras import ops

from modeling import families, masked_lm_loss
from modeling.bert.config import OBJECTIVE_KEY
from modeling.electra.config import ElectraConfig
from modeling.losses import ELECTRA_DENOMINATOR_EPSILON, replaced_token_loss
from bert_tasks.pretraining.data import electra_masking
from bert_tasks.pretraining.data.reading import InputError
from bert_tasks.pretraining.task import PretrainingTask, _correct
from bert_runner.task import encoder_training_flops

# tf.metrics.auc's default: the ROC curve at this many thresholds, trapezoids between them.
AUC_THRESHOLDS = 200


def electra_outputs(model, features, training, gen_weight, disc_weight):
    """The model's outputs, both losses and the total: `(total, generator (loss, per_position
    [B·P], log_probs [B·P, V]), discriminator (loss, per_example [B], probs [B, S]), outputs)`."""
    outputs = model(features, training=training)
    generator = masked_lm_loss(outputs["masked_lm_logits"], features["masked_lm_ids"],
                               features["masked_lm_weights"], ELECTRA_DENOMINATOR_EPSILON)
    discriminator = replaced_token_loss(outputs["discriminator_logits"], outputs["is_replaced"],
                                        features["input_mask"])
    total = gen_weight * generator[0] + disc_weight * discriminator[0]
    return total, generator, discriminator, outputs


def roc_auc(labels, scores, num_thresholds=AUC_THRESHOLDS):
    """`tf.metrics.auc` (its defaults: ROC, `num_thresholds` thresholds evenly spaced in [0, 1]
    with two just outside, trapezoidal sums, 1e-7 against division by zero) of 0/1 `labels` and
    `scores` in [0, 1], any equal shapes."""
    epsilon = 1e-7
    thresholds = np.concatenate([[-epsilon], (np.arange(1, num_thresholds - 1, dtype=np.float64)
                                              / (num_thresholds - 1)), [1.0 + epsilon]])
    labels = labels.reshape(-1).astype(bool)
    scores = scores.reshape(-1).astype(np.float32)
    above = scores[None, :] > thresholds.astype(np.float32)[:, None]
    tp = (above & labels).sum(axis=1).astype(np.float64)
    fp = (above & ~labels).sum(axis=1).astype(np.float64)
    fn = labels.sum() - tp
    tn = (~labels).sum() - fp
    tpr = (tp + epsilon) / (tp + fn + epsilon)
    fpr = fp / (fp + tn + epsilon)
    return float(np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2.0))


class ElectraPretrainingTask(PretrainingTask):
    """`PretrainingTask` for ELECTRA: same flags, splits and output_dir layout.

    gen_weight, disc_weight, temperature: the original's hparams of those names.
    masking: `data.electra_masking.ElectraMasking`, how records without masks (the original
      ELECTRA's) are masked: the vocabulary, mask_prob, and N when given (run_pretraining.py's
      flags); records with masks are read as they are, with `max_predictions_per_seq`.
    masker: once settled (`settle`), None for records with masks, else the `ElectraMasker`
      that masks each batch (`max_predictions_per_seq` is then its N).
    eval_results.txt: the original's `metric_fn` values: the generator's `masked_lm_accuracy`,
    `masked_lm_loss` and `sampled_masked_lm_accuracy`; the discriminator's `disc_loss`,
    `disc_auc`, `disc_accuracy`, `disc_precision`, `disc_recall`; `loss` and `global_step`.
    """

    objective = "electra"

    def __init__(self, max_seq_length, max_predictions_per_seq, input_file=None,
                 num_train_steps=0, num_warmup_steps=0, max_eval_steps=None, gen_weight=1.0,
                 disc_weight=50.0, temperature=1.0, masking=None, dynamic_input=None):
        super().__init__(max_seq_length, max_predictions_per_seq, False, input_file,
                         num_train_steps, num_warmup_steps, max_eval_steps, dynamic_input)
        self.gen_weight = gen_weight
        self.disc_weight = disc_weight
        self.temperature = temperature
        self.masking = masking or electra_masking.ElectraMasking()
        self.masker = None

    @property
    def masked_lm(self):
        """None (`check_records`: records with masks or without) for records read as such;
        dynamic masking (`--input_format=unmasked_records`) reads records with masked_lm_*."""
        return None if self.dynamic_input is None else True

    def recorded_settings(self):
        masking = {} if self.masker is None else {"mask_prob": self.masking.mask_prob}
        return {**super().recorded_settings(), "gen_weight": self.gen_weight,
                "disc_weight": self.disc_weight, "temperature": self.temperature, **masking}

    def records_settings(self, records):
        """Records with masks are read as they are; records without (the original ELECTRA's)
        get the masker of `masking`, and its N as `max_predictions_per_seq`. Raises ValueError
        for `masking` options that would not be used (a mask_prob other than the default on
        records with masks), or that cannot mask (no vocabulary)."""
        # The records' next-sentence labels, if any, are not read: ELECTRA has no such loss.
        settled = {"next_sentence": False, "sequences_per_row": records.sequences_per_row}
        logging.info("Objective: ELECTRA replaced-token detection (generator loss x %g + "
                     "discriminator loss x %g)", self.gen_weight, self.disc_weight)
        if self.dynamic_input is not None:
            return settled
        if records.masks:
            # The default is the original's mask_prob, so only another value was asked for.
            if self.masking.mask_prob != electra_masking.MASK_PROB:
                raise InputError(
                    f"--masked_lm_prob={self.masking.mask_prob:g}: the records of --input_file="
                    f"{self.input_file} carry their masks (masked_lm_*), which ELECTRA uses as "
                    "they are; --masked_lm_prob masks records without (the original ELECTRA's): "
                    "leave it out")
            return settled
        masker = self.masking.masker(self.max_seq_length, self.input_file)
        logging.info("Records without masks (the original ELECTRA's): each batch masked as the "
                     "original masks it, %g of the tokens (up to %d a sequence), %d%% of them "
                     "[MASK], the rest kept", self.masking.mask_prob, masker.max_predictions,
                     round(100 * electra_masking.MASK_TOKEN_SHARE))
        return {**settled, "masker": masker, "max_predictions_per_seq": masker.max_predictions}

    def feature_spec(self, is_training):
        spec = super().feature_spec(is_training)
        if self.masker is None:
            return spec
        return {name: feature for name, feature in spec.items()
                if not name.startswith("masked_lm")}

    def input_dataset(self, files, batch_size, is_training, **kwargs):
        """The records; without masks, each batch masked by `masker` (`data.electra_masking`:
        static shapes `[B, N]` where the batches' are, as training's with drop_remainder)."""
        if self.masker is None:
            return super().input_dataset(files, batch_size, is_training, **kwargs)
        return electra_masking.masked_records(files, self.feature_spec(is_training), self.masker,
                                              batch_size, is_training=is_training, **kwargs)

    def model_config(self, config):
        """An `ElectraConfig`; a BERT config is taken as the discriminator's, with ELECTRA's
        defaults for the rest (embedding tables as wide as the encoder, a generator a quarter
        as wide). A left-to-right model's config is refused."""
        recorded = config.to_dict().get(OBJECTIVE_KEY)
        if recorded is not None:
            raise ValueError(f"--bert_config_file records \"{OBJECTIVE_KEY}\": \"{recorded}\": "
                             "an ELECTRA discriminator attends both ways; pass a config "
                             "without the key")
        if not isinstance(config, ElectraConfig):
            logging.info("A BERT config for ELECTRA: the discriminator is its model, the "
                         "generator %g of its width", ElectraConfig(1).generator_hidden_size)
            config = ElectraConfig.from_bert(config)
        return config

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return families.build_model("pretrainer", config, temperature=self.temperature,
                                    modes=modes)

    def loss(self, model, features, training):
        total, generator, discriminator, outputs = electra_outputs(
            model, features, training, self.gen_weight, self.disc_weight)
        weights = ops.reshape(ops.cast(features["masked_lm_weights"], "float32"), (-1,))
        correct = _correct(generator[2], features["masked_lm_ids"])
        accuracy = ops.sum(correct * weights) / ops.maximum(ops.sum(weights), 1.0)
        return total, {"masked_lm_loss": generator[0], "masked_lm_accuracy": accuracy,
                       "disc_loss": discriminator[0]}

    def predict_step(self, model, features):
        """Per example: the generator's per-position losses, argmaxes and samples `[B, P]` with
        the targets and weights; the discriminator's loss `[B]`, and its probabilities, labels
        and the input mask `[B, S]`."""
        _, generator, discriminator, outputs = electra_outputs(
            model, features, False, self.gen_weight, self.disc_weight)
        ids = features["masked_lm_ids"]
        shape = ops.shape(ids)
        return {
            "mlm_loss": ops.reshape(generator[1], shape),
            "mlm_preds": ops.reshape(ops.cast(ops.argmax(generator[2], -1), "int32"), shape),
            "sampled_ids": outputs["sampled_ids"],
            "masked_lm_ids": ids,
            "masked_lm_weights": features["masked_lm_weights"],
            "disc_loss": discriminator[1],
            "disc_probs": discriminator[2],
            "disc_labels": outputs["is_replaced"],
            "input_mask": features["input_mask"],
        }

    def evaluate(self, outputs, global_step, split, output_dir):
        """The original's `metric_fn`: weighted means over the masked positions (generator) and
        the real tokens (discriminator); `disc_loss` the mean of the examples' losses;
        `disc_auc` over every position, padding counted as an original token scored 0 (the
        original's `labels * input_mask`, `probs * input_mask`); `loss` the mean over batches
        of the batch total loss."""
        batch = outputs["batch_index"]
        weights = outputs["masked_lm_weights"].astype(np.float64)
        ids = outputs["masked_lm_ids"]
        mask = outputs["input_mask"].astype(np.float64)
        labels = outputs["disc_labels"]
        preds = (outputs["disc_probs"] > 0.5).astype(labels.dtype)
        example_weights = weights.sum(axis=1)
        gen_batch = (np.bincount(batch, weights=(outputs["mlm_loss"] * weights).sum(axis=1))
                     / (np.bincount(batch, weights=example_weights) + ELECTRA_DENOMINATOR_EPSILON))
        token_losses = outputs["disc_loss"] * (mask.sum(axis=1) + ELECTRA_DENOMINATOR_EPSILON)
        disc_batch = (np.bincount(batch, weights=token_losses)
                      / (np.bincount(batch, weights=mask.sum(axis=1))
                         + ELECTRA_DENOMINATOR_EPSILON))

        def weighted(correct, w):
            return np.sum(correct * w) / max(np.sum(w), 1e-12)

        values = {
            "loss": np.mean(self.gen_weight * gen_batch + self.disc_weight * disc_batch),
            "masked_lm_accuracy": weighted(outputs["mlm_preds"] == ids, weights),
            "masked_lm_loss": weighted(outputs["mlm_loss"], weights),
            "sampled_masked_lm_accuracy": weighted(outputs["sampled_ids"] == ids, weights),
            "disc_loss": np.mean(outputs["disc_loss"]),
            "disc_auc": roc_auc(labels * outputs["input_mask"], outputs["disc_probs"] * mask),
            "disc_accuracy": weighted(preds == labels, mask),
            "disc_precision": weighted(preds == labels, preds * mask),
            "disc_recall": weighted(preds == labels, labels * mask),
        }
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs, split):
        """The most frequent masked token; for the discriminator, calling every token original
        (accuracy), or every token replaced (precision: the replaced share; recall 1), and
        chance (AUC 0.5)."""
        lines = {}
        weights = outputs["masked_lm_weights"].reshape(-1) > 0
        targets = outputs["masked_lm_ids"].reshape(-1)[weights]
        if len(targets):
            counts = np.bincount(targets)
            lines["masked_lm_accuracy"] = "most frequent masked token (id %d) %.4f" % (
                int(np.argmax(counts)), counts.max() / len(targets))
        real = outputs["input_mask"].reshape(-1) > 0
        if real.any():
            replaced = outputs["disc_labels"].reshape(-1)[real].mean()
            lines["disc_accuracy"] = "every token called original %.4f" % (1.0 - replaced)
            lines["disc_precision"] = "every token called replaced %.4f" % replaced
            lines["disc_recall"] = "every token called replaced 1.0000"
            lines["disc_auc"] = "chance 0.5000"
        return lines

    def flops_per_example(self, config):
        """The discriminator's training FLOPs and the generator's (its masked-LM head at the
        masked positions)."""
        return (encoder_training_flops(config, self.max_seq_length)
                + encoder_training_flops(config.generator_config(), self.max_seq_length,
                                         self.max_predictions_per_seq))
