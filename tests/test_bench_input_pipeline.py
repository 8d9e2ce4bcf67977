"""bench/input_pipeline.py's smallest run (one novel, 128 tokens, batches of 8, every input): it
exits 0, prints its table and appends one JSON line per input with positive rates, measured on
one CPU. Large tier: it runs the bench and, from it, one process per input.

Run as tests/test_bench.py runs the benches: the bench's own subprocess.run calls (the measuring
processes) fork from the tests' script server instead of importing TensorFlow afresh."""
import json
import math
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.large

# tests/test_bench.py's: `python -c BOOT bench.NAME ARGS...` runs `python -m bench.NAME ARGS...`
# with subprocess.run forking the scripts it starts.
BOOT = ("import runpy, subprocess, sys; sys.path.insert(0, 'tests'); import forked_scripts; "
        "subprocess.run = forked_scripts.run; "
        "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")
INPUTS = ("records", "dynamic_masking", "packed_rows")


def test_input_pipeline_bench_writes_a_rate_per_input(tmp_path):
    results = tmp_path / "results.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", BOOT, "bench.input_pipeline", "--input=data/austen/persuasion.txt",
         "--seq_lengths=128", "--batch_sizes=8", "--warmup_batches=1", "--batches=3",
         "--repeats=2", f"--results_jsonl={results}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "| seq_len | input | batch | seq/s per core |" in result.stdout
    lines = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    assert [line["figures"]["input"] for line in lines] == list(INPUTS)
    for line in lines:
        assert line["bench"] == "input_pipeline" and line["versions"]["tensorflow"]
        figures = line["figures"]
        assert (figures["seq_len"], figures["batch_size"], figures["batches"]) == (128, 8, 3)
        assert set(figures["cpu"]) == {"name", "family", "model"}
        assert figures["cpus_allowed"] == 1 and 0 < figures["cpu_use"] < 1.1  # one core
        assert figures["rows_per_s"] > 0 and figures["seq_per_cpu_s"] > 0
        assert figures["pairs_per_row"] >= 1
        assert figures["seq_per_s_per_core"] == pytest.approx(
            figures["rows_per_s"] * figures["pairs_per_row"])
        assert figures["cores_for_target"] == math.ceil(4400 / figures["seq_per_s_per_core"])
