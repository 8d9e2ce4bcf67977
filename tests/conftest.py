"""Shared pytest configuration: quiet TensorFlow, fixture paths, project root on sys.path."""
import json
import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture(scope="session")
def tokenization_cases():
    """The original's tokenizations (tokenization/tokenization_cases.jsonl): 302 texts."""
    path = FIXTURES / "tokenization" / "tokenization_cases.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
