"""pytest.ini's `--dist loadgroup` holds: each test file runs on one process (tests/conftest.py),
so its module fixtures are made once. A pytest/pytest-xdist pair that loses the groups (pytest 9.2
with xdist 3.8, tests/requirements.txt) would schedule every test alone and the suite would take
minutes longer, with nothing failing; this test fails instead."""
import pytest


def test_this_file_runs_as_one_group(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup (pytest.ini's -n 3)")
    assert request.node.nodeid.endswith("@tests/test_grouping.py"), (
        f"{request.node.nodeid}: pytest-xdist did not tag the test with its group; see "
        "tests/requirements.txt")
