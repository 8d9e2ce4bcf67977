"""Which script server a script forks from (tests/forked_scripts.py): the variables its imports
read decide; the servers are only looked up here, none is started."""
import os

import forked_scripts


def _server(monkeypatch, session, script):
    """The server a script with `script` over the session's `session` variables forks from."""
    monkeypatch.setattr(forked_scripts, "_servers", {})
    for name, value in session.items():
        monkeypatch.setenv(name, value)
    return forked_scripts._server_for({**os.environ, **script})


def test_scripts_fork_from_a_server_imported_with_their_preloads(monkeypatch):
    preload = {forked_scripts.PRELOAD_VARIABLE: "torch", "OMP_WAIT_POLICY": "PASSIVE"}
    own = _server(monkeypatch, preload, {})
    assert own.variables[forked_scripts.PRELOAD_VARIABLE] == "torch"
    assert own.variables["OMP_WAIT_POLICY"] == "PASSIVE"
    # Another OpenMP policy under the same preload: a server of its own, imported with it.
    other = _server(monkeypatch, preload, {"OMP_WAIT_POLICY": "ACTIVE"})
    assert other.variables["OMP_WAIT_POLICY"] == "ACTIVE"
    # A script without the variable: a server that preloads nothing (its environment drops it),
    # whatever the session's OpenMP policy, which nothing it imports reads.
    monkeypatch.setattr(forked_scripts, "_servers", {})
    bare = forked_scripts._server_for({k: v for k, v in os.environ.items()
                                       if k != forked_scripts.PRELOAD_VARIABLE})
    assert forked_scripts.PRELOAD_VARIABLE not in bare._environment()
    assert "OMP_WAIT_POLICY" not in bare.variables


def test_a_script_whose_tensorflow_variables_differ_starts_afresh(monkeypatch):
    assert _server(monkeypatch, {}, {"TF_ENABLE_ONEDNN_OPTS": "changed"}) is None
