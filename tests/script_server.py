"""The process the tests' scripts are forked from (tests/forked_scripts.py is its client).

It imports TensorFlow, tensorflow-text and Keras once, then reads one request per line on stdin
(JSON: argv, cwd, env and the paths of the files for stdin, stdout and stderr) and answers on
stdout, a JSON line each: `{"pid": N}` when the script's process has started, then
`{"returncode": R}` when it has ended. The script runs in a forked child, which is a process of its
own for everything the test can see (its own pid, environment, working directory, file descriptors
and process group) except that the imports are already done.

Only third-party modules are imported here, and no TensorFlow operation runs: the child creates
TensorFlow's runtime (threads, devices, thread-pool settings) itself, as a fresh process would.

    argv: ["path/to/script.py", args...]  the script, run as __main__
          ["-c", code, args...]           as `python -c`
          ["-m", module, args...]         as `python -m`
"""
import atexit
import json
import os
import runpy
import sys
import traceback

import absl.app  # noqa: F401
import absl.flags  # noqa: F401
import absl.logging  # noqa: F401
import keras  # noqa: F401
import numpy  # noqa: F401
import tensorflow  # noqa: F401
import tensorflow_text  # noqa: F401


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


def main():
    requests, answers = sys.stdin, sys.stdout
    # The children's output goes to their own files; nothing of theirs may reach the answers.
    sys.stdout = sys.stderr
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
