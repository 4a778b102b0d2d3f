"""The ``agentmail`` command and ``python -m agentmail``: the entry point, before anything loads.

A Ctrl-C while the command's modules are still being imported (the first tens of milliseconds)
reaches no handler of ``cli.main``: it is caught here, so it too ends in one line and exit 130.
Nothing is imported here but ``sys``: start-up time is a measured figure (benchmarks, 3a/3b).
"""

import sys

# A command's start makes some 25,000 objects that live as long as it does (its modules, classes
# and functions), with hardly a cycle among them: collecting every 700 new objects walked them
# all twice, for nothing. Every 50,000 new objects, a command that runs on (wait, watch, serve,
# a long sync) still collects, and a short one never has to.
START_THRESHOLD = 50_000


def run() -> None:
    try:
        import gc  # built in, yet not loaded before the package: imported inside the guard too

        gc.set_threshold(START_THRESHOLD, *gc.get_threshold()[1:])
        from .cli.app import main

        code = main()
        # What is left is the interpreter's to free as it exits: every module, class and function.
        # Its collections at exit would walk all of them for the few cycles among them, a large
        # part of a short command's exit; frozen, they are left to the exit (files are closed).
        gc.freeze()
    except KeyboardInterrupt:
        sys.stderr.write("agentmail: interrupted\n")
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    run()
