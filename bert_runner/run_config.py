"""The shared run settings of every script, read from the flags once, in one place.

    run = RunConfig.from_flags()          # after absl has parsed the command line
    driver.run_command(task, run)                 # nothing below reads FLAGS

A script defines the flags it offers (the original's, through `bert_runner.flags`); a field whose flag
a script does not define keeps its default here.
"""
import dataclasses
from typing import Optional

from absl import flags

from bert_runner import flags as run_flags


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Model files, output, batch sizes, schedule, distribution and numerics of one run."""

    output_dir: str
    bert_config_file: Optional[str] = None
    vocab_file: Optional[str] = None
    init_checkpoint: Optional[str] = None
    do_lower_case: bool = True
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    log_steps: Optional[int] = None
    profile_steps: int = 0
    compilation_cache_dir: Optional[str] = None
    keep_checkpoint_max: int = 5
    save_tf1_checkpoint: bool = False
    bilstm_on_top: bool = False
    lora_rank: int = 0
    lora_alpha: Optional[float] = None
    lora_targets: str = "query_value"
    lora_adapters: Optional[str] = None
    max_sequences_per_row: int = 1
    # --layerwise_lr_decay; None: the model family's fine-tuning default (`layerwise_decay`).
    # 1.0 (none) for a script without the flag: pre-training has no layer-wise decay.
    layerwise_lr_decay: Optional[float] = 1.0
    # Distribution and numerics.
    use_tpu: bool = False
    tpu_name: Optional[str] = None
    tpu_zone: Optional[str] = None
    gcp_project: Optional[str] = None
    distribution_strategy: str = "default"
    mixed_precision: Optional[str] = None
    jit_compile: bool = False
    optimizer: str = "adamw"
    gradient_accumulation_steps: int = 1
    recompute_activations: bool = False
    fused_attention: str = "auto"
    random_seed: int = 12345
    deterministic: bool = False
    peak_tflops: Optional[float] = None

    @classmethod
    def from_flags(cls, flag_values=None):
        """The config of the parsed flags; fields without a flag keep their defaults."""
        return run_flags.config_from_flags(cls, flag_values or flags.FLAGS)

    def with_seed(self, seed, output_dir):
        """This config for one run of a seed sweep: another seed and output directory."""
        return dataclasses.replace(self, random_seed=seed, output_dir=output_dir)

    def training_steps(self, num_examples, unit="training examples"):
        """(num_train_steps, num_warmup_steps) as the original scripts compute them:
        `int(num_examples / train_batch_size * num_train_epochs)`, warm-up its
        `warmup_proportion`. Raises ValueError (naming the flags) when that makes no step.

        `unit` names what is counted in the message (SQuAD counts questions, NER windows).
        """
        num_train_steps = int(num_examples / self.train_batch_size * self.num_train_epochs)
        if num_train_steps <= 0:
            raise ValueError(
                f"{num_examples} {unit} at --train_batch_size={self.train_batch_size} for "
                f"--num_train_epochs={self.num_train_epochs} make 0 training steps")
        return num_train_steps, int(num_train_steps * self.warmup_proportion)

    def layerwise_decay(self, config):
        """The layer-wise learning-rate decay a run of `config`'s model trains with:
        --layerwise_lr_decay, else the model family's (`ModelFamily.layerwise_lr_decay`)."""
        if self.layerwise_lr_decay is not None:
            return float(self.layerwise_lr_decay)
        from modeling import families

        return float(families.of_config(config).layerwise_lr_decay(config))

    @property
    def on_tpu(self):
        """Whether the run's strategy is a `TPUStrategy` (`--use_tpu` or
        `--distribution_strategy=tpu`)."""
        return self.use_tpu or self.distribution_strategy == "tpu"

    @property
    def static_shapes(self):
        """Whether the steps are XLA-compiled (`--jit_compile`, or a TPU, which always is):
        the model then computes on static shapes only (`BertModel.static_shapes`)."""
        return self.jit_compile or self.on_tpu

    @property
    def checkpoint_iterator(self):
        """Whether checkpoints hold the input position (not every multi-worker setup supports it)."""
        return self.distribution_strategy != "multi_worker_mirrored"
