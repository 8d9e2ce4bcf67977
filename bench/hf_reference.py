"""The reference side of the Hugging Face hand checks (docs/modeling.md), run where `torch` and
`transformers` are installed (not needed by the project or its tests).

    python -m bench.hf_reference embed MODEL_DIR LINES.txt OUT.npy   # sentence-transformers' vectors
    python -m bench.hf_reference encode MODEL_DIR LINES.txt OUT.npy  # last layer, [CLS] row
    python -m bench.hf_reference heads MODEL_DIR LINES.txt          # BertForPreTraining vs ours

embed: `BertModel.from_pretrained` + `BertTokenizer` (truncation at 256 word-pieces, as
all-MiniLM-L6-v2's sentence_bert_config.json), mean over the attention mask, then L2: the
computation of sentence-transformers' Pooling(mean) + Normalize modules. encode: the last layer's
[CLS] vector of each line at --max_seq_length 128 (`text_a ||| text_b` lines are pairs in
both modes, as extract_features.py reads them), to compare a model written by
`export_model.py --format=huggingface` with our own encoder. heads: a pre-training checkpoint's
export read by `BertForPreTraining.from_pretrained` (the keys it did not load, printed) and by our
`BertPretrainer`, on the first 64 lines: the largest difference of the masked-LM logits at every
real position and of the next-sentence logits (needs this project's requirements too).
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


def heads(model_dir, lines_file):
    import os

    from transformers import BertForPreTraining

    from modeling import BertPretrainer, checkpoint as checkpoints

    theirs, info = BertForPreTraining.from_pretrained(model_dir, output_loading_info=True)
    print("transformers did not load: " + ", ".join(
        f"{key} {info[key] or 'none'}" for key in ("missing_keys", "unexpected_keys",
                                                    "mismatched_keys")))
    ours = BertPretrainer(checkpoints.load_config(os.path.join(model_dir, "config.json")))
    checkpoints.load_checkpoint(ours, model_dir, strict=True)
    tokenizer = BertTokenizer.from_pretrained(model_dir)
    with open(lines_file, encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split(" ||| ", 1) + [None] for line in f][:64]
    batch = tokenizer.pad([tokenizer(a, b, truncation=True, max_length=128)
                           for a, b, *_ in pairs], return_tensors="pt")
    with torch.no_grad():
        out = theirs.eval()(**batch)
    ids, mask, segments = (batch[k].numpy() for k in ("input_ids", "attention_mask",
                                                      "token_type_ids"))
    positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    got = ours({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                "masked_lm_positions": positions})
    mlm = np.abs(np.asarray(got["masked_lm_logits"]) - out.prediction_logits.numpy())
    nsp = np.abs(np.asarray(got["next_sentence_logits"])
                 - out.seq_relationship_logits.numpy())
    print(f"{len(pairs)} lines: masked-LM logits differ by at most "
          f"{mlm[mask.astype(bool)].max():.2g}, next-sentence logits by {nsp.max():.2g}")


if __name__ == "__main__":
    if sys.argv[1] == "heads":
        heads(*sys.argv[2:])
    else:
        main(*sys.argv[1:])
