"""Every test gets its own AGENTMAIL_HOME and no inherited identity: hermetic by default."""

from __future__ import annotations

import gc
import io
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, settings

from agentmail import model
from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry

from .depth import LOAD_CHECKS, examples

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

# A property test that names no max_examples draws Hypothesis's 100 under CI, fewer in the
# quick run (tests/depth.py). No deadline and no health check that measures the machine: the
# suite passes on a busy machine as on a quiet one (a test's own list goes through suppressed()).
settings.register_profile("agentmail", max_examples=examples(100), deadline=None, suppress_health_check=LOAD_CHECKS)
# A mutation run (tests/mutate.py) wants a failure, not its smallest example: no shrinking.
settings.register_profile(
    "mutation", parent=settings.get_profile("agentmail"), phases=[Phase.explicit, Phase.reuse, Phase.generate]
)
settings.load_profile("mutation" if os.environ.get("AGENTMAIL_MUTATION") else "agentmail")


def _coverage_floors() -> dict[str, float]:
    import tomllib

    data = tomllib.loads(_PYPROJECT.read_text())
    floors = data.get("tool", {}).get("agentmail", {}).get("coverage", {})
    return {str(k): float(v) for k, v in floors.items()}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[object]:
    """After pytest-cov has combined its data (its wrapper is inside this one): each trust-core
    module's branch coverage against its floor in pyproject.toml; one below fails the run."""
    result = yield
    plugin = session.config.pluginmanager.getplugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    if controller is None or getattr(plugin, "cov_total", None) is None or session.testsfailed:
        return result  # coverage off (--no-cov), or a failing run: the failure says enough
    coverage, root = controller.cov, _PYPROJECT.parent / "agentmail"
    lines, low = [], []
    for module, floor in sorted(_coverage_floors().items()):
        measured = coverage.report(include=[str(root / module)], file=io.StringIO())
        lines.append(f"  {module:<22} {measured:5.1f}%  (floor {floor:g}%)")
        if measured < floor:
            low.append(module)
    # Only the whole suite (the test command, no paths given) is held to the floors: one test file
    # run while iterating covers little and says nothing about the suite.
    whole = session.config.args_source == pytest.Config.ArgsSource.TESTPATHS and not session.config.option.keyword
    enforced = "enforced" if whole else "not enforced: a subset of the tests ran"
    _FLOOR_REPORT[:] = [f"trust-core coverage floors ({enforced})", *lines]
    if low and whole:
        _FLOOR_REPORT.append(f"ERROR: coverage under its floor: {', '.join(low)}")
        session.testsfailed += 1
    return result


_FLOOR_REPORT: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The floors, printed under pytest-cov's per-module table."""
    if _FLOOR_REPORT:
        terminalreporter.write_sep("=", _FLOOR_REPORT[0])
        for line in _FLOOR_REPORT[1:]:
            terminalreporter.write_line(line, red=line.startswith("ERROR"), bold=line.startswith("ERROR"))


_ENV = (
    "AGENTMAIL_HOME",
    "AGENTMAIL_REGISTRY",
    "AGENTMAIL_PLATFORM",
    "AGENTMAIL_AGENT",
    "AGENTMAIL_DKIM_KEY",
    "AGENTMAIL_USERNAME",
    "AGENTMAIL_PASSWORD",
    "AGENTMAIL_PASSWORD_CMD",
    "AGENTMAIL_PASSWORD_KEYRING",
    "AGENTMAIL_MCP_SAVE_DIR",
)


_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE)  # SIGALRM: pytest-timeout's


