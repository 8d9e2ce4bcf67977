"""Distribution strategy and numeric policy from flags."""
import json
import os

import keras
import tensorflow as tf
from absl import logging

_POLICIES = {None: "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def get_strategy(name="default", use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None):
    """Builds the `tf.distribute` strategy named by `--distribution_strategy` (or `--use_tpu`).

    The global batch size given by the flags is split evenly over
    `strategy.num_replicas_in_sync` replicas (all devices of all workers).
    """
    if use_tpu:
        name = "tpu"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker_mirrored":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--distribution_strategy=multi_worker_mirrored needs TF_CONFIG set")
        check_tf_config(os.environ["TF_CONFIG"])
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
                tpu=tpu_name, zone=tpu_zone, project=gcp_project)
        except ValueError as e:  # no TPU named, none found in the environment
            raise ValueError(f"--distribution_strategy=tpu: {e} (--tpu_name, --tpu_zone, "
                             "--gcp_project)") from None
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown distribution strategy {name!r}")


def check_tf_config(text):
    """Raises ValueError naming TF_CONFIG unless `text` describes a cluster and this process's
    task in it, as `MultiWorkerMirroredStrategy` reads it (whose own errors name nothing)."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"TF_CONFIG is not JSON ({e}): {text[:80]!r}") from None
    cluster = value.get("cluster") if isinstance(value, dict) else None
    task = value.get("task") if isinstance(value, dict) else None
    if not isinstance(cluster, dict) or not cluster or not isinstance(task, dict):
        raise ValueError('TF_CONFIG needs a "cluster" ({"worker": ["host:port", ...]}) and this '
                         'process\'s "task" ({"type": "worker", "index": 0})')
    hosts = cluster.get(task.get("type"))
    index = task.get("index")
    if not isinstance(hosts, list) or not isinstance(index, int) or not 0 <= index < len(hosts):
        raise ValueError(f"TF_CONFIG's task {json.dumps(task)} is not one of its cluster's: "
                         f"{json.dumps(cluster)}")


# CPU features that compute bfloat16 matmuls natively (AVX512_BF16 dot products, AMX tiles).
BF16_UNITS = ("avx512_bf16", "amx_bf16")


def set_precision(mixed_precision):
    """Sets the global Keras dtype policy for `--mixed_precision` (None, "bf16", "fp16")."""
    policy = _POLICIES[mixed_precision]
    keras.config.set_dtype_policy(policy)
    logging.info("Keras dtype policy: %s", policy)
    if mixed_precision == "bf16":
        warn_if_bfloat16_is_emulated()
    return policy


def cpu_features(cpuinfo="/proc/cpuinfo"):
    """(model name, set of feature flags) of this machine's CPU; (None, None) where unknown."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None, None
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    if "flags" not in fields:
        return fields.get("model name"), None
    return fields.get("model name"), set(fields["flags"].split())


def warn_if_bfloat16_is_emulated(cpuinfo="/proc/cpuinfo"):
    """Warns that bfloat16 computes on a CPU without bfloat16 units, where no
    GPU or TPU takes the work: oneDNN then converts to float32 around every matmul, so bf16
    costs time instead of saving it. Returns whether it warned."""
    model, features = cpu_features(cpuinfo)
    if features is None or any(unit in features for unit in BF16_UNITS):
        return False
    if _accelerated():
        return False
    logging.warning(
        "--mixed_precision=bf16 on a CPU without bfloat16 units (%s has none of %s): every "
        "bfloat16 matmul is converted to float32 and back, slower than float32 and less "
        "precise. Leave --mixed_precision out here (float32), and use bf16 on a TPU, a GPU or "
        "a CPU with AVX512_BF16 or AMX.", model or "this CPU", ", ".join(BF16_UNITS))
    return True


def _accelerated():
    """Whether Keras' backend computes on a GPU or TPU (under JAX TensorFlow sees the CPU
    alone: `cli.keep_tensorflow_on_the_host`)."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.default_backend() != "cpu"
    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def is_chief(strategy):
    """Whether this process writes outputs: true outside multi-worker training; under JAX, for
    process 0 (`engines.jax_processes`)."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.process_index() == 0
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)


def set_determinism(seed, deterministic):
    """Seeds Python, NumPy, TF and Keras; optionally makes TF ops deterministic."""
    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
