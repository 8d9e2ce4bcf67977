"""A wrong combination of flags for an optional format gets its own one-line refusal with that
format's packages missing (ONNX, LiteRT, Beam, the sweep's plot): flags are checked before
packages are looked for, so the same command is refused the same way on every machine."""
import re
import sys
import types

import pytest

from conftest import ROOT
from optional_packages import REQUIREMENTS
from refusals import message

VOCAB = str(ROOT / "vocab" / "uncased_L-12_H-768_A-12" / "vocab.txt")


def _uninstall(monkeypatch, requirements_file):
    """Makes every package of `requirements_file` fail to import in this test."""
    for module, file in REQUIREMENTS.items():
        if file == requirements_file:
            monkeypatch.setitem(sys.modules, module, None)


def test_onnx_quantization_of_litert_is_refused_without_the_onnx_packages(monkeypatch):
    from bert_runner.serving import onnx

    _uninstall(monkeypatch, "requirements-onnx.txt")
    with pytest.raises(ValueError, match=re.escape(message("export-onnx-quantization"))):
        onnx.export_from_config(types.SimpleNamespace(quantization="int8"), files=None)


def test_litert_int8_without_texts_is_refused_without_the_litert_package(monkeypatch):
    from bert_runner.serving import litert

    _uninstall(monkeypatch, "requirements-litert.txt")
    with pytest.raises(ValueError, match=re.escape(message("litert-int8-calibration"))):
        litert.export_from_config(types.SimpleNamespace(quantization="int8",
                                                       calibration_file=None), files=None)


@pytest.mark.parametrize("flags, refusal", [
    (dict(num_workers=2, chunk_size_mb=1), "--num_workers=2 with --runner=DirectRunner"),
    (dict(output_file="a,b"), "--output_file=a,b with --runner: one name"),
    (dict(max_seq_length=4), "--max_seq_length=4: must be >= 5"),
])
def test_beam_flags_are_refused_without_beam(monkeypatch, tmp_path, flags, refusal):
    from bert_tasks.pretraining import beam_pipelines
    from bert_tasks.pretraining.data import pipeline

    _uninstall(monkeypatch, "requirements-beam.txt")
    opts = pipeline.Options(**{"input_file": str(tmp_path / "missing.txt"),
                               "output_file": str(tmp_path / "out"), "vocab_file": VOCAB,
                               **flags})
    with pytest.raises(ValueError, match=re.escape(refusal)) as refused:
        beam_pipelines.make_pretraining_data(opts, "DirectRunner")
    assert not isinstance(refused.value, beam_pipelines.BeamMissing)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("flags, refusal", [
    (dict(max_input_lines=5), "--max_input_lines=5 with --runner=DirectRunner"),
    (dict(num_workers=2), "--num_workers=2 with --runner=DirectRunner"),
])
def test_beam_vocab_flags_are_refused_without_beam(monkeypatch, tmp_path, flags, refusal):
    from bert_tasks.pretraining import beam_pipelines
    from bert_tasks.pretraining.vocab_building import building

    _uninstall(monkeypatch, "requirements-beam.txt")
    opts = building.Options(input_file=str(tmp_path / "missing.txt"),
                            output_file=str(tmp_path / "vocab.txt"), **flags)
    with pytest.raises(ValueError, match=re.escape(refusal)) as refused:
        beam_pipelines.build_vocab(opts, "DirectRunner")
    assert not isinstance(refused.value, beam_pipelines.BeamMissing)
    assert not list(tmp_path.iterdir())


def test_sweep_steps_are_refused_without_matplotlib(monkeypatch, tmp_path):
    from experiments import figure2

    _uninstall(monkeypatch, "requirements-plot.txt")
    run = figure2.PretrainingRun(str(tmp_path), "pt", "mlm", str(tmp_path / "bert_config.json"),
                                 {2: str(tmp_path / "ckpt-2"), 4: str(tmp_path / "ckpt-4")})
    with pytest.raises(ValueError, match=re.escape(message("sweep-step-without-checkpoint"))):
        figure2.choose_steps(run, steps=[5])
    with pytest.raises(ValueError, match="steps >= 0"):
        figure2.parse_steps(["1", "x"])