def _sockets() -> set[str]:
    """The sockets this process holds open (Linux: /proc/self/fd links read ``socket:[inode]``)."""
    found = set()
    try:
        names = os.listdir("/proc/self/fd")
    except FileNotFoundError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # pytest's own, per phase


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything alive once the tests are collected (pytest, the libraries, Hypothesis) is moved
    out of the collector's sight: the leak check's ``gc.collect()`` then walks only what the test
    itself made, not the whole process (that walk was most of the suite's time)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """A test leaves the process as it found it: no signal handler, thread, socket or environment
    variable of its own survives it, and nothing it opened is left for the garbage collector to
    close (ResourceWarning). Torn down after ``home`` and monkeypatch have undone their part."""
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    threads = set(threading.enumerate())
    environ = _environ()
    # The last test's garbage goes now, and what outlived it (caches, modules it imported) joins
    # the frozen generation, so this test's collections walk only what it makes. Not frozen at
    # the last test's teardown: pytest still held its fixtures then, and a fixture frozen in a
    # reference cycle would never be collected (its file descriptors kept open for good).
    gc.collect()
    gc.freeze()
    sockets = _sockets()
    yield
    problems: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    problems += [f"ResourceWarning: {w.message}" for w in caught if issubclass(w.category, ResourceWarning)]
    for number, handler in handlers.items():
        if signal.getsignal(number) != handler:
            problems.append(f"the handler of {signal.Signals(number).name} was left changed")
            signal.signal(number, handler)
    deadline = time.monotonic() + 10  # a thread told to stop may need a moment on a loaded machine
    for thread in set(threading.enumerate()) - threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            problems.append(f"thread {thread.name} still runs")
    now = _environ()
    if now != environ:
        changed = sorted(k for k in set(now) | set(environ) if now.get(k) != environ.get(k))
        problems.append(f"environment changed: {', '.join(changed)}")
        for name in changed:
            if name in environ:
                os.environ[name] = environ[name]
            else:
                del os.environ[name]
    leaked = _sockets() - sockets
    if leaked:
        problems.append(f"{len(leaked)} socket(s) left open")
    if problems:
        pytest.fail("the test leaked: " + "; ".join(problems), pytrace=False)


@pytest.fixture(autouse=True)
def home(no_leaks: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENTMAIL_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    yield home
    # Ids never go back within a process (monotonic ULIDs): a test that moved the clock ahead
    # would otherwise hand every later test of this worker ids from its future.
    model._last_ulid = (0, 0)


class Cli:
    """The command line run in this process: ``cli("--as", "alpha", "inbox")`` gives
    (exit code, stdout, stderr), the output captured by pytest's ``capsys``."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        from agentmail.cli.app import main

        code = main(list(args))
        out, err = self._capsys.readouterr()
        return code, out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """The one CLI runner every test file uses (it was nine copies of a ``run`` helper)."""
    return Cli(capsys)


@pytest.fixture
def registry(home: Path) -> Registry:
    # No hourly new-thread cap here: many tests open dozens of threads (test_approving pins it).
    return bus.init(
        home, home / "registry", ["alpha", "beta"], domain="bus.test", endpoints={"new_threads_per_hour": 0}
    )


@pytest.fixture
def alpha(registry: Registry, home: Path) -> AgentMail:
    return AgentMail(registry, Identity("alpha"), home)


@pytest.fixture
def beta(registry: Registry, home: Path) -> AgentMail:
    return AgentMail(registry, Identity("beta"), home)


OPENER = """\
I am the agent of alpha (billing); we call beta's /quota endpoint for every invoice.
Reproduction: `curl -s https://beta.example/quota?id=7` returns status 500 with the output
"KeyError: 'plan'" since version 2.4.1 (2026-11-28). Expected 200 per the documented contract.
Blast radius: all invoices for users on the free plan. Please fix or tell us the new contract.
"""


def make_signed_letters(sender: AgentMail, to: str, n: int, label: str) -> list[tuple[str, bytes]]:
    """``n`` rendered, DKIM-signed letters (Message-ID, raw), each opening its own thread."""
    from agentmail.model import new_thread_id
    from agentmail.stages.compose import Draft, compose

    recipient = sender.registry.get(to)
    letters = []
    for i in range(n):
        letter, raw = compose(
            sender.registry,
            sender.home,
            sender.me.platform,
            Draft(recipient.name, "question", new_thread_id(), f"{label} letter {i}", f"letter {i} of {n}\n"),
        )
        letters.append((letter.message_id, raw))
    return letters


def eventually(condition: Callable[[], bool], within: float = 60.0) -> bool:
    """Poll ``condition`` until it holds or ``within`` seconds pass (a margin, never the assertion)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
