"""LoRA (`--lora_rank`): adapters that start at the base model and merge into it exactly; a
run_classifier LoRA run (XLA-compiled) trains only the adapters and the head, writes them apart,
and serves merged: from the base plus the adapters file, from the original-layout and the
Hugging Face writers, and from an export; the refusals."""
import json

import numpy as np
import pytest

from modeling_helpers import TINY, tiny_config
from refusals import assert_refused, message
from test_run_classifier import (
    checkpoint_values, read_eval_results, run_classifier, run_in_process, write_keyword_mrpc)


def _features(seed=0):
    # An evaluation batch of run_classifier at --max_seq_length=24 (the runs below, and other
    # files'): XLA compiles the encoder's kernels at these shapes once for all of them.
    ids = np.random.default_rng(seed).integers(5, 99, (8, 24)).astype("int32")
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}


@pytest.mark.parametrize("targets,adapted", [("query_value", 2), ("all", 6)])
def test_adapters_start_at_the_base_and_merge_exactly(targets, adapted):
    from modeling import BertClassifier
    from modeling.inference import merged_copy
    from modeling.optimization import with_lora
    from modeling.layers import lora

    config = tiny_config()
    model = BertClassifier(config, 2)
    before = np.asarray(model(_features())["logits"])
    base = model
    model = with_lora(model, lora.LoraSettings(rank=4, alpha=8, targets=targets))
    np.testing.assert_array_equal(np.asarray(model(_features())["logits"]), before)  # B = 0
    trained = {v.path for v in model.trainable_variables}
    assert trained == ({p for p in lora.adapters(model)
                        for p in (p.replace("kernel", "lora_a"), p.replace("kernel", "lora_b"))}
                       | {v.path for v in model.classifier.trainable_variables})
    assert len(lora.adapters(model)) == adapted * config.num_hidden_layers
    # Each adapter draws its own start (a shared Keras initializer would repeat its values).
    starts = [np.asarray(a) for _, a, _, _ in lora.adapters(model).values()]
    assert all(not np.array_equal(starts[0], other) for other in starts[1:])
    rng = np.random.default_rng(1)
    for _, _, b, _ in lora.adapters(model).values():
        b.assign(rng.normal(0, 0.2, b.shape).astype("float32"))
    adapted_logits = np.asarray(model(_features())["logits"])
    assert not np.allclose(adapted_logits, before)
    plain = BertClassifier(config, 2)
    values = {v.path: np.asarray(v) for v in merged_copy(model).variables}
    for variable in plain.variables:
        if "seed_generator" not in variable.path:
            variable.assign(values[variable.path])
    np.testing.assert_allclose(np.asarray(plain(_features())["logits"]), adapted_logits,
                               atol=1e-6)
    # The merged copy left the model's base kernels, and the model it was made from, as they were.
    kernel, *_ = next(iter(lora.adapters(model).values()))
    assert not np.array_equal(np.asarray(kernel), values[kernel.path])
    assert not lora.adapters(base) and merged_copy(base) is base
    np.testing.assert_array_equal(np.asarray(base(_features())["logits"]), before)


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """A LoRA run of run_classifier on the keyword task, with --save_tf1_checkpoint (the large
    tier's test_xla.py trains adapters with --jit_compile=true)."""
    folder = tmp_path_factory.mktemp("lora")
    write_keyword_mrpc(folder / "data", num_train=128, num_dev=64, num_test=20)
    out = folder / "out"
    run_in_process(folder / "data", out, do_train=True, do_eval=True, do_predict=True,
                   init_checkpoint=str(TINY / "bert_model.ckpt"), train_batch_size=16,
                   num_train_epochs=8, learning_rate=5e-3, lora_rank=4,
                   save_tf1_checkpoint=True)
    return folder, out


