"""What one program of a command line does: the rules ``shell`` asks, over the tables of
``program_tables``.

Most programs are one word in a set (``ls`` reads, ``rm`` writes). Programs with
subcommands have a table (``git status`` reads, ``git push`` writes, ``kubectl rollout
status`` reads, ``kubectl rollout restart`` writes); a few read their options (``sed -i``,
``curl -X POST``, ``black --check``) or hand a nested command back to ``shell``
(``docker exec box ls``, ``python -m pytest``). An unknown program, or a subcommand the table
does not name, is ``opaque``: it could do anything.

Example:
    >>> from loopscope.detect.shell import command_kind
    >>> [command_kind(c) for c in ("git log -3", "git stash", "kubectl get pods -w")]
    ['read', 'write', 'poll']
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Final, Protocol

from .options import after_options, flag_set, option_value, positionals
from .program_tables import (
    AWS_S3,
    BUNDLE,
    CARGO,
    DEV_NULL,
    DOCKER,
    DOTNET,
    FLAG_RULES,
    GH,
    GIT,
    GO,
    HELM,
    KUBECTL,
    NEUTRAL,
    NPM,
    PACKAGES,
    POETRY,
    READS,
    REDIS,
    RUN_OPTIONS,
    SCRIPT_READS,
    SCRIPT_WRITES,
    SLEEPS,
    SYSTEMCTL,
    TERRAFORM,
    UV,
    WRITES,
    Seg,
    word_set,
)
from .verbs import HTTP_METHOD_KINDS, KindGuess, name_words, statement_kind, words_kind


class Nest(Protocol):
    """How a program hands a command it runs back to the line parser (one level deeper)."""

    def command(self, words: list[str]) -> Seg: ...

    def line(self, text: str) -> Seg: ...


Handler = Callable[[list[str], Nest], Seg]
"""A program's rule: its arguments (after the program's name) → what the command does."""



_VERSIONED = re.compile(r"^(python|pip|ruby|perl|node|php)[\d.]*$")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_SED_IN_PLACE = re.compile(r"-[nErsuz]*i.*|--in-place(?:=.*)?")
"""``sed -i``, ``sed -Ei.bak``, ``sed --in-place``: edit the file itself."""
_PERL_IN_PLACE = re.compile(r"-[pnlaw0]*i.*")
_CURL_VALUES: Final = frozenset("XdFTHouAebcKmwxrEyYzCUQ")
"""curl's short options that take a value."""


def program_name(word: str) -> str:
    """A command's program: ``/usr/bin/git`` → ``git``, ``python3.12`` → ``python``."""
    return _VERSIONED.sub(r"\1", word.rsplit("/", 1)[-1])


def is_assignment(word: str) -> bool:
    """``FOO=bar``: an environment assignment in front of a command."""
    return _ASSIGNMENT.match(word) is not None


def known(program: str) -> bool:
    """Whether the tables know ``program`` (as ``program_name`` spells it)."""
    return program in _HANDLERS or program in FLAG_RULES or program in READS or program in WRITES


def program_kind(program: str, args: list[str], nest: Nest) -> Seg:
    """What ``program`` run with ``args`` does."""
    handler = _HANDLERS.get(program)
    if handler is not None:
        return handler(args, nest)
    rule = FLAG_RULES.get(program)
    if rule is not None:
        default, reads, writes = rule
        flags = flag_set(args)
        return "write" if flags & word_set(writes) else "read" if flags & word_set(reads) else default
    if program in READS:
        return "read"
    if program in WRITES:
        return "write"
    if program in NEUTRAL:
        return "neutral"
    return "sleep" if program in SLEEPS else "opaque"




def _lookup(table: dict[str, Seg], words: list[str]) -> Seg:
    if len(words) > 1 and f"{words[0]} {words[1]}" in table:
        return table[f"{words[0]} {words[1]}"]
    return table.get(words[0], "opaque") if words else "opaque"


def _subcommands(table: dict[str, Seg]) -> Handler:
    return lambda args, nest: _lookup(table, positionals(args))


