"""The scripts the tests start run in a fork of a process that has imported TensorFlow.

Every script of the project imports TensorFlow, tensorflow-text and Keras before it does anything:
about 6 s of CPU on this project's 2-core CI machine, for each of the many scripts the suite
starts. `install()` (called by tests/conftest.py) makes `subprocess.run([sys.executable, ...])`
fork the script from `tests/script_server.py`, which has done those imports once (a server per
pytest process, started at its first script). The test sees what subprocess.run gives: a
CompletedProcess with the script's exit code and its stdout and stderr (text or bytes, or stderr
in stdout), or TimeoutExpired after `timeout`, the script's process group killed. Likewise
`subprocess.Popen` of a script whose output is one stream or DEVNULL (`popen`): a test that
signals a running script, or demo.py's stage runner.

Everything else goes to the real subprocess.run: other programs, other arguments (pass_fds, ...),
a help request (a script's --helpfull lists every flag defined, and importing TensorFlow before
the script defines some), and an environment that changes what the imports decide (KERAS_BACKEND, TensorFlow's and XLA's
variables, PYTHONPATH). `BERT_TESTS_FORK=0` turns forking off: every script starts afresh.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "script_server.py")
# Read when the server imports TensorFlow and Keras, or by the interpreter at its start: a script
# that needs other values than the server's must start afresh.
# (Devices, thread pools and TF_CONFIG are read later, when the script first runs TensorFlow.)
_IMPORT_TIME = ("KERAS_BACKEND", "TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL",
                "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUTF8")
FORK_HELP_VARIABLE = "BERT_TESTS_FORK_HELP"
_HANDLED = {"cwd", "env", "input", "capture_output", "stdout", "stderr", "text", "timeout", "check",
            "universal_newlines", "encoding"}
_real_run = subprocess.run
_real_popen = subprocess.Popen


class _Server:
    """A script_server.py process, started at the first request; one request at a time."""

    def __init__(self):
        self._process = None
        self._lock = threading.Lock()

    def can_run(self, env):
        return all(env.get(name) == os.environ.get(name) for name in _IMPORT_TIME)

    def start(self, argv, cwd, env, stdin, stdout, stderr, blocking=True):
        """Forks `argv` (after the interpreter); returns its pid, or None where `blocking` is
        False and another script has the server. The server is this caller's until `wait` has
        read the script's exit code."""
        if not self._lock.acquire(blocking=blocking):
            return None
        try:
            if self._process is None or self._process.poll() is not None:
                self._process = subprocess.Popen(
                    [sys.executable, SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    text=True, env=dict(os.environ))
            request = dict(argv=argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout,
                           stderr=stderr)
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            return json.loads(self._process.stdout.readline())["pid"]
        except BaseException:
            self._lock.release()
            raise

    def wait(self):
        """The exit code of the script `start` forked, once it has ended."""
        try:
            answer = self._process.stdout.readline()
            if not answer:
                raise RuntimeError("tests/script_server.py ended; see the test's stderr")
            return json.loads(answer)["returncode"]
        finally:
            self._lock.release()

    def run(self, argv, cwd, env, stdin, stdout, stderr, timeout):
        """Runs `argv` (after the interpreter) in a fork; returns its exit code."""
        pid = self.start(argv, cwd, env, stdin, stdout, stderr)
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, _kill_group, [pid])
            timer.start()
        try:
            returncode = self.wait()
        finally:
            if timer is not None:
                timer.cancel()
        if timer is not None and timer.finished.is_set() and returncode == -signal.SIGKILL:
            raise subprocess.TimeoutExpired(argv, timeout)
        return returncode


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_server = _Server()


def _forkable(args, kwargs, handled=_HANDLED):
    if os.environ.get("BERT_TESTS_FORK", "1") == "0" or set(kwargs) - handled:
        return False
    if not isinstance(args, (list, tuple)) or len(args) < 2 or args[0] != sys.executable:
        return False
    if not (str(args[1]).endswith(".py") or (args[1] in ("-c", "-m") and len(args) > 2)):
        return False
    env = kwargs.get("env") or os.environ
    if (any(str(arg).startswith(("--help", "-?")) for arg in args)
            and env.get(FORK_HELP_VARIABLE) != "1"):
        # The help lists every defined flag, and TensorFlow's import defines some: forked only
        # for a test that reads no flag list (FORK_HELP_VARIABLE=1 in its environment).
        return False
    if kwargs.get("stdout") not in (None, subprocess.PIPE, subprocess.DEVNULL):
        return False
    if kwargs.get("stderr") not in (None, subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL):
        return False
    return _server.can_run(env)


