"""Writing a raw-text SavedModel whole or not at all, with its export.json.

Every export holds `assets.extra/export.json` (`METADATA_FILE`): what it is (`format`), its
signatures and settings, for `predict.py` and other clients; TF Serving ignores it.
"""
import json
import os
import uuid

import tensorflow as tf
from absl import logging

from bert_runner import results

METADATA_FILE = os.path.join("assets.extra", "export.json")


def write_saved_model(module, export_dir, what):
    """Saves the raw-text `module` (a `ModelExport`) with its signatures as the SavedModel
    `export_dir`, with `module.metadata()` as its `METADATA_FILE`.

    The SavedModel is written to a temporary directory beside `export_dir` and renamed, so a
    serving system watching the parent never sees a half-written model. `what` names the model
    in the log. Raises FileExistsError when `export_dir` exists, ValueError when it cannot be
    written (nothing is left).
    """
    export_dir = os.fspath(export_dir).rstrip("/")
    if tf.io.gfile.exists(export_dir):
        raise FileExistsError("%s already exists: choose a new --export_dir (e.g. the next "
                              "version number under the model's serving directory)" % export_dir)
    parent = os.path.dirname(export_dir)
    tmp_dir = "%s.tmp-%s" % (export_dir, uuid.uuid4().hex)
    signatures = module.signatures()
    try:
        if parent:
            tf.io.gfile.makedirs(parent)
        tf.saved_model.save(module, tmp_dir, signatures=signatures, options=SERVED_ONLY)
        tf.io.gfile.makedirs(os.path.join(tmp_dir, os.path.dirname(METADATA_FILE)))
        with tf.io.gfile.GFile(os.path.join(tmp_dir, METADATA_FILE), "w") as f:
            f.write(json.dumps(module.metadata(), indent=2) + "\n")
        tf.io.gfile.rename(tmp_dir, export_dir)
    except (OSError, *_FILE_ERRORS) as e:
        # Said of --export_dir: the failing path is often the temporary one.
        raise ValueError("Cannot write --export_dir=%s (%s): nothing was exported; choose a "
                         "writable location" % (export_dir, results.file_error_reason(e))) from e
    finally:
        _remove_quietly(tmp_dir)
    logging.info("Exported the raw-text %s to %s (signatures: %s)", what, export_dir,
                 ", ".join(signatures))
    return export_dir


# The options of a SavedModel that is served (or converted), never differentiated: a raw-text
# model's signatures take strings. TensorFlow would otherwise trace the gradient of every
# `tf.custom_gradient` call in it (each fast kernel's, `modeling.layers.kernels`) into the
# SavedModel, one per call in every layer, for a gradient no caller can ask for (and a loader
# would restore). A TF Hub encoder, which callers fine-tune, keeps them.
SERVED_ONLY = tf.saved_model.SaveOptions(experimental_custom_gradients=False)

# TensorFlow's errors about a path (gfile and SavedModel writing raise these, not OSError).
_FILE_ERRORS = (tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
                tf.errors.FailedPreconditionError, tf.errors.AlreadyExistsError,
                tf.errors.UnknownError)


def _remove_quietly(directory):
    """Removes the half-written `directory`, if any; a failure to is logged, not raised (the
    error that stopped the export is the one to report)."""
    try:
        if tf.io.gfile.exists(directory):
            tf.io.gfile.rmtree(directory)
    except (OSError, *_FILE_ERRORS) as e:
        logging.warning("Could not remove the incomplete export %s: %s", directory, e)
