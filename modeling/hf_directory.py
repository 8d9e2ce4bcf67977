"""A Hugging Face model directory's files: which weights files it holds, whether a path is one.
Below both the model families (ELECTRA's reads its `generator/` folder) and the checkpoint
package, which import it; it imports neither.
"""
import os

# The weights of a Hugging Face directory (`hugging_face.read_hf_weights` reads either).
HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
HF_DIRECTORY = "a Hugging Face model directory (config.json, model.safetensors or " \
               "pytorch_model.bin, vocab.txt)"


def is_hf_directory(path):
    """True when `path` is a directory holding `config.json` and one of `HF_WEIGHT_FILES`."""
    return bool(path) and os.path.isfile(os.path.join(path, "config.json")) and any(
        os.path.isfile(os.path.join(path, name)) for name in HF_WEIGHT_FILES)

