"""Flags shared by the training scripts: the original TPU flags and this project's additions;
and the settings values the scripts make of their flags (`config_from_flags`), so that nothing
below a script reads them."""
import dataclasses
import os

from absl import flags

from bert_runner.flag_ranges import (
    TRAINING, CrossRule, ModeRule, above, at_least, cross, mode, ranged, seed, seed_list, within)


_BERT_FLAG_HELP = {
    "bert_config_file": "The config json file corresponding to the pre-trained BERT model. "
                        "This specifies the model architecture.",
    "vocab_file": "The vocabulary file that the BERT model was trained on.",
    "output_dir": "The output directory where the model checkpoints will be written.",
    "init_checkpoint": "Initial checkpoint (usually from a pre-trained BERT model).",
}


def define_bert_flags(*names):
    """The original's model flags that several scripts share, by name: `bert_config_file`,
    `vocab_file`, `output_dir`, `init_checkpoint` (strings, default None) and `do_lower_case`."""
    for name in names:
        if name == "do_lower_case":
            flags.DEFINE_bool(
                "do_lower_case", True,
                "Whether to lower case the input text. Should be True for uncased models and "
                "False for cased models.")
        else:
            flags.DEFINE_string(name, None, _BERT_FLAG_HELP[name])


def define_split_flags(train_batch_size=32, dev="the dev set", test="the test set"):
    """run_classifier's do_train / do_eval / do_predict and batch-size flags (same names, help and
    defaults), for the fine-tuning scripts with a train, dev and test split; `dev` and `test` name
    the sets in the help."""
    flags.DEFINE_bool("do_train", False, "Whether to run training.")
    flags.DEFINE_bool("do_eval", False, f"Whether to run eval on {dev}.")
    flags.DEFINE_bool(
        "do_predict", False, f"Whether to run the model in inference mode on {test}.")
    # Each batch size only with the split it batches.
    ranged(flags.DEFINE_integer("train_batch_size", train_batch_size,
                                "Total batch size for training."), at_least(1).when(*TRAINING))
    ranged(flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval."),
           at_least(1).when("do_eval"))
    ranged(flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict."),
           at_least(1).when("do_predict"))


def define_finetuning_flags(learning_rate=5e-5):
    """The original fine-tuning schedule flags, shared by the fine-tuning scripts; a task may
    take another default learning rate (SWAG: the paper's 2e-5)."""
    # The schedule and the checkpoints are used only when training.
    ranged(flags.DEFINE_float("learning_rate", learning_rate,
                              "The initial learning rate for Adam."), above(0).when(*TRAINING))
    ranged(flags.DEFINE_float("num_train_epochs", 3.0,
                              "Total number of training epochs to perform."),
           above(0).when(*TRAINING))
    ranged(flags.DEFINE_float(
        "warmup_proportion", 0.1,
        "Proportion of training to perform linear learning rate warmup for. "
        "E.g., 0.1 = 10% of training."), within(0, 1).when(*TRAINING))
    define_layerwise_lr_decay_flag()
    define_checkpoint_flags()
    define_lora_flags()
    flags.DEFINE_bool(
        "bilstm_on_top", False,
        "The paper's '+ BiLSTM' (Table 5): a randomly initialised bidirectional LSTM between the "
        "encoder and the output layer, trained with it; the layer reads its outputs (per token; "
        "the two final states in place of the pooled output). Made for left-to-right "
        "(--pretraining_objective=ltr) checkpoints, whose tokens see no right context.")


def define_layerwise_lr_decay_flag():
    """`--layerwise_lr_decay`: ELECTRA's layer-wise learning rates
    (`modeling.optimization.layerwise_rates`), for fine-tuning only."""
    ranged(flags.DEFINE_float(
        "layerwise_lr_decay", None,
        "Layer-wise learning-rate decay (ELECTRA's fine-tuning): each variable's learning rate "
        "is multiplied by this to the power of its distance from the head, so the head trains "
        "at --learning_rate, the top encoder layer at this times it, and the embeddings, "
        "num_hidden_layers + 2 steps down, at the least (BERT's pooler between the top layer "
        "and the head). 1.0: one learning rate for every variable (BERT's original). Default: "
        "the model family's: 1.0 for BERT; the original ELECTRA's 0.8, and 0.9 for its Large "
        "models."), within(0, 1, low_open=True).when(*TRAINING))


