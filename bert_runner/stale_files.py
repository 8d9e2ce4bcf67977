"""Whether the writer of a temporary file is gone, so that a later run may remove the file.

Outputs are written under a temporary name and renamed when complete; a run killed outright
(SIGKILL, power loss, the machine's out-of-memory killer) leaves the temporary behind. A later run
removes such a file only when nothing can still be writing it:

* its name holds the writer's pid (`writer_is_gone`): that process no longer runs, or the process
  now holding that pid started after the file was last written (the pid was reused);
* a name without a pid (from a version that did not put it there): the file is older than the
  run that looks at it, and no process on this machine has it open (`held_open`; a memory-mapped
  file counts, as Python's mmap keeps its own descriptor).

Local paths only: a pid or an open descriptor says nothing about another machine's files.
"""
import os

_CLOCK_SLACK_S = 2.0  # /proc/stat's boot time has whole seconds; file times have their own grain


def process_is_running(pid):
    """Whether a process `pid` exists on this machine (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc (not Linux): it exists
    return stat[0] != "Z"


def _proc_stat(pid):
    """/proc/<pid>/stat's fields after the command name (state first), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start_time(pid):
    """When process `pid` started (seconds since the epoch), or None where /proc cannot say."""
    stat = _proc_stat(pid)
    if stat is None or len(stat) < 20:
        return None
    try:
        with open("/proc/stat") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + int(stat[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def writer_is_gone(path, pid):
    """Whether process `pid`, named in `path`'s temporary name as its writer, cannot be writing
    it any more: it does not run, or the process with that pid started after `path` was last
    modified (so it is another process, the pid reused). The current process is never gone."""
    if pid == os.getpid():
        return False
    if not process_is_running(pid):
        return True
    started = process_start_time(pid)
    try:
        modified = os.stat(path).st_mtime
    except FileNotFoundError:
        return False  # renamed or removed by its writer meanwhile
    return started is not None and started > modified + _CLOCK_SLACK_S


def held_open(path):
    """Whether a process on this machine has `path` open (or memory-mapped through a
    descriptor); None where /proc cannot say. Processes of other users are not seen."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    target = os.path.realpath(path)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fd_dir = "/proc/%s/fd" % entry
        try:
            descriptors = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in descriptors:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) == target:
                    return True
            except OSError:
                continue
    return False