def run(args, **kwargs):
    """`subprocess.run`, forking the scripts that `_forkable` accepts (module docstring)."""
    if not _forkable(args, kwargs):
        return _real_run(args, **kwargs)
    capture = kwargs.get("capture_output", False)
    want_out = capture or kwargs.get("stdout") == subprocess.PIPE
    want_err = capture or kwargs.get("stderr") == subprocess.PIPE
    merged = kwargs.get("stderr") == subprocess.STDOUT
    text = kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding")
    with tempfile.TemporaryDirectory(prefix="forked-script-") as folder:
        stdin = os.path.join(folder, "stdin")
        data = kwargs.get("input")
        with open(stdin, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else (data or b""))
        out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
        open(out, "wb").close()
        open(err, "wb").close()
        returncode = _server.run(
            [str(arg) for arg in args[1:]], str(kwargs.get("cwd") or os.getcwd()),
            dict(kwargs.get("env") or os.environ), stdin, out, out if merged else err,
            kwargs.get("timeout"))
        encoding = kwargs.get("encoding")
        stdout = _output(out, want_out or merged, kwargs.get("stdout"), sys.stdout, text, encoding)
        stderr = _output(err, want_err, kwargs.get("stderr"), sys.stderr, text, encoding)
    result = subprocess.CompletedProcess(list(args), returncode, stdout, stderr)
    if kwargs.get("check"):
        result.check_returncode()
    return result


def _output(path, wanted, redirect, stream, text, encoding):
    """What subprocess.run gives of one output: its contents when captured (text with universal
    newlines, as subprocess's), else None after it went to the test's `stream` (not captured) or
    nowhere (DEVNULL, or STDOUT: it is in the other file)."""
    with open(path, "rb") as f:
        data = f.read()
    decoded = data.decode(encoding or "utf-8", errors="replace")
    if not wanted:
        if redirect is None:
            stream.write(decoded)
        return None
    return decoded.replace("\r\n", "\n").replace("\r", "\n") if text else data


class _ForkedProcess:
    """What `Popen` gives for a forked script: its output read as the script writes it (one
    stream, stdout a pipe with stderr in it: what a stage runner reads) or sent to DEVNULL (a
    script a test signals); `poll`, `wait`, `send_signal`, `kill`; a context manager."""

    def __init__(self, pid, args, output, text, encoding):
        """`pid`: the forked script's; `output`: the FIFO it writes, or None (DEVNULL)."""
        self.args = args
        self.pid = pid
        self.returncode = None
        self.stdout = None
        if output is not None:
            self.stdout = (open(output, encoding=encoding or "utf-8", errors="replace") if text
                           else open(output, "rb"))

    @classmethod
    def start(cls, args, kwargs):
        """The script forked, or None where the server runs another script (a test that runs
        one script while it holds another: that one starts afresh)."""
        folder = tempfile.TemporaryDirectory(prefix="forked-script-")
        stdin, output = (os.path.join(folder.name, name) for name in ("stdin", "output"))
        open(stdin, "wb").close()
        if kwargs.get("stdout") == subprocess.PIPE:
            os.mkfifo(output)  # the script writes it as it runs; EOF when it ends
            streams = (output, output)
        else:
            output, streams = None, (os.devnull, os.devnull)
        pid = _server.start(
            [str(arg) for arg in args[1:]], str(kwargs.get("cwd") or os.getcwd()),
            dict(kwargs.get("env") or os.environ), stdin, *streams, blocking=False)
        if pid is None:
            folder.cleanup()
            return None
        process = cls(pid, args, output,
                      kwargs.get("text") or kwargs.get("universal_newlines")
                      or kwargs.get("encoding"), kwargs.get("encoding"))
        process._folder = folder
        return process

    def wait(self, timeout=None):
        del timeout  # the tests and stage runners wait for the script's end
        if self.returncode is None:
            self.returncode = _server.wait()
            self._folder.cleanup()
        return self.returncode

    def poll(self):
        """The exit code once the script has ended, else None (without waiting). The server
        reaps its child at once, so an ended script's pid is gone (or a zombie for a moment)."""
        if self.returncode is None:
            try:
                with open(f"/proc/{self.pid}/stat") as f:
                    running = f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except (FileNotFoundError, ProcessLookupError):
                running = False
            if running:
                return None
        return self.wait()

    def communicate(self, input=None, timeout=None):
        """(the output read to its end, None) as Popen's, once the script has ended."""
        del input, timeout  # no stdin; the script is waited for
        output = self.stdout.read() if self.stdout is not None else None
        self.wait()
        return output, None

    def send_signal(self, sig):
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        if self.returncode is None:
            _kill_group(self.pid)

    terminate = kill

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.stdout is not None:
            self.stdout.close()
        self.wait()


def popen(args, **kwargs):
    """`subprocess.Popen`, forking a script whose output is read as one stream (stdout a pipe,
    stderr into it: what demo.py does for each stage) or goes nowhere (stdout and stderr
    DEVNULL: a test that signals the script); other calls, and a script started while another
    forked one runs, go to the real Popen."""
    streams = (kwargs.get("stdout"), kwargs.get("stderr"))
    if (_forkable(args, kwargs, {"cwd", "env", "stdout", "stderr", "text", "universal_newlines",
                                 "encoding"})
            and streams in ((subprocess.PIPE, subprocess.STDOUT),
                            (subprocess.DEVNULL, subprocess.DEVNULL))):
        process = _ForkedProcess.start(args, kwargs)
        if process is not None:
            return process
    return _real_popen(args, **kwargs)


def install():
    """Routes subprocess.run and subprocess.Popen through `run` and `popen` for this process
    (the pytest process)."""
    subprocess.run = run
    subprocess.Popen = popen


def install_popen():
    """Routes subprocess.Popen through `popen` for this process (a script the tests start that
    starts scripts itself: tests/forking_site/sitecustomize.py)."""
    subprocess.Popen = popen