def define_lora_flags():
    """LoRA (`modeling.layers.lora`): `--lora_rank`, `--lora_alpha`, `--lora_targets`, and
    `--lora_adapters` to load a LoRA run's adapters onto its base checkpoint."""
    ranged(flags.DEFINE_integer(
        "lora_rank", 0,
        "Fine-tune with LoRA: the encoder frozen, low-rank adapters of this rank beside its "
        "dense kernels (--lora_targets) and the task's head trained; output_dir gets "
        "lora_adapters.safetensors (the trained part alone), and every export and checkpoint "
        "writer merges the adapters into the kernels. 0: fine-tune every weight (the original)."),
        at_least(0))
    ranged(flags.DEFINE_float(
        "lora_alpha", None,
        "The adapters' output is scaled by lora_alpha / lora_rank. Default: the rank (scale 1)."),
        above(0))
    flags.DEFINE_enum(
        "lora_targets", "query_value", ["query_value", "all"],
        "Which kernels of each encoder layer get adapters: query_value (the LoRA paper's choice) "
        "or all (query, key, value, attention output, intermediate and output dense).")
    mode(ModeRule(("lora_alpha", "lora_targets"), ("lora_rank",), lambda rank: bool(rank),
                  "with --lora_rank", "without it every weight is fine-tuned"))
    flags.DEFINE_string(
        "lora_adapters", None,
        "A LoRA run's lora_adapters.safetensors, loaded onto --init_checkpoint (the base model "
        "it was trained from; another is refused): its head and its adapters merged into the "
        "encoder's kernels, e.g. to evaluate or predict with it.")


def define_checkpoint_flags():
    """The original's checkpoint and loop flags of a training run."""
    ranged(flags.DEFINE_integer("save_checkpoints_steps", 1000,
                                "How often to save the model checkpoint."),
           at_least(1).when(*TRAINING))
    ranged(flags.DEFINE_integer(
        "iterations_per_loop", 1000, "How many steps to make in each estimator call."),
        at_least(1).when(*TRAINING))
    ranged(flags.DEFINE_integer(
        "log_steps", 100,
        "Log the loss and the throughput (steps/s, examples/s, tokens/s, MFU with "
        "--peak_tflops) every this many steps, besides every --iterations_per_loop. Each log "
        "waits for the step it reports."), at_least(1).when(*TRAINING))
    ranged(flags.DEFINE_integer(
        "profile_steps", 0,
        "Profile up to this many training steps (to the next progress line or checkpoint) after "
        "the first loop call (which compiles the step) "
        "with the backend's profiler (JAX's under KERAS_BACKEND=jax, with a Perfetto trace "
        "beside; else TensorFlow's), written to output_dir/train/plugins/profile for "
        "TensorBoard's profile tab. 0: no profile."), at_least(0).when(*TRAINING))
    flags.DEFINE_string(
        "compilation_cache_dir", _default_compilation_cache(),
        "Under KERAS_BACKEND=jax: JAX's persistent compilation cache, so a run of shapes an "
        "earlier run compiled starts its first step without compiling. Default: "
        "$JAX_COMPILATION_CACHE_DIR, else ~/.cache/bert_keras/jax (under $XDG_CACHE_HOME where "
        "set). Empty: no cache.")


