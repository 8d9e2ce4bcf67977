"""Shared pytest configuration: quiet TensorFlow, fixture paths, project root on sys.path."""
import atexit
import collections
import gc
import json
import logging
import os
import pathlib
import shutil
import sys
import tempfile

import optional_packages

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# pytest.ini runs three pytest processes, each starting scripts, on CI's 2 cores: one thread in
# each of TensorFlow's pools per process (the scripts inherit it), so that no pool's idle threads
# spin for a core another process needs. A user's run, without these variables, uses every core.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
# One XLA compilation cache for the session, shared with the scripts the tests run (they inherit
# the environment): the fused kernels are compiled once per shape, not once per process, which
# takes minutes off the suite. Set before TensorFlow is imported. The process that makes it (the
# pytest-xdist controller, or pytest alone) names it in _XLA_CACHE_VARIABLE and removes it at exit;
# the xdist workers, started later with its environment, use the same folder.
_XLA_CACHE_VARIABLE = "BERT_TESTS_XLA_CACHE"
_XLA_CACHE = os.environ.get(_XLA_CACHE_VARIABLE)
if not _XLA_CACHE or not os.path.isdir(_XLA_CACHE):
    _XLA_CACHE = tempfile.mkdtemp(prefix="bert-tests-xla-cache-")
    os.environ[_XLA_CACHE_VARIABLE] = _XLA_CACHE
    atexit.register(shutil.rmtree, _XLA_CACHE, ignore_errors=True)
_XLA_CACHE_FLAG = f"--tf_xla_persistent_cache_directory={_XLA_CACHE}"
if _XLA_CACHE_FLAG not in os.environ.get("TF_XLA_FLAGS", "").split():
    os.environ["TF_XLA_FLAGS"] = " ".join(filter(None, [
        os.environ.get("TF_XLA_FLAGS"), _XLA_CACHE_FLAG]))
# JAX's persistent compilation cache beside it, for the large tier's JAX processes (each a
# process of its own: a resumed run, a prediction from the other backend's checkpoint and a
# bench's contenders compile programs that an earlier process compiled). Its size bound turns on
# its file lock (the package filelock), without which processes writing one entry at once could
# read each other's half-written file.
if optional_packages.installed("jax", "filelock"):
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(_XLA_CACHE, "jax"))
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2**32))

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

# As every script does first (TF_ENABLE_ONEDNN_OPTS), so that the scripts forked from one process
# (forked_scripts) run as they run alone.
import bert_runner.cli  # noqa: E402,F401
import forked_scripts  # noqa: E402

forked_scripts.install()


@pytest.fixture(scope="session", autouse=True)
def _xla_cache_keys():
    """In the processes that run tests (not pytest-xdist's controller, which imports no
    TensorFlow): compiled functions named by their content, for the shared XLA cache."""
    import xla_cache_keys

    xla_cache_keys.install()


@pytest.fixture(autouse=True)
def _import_time_environment_kept():
    """Each test leaves the variables the scripts' imports read as it found them: after one that
    changed them (tf2onnx's import set TF_CPP_MIN_LOG_LEVEL once), every script its process
    starts runs afresh, not forked, and pays the imports (forked_scripts)."""
    before = forked_scripts.import_time(os.environ)
    yield
    changed = {name: value for name, value in forked_scripts.import_time(os.environ).items()
               if value != before.get(name)}
    assert not changed, "the test left os.environ changed: %s" % changed


@pytest.fixture(autouse=True)
def _absl_log_level():
    """Each test starts with absl's logger at its initial level (NOTSET: caplog's decides).
    TensorFlow's SavedModel writer sets it to FATAL and back to its effective level, WARNING
    where it was NOTSET (a script's, set by absl's --verbosity, comes back as it was): after an
    export in an earlier test or a module fixture, caplog would miss the INFO lines a test
    checks, depending on which tests ran before it in its process."""
    logging.getLogger("absl").setLevel(logging.NOTSET)


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
    if env.get("BERT_TESTS_FORK", "1") != "0":  # the scripts the command starts are forked too
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [
            str(ROOT / "tests" / "forking_site"), env.get("PYTHONPATH")]))
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


