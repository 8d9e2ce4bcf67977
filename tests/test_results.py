"""bert_runner.results: the output files every script shares."""
import json


def test_eval_report_writes_counts_as_integers(tmp_path):
    """global_step is 21 in eval_report.json as in eval_results.txt, not 21.0, also where the
    caller made every metric a float (the starting model's report)."""
    import numpy as np

    from bert_runner import results

    metrics = {"eval_accuracy": np.float32(0.75), "global_step": np.int64(21),
               "eval_loss": 0.5}
    results.write_eval_report(str(tmp_path), metrics, {"eval_accuracy": "chance 0.5000"})
    results.write_eval_results(str(tmp_path / "eval_results.txt"), metrics)
    text = (tmp_path / results.EVAL_REPORT).read_text()
    assert '"global_step": 21\n' in text
    assert "global_step = 21\n" in (tmp_path / "eval_results.txt").read_text()
    report = json.loads(text)
    assert report["metrics"] == {"eval_accuracy": 0.75, "eval_loss": 0.5, "global_step": 21}
    assert type(report["metrics"]["global_step"]) is int
    assert type(report["metrics"]["eval_accuracy"]) is float
    results.write_eval_report(str(tmp_path), {"global_step": 0.0, "eval_loss": 2.0}, {},
                              name=results.START_REPORT)
    start = json.loads((tmp_path / results.START_REPORT).read_text())["metrics"]
    assert (type(start["global_step"]), type(start["eval_loss"])) == (int, float)