def _default_compilation_cache():
    """--compilation_cache_dir's default: JAX's own variable, else the user's cache folder."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return os.environ["JAX_COMPILATION_CACHE_DIR"]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "bert_keras", "jax")


def define_packing_flag():
    """`--max_sequences_per_row`: fine-tuning on packed training rows (`bert_runner.packing`)."""
    flags.DEFINE_integer(
        "max_sequences_per_row", 1,
        "Pack up to this many training examples into one row of max_seq_length tokens (each "
        "keeps its own positions, attention and [CLS]; the loss is their mean, as unpacked): "
        "static-shape steps (--jit_compile, TPUs) then spend less of their work on padding. "
        "--train_batch_size counts rows, and an epoch is one pass over them. Evaluation and "
        "prediction stay unpacked. 1: the original's one example a row.", lower_bound=1)
    mode(ModeRule(("max_sequences_per_row",), ("do_train",), bool, "with --do_train",
                  "evaluation and prediction read one example a row"))


def define_seeds_flag():
    """`--seeds`: one fine-tuning per seed, each in its own directory (`bert_runner.seeds`)."""
    ranged(flags.DEFINE_list(
        "seeds", None,
        "Comma-separated random seeds, e.g. 1,2,3: fine-tune once per seed (initialisation of "
        "the output layer, dropout and data order), each in output_dir/seed_<seed>, and write "
        "output_dir/eval_results_seeds.txt with each eval metric's mean, standard deviation and "
        "per-seed values. Overrides --random_seed."), seed_list())
    flags.register_validator("seeds", _check_seeds)


def _check_seeds(values):
    if values is None:
        return True
    try:
        seeds = [int(v) for v in values]
    except ValueError:
        raise flags.ValidationError(f"--seeds expects comma-separated integers, got {values}")
    if len(set(seeds)) != len(seeds):
        raise flags.ValidationError(f"--seeds has a repeated seed: {values}")
    return True


def seeds_of(flag_values):
    """--seeds as ints ([] when not given)."""
    return [int(seed) for seed in flag_values.seeds or ()]


def define_tpu_flags():
    """The original's TPU flags, same names, defaults and help."""
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU.")
    flags.DEFINE_string(
        "tpu_name", None,
        "The Cloud TPU to use for training. This should be either the name used when creating the "
        "Cloud TPU, or a grpc://ip.address.of.tpu:8470 url.")
    flags.DEFINE_string(
        "tpu_zone", None,
        "[Optional] GCE zone where the Cloud TPU is located in. If not specified, we will attempt "
        "to automatically detect the GCE project from metadata.")
    flags.DEFINE_string(
        "gcp_project", None,
        "[Optional] Project name for the Cloud TPU-enabled project. If not specified, we will "
        "attempt to automatically detect the GCE project from metadata.")
    flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
    ranged(flags.DEFINE_integer(
        "num_tpu_cores", 8, "Only used if `use_tpu` is True. Total number of TPU cores to use."),
        at_least(1).when("use_tpu"))


