"""The process the tests' scripts are forked from (tests/forked_scripts.py is its client).

    python tests/script_server.py SOCKET OWNER_PID

It imports TensorFlow, tensorflow-text and Keras once, then listens on the Unix socket SOCKET:
each connection brings one request (a JSON line: argv, cwd, env and the paths of the files for
stdin, stdout and stderr) and gets two answers, a JSON line each: `{"pid": N}` when the script's
process has started, then `{"returncode": R}` when it has ended. Scripts run side by side (the
workers of a multi-worker test, several pytest processes), each in a forked child, which is a
process of its own for everything the test can see (its own pid, environment, working directory,
file descriptors, signal handlers and process group) except that the imports are already done.
The server exits when process OWNER_PID (the pytest session) has ended.

With BERT_TESTS_SCRIPT_TIMES=FILE in the session's environment, each script's end appends a JSON
line to FILE: {"argv", "cwd", "seconds" (wall), "cpu_seconds" (its own and its waited-for
children's)}, which says where the suite's script time goes.

Only third-party modules are imported here (and tests/xla_cache_keys.py installed, so that the
scripts' compiled kernels are shared through the session's XLA cache); no TensorFlow operation
runs: the child creates TensorFlow's runtime (threads, devices, thread-pool settings) itself, as
a fresh process would. The server is one thread (a fork copies only the calling thread: no other
thread's lock can be held in the child); it learns of its children's ends through SIGCHLD.

    argv: ["path/to/script.py", args...]  the script, run as __main__
          ["-c", code, args...]           as `python -c`
          ["-m", module, args...]         as `python -m`
"""
import atexit
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import time
import traceback

import absl.app  # noqa: F401
import absl.flags  # noqa: F401
import absl.logging  # noqa: F401
import keras  # noqa: F401
import numpy  # noqa: F401
import tensorflow  # noqa: F401
import tensorflow_text  # noqa: F401

import xla_cache_keys

xla_cache_keys.install()
# And the packages the session names (forked_scripts.PRELOAD_VARIABLE): imports, no operation.
for _module in filter(None, os.environ.get("BERT_TESTS_PRELOAD", "").split(",")):
    importlib.import_module(_module)


def _run_as_main(argv):
    """Runs `argv` as the Python command line `python *argv` would; returns its exit code."""
    kind, target = (argv[0], argv[1]) if argv[0] in ("-c", "-m") else ("script", argv[0])
    sys.argv = [target if kind == "script" else kind] + argv[(1 if kind == "script" else 2):]
    if kind == "-c":
        sys.path[0] = ""
        code = compile(target, "<string>", "exec")
        run = lambda: exec(code, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: E731
    elif kind == "-m":
        sys.path[0] = os.getcwd()
        run = lambda: runpy.run_module(target, run_name="__main__", alter_sys=True)  # noqa: E731
    else:
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        run = lambda: runpy.run_path(target, run_name="__main__")  # noqa: E731
    try:
        run()
        return 0
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - as the interpreter: a traceback and exit code 1
        traceback.print_exc()
        return 1


def _child(request):
    """In the forked child: becomes the script's process, runs it, and exits with its code."""
    os.setsid()  # its own process group, so that a timeout kills what it started too
    for fd, (path, mode) in enumerate([(request["stdin"], os.O_RDONLY),
                                       (request["stdout"], os.O_WRONLY | os.O_APPEND),
                                       (request["stderr"], os.O_WRONLY | os.O_APPEND)]):
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    # The server's own stream objects write to descriptors 1 and 2, now the script's files (as
    # do the handlers that absl.logging made at import); stdin needs a reader of the new fd 0.
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    sys.stdin = open(0, encoding="utf-8", closefd=False)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    code = 1
    try:
        code = _run_as_main(request["argv"])
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def main():
    path, owner = sys.argv[1], int(sys.argv[2])
    # The children's output goes to their own files; nothing else may write to the descriptors.
    sys.stdout = sys.stderr
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.replace(path + ".tmp", path)  # clients connect once it listens
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select below
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    received = {}  # connection -> the bytes of its request so far
    running = {}  # pid -> (the connection that asked for it, its request, its start time)
    times_file = os.environ.get("BERT_TESTS_SCRIPT_TIMES")

    def start(connection, request):
        selector.unregister(connection)
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            selector.close()
            os.close(wake_read)
            os.close(wake_write)
            for sock in (listener, connection, *received, *(c for c, _, _ in running.values())):
                sock.close()
            _child(request)
        running[pid] = (connection, request, time.monotonic())
        _answer(connection, {"pid": pid})

    while _alive(owner):
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is listener:
                connection, _ = listener.accept()
                received[connection] = b""
                selector.register(connection, selectors.EVENT_READ)
            elif key.fileobj == wake_read:
                while True:
                    try:
                        if not os.read(wake_read, 4096):
                            break
                    except BlockingIOError:
                        break
            else:
                connection = key.fileobj
                data = connection.recv(1 << 16)
                received[connection] += data
                if not data:  # the client left before asking
                    selector.unregister(connection)
                    del received[connection]
                    connection.close()
                elif b"\n" in received[connection]:
                    request = json.loads(received.pop(connection).split(b"\n", 1)[0])
                    start(connection, request)
        while running:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid not in running:
                continue
            connection, request, started = running.pop(pid)
            _answer(connection, {"returncode": os.waitstatus_to_exitcode(status)})
            connection.close()
            if times_file:
                with open(times_file, "a", encoding="utf-8") as times:
                    times.write(json.dumps({
                        "argv": request["argv"], "cwd": request["cwd"],
                        "seconds": round(time.monotonic() - started, 3),
                        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3)}) + "\n")


def _answer(connection, message):
    try:
        connection.sendall((json.dumps(message) + "\n").encode())
    except OSError:  # the client has gone (a test killed by its timeout): nothing to tell
        pass


if __name__ == "__main__":
    main()
