"""Shell command lines: what a ``bash`` or ``run_command`` call does, read from its text.

A line is split into simple commands on ``&&``, ``||``, ``;``, ``|``, ``&``, newlines and
parentheses (quotes respected, here-document bodies skipped). Each command loses what is
not the program: ``FOO=bar`` assignments, ``if``/``do``/``while`` keywords, wrappers
(``sudo``, ``env``, ``timeout 30``, ``nohup``, ``xargs``, ``npx``) and nestings
(``bash -c '…'``, ``ssh host '…'``, ``watch …``). What is left is looked up in ``programs``.
The line is

- a **write** when any command writes, an output redirection to a file included
  (``> notes.txt``; not ``2>&1``, not ``>/dev/null``);
- a **poll** when it waits (``sleep``, ``watch``, ``kubectl wait``, a ``while``/``until``
  loop that sleeps) and otherwise only reads;
- a **read** when every command reads (running tests changes nothing: a read);
- **opaque** otherwise: a script, ``python -c``, an unknown program. Anything could happen.

Example:
    >>> command_kind("cd repo && git push origin main 2>&1")
    'write'
    >>> command_kind("sleep 30 && kubectl rollout status deploy/api")
    'poll'
    >>> command_kind("git status && ls -la | head")
    'read'
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Final

from .limits import MAX_TEXT, SHELL_NESTING
from .options import after_options
from .program_tables import DEV_NULL, Seg
from .programs import is_assignment, known, program_kind, program_name
from .verbs import KindGuess

KEYWORDS: Final = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{",
                             "}", "time"})
"""Words that open a compound command; the command after them is what runs."""
FRAME_WORDS: Final = frozenset({"done", "fi", "esac", "for", "case", "select", "in",
                                "function"})
"""Words of a compound command's frame (``for f in *.py``): nothing runs there."""
WRAPPERS: Final[dict[str, frozenset[str]]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "--user",
                       "--group", "--host", "--prompt"}),
    "doas": frozenset({"-u", "-C"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-n", "-I", "-P", "-L", "-d", "-s", "-E", "-a", "--max-args",
                        "--max-procs", "--delimiter"}),
    "npx": frozenset({"-p", "--package"}),
    **dict.fromkeys(("nohup", "command", "builtin", "exec", "chronic", "caffeinate",
                     "unbuffer", "pnpx", "bunx"), frozenset()),
}
"""Programs that run the command after their options, with their options that take a value."""
SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish", "su"})
"""``bash -c '…'`` runs its string; ``bash script.sh`` is opaque."""
SSH_VALUES: Final = frozenset({"-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b",
                               "-c", "-E", "-e", "-m", "-O", "-Q", "-S", "-W", "-w", "-B"})
TIMEOUT_VALUES: Final = frozenset({"-s", "-k", "--signal", "--kill-after"})
ENV_VALUES: Final = frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"})
WATCH_VALUES: Final = frozenset({"-n", "-d", "--interval", "--differences", "-q"})

_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_OPERATOR_CHARS: Final = frozenset(";&|()<>\n")


def command_kind(text: str) -> KindGuess | None:
    """What a shell command line does (the module docstring); ``None`` when it is empty."""
    if len(text) > MAX_TEXT:
        return "opaque"
    return _line(text, 0)


def known_program(word: str) -> bool:
    """Whether ``word`` names a program the tables know (a line starting with it is a
    command line, whatever its tool is called)."""
    return known(program_name(word))


@dataclass(frozen=True, slots=True)
class _Nest:
    """A command run by another one (``docker exec box ls``), one level deeper."""

    depth: int

    def command(self, words: list[str]) -> Seg:
        return _command(words, self.depth + 1) if words else "opaque"

    def line(self, text: str) -> Seg:
        kind = _line(text, self.depth + 1)
        return "opaque" if kind is None else kind


def _line(text: str, depth: int) -> KindGuess | None:
    if depth > SHELL_NESTING:
        return "opaque"
    lexer = shlex.shlex(_drop_heredocs(text.replace("\\\n", " ")), posix=True,
                        punctuation_chars=";&|()<>\n")
    lexer.whitespace = " \t\r"  # a newline separates commands
    lexer.whitespace_split = True
    lexer.commenters = ""  # a comment is dropped by ``_commands``, up to its newline only
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote
        return "opaque"
    kinds: set[Seg] = set()
    loop = False
    for words, to_file in _commands(tokens):
        while words and words[0] in KEYWORDS:
            loop = loop or words[0] in ("while", "until")
            words = words[1:]
        if to_file:
            kinds.add("write")
        elif words:
            kinds.add(_command(words, depth))
    return _combine(kinds, loop)


