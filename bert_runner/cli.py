"""How every script starts and how it fails: `cli.run_script(main)` in place of
`absl.app.run(main)`.

A failure the user can fix (a flag out of range, a malformed input file, an unreadable
checkpoint, an output_dir that is read-only or held by another run) is one line on stderr that
names the flag or file, and exit code 2, without a Python traceback; anything else is a bug or the
machine, and keeps its traceback (exit code 1). The project's convention: code that refuses
something the user gave raises `ValueError` with a message naming it; file-system failures
(`OSError`, TensorFlow's file errors) name their path themselves.

`BERT_TRACEBACK=1` in the environment, or `--verbosity=1` (absl's flag), prints the traceback of a
refused run as well, for bug reports.
"""
import gc
import json
import os
import platform
import signal
import sys

from absl import app, flags, logging

from bert_runner import flag_ranges

EXIT_CODES = """
Exit codes:
  0  done.
  1  an unexpected failure (a bug, or the machine: out of memory, a lost device); the traceback
     is printed: please report it.
  2  refused: a flag out of range, a malformed input file, an unreadable checkpoint, an
     output_dir that is read-only or held by another run. One line names the flag or file and
     what to do; nothing already written was damaged. BERT_TRACEBACK=1 (or --verbosity=1) also
     prints the traceback.
  130, 143  interrupted (Ctrl-C, kill): incomplete outputs are removed; the same command resumes
     a training run from its newest checkpoint.
"""

TRACEBACK_VARIABLE = "BERT_TRACEBACK"
# A file the script writes the flag rules it declared to (JSON, `flag_ranges.declared`) before it
# parses its flags: how tests/test_flag_ranges.py finds every rule of every script.
FLAG_RULES_VARIABLE = "BERT_FLAG_RULES_FILE"

