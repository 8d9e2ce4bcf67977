"""The original release's variable names for this project's layers (the TF1 checkpoint layout).

The encoder's names are listed here once; each task model declares its own head's names with
`tf1_head_variables()` (built from `dense_names` / `layer_norm_names`), so a new head loads from
and saves to original-layout checkpoints without a change to `modeling.tf1_checkpoint`.
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


def encoder_variable_map(bert, prefix="bert"):
    """`[(original name, variable)]` of a `BertModel`, in the original's creation order."""
    emb = bert.embeddings
    names = [
        (f"{prefix}/embeddings/word_embeddings", emb.word_embeddings),
        (f"{prefix}/embeddings/token_type_embeddings", emb.token_type_embeddings),
        (f"{prefix}/embeddings/position_embeddings", emb.position_embeddings),
    ]
    names += layer_norm_names(f"{prefix}/embeddings/LayerNorm", emb.layer_norm)
    for i, layer in enumerate(bert.encoder_layers):
        p = f"{prefix}/encoder/layer_{i}"
        att = layer.attention
        names += dense_names(f"{p}/attention/self/query", att.query)
        names += dense_names(f"{p}/attention/self/key", att.key)
        names += dense_names(f"{p}/attention/self/value", att.value)
        names += dense_names(f"{p}/attention/output/dense", layer.attention_output)
        names += layer_norm_names(f"{p}/attention/output/LayerNorm", layer.attention_layer_norm)
        names += dense_names(f"{p}/intermediate/dense", layer.intermediate)
        names += dense_names(f"{p}/output/dense", layer.output_dense)
        names += layer_norm_names(f"{p}/output/LayerNorm", layer.output_layer_norm)
    names += dense_names(f"{prefix}/pooler/dense", bert.pooler)
    return names
