"""Serving: the machinery every export is made of, and the formats that are not a task's.

  registry      the serving formats (`ServingFormat`), declared by their owners
  export_config export_model.py's flags as one frozen value (`ExportConfig`): every export's input
  text_module   the raw-text module (`ModelExport`, `TextExport`): strings in, the model's
                values per text out, in groups of similar length
  saved_model   a SavedModel written whole or not at all, with its export.json
  provenance    loading the model an export serves; refusing another script's checkpoint
  formats       the machinery's formats declared: embedding, huggingface, litert, onnx
  embedding     raw text -> a sentence vector, from any checkpoint's encoder
  litert, onnx  a classifier or an encoder converted (LiteRT: tokenizer inside; ONNX: ids in)
  predictor     predict.py: an export loaded once, raw text answered

No module here imports a task: each task declares its own format in its package's `serving`
module.
"""
