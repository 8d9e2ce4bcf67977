"""The scripts the tests start run in a fork of a process that has imported TensorFlow.

Every script of the project imports TensorFlow, tensorflow-text and Keras before it does anything:
about 6 s of CPU on this project's 2-core CI machine, for each of the many scripts the suite
starts. `install()` (called by tests/conftest.py) makes `subprocess.run([sys.executable, ...])`
fork the script from `tests/script_server.py`, which has done those imports once (one server
for the session's pytest processes, started at the first script; scripts run side by side). The
test sees what subprocess.run gives: a CompletedProcess with the script's exit code and its stdout
and stderr (text or bytes, or stderr in stdout), or TimeoutExpired after `timeout`, the script's
process group killed. Likewise `subprocess.Popen` of a script whose outputs are pipes or DEVNULL
(`popen`): demo.py's stages, a test that signals a running script or runs several side by side.

A script under KERAS_BACKEND=jax (the large tier's JAX runs) forks from a second server, whose
imports ran under that backend (Keras imports JAX; no JAX backend starts before the fork).
Everything else goes to the real subprocess.run: other programs, other arguments (pass_fds, ...),
a help request (a script's --helpfull lists every flag defined, and importing TensorFlow before
the script defines some), and an environment that changes what the imports decide otherwise
(TensorFlow's and XLA's variables, PYTHONPATH). `BERT_TESTS_FORK=0`, in the session's environment
or a script's, starts scripts afresh (a script that must import nothing before it runs).
"""
import atexit
import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "script_server.py")
# Read when the server imports TensorFlow and Keras, or by the interpreter at its start: a script
# that needs other values than the server's must start afresh.
# (Devices, thread pools and TF_CONFIG are read later, when the script first runs TensorFlow.)
IMPORT_TIME = ("KERAS_BACKEND", "TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL",
               "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUTF8")
# Read by JAX's import too (its configuration's defaults), under KERAS_BACKEND=jax. XLA_FLAGS is
# read when a JAX backend starts, in the script.
JAX_IMPORT_TIME = ("JAX_PLATFORMS", "JAX_COMPILATION_CACHE_DIR", "JAX_COMPILATION_CACHE_MAX_SIZE")
# The packages the server also imports (comma-separated module names; tests/conftest.py names the
# large tier's comparison packages, torch and transformers' BERT, where they are installed), and
# what they read when imported: libgomp, which torch loads, its OpenMP settings; huggingface_hub
# its offline switches (the session sets the benches' values). A script with other values, or
# without the variable, forks from a server of its own, imported with them.
PRELOAD_VARIABLE = "BERT_TESTS_PRELOAD"
PRELOAD_IMPORT_TIME = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "HF_HUB_OFFLINE",
                       "TRANSFORMERS_OFFLINE")
# On PYTHONPATH for the README's demo command (conftest.run_quickstart_command), whose stages are
# forked too: left out of the import-time environment, so that they fork from the session's
# server instead of starting one of their own (which never has it either).
FORKING_SITE = os.path.join(os.path.dirname(SERVER), "forking_site")
FORK_HELP_VARIABLE = "BERT_TESTS_FORK_HELP"
SERVERS_VARIABLE = "BERT_TESTS_SCRIPT_SERVERS"
_HANDLED = {"cwd", "env", "input", "capture_output", "stdout", "stderr", "text", "timeout", "check",
            "universal_newlines", "encoding"}
_real_run = subprocess.run
_real_popen = subprocess.Popen