def _seg(verdict: KindGuess | None) -> Seg:
    return "opaque" if verdict is None else verdict


def _method(method: str) -> Seg:
    kind = HTTP_METHOD_KINDS.get(method.upper())
    return "opaque" if kind is None else kind




# -- programs with subcommands ----------------------------------------------------------------


def _git(args: list[str], nest: Nest) -> Seg:
    words = positionals(args, word_set("-C -c --git-dir --work-tree --namespace"))
    sub, flags = (words[0] if words else ""), flag_set(args)
    if sub == "branch":  # lists, unless it names a branch to create or an option that changes
        if flags & word_set("-d -D -m -M -c -C --delete --move --copy -u --set-upstream-to "
                          "--unset-upstream --edit-description"):
            return "write"
        listing = flags & word_set("-l --list -a -r --all --remotes --contains --merged "
                                 "--no-merged --show-current -v -vv --points-at")
        return "write" if len(words) > 1 and not listing else "read"
    if sub == "tag":
        if flags & word_set("-d --delete -a -s -f -m --annotate --sign --force"):
            return "write"
        return "write" if len(words) > 1 and not flags & word_set("-l --list -n") else "read"
    if sub == "config":
        if flags & word_set("--unset --unset-all --add --replace-all --rename-section "
                          "--remove-section -e --edit"):
            return "write"
        if flags & word_set("--get --get-all --get-regexp --list -l --show-origin"):
            return "read"
        return "write" if len(words) > 2 else "read"  # git config key value
    return _lookup(GIT, words)


def _kubectl(args: list[str], nest: Nest) -> Seg:
    words = positionals(args)
    if words[:1] == ["exec"]:
        return nest.command(args[args.index("--") + 1 :]) if "--" in args else "opaque"
    if words[:1] == ["get"] and flag_set(args) & word_set("-w --watch --watch-only"):
        return "poll"
    return _lookup(KUBECTL, words)


def _docker(args: list[str], nest: Nest) -> Seg:
    words = positionals(args)
    if "exec" in words[:2]:  # docker exec [options] box cmd…; docker compose exec svc cmd…
        rest = args[args.index("exec") + 1 :]
        rest = after_options(rest, word_set("-e --env -u --user -w --workdir --env-file"))
        return nest.command(rest[1:]) if len(rest) > 1 else "opaque"
    return _lookup(DOCKER, words)


def _gh(args: list[str], nest: Nest) -> Seg:
    words = positionals(args)
    flags = flag_set(args)
    if words[:1] == ["api"]:
        method = option_value(args, ("-X", "--method"))
        if method:
            return _method(method)
        return "write" if flags & word_set("-f -F --field --raw-field --input") else "read"
    if words[:2] == ["pr", "checks"] and "--watch" in flags:
        return "poll"
    return _lookup(GH, words)


def _terraform(args: list[str], nest: Nest) -> Seg:
    words = positionals(args)
    if words[:1] == ["fmt"]:
        return "read" if flag_set(args) & word_set("-check --check -diff") else "write"
    return _lookup(TERRAFORM, words)


def _scripts(names: list[str]) -> Seg:
    """``make`` / ``npm run`` targets by the words of their names."""
    if not names:
        return "opaque"
    kinds: set[Seg] = set()
    for name in names:
        words = set(re.split(r"[:\-_./]", name.lower()))
        kinds.add("write" if words & SCRIPT_WRITES else "read" if words & SCRIPT_READS
                  else "opaque")
    return "write" if "write" in kinds else "opaque" if "opaque" in kinds else "read"


def _make(args: list[str], nest: Nest) -> Seg:
    options = word_set("-C -f -j -l -o -W --directory --file --jobs")
    return _scripts([w for w in positionals(args, options) if not is_assignment(w)])


def _build_tool(args: list[str], nest: Nest) -> Seg:  # mvn, gradle: phases and tasks
    return _scripts([w for w in positionals(args) if not w.startswith("-D")])