def define_run_flags(batch_size_rule=True):
    """New capabilities of the shared run machinery (not in the original release). Called after
    the script's --train_batch_size is defined: a rule ties --gradient_accumulation_steps to it
    (`batch_size_rule` False: the script, with batch sizes of another form, declares its own)."""
    flags.DEFINE_enum(
        "distribution_strategy", "default",
        ["default", "mirrored", "multi_worker_mirrored", "tpu"],
        "tf.distribute strategy: default (one device; under KERAS_BACKEND=jax every local device, "
        "data-parallel), mirrored (all local GPUs), "
        "multi_worker_mirrored (cluster from TF_CONFIG) or tpu (also selected by --use_tpu).")
    flags.DEFINE_enum(
        "mixed_precision", None, ["bf16", "fp16"],
        "Compute in bfloat16 or float16 (with dynamic loss scaling); variables, LayerNorm, softmax "
        "and losses stay float32. Default: float32 throughout. bf16 on a CPU without bfloat16 "
        "units (no avx512_bf16 or amx_bf16) is slower than float32 and warns.")
    flags.DEFINE_bool(
        "jit_compile", False,
        "Compile the training, evaluation and prediction steps with XLA, as GPUs and TPUs run "
        "them: static shapes, the encoder computes every position of the padded grid. Off on "
        "CPU, where the real-token rows and oneDNN's matmuls are faster.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                      "adamw: the original AdamWeightDecay. lamb: LAMB, for large batches.")
    # Always checked: the Trainer is built for evaluation too.
    ranged(flags.DEFINE_integer(
        "gradient_accumulation_steps", 1,
        "Split each batch into this many micro-batches and apply their mean gradient once: the "
        "same batch size in less memory."), at_least(1))
    ranged(flags.DEFINE_integer("keep_checkpoint_max", 5, "How many recent checkpoints to keep."),
           at_least(1).when(*TRAINING))
    flags.DEFINE_bool(
        "recompute_activations", False,
        "Keep only each encoder layer's input during the forward pass and recompute the rest in "
        "the backward pass: the same losses and gradients in less memory (BERT-Large on small "
        "GPUs), for about one more forward pass of compute.")
    flags.DEFINE_enum(
        "fused_attention", "auto", ["auto", "true", "false"],
        "The attention and its dropout as one flash-attention kernel drawing the same dropout "
        "masks (EncoderModes.fused_attention): the same run, faster. auto: under "
        "KERAS_BACKEND=jax on a GPU in bf16 (cuDNN, Pallas; bench/measured/).")
    flags.DEFINE_bool(
        "save_tf1_checkpoint", False,
        "At the end of training also write the weights as an original-layout TF1 checkpoint "
        "(output_dir/bert_model.ckpt, with bert_config.json beside it).")
    ranged(flags.DEFINE_integer("random_seed", 12345,
                                "Seed for initialisation, dropout and input shuffling."), seed())
    flags.DEFINE_bool(
        "deterministic", False,
        "Reproducible bit for bit, resumed or not. TensorFlow: its deterministic ops (slower). "
        "KERAS_BACKEND=jax: XLA's deterministic GPU ops (XLA_FLAGS="
        "--xla_gpu_deterministic_ops=true); XLA's CPU and TPU programs are deterministic "
        "already.")
    ranged(flags.DEFINE_float(
        "peak_tflops", None,
        "Peak TFLOP/s of one accelerator, to log model-FLOPs utilisation (e.g. 989 for an H100 "
        "in bf16)."), above(0).when(*TRAINING))
    # The Trainer splits each batch into equal micro-batches.
    if batch_size_rule:
        cross(CrossRule(
            ("gradient_accumulation_steps", "train_batch_size"),
            lambda steps, batch: steps < 1 or batch % steps == 0,
            lambda steps, batch: (f"train_batch_size must be a multiple of "
                                  f"gradient_accumulation_steps ({steps}): each batch is split into "
                                  "that many equal micro-batches"),
            "must divide train_batch_size"))


def require_model_files(*names, checkpoint="init_checkpoint", flag_values=flags.FLAGS):
    """Marks the flags `names` (`bert_config_file`, `vocab_file`) required unless `--checkpoint`
    supplies them: a Hugging Face model directory, which holds the config and the vocabulary; an
    original ELECTRA checkpoint with `vocab.txt` beside it (a released folder: its config is read
    from its shapes) (`bert_runner.runs.model_files`); or a run's output_dir or a checkpoint in
    it (without `--checkpoint`: the command's own `--output_dir`, when it holds checkpoints to
    evaluate, predict with or resume), whose bert_config.json and vocabulary then become the
    flags' values (`bert_runner.runs.supplied`), so that every later reader of the
    flags takes the run's. Checked when `flag_values` are parsed."""

    def check(values):
        missing = [name for name in names if not values[name]]
        if not missing:
            return True
        from bert_runner.runs.checkpoint_flags import check_partial_directory
        from modeling.checkpoint import (
            checkpoint_folder, hf_home, is_original_electra, is_saved_model, saved_model_vocab)

        directory = values[checkpoint]
        home = hf_home(directory) or (checkpoint_folder(directory)
                                      if is_original_electra(directory) else None)
        vocab = os.path.join(home, "vocab.txt") if home else None
        if not home and is_saved_model(directory):  # a TF Hub encoder: its asset
            home, vocab = directory, saved_model_vocab(directory)
        if home and ("vocab_file" not in missing or (vocab and os.path.isfile(vocab))):
            return True
        try:  # part of a Hugging Face directory: say what it lacks, not which flag to give
            check_partial_directory(directory, f"--{checkpoint}")
        except ValueError as e:
            raise flags.ValidationError(str(e)) from None
        if not home and _take_run_files(missing, directory, checkpoint, flag_values):
            return True
        from bert_runner.runs import supplied

        raise flags.ValidationError(supplied.required_unless(missing[0], f"--{checkpoint}"))

    # --output_dir too: without a checkpoint flag, a run's own output_dir may supply them.
    watched = [*names, checkpoint] + (["output_dir"] if "output_dir" in flag_values else [])
    flags.register_multi_flags_validator(watched, check, flag_values=flag_values)
    if "do_lower_case" in flag_values:
        flags.register_validator(checkpoint, lambda directory: _take_casing(
            directory, flag_values), flag_values=flag_values)


def _take_casing(directory, flag_values):
    """Sets `--do_lower_case`, when the command line does not give it, to the casing a Hugging
    Face directory `directory` records (its tokenizer_config.json), or a TF Hub SavedModel (its
    `do_lower_case`), as its config and vocabulary are taken from it: a cased model's text is
    then not lower-cased by the flag's default."""
    if directory and not flag_values["do_lower_case"].present:
        from modeling.checkpoint import hf_home, is_saved_model, read_casing, saved_model_casing

        home = hf_home(directory)
        casing = read_casing(home) if home else None
        if casing is None and is_saved_model(directory):
            casing = saved_model_casing(directory)
        if casing is not None:
            flag_values["do_lower_case"].value = casing  # as if given, for every later reader
    return True


def _take_run_files(missing, directory, checkpoint, flag_values):
    """Sets the `missing` model-file flags to what the run whose checkpoint `directory` is (else
    the command's own --output_dir, when it holds checkpoints) supplies; True when it supplies
    all of them. A vocabulary the run read that is gone or changed is refused naming it."""
    from bert_runner.runs import supplied
    from modeling.checkpoint import checkpoint_folder

    flag = f"--{checkpoint}"
    if not directory and "output_dir" in flag_values:
        output_dir = flag_values["output_dir"].value
        if output_dir and checkpoint_folder(output_dir):
            directory, flag = output_dir, "--output_dir"
    try:
        files = supplied.supplied(directory, flag, "vocab_file" in missing)
    except ValueError as e:
        raise flags.ValidationError(str(e)) from None
    supplied = dict(zip(("bert_config_file", "vocab_file"), files or (None, None)))
    if not all(supplied[name] for name in missing):
        return False
    for name in missing:
        # Set as parsed values (not `present`): the scripts, the driver and the run's record
        # read these flags as if they had been given.
        flag_values[name].value = supplied[name]
    return True


def define_embedding_flags():
    """`--pooling` and `--normalize`: one vector per text (`modeling.layers.pooling.pool`)."""
    flags.DEFINE_enum(
        "pooling", None, ["cls", "mean", "max"],
        "One vector per input line from the last layer: cls (the [CLS] row), mean (the mean over "
        "the real tokens, as sentence-transformers models), max (the element-wise maximum over "
        "them).")
    flags.DEFINE_bool("normalize", False,
                      "With --pooling: divide each vector by its L2 norm (cosine = dot product).")


def config_from_flags(cls, flag_values=flags.FLAGS, **values):
    """`cls` (a frozen dataclass of settings: `RunConfig`, `ExportConfig`, ...) of the parsed
    `flag_values`: each field named as a flag the script defines takes its value, `values` are
    given as they are, the other fields keep their defaults."""
    parsed = {field.name: flag_values[field.name].value for field in dataclasses.fields(cls)
              if field.name in flag_values}
    return cls(**{**parsed, **values})


def given_names(flag_values=flags.FLAGS):
    """The names of the flags the command line gave (the others hold their defaults, or what
    the model files supplied)."""
    return frozenset(name for name in flag_values if flag_values[name].present)


def given_value(name, flag_values=flags.FLAGS):
    """`--name`'s value where the command line gave it, None where it was left out (its
    default then comes from other settings: ELECTRA's `--max_predictions_per_seq`)."""
    return flag_values[name].value if flag_values[name].present else None


def check_rules_again(config, flag_values=flags.FLAGS):
    """Checks the rules between flags (`bert_runner.flag_ranges`) again with `config`'s values,
    each field on the flag of its name: values a run's record gave the flags left out
    (`provenance.follow_run_record`), which the rules of a given flag may refuse. ValueError in
    one line for a broken rule."""
    for field in dataclasses.fields(config):
        if field.name in flag_values:
            flag_values[field.name].value = getattr(config, field.name)
    try:
        flag_values.validate_all_flags()
    except flags.Error as error:
        raise ValueError(str(error)) from None
