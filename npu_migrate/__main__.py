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


def _interrupted() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # stderr may be closed: the exit code still says it
        sys.stderr.write("npu-migrate: interrupted\n")
        sys.stderr.flush()
    sys.exit(EXIT_SIGINT)


if __name__ == "__main__":
    entry()