# pytest.ini runs the suite on 3 processes (pytest-xdist, `--dist loadgroup`). A test file runs on
# one of them, so its module-scoped fixtures are made once; tests that share a session fixture
# across files say so with `@pytest.mark.xdist_group(name)` (the quick demo: test_demo.py and
# test_readme.py; each task case of `task_exports`: test_onnx.py's and test_litert.py's tests of
# that case) and run on one process too. xdist hands the groups out in collection order, each
# to the first process free (pytest.ini turns off its reordering by number of tests), so they are
# sorted longest first, by the seconds each took in a suite run (GROUP_SECONDS), and the
# processes end together. A group not listed there (a new file) goes first. Each tier keeps its
# own seconds: the default tier's (`python -m pytest -q tests`) and the large tier's alone
# (`--run_large -m large`, as .ci/run runs it), since a file's large tests are not its default ones.
QUICK_DEMO_GROUP = "quick_demo"
GROUP_SECONDS = pathlib.Path(__file__).with_name("group_seconds.json")


PRELOAD = "torch,transformers.models.bert.modeling_bert"


def pytest_configure(config):
    # pytest's unraisable-exception plugin collects garbage five times as each process ends, to
    # report exceptions raised in finalizers; with TensorFlow loaded a collection takes about a
    # second, at the end of every worker. One collection still runs the finalizers of what the
    # tests left behind (and the plugin reports what was raised during a test as it ends). The
    # key is pytest's own (pytester sets it); a pytest without it keeps its default.
    from _pytest import unraisableexception

    key = getattr(unraisableexception, "gc_collect_iterations_key", None)
    if key is not None:
        config.stash[key] = 1
    # The large tier's comparisons import torch and transformers' BERT in many scripts (each bench,
    # its peer's process, an accelerator contender): about 7 s of CPU each, imported once instead
    # by the servers those scripts fork from (forked_scripts.PRELOAD_VARIABLE). With the values
    # the benches give their peers (bench/harness.py) for what those imports read: OpenMP's
    # threads wait passively (torch's libgomp reads it when loaded; spinning ones would take a
    # core another process needs), and Hugging Face offline (no test downloads). Set before
    # pytest-xdist starts its processes, which inherit them.
    if config.getoption("run_large") and optional_packages.installed("torch", "transformers"):
        for name, value in {forked_scripts.PRELOAD_VARIABLE: PRELOAD, "OMP_WAIT_POLICY": "PASSIVE",
                            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}.items():
            os.environ.setdefault(name, value)


def pytest_collection_finish(session):
    # What collection imported (TensorFlow, Keras, the project) is kept out of the garbage
    # collector's full collections, as the scripts keep theirs (`cli.freeze_imported_objects`).
    gc.collect()
    bert_runner.cli.freeze_imported_objects()


def pytest_addoption(parser):
    parser.addoption("--record-group-seconds", action="store_true",
                     help=f"write this tier's part of {GROUP_SECONDS.name}: the seconds each xdist "
                          "group took in this run (with pytest.ini's -n 3)")
    parser.addoption("--run_large", action="store_true",
                     help="also run the large tier: the tests marked `large` (tests/README.md)")


# The two tiers (tests/README.md), in KerasHub's form: tests marked `large` (the quick demo, the
# XLA-against-eager runs, the grids, multi-worker and killed runs, conversions, longer trainings)
# run only with --run_large; the default run proves fidelity and each script's main path.
LARGE_SKIP = pytest.mark.skip(reason="large tier: run with --run_large")


@pytest.fixture(scope="session")
def task_exports(tmp_path_factory):
    """test_onnx's `TaskExports`: each task's tiny run and its exports, made once a process."""
    from test_onnx import TaskExports

    return TaskExports(tmp_path_factory.mktemp("task_exports"))


def _group(item):
    mark = item.get_closest_marker("xdist_group")
    return mark.args[0] if mark.args else mark.kwargs.get("name", "default")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    run_large = config.getoption("run_large")
    for item in items:
        if not run_large and item.get_closest_marker("large") is not None:
            item.add_marker(LARGE_SKIP)
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    seconds = _recorded_seconds().get(_tier(config), {})
    items.sort(key=lambda item: -seconds.get(_group(item), float("inf")))  # stable


def _tier(config):
    return "large" if config.getoption("run_large") else "default"


def _recorded_seconds():
    """{tier: {group: seconds}} from GROUP_SECONDS."""
    return json.loads(GROUP_SECONDS.read_text()) if GROUP_SECONDS.exists() else {}


_group_seconds = collections.Counter()


def pytest_runtest_logreport(report):
    # In the xdist controller each report's node id ends in "@<group>".
    if "@" in report.nodeid:
        _group_seconds[report.nodeid.rsplit("@", 1)[1]] += report.duration


def pytest_sessionfinish(session):
    controller = not hasattr(session.config, "workerinput")
    if session.config.getoption("record_group_seconds") and controller and _group_seconds:
        recorded = _recorded_seconds()
        recorded[_tier(session.config)] = {
            group: round(seconds, 1) for group, seconds in sorted(_group_seconds.items())}
        GROUP_SECONDS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
