"""Seed sweeps (`--seeds`): one run per seed in its own directory, and the spread of their metrics."""
import os
import re

import numpy as np


def seed_dir(output_dir, seed):
    """Where `--seeds` puts the run of one seed: `<output_dir>/seed_<seed>`."""
    return os.path.join(output_dir, "seed_%d" % seed)


def seed_directories(output_dir):
    """The `seed_<n>` directories of a `--seeds` sweep in `output_dir`."""
    import tensorflow as tf  # the sweep's summary alone needs none

    return [d for d in tf.io.gfile.glob(os.path.join(output_dir, "seed_*"))
            if re.fullmatch(r"seed_\d+", os.path.basename(d))]


def summarize_seeds(results_by_seed):
    """The text of eval_results_seeds.txt: each metric's spread over the seeds.

    Args:
      results_by_seed: {seed (int): eval_results dict}, in run order.
    Returns:
      str, one line per metric (sorted; `global_step` left out), e.g.
      "eval_accuracy = 0.852941 ± 0.0073529 (seeds 1, 2: 0.845588, 0.860294)\\n".
      The spread is the sample standard deviation (n - 1 in the denominator; 0 for one seed).
    """
    seeds = list(results_by_seed)
    names = sorted(name for name in results_by_seed[seeds[0]] if name != "global_step")
    lines = []
    for name in names:
        values = [results_by_seed[s][name] for s in seeds]
        numbers = np.asarray(values, dtype=np.float64)
        std = np.std(numbers, ddof=1) if len(numbers) > 1 else 0.0
        lines.append("%s = %.6g ± %.6g (seeds %s: %s)\n" % (
            name, np.mean(numbers), std, ", ".join(map(str, seeds)), ", ".join(map(str, values))))
    return "".join(lines)
