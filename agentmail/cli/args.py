"""The command line's grammar, on the standard library's argparse (importing click was
18 ms of a 50 ms ``inbox --no-sync``; argparse takes 1.4 ms).

A command is a function declared with decorators beside it (``@group.command()``, ``@option``,
``@argument``), and its parser is built only when that command runs or shows its help: a start
pays for one command's options, not for all ~180. Usage errors raise ``UsageError`` (exit 2, one
line that says where the help is); ``--help`` and ``--version`` raise ``Exit(0)`` after printing.

Only argparse's public API is used, and its own words and layout: ``error`` and ``exit`` are
overridden as documented (an error is raised, never ``sys.exit``), help is
``RawDescriptionHelpFormatter`` (a docstring printed as written, options wrapped by argparse), a
group's commands listed in its epilog.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, NoReturn, TypeVar

from ..errors import BadInput

F = TypeVar("F", bound=Callable[..., Any])


class UsageError(BadInput):
    """The arguments do not parse (exit 2)."""


class Exit(Exception):
    """Help or version was printed: end with this code, nothing else runs."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def echo(message: object = "", err: bool = False) -> None:
    """One line to stdout (or stderr), flushed: output interleaves as it is written."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{message}\n")
    stream.flush()


# --- declarations -------------------------------------------------------------------------------


class _Param:
    """An option or argument as declared, added to a parser when its command needs one.

    ``into_ctx`` names an attribute of the command's context object that a given value is stored
    in instead of being passed to the function (``--json`` after the command name)."""

    __slots__ = ("decls", "attrs")

    def __init__(self, decls: tuple[str, ...], attrs: dict[str, Any]) -> None:
        self.decls, self.attrs = decls, attrs

    @property
    def dest(self) -> str:
        names = [d for d in self.decls if not d.startswith("-")]
        if names:
            return names[0]
        longest = max(self.decls, key=lambda d: (d.startswith("--"), len(d)))
        return longest.lstrip("-").replace("-", "_")

    def add_to(self, parser: _Parser) -> None:
        attrs = dict(self.attrs)
        attrs.pop("into_ctx", None)
        help_text = attrs.pop("help", None)
        if attrs.pop("show_default", False) and attrs.get("default") is not None:
            help_text = f"{help_text or ''} (default: {attrs['default']})".lstrip()
        if attrs.pop("hidden", False):
            help_text = argparse.SUPPRESS
        elif help_text is not None:
            help_text = help_text.replace("%", "%%")  # argparse %-formats help strings
        flags = [d for d in self.decls if d.startswith("-")]
        if not flags:  # an argument
            nargs = attrs.pop("nargs", None)
            required = attrs.pop("required", nargs != -1 and "default" not in attrs)
            if nargs == -1:
                attrs["nargs"] = "+" if required else "*"
            elif not required:
                attrs["nargs"] = "?"
            attrs.setdefault("metavar", self.dest.upper())
            parser.declare(self.dest, help=help_text, **attrs)
            return
        if attrs.pop("is_flag", False):
            attrs["action"] = "store_true"
        elif attrs.pop("multiple", False):
            attrs["action"] = "append"
        parser.declare(*flags, dest=self.dest, help=help_text, **attrs)


def _declare(kind: str) -> Callable[..., Callable[[F], F]]:
    def declare(*decls: str, **attrs: Any) -> Callable[[F], F]:
        if kind == "argument" and decls[0].startswith("-"):
            raise TypeError(f"an argument is named, not flagged: {decls}")

        def decorator(func: F) -> F:
            # decorators run bottom-up: inserting first keeps the order they are written in
            func.__dict__.setdefault("__cli_params__", []).insert(0, _Param(decls, attrs))
            return func

        return decorator

    return declare


option = _declare("option")
argument = _declare("argument")


def at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer type for an option: at least ``low`` (and at most ``high``)."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} is not {bound}")
        return value

    return number


def seconds(text: str) -> float:
    """A duration option (``--timeout S``): a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds from 0 up")
    return value


