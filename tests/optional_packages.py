"""The packages the project keeps optional, each with the requirements file that installs it, and
the one way a test reaches one: `require` (in a test or fixture) or `needs` (a mark). A missing
package skips the test with a reason that names its requirements file; no test imports one
itself (`test_optional_packages.py` reads every test file to keep it so).

CI installs every file named here for the large tier (tests/requirements-large.txt gathers them),
so there no test skips for a missing package; in the README's environment they skip."""
import importlib
import importlib.util

import pytest

# Top-level module -> the requirements file (relative to the project root) that installs it.
REQUIREMENTS = {
    "apache_beam": "requirements-beam.txt",
    "ai_edge_litert": "requirements-litert.txt",
    "tf2onnx": "requirements-onnx.txt",
    "onnx": "requirements-onnx.txt",
    "onnxruntime": "requirements-onnx.txt",
    "matplotlib": "requirements-plot.txt",
    "tensorflow_hub": "requirements-tfhub.txt",
    "tf_keras": "requirements-tfhub.txt",
    "torch": "tests/requirements-large.txt",
    "transformers": "tests/requirements-large.txt",
    "sentence_transformers": "tests/requirements-large.txt",
    "datasets": "tests/requirements-large.txt",
    "accelerate": "tests/requirements-large.txt",
    "jax": "tests/requirements-large.txt",
    "filelock": "tests/requirements-large.txt",
}


def skip_reason(name):
    """Why a test needing the module `name` (dotted names: their top-level package's) skips."""
    top = name.split(".")[0]
    return f"{top} is not installed (pip install -r {REQUIREMENTS[top]})"


def _missing(names):
    """The first of `names` whose top-level package cannot be found, or None."""
    for name in names:
        top = name.split(".")[0]
        if top not in REQUIREMENTS:
            raise KeyError(f"{top} is not an optional package of REQUIREMENTS")
        if importlib.util.find_spec(top) is None:
            return name
    return None


def require(*names):
    """The modules `names` (dotted names allowed), imported; skips the calling test naming the
    requirements file of the first that is not installed (at a module's top level: the module's
    tests). One name: its module; several: a tuple."""
    missing = _missing(names)
    if missing is not None:
        pytest.skip(skip_reason(missing), allow_module_level=True)
    modules = tuple(importlib.import_module(name) for name in names)
    return modules[0] if len(modules) == 1 else modules


def installed(*names):
    """Whether every one of `names` is installed (the session's set-up: tests/conftest.py)."""
    return _missing(names) is None


def needs(*names):
    """A mark that skips the test, naming the requirements file, unless every one of `names` is
    installed (for tests that only start a process that imports them)."""
    missing = _missing(names)
    return pytest.mark.skipif(missing is not None,
                              reason=skip_reason(missing) if missing else "")