def test_a_lora_run_trains_the_adapters_and_head_and_writes_them_apart(lora_run):
    folder, out = lora_run
    results = read_eval_results(out / "eval_results.txt")
    assert float(results["eval_accuracy"]) > 0.7  # majority 0.61 (checked by the classifier's tests)
    base = checkpoint_values(TINY / "bert_model.ckpt")
    merged = checkpoint_values(out / "bert_model.ckpt")
    # Only the adapted kernels moved (merged in); every other encoder weight is the base's.
    moved = sorted(n for n in base if n.startswith("bert/")
                   and not np.array_equal(base[n], merged[n]))
    assert moved == sorted(f"bert/encoder/layer_{i}/attention/self/{p}/kernel"
                           for i in range(2) for p in ("query", "value"))
    adapters_file = out / "lora_adapters.safetensors"
    assert adapters_file.stat().st_size < (out / "ckpt-64.data-00000-of-00001").stat().st_size / 10
    run = json.loads((out / "run.json").read_text())
    assert (run["lora_rank"], run["lora_targets"]) == (4, "query_value")


def test_the_base_and_the_adapters_file_evaluate_and_predict_as_the_run(lora_run, tmp_path):
    folder, out = lora_run
    again = tmp_path / "again"
    run_in_process(folder / "data", again, do_eval=True, do_predict=True,
                   init_checkpoint=str(TINY / "bert_model.ckpt"),
                   lora_adapters=str(out / "lora_adapters.safetensors"))
    merged = tmp_path / "merged"
    run_in_process(folder / "data", merged, do_eval=True, do_predict=True,
                   init_checkpoint=str(out / "bert_model.ckpt"))
    expected = np.loadtxt(out / "test_results.tsv")
    for run in (again, merged):
        np.testing.assert_allclose(np.loadtxt(run / "test_results.tsv"), expected, atol=1e-5)
        assert float(read_eval_results(run / "eval_results.txt")["eval_loss"]) == pytest.approx(
            float(read_eval_results(out / "eval_results.txt")["eval_loss"]), abs=1e-5)


def test_exports_serve_the_merged_weights(lora_run, tmp_path):
    """The Hugging Face writer (export_model.py) loads the LoRA run's checkpoint merged: its
    weights are the original-layout writer's."""
    import subprocess
    import sys

    from conftest import ROOT
    from modeling.checkpoint.hugging_face import read_hf_as_tf1
    from modeling.bert.family import BERT

    _, out = lora_run
    process = subprocess.run(
        [sys.executable, str(ROOT / "export_model.py"), "--format=huggingface",
         f"--checkpoint={out}", f"--vocab_file={TINY / 'vocab.txt'}",
         f"--bert_config_file={TINY / 'bert_config.json'}", f"--export_dir={tmp_path / 'hf'}"],
        capture_output=True, text=True)
    assert process.returncode == 0, process.stderr[-3000:]
    exported = read_hf_as_tf1(str(tmp_path / "hf"), BERT)
    merged = checkpoint_values(out / "bert_model.ckpt")
    for name, value in exported.items():
        np.testing.assert_allclose(value, merged[name], atol=1e-7, err_msg=name)


def test_refusals(lora_run, tmp_path):
    folder, out = lora_run
    data = folder / "data"
    common = [f"--data_dir={data}", "--max_seq_length=24", "--do_eval"]
    other_base = run_classifier("--task_name=mrpc", *common, f"--output_dir={tmp_path / 'a'}",
                                f"--init_checkpoint={out / 'ckpt-64'}",
                                f"--lora_adapters={out / 'lora_adapters.safetensors'}")
    assert_refused(other_base, "lora-adapters-other-base")
    other_task = run_classifier("--task_name=cola", *common, f"--output_dir={tmp_path / 'b'}",
                                f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
                                f"--lora_adapters={out / 'lora_adapters.safetensors'}")
    assert_refused(other_task, "lora-adapters-other-task")
    too_large = run_classifier("--task_name=mrpc", *common, "--do_train",
                               f"--output_dir={tmp_path / 'c'}", "--lora_rank=33")
    assert_refused(too_large, "lora-rank-too-large")
    negative = run_classifier("--task_name=mrpc", *common, f"--output_dir={tmp_path / 'd'}",
                              "--lora_rank=-1")
    assert negative.returncode == 2 and "must be >= 0" in negative.stderr
    # The LoRA run's output_dir resumed without LoRA: its checkpoints hold adapters.
    with pytest.raises(ValueError, match=message("lora-output-dir-changed")):
        run_in_process(data, out, do_eval=True)
