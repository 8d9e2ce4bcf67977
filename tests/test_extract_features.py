"""extract_features.py against the original's output on the tiny fixture."""
import json
import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY, tiny_config
from refusals import assert_refused, message


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


def _refusal(tmp_path, *extra, input_file=TINY / "extract_features" / "input.txt",
             output_file=None, bert_config_file=TINY / "bert_config.json"):
    """extract_features.py on the tiny model, `extra` flags added, run in `tmp_path`: its
    CompletedProcess (text), for the tests of what it refuses."""
    return subprocess.run([
        sys.executable, str(ROOT / "extract_features.py"), f"--input_file={input_file}",
        f"--output_file={output_file or tmp_path / 'features.jsonl'}",
        f"--vocab_file={TINY / 'vocab.txt'}", f"--bert_config_file={bert_config_file}",
        f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--max_seq_length=16", *extra,
    ], capture_output=True, text=True, cwd=tmp_path, timeout=300)


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


def test_bad_utf8_is_refused_naming_file_and_line(tmp_path):
    """The original's convert_to_unicode dropped the bytes without a word."""
    import extract_features

    path = tmp_path / "input.txt"
    path.write_bytes("the dog ||| a cat\n\ufeffhappy bird\r\n".encode("utf-8") + b"caf\xe9 snow\n")
    with pytest.raises(ValueError, match=re.escape(message("extract-features-not-utf8"))) as error:
        list(extract_features.read_examples(str(path)))
    assert str(error.value).startswith(f"{path}:3: not valid UTF-8")
    path.write_bytes("the dog ||| a cat\nhappy bird\r\n".encode("utf-8"))
    assert list(extract_features.read_examples(str(path))) == [
        (0, "the dog", "a cat"), (1, "happy bird", None)]


def test_an_empty_input_writes_an_empty_output_with_a_warning(tmp_path, caplog):
    """As the original (an empty file), but said."""
    from absl import logging as absl_logging

    import extract_features
    from modeling import BertModel
    from vocab.tokenization import FullTokenizer

    absl_logging.set_verbosity(absl_logging.INFO)
    caplog.set_level(logging.INFO)
    out = tmp_path / "features.jsonl"
    written = extract_features.extract(
        BertModel(tiny_config()), FullTokenizer(str(TINY / "vocab.txt")), [], str(out), [-1], 16,
        8, input_file="empty.txt")
    assert written == 0 and out.read_text() == "" and os.listdir(tmp_path) == [out.name]
    assert message("extract-features-empty-input") in caplog.text
    assert f"empty.txt holds no lines: wrote an empty output file {out}" in caplog.text


def test_a_config_with_other_layers_than_the_checkpoint_is_refused(tmp_path):
    """12 layers for the 2-layer checkpoint: the original loaded 39 of 199 variables, drew the
    rest at random and wrote their features; refused here, nothing written."""
    config = json.loads((TINY / "bert_config.json").read_text())
    config["num_hidden_layers"] = 12
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    process = _refusal(tmp_path, bert_config_file=tmp_path / "bert_config.json")
    assert_refused(process, "checkpoint-encoder-missing")
    assert f"the model of {tmp_path / 'bert_config.json'}: 160 of its 197" in process.stderr
    assert os.listdir(tmp_path) == ["bert_config.json"]


def test_an_output_file_that_cannot_be_written_is_refused_before_the_model_runs(tmp_path):
    (tmp_path / "a_file").write_text("")
    process = _refusal(tmp_path, output_file=tmp_path / "a_file" / "features.jsonl")
    assert_refused(process, "output-dir-not-writable")
    assert f"--output_file={tmp_path / 'a_file'}: cannot write there" in process.stderr
    assert "Wrote" not in process.stderr and ".tmp" not in process.stderr


def test_an_output_file_that_is_the_input_file_is_refused(tmp_path):
    """The JSON lines of features replaced the input they were computed from, exit 0."""
    import extract_features

    lines = tmp_path / "input.txt"
    lines.write_bytes((TINY / "extract_features" / "input.txt").read_bytes())
    (tmp_path / "sub").mkdir()
    os.symlink(lines, tmp_path / "link.txt")
    process = _refusal(tmp_path, "--layers=-1", input_file=lines,
                       output_file=tmp_path / "sub" / ".." / "input.txt")
    assert_refused(process, "extract-features-output-is-input")
    assert lines.read_bytes() == (TINY / "extract_features" / "input.txt").read_bytes()
    # Every mode, any spelling of the path: a link, the npy mode's lines file.
    for output_file, output_format in ((tmp_path / "link.txt", None),
                                       (tmp_path / "link.txt", "jsonl"),
                                       (tmp_path / "link.npy", "npy")):
        with pytest.raises(ValueError, match=message("extract-features-output-is-input")):
            extract_features.check_output_files(str(output_file), str(lines), output_format)
    extract_features.check_output_files(str(tmp_path / "out.npy"), str(lines), "npy")
    extract_features.check_output_files(str(tmp_path / "input.jsonl"), str(lines))


def test_an_input_file_that_cannot_be_read_is_refused_naming_the_flag(tmp_path):
    """A missing --input_file: one line naming the flag, before the model is loaded (it said
    only "No such file or directory: <path>")."""
    import extract_features

    missing = tmp_path / "missing.txt"
    process = _refusal(tmp_path, input_file=missing)
    assert_refused(process, "extract-features-input-unreadable")
    assert f"--input_file={missing} cannot be read (No such file or directory)" in process.stderr
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match=re.escape(
            f"--input_file={tmp_path} cannot be read (Is a directory)")):
        extract_features.check_input_file(str(tmp_path))


def test_pooling_takes_layers_minus_one_the_layer_it_pools_and_refuses_others(tmp_path):
    """`--pooling=mean --layers=-1` says what --pooling does anyway: taken (it was refused);
    another --layers with --pooling is still refused, naming the flag."""
    def parse(*extra):
        return subprocess.run(
            [sys.executable, str(ROOT / "extract_features.py"),
             f"--input_file={TINY / 'extract_features' / 'input.txt'}",
             f"--output_file={tmp_path / 'out.jsonl'}", f"--vocab_file={TINY / 'vocab.txt'}",
             f"--bert_config_file={TINY / 'bert_config.json'}",
             f"--init_checkpoint={TINY / 'bert_model.ckpt'}", "--pooling=mean", *extra,
             "--only_check_args"], capture_output=True, text=True, cwd=tmp_path, timeout=120)

    taken = parse("--layers=-1")
    assert taken.returncode == 0, taken.stderr
    refused = parse("--layers=-1,-2")
    assert refused.returncode != 0
    assert "--layers only without --pooling or as -1" in refused.stderr
