"""The one place that names the flag a checkpoint came from in the reader's refusals.

`modeling.checkpoint` knows no flag: its refusals (`CheckpointError`, `CheckpointNotFoundError`,
`AdaptersError`) name the file, and the machinery, which knows which flag gave the path, runs the
reader inside `naming_flag(flag)`. Loads without TensorFlow, for the checks of a script's flags
(`bert_runner.flags`).
"""
import contextlib

from modeling import checkpoint as model_checkpoint

# Where a LoRA run's adapters file is given, whatever flag gave the base it loads onto.
ADAPTERS_FLAG = "--lora_adapters"


def describe_source(path, flag):
    """`path`, followed by the flag it came from when known: "x.ckpt (--init_checkpoint)"."""
    return f"{path} ({flag})" if flag else f"{path}"


@contextlib.contextmanager
def naming_flag(flag):
    """Re-raises the reader's refusals (`modeling.checkpoint.CheckpointError`, `...NotFoundError`,
    which name their file) with the flag that gave the file beside it: "x.ckpt
    (--init_checkpoint)", "--lora_adapters=x.safetensors" for an adapters file; `flag` None:
    as they are. As a plain ValueError (FileNotFoundError), so that an enclosing one leaves it."""
    try:
        yield
    except model_checkpoint.AdaptersError as e:
        raise ValueError(e.naming(f"{ADAPTERS_FLAG}={e.file}")) from e.__cause__
    except model_checkpoint.CheckpointError as e:
        raise ValueError(e.naming(describe_source(e.file, flag))) from e.__cause__
    except model_checkpoint.CheckpointNotFoundError as e:
        raise FileNotFoundError(e.naming(describe_source(e.file, flag))) from e.__cause__


def check_partial_directory(path, flag):
    """`modeling.checkpoint.check_partial_directory`, its refusal naming `flag`."""
    with naming_flag(flag):
        model_checkpoint.check_partial_directory(path)
