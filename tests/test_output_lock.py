"""bert_runner.output_lock: one run at a time in an output_dir; a killed run's lock is taken over,
a live holder's (here or on another host) is refused naming it. End to end: two run_swag runs
started into one directory (tests/test_run_swag.py)."""
import json
import logging
import os
import socket
import subprocess
import sys

import pytest

from bert_runner import output_lock, stale_files
from refusals import message


def _write_lock(directory, **holder):
    (directory / output_lock.LOCK_FILE).write_text(json.dumps(holder))


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_held_for_the_block_and_released_after(tmp_path):
    with output_lock.hold(str(tmp_path)):
        holder = json.loads((tmp_path / output_lock.LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        # This process is alive: a second run here is refused, naming the holder.
        with pytest.raises(output_lock.OutputDirBusy,
                           match=f"pid {os.getpid()} on {socket.gethostname()}") as busy:
            output_lock.acquire(str(tmp_path))
        assert message("output-dir-busy") in str(busy.value)
    assert not (tmp_path / output_lock.LOCK_FILE).exists()
    with pytest.raises(RuntimeError):
        with output_lock.hold(str(tmp_path)):
            raise RuntimeError("the run failed")
    assert not (tmp_path / output_lock.LOCK_FILE).exists()


def test_a_killed_runs_lock_is_taken_over(tmp_path, caplog):
    _write_lock(tmp_path, pid=_dead_pid(), host=socket.gethostname(), started="earlier",
                command="run_swag.py --learning_rate=2e-5")
    caplog.set_level(logging.WARNING)
    with output_lock.hold(str(tmp_path)):
        assert json.loads((tmp_path / output_lock.LOCK_FILE).read_text())["pid"] == os.getpid()
    assert message("output-dir-stale-lock") in caplog.text
    assert "run_swag.py --learning_rate=2e-5" in caplog.text
    assert not list(tmp_path.glob("*.stale-*"))


def test_a_reused_pid_is_not_the_holder(tmp_path):
    # This process's pid, recorded with another start time: the holder was an earlier process.
    _write_lock(tmp_path, pid=os.getpid(), host=socket.gethostname(), process_started=1.0)
    if stale_files.process_start_time(os.getpid()) is None:
        pytest.skip("no /proc: pid reuse cannot be told apart here")
    with output_lock.hold(str(tmp_path)):
        pass


def test_a_holder_on_another_host_is_refused_with_what_to_do(tmp_path):
    _write_lock(tmp_path, pid=_dead_pid(), host="other-host.example", started="2026-11-23T10:00",
                command="run_squad.py")
    with pytest.raises(output_lock.OutputDirBusy) as busy:
        output_lock.acquire(str(tmp_path))
    text = str(busy.value)
    assert "other-host.example" in text and "run_squad.py" in text
    assert f"delete {tmp_path / output_lock.LOCK_FILE}" in text
    # Refused, not taken: the holder's lock is as it was.
    assert "other-host.example" in (tmp_path / output_lock.LOCK_FILE).read_text()


def test_release_leaves_a_lock_that_is_no_longer_this_runs(tmp_path):
    lock = output_lock.acquire(str(tmp_path))
    _write_lock(tmp_path, pid=12345, host="successor", token="theirs")
    output_lock.release(lock)
    assert "successor" in (tmp_path / output_lock.LOCK_FILE).read_text()
