"""The layers every model family is built of: attention, the transformer layer, embeddings, the
pre-training and task heads, pooling, LoRA, the BiLSTM on top, activations, initializers, and the
fused TensorFlow kernels behind them (`kernels`). Nothing here names a family or a checkpoint
layout; the families (`modeling.bert`, `modeling.electra`) assemble these into encoders and task
models.
"""