def _npm(program: str) -> Handler:
    def handler(args: list[str], nest: Nest) -> Seg:
        words = positionals(args)
        if words[:1] in (["run"], ["run-script"]):
            return _scripts(words[1:2])
        if words[:1] in (["exec"], ["x"], ["dlx"]):
            return nest.command(words[1:]) if len(words) > 1 else "opaque"
        if not words and program == "yarn":
            return "write"  # a bare ``yarn`` installs
        kind = _lookup(NPM, words)
        if kind == "opaque" and words and program in ("yarn", "pnpm", "bun"):
            return _scripts(words[:1])  # ``yarn lint`` runs the script
        return kind
    return handler


def _runner(table: dict[str, Seg], verb: str) -> Handler:
    """Tools whose ``run`` / ``exec`` runs another command (``uv run``, ``bundle exec``)."""
    def handler(args: list[str], nest: Nest) -> Seg:
        words = positionals(args)
        if words[:1] == [verb]:
            rest = after_options(args[args.index(verb) + 1 :], RUN_OPTIONS)
            return nest.command(rest) if rest else "opaque"
        if words[:2] == ["tool", "run"]:  # uv tool run ruff check
            return nest.command(words[2:]) if len(words) > 2 else "opaque"
        return _lookup(table, words)
    return handler


def _python(args: list[str], nest: Nest) -> Seg:
    if args[:1] in (["--version"], ["-V"]):
        return "read"
    for at, arg in enumerate(args):
        if arg == "-m" and at + 1 < len(args):
            return nest.command(args[at + 1 :])  # python -m pytest: what pytest does
        if arg.startswith("-m") and len(arg) > 2:
            return nest.command([arg[2:], *args[at + 1 :]])
        if not arg.startswith("-"):
            break
    return "opaque"  # -c, a script, stdin


def _ruff(args: list[str], nest: Nest) -> Seg:
    flags = flag_set(args)
    if positionals(args)[:1] == ["format"]:
        return "read" if flags & word_set("--check --diff") else "write"
    fixes = flags & word_set("--fix --unsafe-fixes") and "--no-fix" not in flags
    return "write" if fixes else "read"


def _aws(args: list[str], nest: Nest) -> Seg:
    words = positionals(args)
    if words[:1] == ["s3"]:
        return _lookup(AWS_S3, words[1:])
    return _seg(words_kind(name_words(words[1]))) if len(words) > 1 else "opaque"


def _cloud(args: list[str], nest: Nest) -> Seg:
    """gcloud, az, doctl: the verb is one of the words before the options."""
    words: list[str] = []
    for arg in args:
        if arg.startswith("-"):
            break
        words.extend(name_words(arg))
    return _seg(words_kind(tuple(words)))


def _redis(args: list[str], nest: Nest) -> Seg:
    words = positionals(args, word_set("-h -p -a -n -u --user --pass -s"))
    return REDIS.get(words[0].upper(), "opaque") if words else "opaque"


def _service(args: list[str], nest: Nest) -> Seg:
    if "--status-all" in args:
        return "read"
    words = positionals(args)
    return SYSTEMCTL.get(words[1], "opaque") if len(words) > 1 else "opaque"


# -- programs whose options decide ------------------------------------------------------------


def _curl(args: list[str], nest: Nest) -> Seg:
    method: str | None = None
    data = head = get = False
    at = 0
    while at < len(args):
        arg = args[at]
        at += 1
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            if name == "--request":
                method = value or (args[at] if at < len(args) else "")
                at += 0 if value else 1
            elif name.startswith(("--data", "--form")) or name in ("--json", "--upload-file"):
                data = True
            head = head or name == "--head"
            get = get or name == "--get"
            continue
        if not arg.startswith("-") or arg == "-":
            continue
        for index, char in enumerate(arg[1:], start=1):  # -sSfX POST, -XPOST, -d@body.json
            head = head or char == "I"
            get = get or char == "G"
            if char in _CURL_VALUES:
                value = arg[index + 1 :]
                if not value:
                    value = args[at] if at < len(args) else ""
                    at += 1
                method = value if char == "X" else method
                data = data or char in "dFT"
                break
    if method:
        return _method(method)
    return "read" if head or not data or get else "write"


