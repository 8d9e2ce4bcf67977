"""Names of layers' variables in the original release's layout (the TF1 checkpoint layout).

A family names its encoder's variables (`encoder_names`, under its scope) and each task model its
head's (`tf1_head_variables()`) with these, so a new head loads from and saves to original-layout
checkpoints without a change to `modeling.checkpoint`.
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


def encoder_names(encoder, prefix, with_embeddings=True):
    """`[(original name, variable)]` of a `BertModel` (or `ElectraModel`) under `prefix`, in the
    original's creation order: the embedding tables and their LayerNorm (left out with
    `with_embeddings=False`: an ELECTRA generator's, which are its discriminator's), the
    `embeddings_project` of narrower tables, the layers, the pooler of a model that has one."""
    names = []
    if with_embeddings:
        emb = encoder.embeddings
        names += [(f"{prefix}/embeddings/word_embeddings", emb.word_embeddings),
                  (f"{prefix}/embeddings/token_type_embeddings", emb.token_type_embeddings),
                  (f"{prefix}/embeddings/position_embeddings", emb.position_embeddings)]
        names += layer_norm_names(f"{prefix}/embeddings/LayerNorm", emb.layer_norm)
    if encoder.embeddings_project is not None:
        names += dense_names(f"{prefix}/embeddings_project", encoder.embeddings_project)
    for i, layer in enumerate(encoder.encoder_layers):
        p = f"{prefix}/encoder/layer_{i}"
        names += [
            (f"{p}/attention/self/query/kernel", layer.query_kernel),
            (f"{p}/attention/self/query/bias", layer.query_bias),
            (f"{p}/attention/self/key/kernel", layer.key_kernel),
            (f"{p}/attention/self/key/bias", layer.key_bias),
            (f"{p}/attention/self/value/kernel", layer.value_kernel),
            (f"{p}/attention/self/value/bias", layer.value_bias),
            (f"{p}/attention/output/dense/kernel", layer.attention_output_kernel),
            (f"{p}/attention/output/dense/bias", layer.attention_output_bias),
            (f"{p}/attention/output/LayerNorm/beta", layer.attention_beta),
            (f"{p}/attention/output/LayerNorm/gamma", layer.attention_gamma),
            (f"{p}/intermediate/dense/kernel", layer.intermediate_kernel),
            (f"{p}/intermediate/dense/bias", layer.intermediate_bias),
            (f"{p}/output/dense/kernel", layer.output_kernel),
            (f"{p}/output/dense/bias", layer.output_bias),
            (f"{p}/output/LayerNorm/beta", layer.output_beta),
            (f"{p}/output/LayerNorm/gamma", layer.output_gamma),
        ]
    if encoder.has_pooler:
        names += dense_names(f"{prefix}/pooler/dense", encoder.pooler)
    return names
