"""extract_features.py against the original's output on the tiny fixture."""
import json
import subprocess
import sys

import numpy as np

from conftest import ROOT
from modeling_helpers import TINY


def load(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _run(tmp_path, *extra):
    out = tmp_path / "features.jsonl"
    cmd = [
        sys.executable, str(ROOT / "extract_features.py"),
        f"--input_file={TINY / 'extract_features' / 'input.txt'}", f"--output_file={out}",
        f"--vocab_file={TINY / 'vocab.txt'}", f"--bert_config_file={TINY / 'bert_config.json'}",
        f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--layers=-1,-2", "--max_seq_length=16",
        "--batch_size=3", "--do_lower_case=True", *extra,
    ]
    subprocess.run(cmd, check=True, capture_output=True, cwd=tmp_path)
    return out


def _layer_values(records):
    return np.concatenate([layer["values"] for record in records for feature in record["features"]
                           for layer in feature["layers"]])


def test_reproduces_the_original_output(tmp_path):
    out = _run(tmp_path)
    ours, original = load(out), load(TINY / "extract_features" / "output.jsonl")
    assert len(ours) == len(original) == 4
    for a, b in zip(ours, original):
        assert list(a) == ["linex_index", "features"]
        assert a["linex_index"] == b["linex_index"]
        assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
        for fa, fb in zip(a["features"], b["features"]):
            assert [l["index"] for l in fa["layers"]] == [-1, -2]
            for la, lb in zip(fa["layers"], fb["layers"]):
                np.testing.assert_allclose(la["values"], lb["values"], atol=1e-5)
    # Same text layout as the original (json.dumps defaults).
    first = (out.read_text().splitlines()[0])
    assert first.startswith('{"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [')
    assert not list(tmp_path.glob("*.tmp-*"))


def test_bfloat16_stays_within_its_rounding(tmp_path):
    out = _run(tmp_path, "--mixed_precision=bf16")
    ours, original = load(out), load(TINY / "extract_features" / "output.jsonl")
    assert [[f["token"] for f in r["features"]] for r in ours] == [
        [f["token"] for f in r["features"]] for r in original]
    got, want = _layer_values(ours), _layer_values(original)
    assert not np.array_equal(got, want)  # it did compute in bfloat16
    np.testing.assert_allclose(got, want, atol=0.05)


def test_pairs_and_truncation_follow_the_original():
    import extract_features
    from vocab.tokenization import FullTokenizer

    tokenizer = FullTokenizer(str(TINY / "vocab.txt"), do_lower_case=True)
    tokens, ids, mask, types = extract_features.convert_example(
        "the old dog walked to the river", "they see red fish", tokenizer, 10)
    assert len(ids) == len(mask) == len(types) == 10
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and len(tokens) == 10
    assert types == [0] * tokens.index("[SEP]") + [0] + [1] * (len(tokens) - tokens.index("[SEP]") - 1)
