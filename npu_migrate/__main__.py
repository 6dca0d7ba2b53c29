"""The program's entry point (`npu-migrate`, `python -m npu_migrate`).

Importing the command line takes a moment (click, then the run's modules): a Ctrl-C then, or
while the last lines are printed, ended in a Python traceback, once with exit 0 (issue 30.10).
Here nothing is imported before the `try`, so any KeyboardInterrupt is one line and exit 130;
once the run has decided its exit code, a late Ctrl-C no longer changes it.
"""

import contextlib
import gc
import signal
import sys

EXIT_SIGINT = 130  # console.EXIT_SIGINT, not imported: importing is what may be interrupted


def entry() -> None:
    try:
        # What the command line imports lives as long as the process: the garbage collector would
        # only go through it again and again while it is imported (~30 young collections, 4-6 %
        # of the CPU of a warm run or of a one-file run). It is imported with the collector off,
        # then frozen out of its reach (as startup.long_lived does; startup.py's own imports too).
        gc.disable()
        try:
            from .startup import compile_dataclasses_once, compile_patterns_once, keep_rule_sets

            compiled = compile_dataclasses_once()  # (before the first dataclass: see startup.py)
            patterns = compile_patterns_once()
            kept_rules = keep_rule_sets()
            from .cli import main
        finally:
            gc.freeze()
            gc.enable()

        main(prog_name="npu-migrate")  # always ends in SystemExit
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit:
        try:  # what is still buffered is part of the result; a Ctrl-C past this point is too late
            with contextlib.suppress(Exception):  # (a closed pipe: Python reports it on exit, as before)
                sys.stdout.flush()
                sys.stderr.flush()
            compiled.save()  # (after the output: it is not part of the result)
            patterns.save()
            kept_rules.save()
        except KeyboardInterrupt:
            _interrupted()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise


def console() -> None:
    """The console script (`npu-migrate`) and `python -m npu_migrate`: `entry`, then the process
    ends as Python ends it, without taking its heap apart object by object. Python's exit waits
    for the threads that are not daemons, runs the `atexit` functions and flushes stdout and
    stderr, then frees every module and object one at a time, a tenth of a one-script or a
    small project's run (~100 M of ~1,300 M instructions) for memory the system takes back anyway.
    This does the first three, then `os._exit` with the run's code. Every file a run writes is
    written and closed before its exit code is decided (source.atomic_write); objects freed at the
    teardown hold nothing to write. Where the end is anything else -- an exit code that is not a
    number (Python prints it), a thread still running that is not a daemon, a stream that cannot
    be flushed (a closed pipe: Python reports it), a profiler or a tracer that writes at the end
    (cProfile, a debugger), `python -i` -- Python ends the process as usual. `entry` itself ends
    in SystemExit (a caller in the same process, tests/test_startup.py's probes, goes on)."""
    try:
        entry()
    except SystemExit as exc:
        code = exc.code
        if (code is None or type(code) is int) and _finished():
            import os

            os._exit(code or 0)
        raise


def _finished() -> bool:
    """Python's exit up to its teardown (see `console`): whether it is done and nothing is left
    that the teardown would do for anyone but the process itself."""
    import atexit

    if sys.getprofile() is not None or sys.gettrace() is not None or sys.flags.inspect:
        return False
    threading = sys.modules.get("threading")
    if threading is not None:
        main = threading.main_thread()
        if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
            return False
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # (a closed pipe, a Ctrl-C now: Python's own exit reports it)
        return False
    return True


def _interrupted() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # stderr may be closed: the exit code still says it
        sys.stderr.write("npu-migrate: interrupted\n")
        sys.stderr.flush()
    sys.exit(EXIT_SIGINT)


if __name__ == "__main__":
    console()