def _sed(args: list[str], nest: Nest) -> Seg:
    return "write" if any(_SED_IN_PLACE.fullmatch(a) for a in args) else "read"


def _perl(args: list[str], nest: Nest) -> Seg:
    return "write" if any(_PERL_IN_PLACE.fullmatch(a) for a in args) else "opaque"


def _awk(args: list[str], nest: Nest) -> Seg:
    in_place = "--inplace" in args or ("-i", "inplace") in itertools.pairwise(args)
    return "write" if in_place else "read"


def _tee(args: list[str], nest: Nest) -> Seg:
    return "write" if any(not a.startswith("-") and a not in DEV_NULL for a in args) else "read"


def _find(args: list[str], nest: Nest) -> Seg:
    if flag_set(args) & word_set("-delete -fprint -fprint0 -fprintf -fls"):
        return "write"
    for at, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            return nest.command([a for a in args[at + 1 :] if a not in ("{}", "+", ";")])
    return "read"


def _tar(args: list[str], nest: Nest) -> Seg:
    modes = "".join(a.lstrip("-") for i, a in enumerate(args)
                    if (i == 0 or a.startswith("-")) and not a.startswith("--"))
    long = flag_set(args)
    if set(modes) & set("cxruA") or long & word_set("--create --extract --get --append --update "
                                                  "--delete --concatenate"):
        return "write"
    return "read" if "t" in modes or "--list" in long else "opaque"


def _sql(names: tuple[str, ...]) -> Handler:
    """psql -c, mysql -e, duckdb -c: the statement decides."""
    def handler(args: list[str], nest: Nest) -> Seg:
        sql = option_value(args, names)
        return _seg(statement_kind(sql)) if sql else "opaque"
    return handler


def _sqlite(args: list[str], nest: Nest) -> Seg:
    words = positionals(args, word_set("-cmd -separator -newline -nullvalue"))
    return _seg(statement_kind(words[1])) if len(words) > 1 else "opaque"


def _node(args: list[str], nest: Nest) -> Seg:
    return "read" if args[:1] in (["--version"], ["-v"]) else "opaque"


def _handlers() -> dict[str, Handler]:
    packages = _subcommands(PACKAGES)
    handlers: dict[str, Handler] = {
        "git": _git, "kubectl": _kubectl, "oc": _kubectl, "k": _kubectl,
        "docker": _docker, "podman": _docker, "nerdctl": _docker,
        "docker-compose": lambda args, nest: _docker(["compose", *args], nest),
        "terraform": _terraform, "tofu": _terraform, "helm": _subcommands(HELM), "gh": _gh,
        "uv": _runner(UV, "run"), "poetry": _runner(POETRY, "run"),
        "pipenv": _runner(POETRY, "run"), "bundle": _runner(BUNDLE, "exec"),
        "systemctl": _subcommands(SYSTEMCTL), "service": _service,
        "cargo": _subcommands(CARGO), "go": _subcommands(GO), "dotnet": _subcommands(DOTNET),
        "make": _make, "mvn": _build_tool, "mvnw": _build_tool, "gradle": _build_tool,
        "gradlew": _build_tool, "python": _python, "py": _python, "node": _node, "ruff": _ruff,
        "curl": _curl, "sed": _sed, "gsed": _sed, "perl": _perl, "awk": _awk, "gawk": _awk,
        "tee": _tee, "find": _find, "tar": _tar,
        "aws": _aws, "gcloud": _cloud, "az": _cloud, "doctl": _cloud, "redis-cli": _redis,
        "psql": _sql(("-c", "--command")), "mysql": _sql(("-e", "--execute")),
        "mariadb": _sql(("-e", "--execute")), "duckdb": _sql(("-c",)),
        "clickhouse-client": _sql(("-q", "--query")), "sqlite3": _sqlite,
    }
    for program in ("npm", "pnpm", "yarn", "bun"):
        handlers[program] = _npm(program)
    for program in ("pip", "pipx", "apt", "apt-get", "dnf", "yum", "apk", "brew", "conda",
                    "mamba"):
        handlers[program] = packages
    return handlers


_HANDLERS: Final = _handlers()
