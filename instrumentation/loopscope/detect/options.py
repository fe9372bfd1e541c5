"""A command's words read as options: which are options, which of those take a value, and
where its positional words (the subcommand, the operands) are.

Every program's rule reads its arguments this way (``programs``), and ``shell`` skips a
wrapper's options (``sudo -u root``, ``timeout -s KILL 5``) to find the command it runs.
"""

from __future__ import annotations

from .program_tables import VALUE_OPTIONS


def after_options(args: list[str], value_options: frozenset[str]) -> list[str]:
    """``args`` from the first word that is not an option (or an option's value) on."""
    at = 0
    while at < len(args) and args[at].startswith("-") and args[at] != "-":
        if args[at] == "--":
            return args[at + 1 :]
        at += 2 if args[at] in value_options else 1
    return args[at:]


def positionals(args: list[str], value_options: frozenset[str] = VALUE_OPTIONS) -> list[str]:
    """The words of ``args`` that are not options nor their values, up to ``--``."""
    found: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--":
            break
        elif arg.startswith("-") and arg != "-":
            skip = arg in value_options
        else:
            found.append(arg)
    return found


def flag_set(args: list[str]) -> frozenset[str]:
    """The options of ``args``, each without its ``=value``."""
    return frozenset(a.split("=", 1)[0] for a in args if a.startswith("-"))


def option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    """The value of the last of ``names`` in ``args``: ``-X POST``, ``--method=POST``,
    ``-XPOST``."""
    value: str | None = None
    for at, arg in enumerate(args):
        for name in names:
            if arg == name and at + 1 < len(args):
                value = args[at + 1]
            elif arg.startswith(name + "="):
                value = arg[len(name) + 1 :]
            elif len(name) == 2 and arg.startswith(name) and not arg.startswith("--"):
                value = arg[2:] or value
    return value