# oneDNN on every x86 CPU, unless the user chose (TF_ENABLE_ONEDNN_OPTS=0): the encoder's fast
# path leans on its matmuls and fusions (docs/performance.md), and TensorFlow turns it on by
# default on Linux only for CPUs with VNNI, bf16 or AMX units; an AVX2-only CPU (AMD Zen 3, older
# Xeons) would run Eigen's kernels instead, and fine-tune at about half the speed. Read when
# TensorFlow is imported: every script imports this module first.
if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def _tensorflow_file_errors():
    """TensorFlow's errors that are about a path (missing, unreadable, corrupt), or () when
    TensorFlow was never imported (then none of its errors can have been raised)."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return ()
    return (tf.errors.NotFoundError, tf.errors.PermissionDeniedError, tf.errors.DataLossError,
            tf.errors.AlreadyExistsError, tf.errors.FailedPreconditionError)


def refusal(error):
    """The one line a user sees for `error` when it is a refusal (see the module docstring), else
    None (a bug: the traceback is kept)."""
    if isinstance(error, OSError):
        # str(OSError) is "[Errno 13] Permission denied: 'path'"; say it without the errno.
        if error.strerror and error.filename:
            target = f"{error.filename} -> {error.filename2}" if error.filename2 else error.filename
            return f"{error.strerror}: {target}"
        return str(error)
    if isinstance(error, _tensorflow_file_errors()):
        return error.message
    if isinstance(error, ValueError):
        return str(error)
    return None


def _show_traceback():
    if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
        return True
    return flags.FLAGS.is_parsed() and flags.FLAGS.verbosity >= 1


def _exit_refused(message):
    script = os.path.basename(sys.argv[0])
    lines = message.strip().splitlines() or ["(no message)"]
    sys.stderr.write(f"{script}: error: {lines[0]}\n")
    for line in lines[1:]:
        sys.stderr.write(f"  {line}\n")
    sys.stderr.flush()
    sys.exit(2)


def keep_tensorflow_on_the_host(tf_config):
    """Makes TensorFlow (`tf_config`: its `tf.config`) see the CPU alone, before it touches any
    device. Under KERAS_BACKEND=jax it only reads the records and writes the checkpoints and
    summaries, but the CUDA wheel finds the GPUs (JAX's pip NVIDIA libraries among them) and
    would place its variables there and reserve most of the memory JAX computes in."""
    tf_config.set_visible_devices(tf_config.list_physical_devices("CPU"))


# KERAS_BACKEND=jax needs JAX, an optional requirement: said in one line before Keras, which
# every script imports after this module, fails on it with a traceback.
if os.environ.get("KERAS_BACKEND") == "jax":
    try:
        import jax  # noqa: F401
    except ImportError:
        _exit_refused("KERAS_BACKEND=jax needs JAX, which is not installed: "
                      "pip install -r requirements-jax.txt")
    try:
        import tensorflow as tf
    except ImportError:  # code that runs without TensorFlow imports this module too (tests)
        pass
    else:
        keep_tensorflow_on_the_host(tf.config)


def _parse_flags(argv):
    """absl's parser, with a flag error as a refusal (exit 2, absl says 1) and help asked for as a
    success (absl's --help and --helpfull exit 1)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as error:
        # The hint rides on the first line: a refusal is one line per problem.
        first, *rest = str(error).splitlines() or [""]
        _exit_refused("\n".join([f"{first} (--helpfull lists every flag with its range)", *rest]))
    except SystemExit as exit_:
        if exit_.code == 1 and any(a.lstrip("-").startswith("help") for a in argv[1:]):
            sys.exit(0)
        raise


def _guarded(main):
    def guarded_main(argv):
        try:
            return main(argv)
        except Exception as error:  # noqa: BLE001 - sorted into refusals and bugs right here
            message = refusal(error)
            if message is None:
                raise
            if _show_traceback():
                logging.exception("Refused:")
            _exit_refused(message)
        except KeyboardInterrupt as interruption:
            # `finally` blocks have removed incomplete outputs and released output_dir.
            sys.stderr.write(f"{os.path.basename(sys.argv[0])}: interrupted; incomplete outputs "
                             "were removed (a training run resumes from its newest checkpoint "
                             "when run again)\n")
            sys.exit(128 + getattr(interruption, "signum", signal.SIGINT))

    return guarded_main


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`), raised where the script is, so that it unwinds as Ctrl-C does: the same
    clean-up and message, and exit code 143."""

    signum = signal.SIGTERM


def _terminate(signum, frame):
    _ignore_further_signals()
    raise Terminated()


def _interrupt(signum, frame):
    _ignore_further_signals()
    raise KeyboardInterrupt()


def _ignore_further_signals():
    """Once the script unwinds, another SIGINT or SIGTERM (Ctrl-C pressed again, or a parent
    passing on the signal its process group also got) would cut its clean-up short: it is
    ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def freeze_imported_objects():
    """Moves what the imports made (TensorFlow's and Keras's modules: most of the process's
    objects, alive as long as it is) out of the cyclic garbage collector's sight, so that its
    full collections, frequent while a model is traced, do not walk it every time.

    Python makes every 10th middle-generation collection a full one, but only once the objects
    promoted since the last full one exceed a quarter of those it kept. Frozen objects are not
    counted there, so after the freeze nearly every 10th would be full: every 100th instead.
    Young garbage is collected as often as before.
    """
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


def run_script(main):
    """`absl.app.run(main)` with the project's rules: flag errors and refusals exit 2 with one
    line (see the module docstring), SIGTERM unwinds like Ctrl-C so `finally` blocks remove
    incomplete outputs and release the output_dir, and the script's `--help` text ends with its
    exit codes."""
    module = sys.modules["__main__"]
    module.__doc__ = (module.__doc__ or "").rstrip("\n") + "\n" + EXIT_CODES
    signal.signal(signal.SIGTERM, _terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    if os.environ.get(FLAG_RULES_VARIABLE):
        with open(os.environ[FLAG_RULES_VARIABLE], "w", encoding="utf-8") as f:
            json.dump(flag_ranges.declared(flags.FLAGS), f)
    freeze_imported_objects()
    try:
        app.run(_guarded(main), flags_parser=_parse_flags)
    except Terminated:  # before main (parsing the flags): nothing to clean up, still 143
        sys.exit(128 + signal.SIGTERM)