def duration(text: str) -> float:
    """A window option (``keygen --rotate 7d``) in seconds: ``ages.duration``'s grammar and words."""
    from .. import ages  # with datetime: only for a window typed, never on --help

    try:
        return float(ages.duration(text, "window"))
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# --- commands and groups ------------------------------------------------------------------------


def _doc(text: str | None) -> str:
    """A docstring without its indentation (``inspect.cleandoc``, whose import brings ast and
    dis into every start)."""
    import textwrap

    first, _, rest = (text or "").expandtabs().partition("\n")
    return f"{first.strip()}\n{textwrap.dedent(rest)}".strip()


class Command:
    """A function run with the context object and its parsed options as keywords."""

    def __init__(self, name: str, func: Callable[..., Any], help_text: str | None) -> None:
        self.name, self.func, self.help_text = name, func, help_text

    @property
    def help(self) -> str:
        return _doc(self.help_text if self.help_text is not None else self.func.__doc__)

    @property
    def params(self) -> list[_Param]:
        params: list[_Param] = self.func.__dict__.get("__cli_params__", [])
        return params

    def summary(self) -> str:
        return self.help.split("\n\n")[0].replace("\n", " ")

    def texts(self) -> tuple[str, str]:
        """The help's description and epilog (read only for help: docstrings cost a start)."""
        return self.help, ""

    def parser(self, prog: str) -> _Parser:
        parser = _Parser(prog, self.texts)
        for param in self.params:
            param.add_to(parser)
        return parser

    def run(self, argv: Sequence[str], prog: str, ctx: Any) -> Any:
        command, keywords = self.resolve(argv, prog, ctx)
        return command.func(ctx, **keywords)

    def resolve(self, argv: Sequence[str], prog: str, ctx: Any) -> tuple[Command, dict[str, Any]]:
        """The command ``argv`` names and its keywords, parsed; nothing is run."""
        parser = self.parser(prog)
        try:
            values, extra = parser.parse_known_intermixed_args(argv)
        except UsageError:
            parser.fail_on_unknown(argv)  # an unknown option explains a missing one best
            raise
        if extra:
            parser.fail_extra(extra)
        return self, _keywords(self.params, vars(values), ctx)


