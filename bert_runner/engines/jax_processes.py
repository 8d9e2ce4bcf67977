"""Several JAX processes making the run one process makes (docs/accelerators.md, "Many hosts").
Imports no TensorFlow.

    count = start()                         # before JAX computes anything: joins the others
    check_agreed("run", {"flags": ...})     # every process was told the same, or each stops

Keras' variables name the processes: KERAS_DISTRIBUTION_JOB_ADDRESSES (the coordinator's
host:port first, as `keras.distribution.initialize` reads it), KERAS_DISTRIBUTION_NUM_PROCESSES
and KERAS_DISTRIBUTION_PROCESS_ID. On a Cloud TPU pod slice and in a SLURM step of several tasks
JAX finds them itself. On CPUs the processes reduce over gloo.

A process never waits for the others silently for ever: joining and each agreement give up
after `TIMEOUT_S` with one line that says whom they waited for, and a process that stops makes
the others' collectives fail within `HEARTBEAT_S` (JAX's heartbeat) of its exit.
"""
import json
import os

import jax
from absl import logging

KERAS_VARIABLES = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                   "KERAS_DISTRIBUTION_PROCESS_ID")
# Seconds a process waits for the others: to join (all start within it) and at an agreement
# (all reach it after the same work).
TIMEOUT_S = 300
# Seconds without a heartbeat after which a process counts as gone (JAX's default: 100), and
# that a process leaving waits for the others at JAX's shutdown barrier (default: 300): one that
# failed makes the others stop soon after, not minutes later.
HEARTBEAT_S = 30

_agreements = 0  # how many `check_agreed` calls this process made: the same on every process


def launch():
    """Which launch names several processes: "keras" (its variables), "slurm" (a step of several
    tasks), "tpu" (a pod slice of several hosts), or None (one process)."""
    if any(os.environ.get(name) for name in KERAS_VARIABLES):
        return "keras"
    if int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
        return "slurm"
    if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
        return "tpu"
    return None


def keras_variables(environ=os.environ):
    """(coordinator address, process count, this process's index) from Keras' variables;
    ValueError naming the variable that is missing or out of range."""
    values = {name: environ.get(name, "").strip() for name in KERAS_VARIABLES}
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise ValueError(f"{', '.join(missing)} not set: a run of several processes needs all of "
                         f"{', '.join(KERAS_VARIABLES)} (docs/accelerators.md, \"Many hosts\")")
    address = values[KERAS_VARIABLES[0]].split(",")[0].strip()
    numbers = {}
    for name in KERAS_VARIABLES[1:]:
        try:
            numbers[name] = int(values[name])
        except ValueError:
            raise ValueError(f"{name}={values[name]!r} is not an integer") from None
    count, index = numbers[KERAS_VARIABLES[1]], numbers[KERAS_VARIABLES[2]]
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"{KERAS_VARIABLES[2]}={index} is not a process of "
                         f"{KERAS_VARIABLES[1]}={count} (0 to {count - 1})")
    if ":" not in address:
        raise ValueError(f"{KERAS_VARIABLES[0]}={values[KERAS_VARIABLES[0]]!r}: the first "
                         "address is the coordinator's host:port")
    return address, count, index


def start():
    """Joins this process to the launch's others (`launch`), before JAX computes anything, and
    returns the process count (1 where the launch names one process)."""
    kind = launch()
    if kind is None:
        return 1
    if jax.distributed.is_initialized():
        return jax.process_count()
    # CPU devices of several processes reduce over gloo (GPUs and TPUs over their own links).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    timeouts = dict(initialization_timeout=TIMEOUT_S, heartbeat_timeout_seconds=HEARTBEAT_S,
                    shutdown_timeout_seconds=HEARTBEAT_S)
    if kind == "keras":
        address, count, index = keras_variables()
        logging.info("Process %d of %d: joining the others through %s (waits up to %d s)",
                     index, count, address, TIMEOUT_S)
        joining = dict(coordinator_address=address, num_processes=count, process_id=index)
        told = f"{KERAS_VARIABLES[0]}={address}, {KERAS_VARIABLES[1]}={count}"
    else:
        logging.info("Joining the processes of this %s launch (waits up to %d s)", kind,
                     TIMEOUT_S)
        joining, told = {}, f"the {kind} launch's"
    try:
        jax.distributed.initialize(**joining, **timeouts)
    except Exception as error:  # noqa: BLE001 - JAX's runtime error, one line here
        raise ValueError(f"could not join the other processes ({told}) within {TIMEOUT_S} s: "
                         f"{_first_line(error)}") from None
    logging.info("Process %d of %d: %d of the run's %d devices are this process's",
                 jax.process_index(), jax.process_count(), jax.local_device_count(),
                 jax.device_count())
    return jax.process_count()


def _client():
    from jax._src import distributed

    return distributed.global_state.client


def check_agreed(what, told, differs="was told another run",
                 remedy="start every process with the same command"):
    """Refuses (ValueError, the same line on every process) unless every process holds the same
    `told` (a JSON-able dict) of `what` ("run": its settings; "start": the checkpoint it
    restored): "process N `differs` than process 0", the first value that differs, `remedy`."""
    global _agreements
    if jax.process_count() == 1:
        return
    _agreements += 1
    key = f"bert_run/{_agreements}/{what}"
    client, index = _client(), jax.process_index()
    everyone, waited = [], index
    try:
        client.key_value_set(f"{key}/{index}", json.dumps(told, sort_keys=True, default=str))
        for other in range(jax.process_count()):
            waited = other
            everyone.append(json.loads(client.blocking_key_value_get(f"{key}/{other}",
                                                                     TIMEOUT_S * 1000)))
    except Exception as error:  # noqa: BLE001 - JAX's runtime error, one line here
        raise ValueError(f"process {waited} did not reach the {what} check within {TIMEOUT_S} s "
                         f"({_first_line(error)}): {remedy}") from None
    for other, settings in enumerate(everyone[1:], start=1):
        differing = _first_difference(everyone[0], settings)
        if differing:
            name, first, then = differing
            raise ValueError(f"process {other} {differs} than process 0: {name} {first!r} on "
                             f"process 0, {then!r} on process {other}; {remedy}")


def _first_difference(first, other, prefix=""):
    """(name, first's value, other's value) of the first setting that differs, else None."""
    for name in sorted(set(first) | set(other)):
        a, b = first.get(name), other.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            found = _first_difference(a, b, f"{prefix}{name}.")
            if found:
                return found
        elif a != b:
            return prefix + name, a, b
    return None


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
