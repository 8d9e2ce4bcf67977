"""The reference side of the Hugging Face hand checks (docs/modeling.md), run where `torch` and
`transformers` are installed (not needed by the project or its tests).

    python bench/hf_reference.py embed MODEL_DIR LINES.txt OUT.npy   # sentence-transformers' vectors
    python bench/hf_reference.py encode MODEL_DIR LINES.txt OUT.npy  # last layer, [CLS] row

embed: `BertModel.from_pretrained` + `BertTokenizer` (truncation at 256 word-pieces, as
all-MiniLM-L6-v2's sentence_bert_config.json), mean over the attention mask, then L2: the
computation of sentence-transformers' Pooling(mean) + Normalize modules. encode: the last layer's
[CLS] vector of each line at --max_seq_length 128 (`text_a ||| text_b` lines are pairs in
both modes, as extract_features.py reads them), to compare a model written by
`export_model.py --format=huggingface` with our own encoder.
"""
import sys

import numpy as np
import torch
from transformers import BertModel, BertTokenizer


def main(mode, model_dir, lines_file, out_file):
    tokenizer = BertTokenizer.from_pretrained(model_dir)
    model = BertModel.from_pretrained(model_dir).eval()
    with open(lines_file, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    vectors = []
    with torch.no_grad():
        for begin in range(0, len(lines), 64):
            # `text_a ||| text_b` lines are pairs, as extract_features.py reads them.
            pairs = [line.split(" ||| ", 1) + [None] for line in lines[begin:begin + 64]]
            batch = tokenizer.pad([tokenizer(a, b, truncation=True,
                                             max_length=256 if mode == "embed" else 128)
                                   for a, b, *_ in pairs], return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            if mode == "embed":
                mask = batch["attention_mask"][:, :, None].float()
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                vectors.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
            else:
                vectors.append(hidden[:, 0].numpy())
    np.save(out_file, np.concatenate(vectors).astype(np.float32))


if __name__ == "__main__":
    main(*sys.argv[1:])
