"""Shared pytest configuration: quiet TensorFlow, fixture paths, project root on sys.path."""
import atexit
import json
import os
import pathlib
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# One XLA compilation cache for the session, shared with the scripts the tests run (they inherit
# the environment): the fused kernels are compiled once per shape, not once per process, which
# takes minutes off the suite. Set before TensorFlow is imported.
_XLA_CACHE = tempfile.mkdtemp(prefix="bert-tests-xla-cache-")
atexit.register(shutil.rmtree, _XLA_CACHE, ignore_errors=True)
os.environ["TF_XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("TF_XLA_FLAGS"), f"--tf_xla_persistent_cache_directory={_XLA_CACHE}"]))

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


# The README's quick-start demo command. tests/test_readme.py checks it runs as written and
# tests/test_demo.py checks what it wrote: one run of the (quick) demo serves both.
README_DEMO_COMMAND = "python demo.py"


def run_quickstart_command(command, folder):
    """Runs a README quick-start command line as written, in `folder`, with DEMO_QUICK=1 (the
    demo's --quick stages)."""
    import subprocess

    env = {**os.environ, "DEMO_QUICK": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def readme_mirror(tmp_path_factory):
    """A folder whose entries are symlinks to the repository's top-level files and folders, so
    what the quick-start commands write (`./demo_output`) stays out of the checkout."""
    folder = tmp_path_factory.mktemp("readme")
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "demo_output"):
            (folder / entry.name).symlink_to(entry)
    return folder


@pytest.fixture(scope="session")
def quick_demo(readme_mirror):
    """`(CompletedProcess, ./demo_output)` of the README's demo command, run once per session in
    the mirror over a folder an earlier demo left behind (a marker file and a stale file)."""
    out = readme_mirror / "demo_output"
    out.mkdir()
    (out / ".bert_demo").write_text("")
    (out / "stale.txt").write_text("from an earlier run")
    return run_quickstart_command(README_DEMO_COMMAND, readme_mirror), out
