"""One run at a time in an output_dir: `with output_lock.hold(output_dir): ...`.

Two runs in one directory overwrite each other's checkpoints, records and results, and run.json
ends up describing one of them while the weights are the other's. The lock is a file,
`output_dir/run.lock`, created with O_CREAT | O_EXCL (atomic on local file systems and on NFS v3
and later) and holding the holder's pid, host, start time and command line. A second run is
refused with those. A run killed with kill -9 leaves its lock behind; its successor on the same
host sees that the pid is gone (or now belongs to a process started later: pid reuse) and takes
the lock over, with a warning. A holder on another host cannot be checked from here: the message
says to delete the lock file once that run is known to be gone.

Object stores (`gs://`, `s3://`) have no atomic create-if-absent through `tf.io.gfile`: there
the run proceeds without a lock, with a warning.
"""
import contextlib
import datetime
import json
import os
import socket
import sys
import time
import uuid

from absl import logging

from bert_runner import stale_files

LOCK_FILE = "run.lock"


class OutputDirBusy(ValueError):
    """The output_dir is held by a run that is (or may be) still running."""


def _alive(holder):
    """Whether the holder recorded in a lock on this host still runs: its pid runs, and (where
    /proc says) started when the holder did, so a reused pid is not taken for the holder."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or not stale_files.process_is_running(pid):
        return False
    recorded, now = holder.get("process_started"), stale_files.process_start_time(pid)
    return recorded is None or now is None or abs(recorded - now) < 1.0


def _describe(holder):
    return (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: "
            f"{holder.get('command', '?')}")


def _read(path, attempts=20):
    """The holder recorded in the lock file at `path`; None when there is none; {} when it
    stays unreadable (a holder writes it right after creating it, so it is read again first)."""
    for _ in range(attempts):
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            time.sleep(0.05)
    return {}


def _create(path, holder):
    """Creates the lock file holding `holder`; False when it exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(holder, f, indent=2)
        f.write("\n")
    return True


def _take_over(path, stale):
    """Removes the lock of a run that is gone, unless another successor replaced it meanwhile.
    The rename moves whatever lock is there now; if it is not the stale one, it goes back."""
    moved = f"{path}.stale-{uuid.uuid4().hex}"
    try:
        os.rename(path, moved)
    except FileNotFoundError:
        return
    if _read(moved) != stale:
        with contextlib.suppress(FileExistsError):
            os.link(moved, path)
    os.remove(moved)


def acquire(output_dir):
    """Takes `output_dir`'s lock (see the module docstring); returns what `release` needs.

    Raises:
      OutputDirBusy: another run holds it (its pid, host, start and command named).
    """
    path = os.path.join(output_dir, LOCK_FILE)
    holder = {
        "pid": os.getpid(), "host": socket.gethostname(),
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "process_started": stale_files.process_start_time(os.getpid()),
        "token": uuid.uuid4().hex,
    }
    for _ in range(3):
        if _create(path, holder):
            return path, holder["token"]
        current = _read(path)
        if current is None:
            continue  # Released meanwhile.
        if current and current.get("host") != holder["host"]:
            raise OutputDirBusy(
                f"--output_dir={output_dir} is held by a run on another machine ({_describe(current)}). "
                f"Wait for it, or use another --output_dir; if that run is gone, delete {path}.")
        if current and _alive(current):
            raise OutputDirBusy(
                f"--output_dir={output_dir} is held by another run ({_describe(current)}). "
                f"Wait for it to finish, or use another --output_dir.")
        logging.warning("%s: taking over the lock of a run that no longer runs (%s)", path,
                        _describe(current) if current else "unreadable lock file")
        _take_over(path, current)
    raise OutputDirBusy(f"--output_dir={output_dir}: could not take {path}; other runs keep "
                        "taking it. Use another --output_dir.")


def release(lock):
    """Removes the lock file that `acquire` returned, if it is still this run's."""
    path, token = lock
    if (_read(path, attempts=1) or {}).get("token") == token:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


@contextlib.contextmanager
def hold(output_dir, enabled=True):
    """Holds `output_dir`'s lock for the block (`enabled=False`: a multi-worker non-chief, which
    shares the chief's directory, takes none)."""
    if not enabled:
        yield
        return
    if "://" in output_dir:
        logging.warning("--output_dir=%s: no lock on this file system; make sure no other run "
                        "writes there.", output_dir)
        yield
        return
    lock = acquire(output_dir)
    try:
        yield
    finally:
        release(lock)