def _without_forking_site(env):
    """`env` with FORKING_SITE taken off its PYTHONPATH."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != FORKING_SITE]
    env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    return {**env, "PYTHONPATH": os.pathsep.join(paths)} if paths else env


def import_time(env):
    """{name: value} of `env`'s import-time variables (`IMPORT_TIME`, PRELOAD_VARIABLE,
    `JAX_IMPORT_TIME` under KERAS_BACKEND=jax, `PRELOAD_IMPORT_TIME` where PRELOAD_VARIABLE is
    set; None where unset)."""
    env = _without_forking_site(env)
    jax = env.get("KERAS_BACKEND") == "jax"
    preload = bool(env.get(PRELOAD_VARIABLE))
    return {name: env.get(name) for name in IMPORT_TIME + (PRELOAD_VARIABLE,)
            + (JAX_IMPORT_TIME if jax else ()) + (PRELOAD_IMPORT_TIME if preload else ())}


def _server_for(env):
    """The `_Server` a script run with `env` forks from: the session's imports, or the same
    under KERAS_BACKEND=jax or with other preloads (PRELOAD_VARIABLE, `PRELOAD_IMPORT_TIME`);
    None where anything else the imports read differs."""
    wanted, own = import_time(env), import_time(os.environ)
    if wanted["KERAS_BACKEND"] not in (own["KERAS_BACKEND"], "jax") or any(
            wanted[name] != own[name] for name in IMPORT_TIME if name != "KERAS_BACKEND"):
        return None
    key = json.dumps(wanted, sort_keys=True)
    if key not in _servers:
        _servers[key] = _Server(wanted)
    return _servers[key]


class _Server:
    """The script_server.py process for one import-time environment (`import_time`'s), shared by
    every process of the session that forks scripts with it (the pytest processes: one server for
    the session and one for its JAX runs) and started by the first that needs it. Scripts run
    side by side.

    Args:
      variables: the import-time environment's {name: value}: the server runs in the session's
        environment with these values (None: unset).
    """

    def __init__(self, variables):
        self.variables = variables

    def _environment(self):
        env = _without_forking_site(os.environ)
        for name, value in self.variables.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def _connect(self):
        """A new connection to the server, started here if it is not running."""
        key = hashlib.sha1(json.dumps(self.variables, sort_keys=True).encode())
        path = os.path.join(_servers_folder(), key.hexdigest()[:16] + ".sock")
        connection = _try_connect(path)
        if connection is not None:
            return connection
        with open(path + ".lock", "w") as lock:  # one process starts it; the others wait here
            fcntl.flock(lock, fcntl.LOCK_EX)
            connection = _try_connect(path)
            if connection is not None:
                return connection
            if os.path.exists(path):  # the socket of a server that has died
                os.remove(path)
            # Its own output to a file of its own: it outlives the process that starts it,
            # whose pipes (a test reading a script's output) it must not hold open.
            with open(path[:-len(".sock")] + ".log", "ab") as log:
                with open(os.path.join(_servers_folder(), "owner")) as f:
                    owner = f.read().strip()
                server = _real_popen([sys.executable, SERVER, path, owner],
                                     env=self._environment(),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     start_new_session=True)
            while not os.path.exists(path):  # it binds, listens, then gives the socket its name
                if server.poll() is not None:
                    raise RuntimeError(f"tests/script_server.py ended: {_log(path)}")
                time.sleep(0.02)
        connection = _try_connect(path)
        if connection is None:
            raise RuntimeError(f"tests/script_server.py does not answer: {_log(path)}")
        return connection

    def start(self, argv, cwd, env, stdin, stdout, stderr):
        """Forks `argv` (after the interpreter); returns (its pid, the connection on which
        `wait` reads its exit code)."""
        connection = _Connection(self._connect())
        request = dict(argv=argv, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr)
        connection.socket.sendall((json.dumps(request) + "\n").encode())
        return connection.read()["pid"], connection

    def run(self, argv, cwd, env, stdin, stdout, stderr, timeout):
        """Runs `argv` (after the interpreter) in a fork; returns its exit code."""
        pid, connection = self.start(argv, cwd, env, stdin, stdout, stderr)
        timer = None
        if timeout is not None:
            timer = threading.Timer(timeout, _kill_group, [pid])
            timer.start()
        try:
            returncode = connection.read()["returncode"]
        finally:
            connection.close()
            if timer is not None:
                timer.cancel()
        if timer is not None and timer.finished.is_set() and returncode == -signal.SIGKILL:
            raise subprocess.TimeoutExpired(argv, timeout)
        return returncode


class _Connection:
    """A connection to the server: one request, then its answers, a JSON line each."""

    def __init__(self, connection):
        self.socket = connection
        self._received = b""

    def read(self, block=True):
        """The next answer; None where `block` is False and it has not come yet."""
        while b"\n" not in self._received:
            if not block and not select.select([self.socket], [], [], 0)[0]:
                return None
            data = self.socket.recv(1 << 12)
            if not data:
                raise RuntimeError("tests/script_server.py ended")
            self._received += data
        line, self._received = self._received.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        self.socket.close()


def _try_connect(path):
    """A connection to the socket at `path`, or None where no server listens there."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
        return connection
    except (FileNotFoundError, ConnectionRefusedError):
        connection.close()
        return None


def _log(path):
    with open(path[:-len(".sock")] + ".log", errors="replace") as f:
        return f.read()[-3000:]


def _servers_folder():
    """The session's folder of server sockets, named in SERVERS_VARIABLE: made by the first
    process of the session that asks (the pytest-xdist controller, or pytest alone: `install`),
    which owns it (the servers exit when it ends) and removes it at exit; the processes it
    starts inherit the variable."""
    folder = os.environ.get(SERVERS_VARIABLE)
    if not folder or not os.path.isdir(folder):
        folder = tempfile.mkdtemp(prefix="bert-tests-scripts-")
        with open(os.path.join(folder, "owner"), "w") as f:
            f.write(str(os.getpid()))
        os.environ[SERVERS_VARIABLE] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_servers = {}


def _forkable(args, kwargs, handled=_HANDLED):
    """The `_Server` to fork the script `args` from, or None: not a script, or one to start
    afresh."""
    env = kwargs.get("env") or os.environ
    if "0" in (os.environ.get("BERT_TESTS_FORK"), env.get("BERT_TESTS_FORK")):
        return None
    if set(kwargs) - handled:
        return None
    if not isinstance(args, (list, tuple)) or len(args) < 2 or args[0] != sys.executable:
        return None
    if not (str(args[1]).endswith(".py") or (args[1] in ("-c", "-m") and len(args) > 2)):
        return None
    if (any(str(arg).startswith(("--help", "-?")) for arg in args)
            and env.get(FORK_HELP_VARIABLE) != "1"):
        # The help lists every defined flag, and TensorFlow's import defines some: forked only
        # for a test that reads no flag list (FORK_HELP_VARIABLE=1 in its environment).
        return None
    if kwargs.get("stdout") not in (None, subprocess.PIPE, subprocess.DEVNULL):
        return None
    if kwargs.get("stderr") not in (None, subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL):
        return None
    return _server_for(env)


def run(args, **kwargs):
    """`subprocess.run`, forking the scripts that `_forkable` accepts (module docstring)."""
    server = _forkable(args, kwargs)
    if server is None:
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
        returncode = server.run(
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
    """What `Popen` gives for a forked script whose stdout and stderr are pipes (stderr apart
    or in stdout) or DEVNULL: read as the script writes them; `poll`, `wait`, `communicate`,
    `send_signal`, `kill`; a context manager."""

    STREAMS = {subprocess.PIPE, subprocess.DEVNULL}  # stderr also STDOUT

    def __init__(self, args, kwargs, server):
        self.args = args
        self.returncode = None
        self._folder = tempfile.TemporaryDirectory(prefix="forked-script-")
        stdin = os.path.join(self._folder.name, "stdin")
        open(stdin, "wb").close()
        paths = {}
        for name in ("stdout", "stderr"):
            if kwargs.get(name) == subprocess.PIPE:
                paths[name] = os.path.join(self._folder.name, name)
                os.mkfifo(paths[name])  # the script writes it as it runs; EOF when it ends
        merged = kwargs.get("stderr") == subprocess.STDOUT
        self.pid, self._connection = server.start(
            [str(arg) for arg in args[1:]], str(kwargs.get("cwd") or os.getcwd()),
            dict(kwargs.get("env") or os.environ), stdin, paths.get("stdout", os.devnull),
            paths["stdout"] if merged else paths.get("stderr", os.devnull))
        text = kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding")
        # In the order the script opens them (each open waits for the other end).
        for name in ("stdout", "stderr"):
            stream = None
            if name in paths:
                stream = (open(paths[name], encoding=kwargs.get("encoding") or "utf-8",
                               errors="replace") if text else open(paths[name], "rb"))
            setattr(self, name, stream)

    def _ended(self, answer):
        self.returncode = answer["returncode"]
        self._connection.close()
        self._folder.cleanup()
        return self.returncode

    def wait(self, timeout=None):
        del timeout  # the tests and stage runners wait for the script's end
        if self.returncode is None:
            self._ended(self._connection.read())
        return self.returncode

    def poll(self):
        """The exit code once the script has ended, else None (without waiting)."""
        if self.returncode is None:
            answer = self._connection.read(block=False)
            if answer is not None:
                self._ended(answer)
        return self.returncode

    def communicate(self, input=None, timeout=None):
        """(stdout, stderr) as Popen's, once the script has ended: the piped one read to its
        end, None for the other."""
        del input, timeout  # no stdin; the script is waited for
        outputs = [None, None]

        def read(index, stream):
            outputs[index] = stream.read()

        # Both pipes read at once: a script blocked on a full one would never end.
        readers = [threading.Thread(target=read, args=(index, stream))
                   for index, stream in enumerate((self.stdout, self.stderr)) if stream is not None]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        self.wait()
        return tuple(outputs)

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
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


def popen(args, **kwargs):
    """`subprocess.Popen`, forking a script whose outputs are pipes or DEVNULL
    (`_ForkedProcess`): demo.py's stages, a test's signalled or side-by-side scripts; other calls
    go to the real Popen."""
    server = _forkable(args, kwargs, {"cwd", "env", "stdout", "stderr", "text",
                                      "universal_newlines", "encoding"})
    if (server is not None and kwargs.get("stdout") in _ForkedProcess.STREAMS
            and kwargs.get("stderr") in _ForkedProcess.STREAMS | {subprocess.STDOUT}):
        return _ForkedProcess(args, kwargs, server)
    return _real_popen(args, **kwargs)


def install():
    """Routes subprocess.run and subprocess.Popen through `run` and `popen` for this process
    (the pytest process), which owns the session's servers unless a process that started it
    does (`_servers_folder`)."""
    _servers_folder()
    subprocess.run = run
    subprocess.Popen = popen


def install_popen():
    """Routes subprocess.Popen through `popen` for this process (a script the tests start that
    starts scripts itself: tests/forking_site/sitecustomize.py)."""
    subprocess.Popen = popen