def _combine(kinds: set[Seg], loop: bool) -> KindGuess | None:
    if "write" in kinds:
        return "write"
    if "opaque" in kinds:  # until ./ready.sh; do sleep 5; done: a poll, whatever it asks
        return "poll" if loop and "sleep" in kinds else "opaque"
    if "sleep" in kinds or "poll" in kinds:
        return "poll"
    if "read" in kinds:
        return "read"
    return "opaque" if kinds else None  # only cd / export: nothing to tell


def _drop_heredocs(text: str) -> str:
    """``text`` without here-document bodies (they are data, not commands)."""
    if "<<" not in text:
        return text
    kept: list[str] = []
    pending: list[str] = []
    for line in text.split("\n"):
        if pending:
            if line.strip() == pending[0]:
                pending.pop(0)
            continue
        delimiters = [m.group(2) for m in _HEREDOC.finditer(line)]
        kept.append(_HEREDOC.sub(" ", line) if delimiters else line)
        pending.extend(delimiters)
    return "\n".join(kept)


SCRATCH: Final = ("/tmp/", "/var/tmp/", "$TMPDIR", "${TMPDIR")
"""Where a command's redirected output is a scratch copy of what it printed, not a change
(``pytest > /tmp/run.log``)."""


def _commands(tokens: list[str]) -> list[tuple[list[str], bool]]:
    """The simple commands of a token stream: each one's words, and whether it redirects
    its output to a file."""
    commands: list[tuple[list[str], bool]] = []
    words: list[str] = []
    to_file = comment = False
    at = 0
    while at < len(tokens):
        token = tokens[at]
        at += 1
        if comment and token != "\n":
            continue
        comment = token.startswith("#")
        if comment:
            continue
        operator = bool(token) and set(token) <= _OPERATOR_CHARS
        if operator and ("(" in token or ")" in token or not set(token) & {"<", ">"}):
            commands.append((words, to_file))  # a separator, or a process substitution
            words, to_file = [], False
        elif operator:  # a redirection, and its target
            if words and len(words[-1]) == 1 and words[-1].isdigit():
                words.pop()  # the descriptor of ``2>``
            target = tokens[at] if at < len(tokens) else ""
            at += 1
            duplicate = token.endswith("&") and (target.isdigit() or target == "-")
            scratch = target.startswith(SCRATCH)
            if ">" in token and not (
                target in DEV_NULL or target.startswith("&") or duplicate or scratch
            ):
                to_file = True  # (a log of the command's own output, in /tmp: still a read)
        else:
            words.append(token)
    commands.append((words, to_file))
    return commands


def _command(words: list[str], depth: int) -> Seg:
    if depth > SHELL_NESTING:
        return "opaque"
    if words[0] in FRAME_WORDS:
        return "neutral"
    while words and is_assignment(words[0]):
        words = words[1:]  # FOO=bar cmd
    if not words:
        return "neutral"
    program, args = program_name(words[0]), words[1:]
    nest = _Nest(depth)
    if program in WRAPPERS:
        return nest.command(after_options(args, WRAPPERS[program]))
    if program in SHELLS:
        for at, arg in enumerate(args):  # bash -c '…', bash -lc '…', su - me -c '…'
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
                return nest.line(args[at + 1]) if at + 1 < len(args) else "opaque"
        return "opaque"  # a script file, or a shell reading stdin
    if program == "eval":
        return nest.line(" ".join(args))
    if program == "ssh":
        rest = after_options(args, SSH_VALUES)
        return nest.line(" ".join(rest[1:])) if len(rest) > 1 else "opaque"
    if program in ("timeout", "gtimeout"):
        return nest.command(after_options(args, TIMEOUT_VALUES)[1:])  # timeout 30 cmd
    if program == "env":
        rest = after_options(args, ENV_VALUES)
        while rest and is_assignment(rest[0]):
            rest = rest[1:]
        return nest.command(rest) if rest else "read"  # a bare ``env`` prints it
    if program == "watch":
        rest = after_options(args, WATCH_VALUES)
        return "write" if rest and nest.line(" ".join(rest)) == "write" else "poll"
    return program_kind(program, args, nest)
