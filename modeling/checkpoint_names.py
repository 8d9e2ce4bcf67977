"""Names of layers' variables in the original release's layout (the TF1 checkpoint layout).

A family names its encoder's variables (`modeling.families.bert.encoder_variable_map`) and each
task model its head's (`tf1_head_variables()`) with these, so a new head loads from and saves to
original-layout checkpoints without a change to `modeling.checkpoint`.
"""


def layer_norm_names(prefix, layer_norm):
    """`[(name, variable)]` of a `keras.layers.LayerNormalization` under the original's `prefix`."""
    return [(f"{prefix}/beta", layer_norm.beta), (f"{prefix}/gamma", layer_norm.gamma)]


def dense_names(prefix, dense):
    """`[(name, variable)]` of a `keras.layers.Dense` (`kernel`, `bias`) under `prefix`."""
    return [(f"{prefix}/kernel", dense.kernel), (f"{prefix}/bias", dense.bias)]


def output_layer_names(prefix, layer):
    """`[(name, variable)]` of an `output_weights [units, H]` / `output_bias [units]` layer (the
    original's hand-made output layers: classifier, next sentence, SQuAD span). `prefix` "" puts
    them at the top level, as run_classifier does."""
    scope = f"{prefix}/" if prefix else ""
    return [(f"{scope}output_weights", layer.output_weights),
            (f"{scope}output_bias", layer.output_bias)]