def _keywords(params: list[_Param], values: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """The parsed values as the function's keywords; ``into_ctx`` ones stored on ``ctx``."""
    for param in params:
        value = values.get(param.dest)
        if isinstance(value, list):
            values[param.dest] = value = tuple(value)
        elif value is None and param.attrs.get("multiple"):
            values[param.dest] = value = ()
        target = param.attrs.get("into_ctx")
        if target:
            del values[param.dest]
            if value:
                setattr(ctx, target, value)
    return values


class Commands:
    """The commands a module declares (``commands = Commands()``, then ``@commands.command()``
    on each function), for the group that takes them in: ``Group(..., parts=[commands])``."""

    def __init__(self) -> None:
        self.commands: dict[str, Command] = {}

    def command(self, name: str | None = None, help: str | None = None) -> Callable[[F], F]:  # noqa: A002
        def decorator(func: F) -> F:
            command = Command(name or func.__name__.replace("_", "-"), func, help)
            self.commands[command.name] = command
            return func

        return decorator

    def group(self, name: str | None = None) -> Callable[[Callable[..., Any]], Group]:
        def decorator(func: Callable[..., Any]) -> Group:
            group = Group(name or func.__name__, func)
            self.commands[group.name] = group
            return group

        return decorator


class Group(Command, Commands):
    """A command of commands: ``agentmail``, ``agentmail bus``, ``agentmail hook``."""

    def __init__(self, name: str, func: Callable[..., Any], help_text: str | None = None, epilog: str = "",
                 parts: Sequence[Commands] = ()) -> None:  # fmt: skip
        Command.__init__(self, name, func, help_text)
        Commands.__init__(self)
        self.epilog = epilog
        for part in parts:
            clash = set(part.commands) & set(self.commands)
            if clash:
                raise ValueError(f"commands declared twice: {sorted(clash)}")
            self.commands.update(part.commands)

    def texts(self) -> tuple[str, str]:
        listing = self._listing()
        return self.help, f"{listing}\n\n{_doc(self.epilog)}" if self.epilog else listing

    def parser(self, prog: str) -> _Parser:
        parser = _Parser(prog, self.texts)
        for param in self.params:
            param.add_to(parser)
        parser.declare("command", nargs=argparse.PARSER, help="one of the commands below, and its arguments")
        return parser

    def _listing(self) -> str:
        """The commands, each with the first paragraph of its help shortened to the help's width."""
        import textwrap

        width = max(len(name) for name in self.commands) + 2
        room = max(_columns() - 2 - width - 2, 30)
        lines = ["commands:"]
        for name in sorted(self.commands):
            summary = textwrap.shorten(self.commands[name].summary(), room, placeholder="...")
            lines.append(f"  {name:<{width}}{summary}")
        return "\n".join(lines)

    def resolve(self, argv: Sequence[str], prog: str, ctx: Any) -> tuple[Command, dict[str, Any]]:
        parser = self.parser(prog)
        if not argv:
            sys.stderr.write(parser.format_help())
            raise Exit(2)
        values = vars(parser.parse_args(argv))
        name, *rest = values.pop("command")
        self.func(ctx, **_keywords(self.params, values, ctx))
        command = self.commands.get(name)
        if command is None:
            parser.fail(f"no such command {name!r}{_did_you_mean(name, list(self.commands))}")
        return command.resolve(rest, f"{prog} {name}", ctx)


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    import difflib  # only on this error's path

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# --- argparse, configured -----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse as it is, but for no abbreviated long options and errors raised (never
    ``sys.exit``) as one line; the actions ``declare`` makes are kept in ``declared``."""

    def __init__(self, prog: str, texts: Callable[[], tuple[str, str]]) -> None:
        super().__init__(prog=prog, allow_abbrev=False, formatter_class=_formatter)
        self.declared: list[argparse.Action] = []
        self.texts = texts

    def declare(self, *names: str, **attrs: Any) -> argparse.Action:
        """``add_argument``, the action kept: an option (``-x``) or an argument (a name)."""
        action = self.add_argument(*names, **attrs)
        self.declared.append(action)
        return action

    def format_help(self) -> str:
        self.description, self.epilog = self.texts()
        return super().format_help()

    def fail(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def fail_on_unknown(self, argv: Sequence[str]) -> None:
        """Fail on the first unknown option of ``argv``, if it has one."""
        for action in self.declared:
            action.required = False
        try:
            _, extra = self.parse_known_intermixed_args(argv)
        except UsageError:
            return
        if extra:
            self.fail_extra(extra)

    def fail_extra(self, extra: list[str]) -> NoReturn:
        word = extra[0]
        if word.startswith("-") and len(word) > 1 and word != "--":
            known = ["-h", "--help", *(flag for action in self.declared for flag in action.option_strings)]
            self.fail(f"no such option {word.split('=')[0]!r}{_did_you_mean(word.split('=')[0], known)}")
        self.fail(f"unexpected argument {word!r}")

    def error(self, message: str) -> NoReturn:
        self.fail(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise Exit(status)


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter for text written as it should print, at argparse's own width."""
    return argparse.RawDescriptionHelpFormatter(prog, width=_columns() - 2)


@cache  # argparse makes a formatter for every option it adds: measure the terminal once
def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` measures it (argparse's default),
    without importing shutil (and with it bz2, lzma and zlib, at every start)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):  # no stdout (None), not a terminal, closed
            columns = 80
    return columns


class Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import version

        echo(f"agentmail, version {version('agentmail')}")
        raise Exit(0)
