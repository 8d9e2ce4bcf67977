"""The encoder under the JAX backend gives the original's numbers (the large tier; JAX is not a
project requirement: tests/requirements-large.txt installs it)."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from optional_packages import needs

SCRIPT = """
import sys
import numpy as np
sys.path[:0] = [{root!r}, {tests!r}]
import keras
assert keras.backend.backend() == "jax"
from modeling import classification_loss, masked_lm_loss
from modeling_helpers import encoder_inputs, pretraining_features, tiny_expected, tiny_pretrainer
e = tiny_expected()
model = tiny_pretrainer()
enc = model.encoder(encoder_inputs(e))
apart = model.encoder(encoder_inputs(e), first_row_apart=True)  # the last layer's [CLS] rows apart
out = model(pretraining_features(e))
mlm, _, mlm_log_probs = masked_lm_loss(out["masked_lm_logits"], e["masked_lm_ids"], e["masked_lm_weights"])
nsp, _, _ = classification_loss(out["next_sentence_logits"], e["next_sentence_labels"])
pairs = [(enc["sequence_output"], e["sequence_output"]), (enc["pooled_output"], e["pooled_output"]),
         *((apart[name], e[name]) for name in ("sequence_output", "pooled_output")),
         (mlm_log_probs, e["masked_lm_log_probs"]), (mlm + nsp, e["total_loss"])]
print(max(float(np.max(np.abs(np.asarray(a) - b))) for a, b in pairs))
"""


@pytest.mark.large  # JAX: the large tier's packages (optional_packages)
@needs("jax")
def test_encoder_matches_the_original_under_jax():
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2"}
    script = SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert float(result.stdout.strip().splitlines()[-1]) < 1e-5
