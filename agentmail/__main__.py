"""The ``agentmail`` command and ``python -m agentmail``: the entry point, before anything loads.

A Ctrl-C while the command's modules are still being imported (the first tens of milliseconds)
reaches no handler of ``cli.main``: it is caught here, so it too ends in one line and exit 130.
Nothing is imported here but ``sys``: start-up time is a measured figure (benchmarks, 3a/3b).
"""

import sys


def run() -> None:
    try:
        from .cli.app import main

        code = main()
    except KeyboardInterrupt:
        sys.stderr.write("agentmail: interrupted\n")
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    run()
