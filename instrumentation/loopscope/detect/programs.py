"""What one program of a command line does: the tables ``shell`` looks a command up in.

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
from typing import Final, Literal, Protocol

from .verbs import HTTP_METHOD_KINDS, KindGuess, name_words, statement_kind, words_kind

Seg = Literal["read", "write", "poll", "opaque", "sleep", "neutral"]
"""What one simple command does; ``sleep`` waits, ``neutral`` (``cd``, ``export``) is nothing."""


class Nest(Protocol):
    """How a program hands a command it runs back to the line parser (one level deeper)."""

    def command(self, words: list[str]) -> Seg: ...

    def line(self, text: str) -> Seg: ...


Handler = Callable[[list[str], Nest], Seg]
"""A program's rule: its arguments (after the program's name) → what the command does."""


def _names(text: str) -> frozenset[str]:
    """The words of ``text`` as a set (the handlers below name their option sets where they
    use them: a few short words, split in no time)."""
    return frozenset(text.split())


def _table(read: str = "", write: str = "", poll: str = "") -> dict[str, Seg]:
    """Subcommands by kind, comma-separated; an entry may be two words (``rollout status``)."""
    table: dict[str, Seg] = {}
    kinds: tuple[tuple[Seg, str], ...] = (("read", read), ("write", write), ("poll", poll))
    for kind, entries in kinds:
        for entry in entries.split(","):
            if entry.split():
                table[" ".join(entry.split())] = kind
    return table


READS: Final = _names("""
    ls ll dir cat bat less more head tail grep egrep fgrep rg ag ack wc pwd echo printf ps pgrep
    df du printenv which whereis type whoami id groups hostname uname date cal stat file tree
    diff cmp comm sort uniq cut paste join tr nl fold column jq yq xq realpath dirname basename
    readlink test [ [[ free uptime top htop lsof netstat ss ping dig nslookup host traceroute
    md5sum sha1sum sha256sum sha512sum shasum cksum strings hexdump xxd od seq history man help
    nproc lscpu lsblk locale w who last journalctl dmesg getent whatis apropos base64 envsubst
    cloc tokei zcat bzcat xzcat zless zgrep pytest py.test tox nox jest vitest mocha
    rspec phpunit mypy pyright flake8 pylint bandit shellcheck hadolint pydoc apt-cache
""")
"""Programs that only read (or only run checks: tests and linters change nothing)."""
WRITES: Final = _names("""
    rm rmdir mv cp mkdir touch chmod chown chgrp ln truncate shred unlink install mkfifo mktemp
    patch scp rsync kill pkill killall reboot shutdown halt poweroff mount umount useradd userdel
    usermod groupadd groupdel passwd chpasswd ssh-keygen ssh-copy-id zip
""")
"""Programs that change files, processes or the machine."""
NEUTRAL: Final = _names("""
    cd pushd popd export set unset true false : exit return clear alias unalias shopt trap local
    declare typeset readonly wait hash ulimit umask break continue shift
""")
SLEEPS: Final = _names("sleep Start-Sleep")
DEV_NULL: Final = _names("/dev/null /dev/stdout /dev/stderr /dev/tty -")

GIT: Final = _table(
    read="""status, log, diff, show, blame, grep, ls-files, ls-tree, ls-remote, rev-parse,
        rev-list, describe, shortlog, reflog, cat-file, show-ref, for-each-ref, fetch,
        whatchanged, version, help, count-objects, merge-base, name-rev, check-ignore, remote,
        remote show, remote get-url, stash list, stash show, worktree list, submodule status,
        notes show, notes list, lfs ls-files, lfs status""",
    write="""push, commit, add, rm, mv, reset, restore, checkout, switch, merge, rebase,
        cherry-pick, revert, pull, clone, init, apply, am, clean, gc, prune, bisect, stash,
        remote add, remote remove, remote rm, remote rename, remote set-url, remote prune,
        stash push, stash pop, stash apply, stash drop, stash clear, stash save, worktree add,
        worktree remove, worktree prune, submodule add, submodule update, submodule init,
        submodule sync, notes add, notes remove, lfs push, lfs pull, lfs install""",
)
KUBECTL: Final = _table(
    read="""get, describe, logs, log, top, explain, version, cluster-info, api-resources,
        api-versions, config view, config get-contexts, config current-context, auth can-i,
        auth whoami, diff, events, rollout status, rollout history""",
    write="""apply, create, delete, scale, patch, edit, replace, label, annotate, set, expose,
        run, cordon, uncordon, drain, taint, autoscale, cp, rollout restart, rollout undo,
        rollout pause, rollout resume, config use-context, config set-context, certificate""",
    poll="wait",
)
DOCKER: Final = _table(
    read="""ps, logs, inspect, stats, images, version, info, top, port, diff, history, events,
        search, image ls, image list, image inspect, image history, container ls,
        container list, container inspect, container logs, network ls, network inspect,
        volume ls, volume inspect, compose ps, compose logs, compose config, compose ls,
        compose images, compose top, system df, system info, context ls, buildx ls""",
    write="""run, rm, rmi, build, push, pull, start, stop, restart, kill, create, commit, tag,
        cp, load, import, save, pause, unpause, rename, update, prune, compose up,
        compose down, compose build, compose restart, compose rm, compose stop,
        compose start, compose pull, compose push, compose run, compose create, compose kill,
        image rm, image prune, image build, image push, image pull, image tag, container rm,
        container prune, container run, container stop, container start, container kill,
        container restart, system prune, volume rm, volume create, volume prune,
        network create, network rm, network prune, network connect, network disconnect,
        buildx build, swarm init, service create, service update, service rm, stack deploy,
        stack rm""",
)
TERRAFORM: Final = _table(
    read="""plan, show, output, validate, version, providers, graph, state list, state show,
        workspace list, workspace show""",
    write="""apply, destroy, import, taint, untaint, init, refresh, state rm, state mv,
        state push, state replace-provider, workspace new, workspace select,
        workspace delete, force-unlock""",
)
HELM: Final = _table(
    read="""list, ls, status, get, history, show, search, template, lint, version, repo list,
        dependency list, env""",
    write="""install, upgrade, uninstall, delete, rollback, repo add, repo update, repo remove,
        dependency update, dependency build, push, package, pull""",
)
GH: Final = _table(
    read="""pr list, pr view, pr status, pr diff, pr checks, issue list, issue view, issue status,
        run list, run view, repo view, repo list, release list, release view, auth status,
        workflow list, workflow view, search, status, label list, gist list, gist view,
        secret list, variable list, cache list""",
    write="""pr create, pr merge, pr close, pr reopen, pr edit, pr comment, pr review, pr ready,
        pr checkout, issue create, issue close, issue reopen, issue comment, issue edit,
        issue delete, issue transfer, issue lock, release create, release delete,
        release upload, release edit, repo create, repo fork, repo clone, repo delete,
        repo edit, repo rename, run rerun, run cancel, workflow run, workflow enable,
        workflow disable, label create, label delete, gist create, secret set, secret delete,
        variable set""",
    poll="run watch",
)
NPM: Final = _table(
    read="test, t, ls, list, view, info, outdated, search, whoami, doctor, config get, audit, "
         "why, explain",
    write="""install, i, ci, add, uninstall, remove, rm, un, update, upgrade, up, publish, link,
        unlink, dedupe, prune, audit fix, init, create""",
)
PACKAGES: Final = _table(
    read="""list, search, show, policy, info, outdated, deps, leaves, doctor, config, files,
        freeze, check, config list, index versions, inspect""",
    write="""install, remove, purge, update, upgrade, autoremove, dist-upgrade, reinstall, add,
        del, tap, untap, link, unlink, cleanup, uninstall, create, download, wheel""",
)
"""pip, apt, apt-get, dnf, yum, apk, brew, conda: one vocabulary."""
SYSTEMCTL: Final = _table(
    read="""status, is-active, is-enabled, is-failed, list-units, list-unit-files, show, cat,
        list-timers""",
    write="""start, stop, restart, reload, enable, disable, mask, unmask, daemon-reload, kill,
        try-restart, reload-or-restart""",
)
CARGO: Final = _table(
    read="test, check, clippy, tree, metadata, search, version, bench, doc, audit",
    write="install, uninstall, publish, add, remove, update, new, init",
)
GO: Final = _table(
    read="test, vet, list, version, env, doc", write="get, install, mod tidy, mod download, fmt")
DOTNET: Final = _table(read="test, list", write="add, remove, publish, new, restore")
UV: Final = _table(
    read="pip list, pip show, pip freeze, pip check, tree, version",
    write="pip install, pip uninstall, pip sync, add, remove, sync, lock, venv, init",
)
POETRY: Final = _table(
    read="show, check, version, env info",
    write="add, remove, install, update, lock, publish, build, init, new",
)
AWS_S3: Final = _table(read="ls, presign", write="cp, mv, rm, sync, mb, rb")
REDIS: Final[dict[str, Seg]] = {
    **dict.fromkeys(_names("""GET MGET HGET HGETALL HMGET KEYS SCAN EXISTS TTL PTTL TYPE LRANGE
        LLEN LINDEX SMEMBERS SCARD SISMEMBER ZRANGE ZCARD ZSCORE STRLEN HKEYS HVALS HLEN XRANGE
        XLEN INFO PING DBSIZE"""), "read"),
    **dict.fromkeys(_names("""SET SETEX SETNX MSET DEL UNLINK HSET HMSET HDEL LPUSH RPUSH LPOP
        RPOP SADD SREM ZADD ZREM INCR INCRBY DECR DECRBY EXPIRE PERSIST FLUSHALL FLUSHDB PUBLISH
        XADD RENAME APPEND GETDEL"""), "write"),
}
FLAG_RULES: Final[dict[str, tuple[Seg, str, str]]] = {
    "black": ("write", "--check --diff", ""),
    "isort": ("write", "--check --check-only --diff", ""),
    "rustfmt": ("write", "--check", ""),
    "prettier": ("read", "--check -c -l --list-different", "--write -w"),
    "eslint": ("read", "", "--fix"),
    "gofmt": ("read", "", "-w"),
    "shfmt": ("read", "", "-w --write"),
    "autopep8": ("read", "", "-i --in-place"),
    "yapf": ("read", "", "-i --in-place"),
    "clang-format": ("read", "", "-i"),
    "unzip": ("write", "-l -t -v -Z -z -p", ""),
    "gzip": ("write", "-l --list -t --test -c --stdout", ""),
    "gunzip": ("write", "-l --list -t --test -c --stdout", ""),
    "xz": ("write", "-l --list -t --test -c --stdout", ""),
    "zstd": ("write", "-l --list -t --test -c --stdout", ""),
    "crontab": ("write", "-l", ""),
    "iptables": ("write", "-L -S --list --list-rules -C --check", ""),
    "wget": ("read", "", "--post-data --post-file --body-data --body-file"),
}
"""Programs whose options decide: (without them, options that read, options that write)."""
SCRIPT_READS: Final = _names("""
    test tests check lint typecheck type-check tsc verify validate unit e2e integration coverage
    audit
""")
SCRIPT_WRITES: Final = _names(
    "deploy release publish install push migrate seed upload apply destroy clean")
"""``npm run X`` / ``make X`` targets, by the words of their names."""
VALUE_OPTIONS: Final = _names("""
    -C -c --git-dir --work-tree -n --namespace --context --kubeconfig --cluster --user -s
    --server --token --as -H --host --config -l --log-level -f --file -p --project-name
    --project-directory --env-file --profile -R --repo --prefix -w --workspace --region
    --output --endpoint-url --kube-context -M
""")
"""Global options that take a value (``git -C dir``, ``kubectl -n prod``), skipped when looking
for the subcommand."""
RUN_OPTIONS: Final = _names(
    "--with --python -p --directory --project --extra --group --package --env-file --from")
"""Options of ``uv run`` / ``poetry run`` that take a value."""

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
        flags = _flags(args)
        return "write" if flags & _names(writes) else "read" if flags & _names(reads) else default
    if program in READS:
        return "read"
    if program in WRITES:
        return "write"
    if program in NEUTRAL:
        return "neutral"
    return "sleep" if program in SLEEPS else "opaque"


def after_options(args: list[str], value_options: frozenset[str]) -> list[str]:
    """``args`` from the first word that is not an option (or an option's value) on."""
    at = 0
    while at < len(args) and args[at].startswith("-") and args[at] != "-":
        if args[at] == "--":
            return args[at + 1 :]
        at += 2 if args[at] in value_options else 1
    return args[at:]


def _positionals(args: list[str], value_options: frozenset[str] = VALUE_OPTIONS) -> list[str]:
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


def _flags(args: list[str]) -> frozenset[str]:
    return frozenset(a.split("=", 1)[0] for a in args if a.startswith("-"))


def _lookup(table: dict[str, Seg], words: list[str]) -> Seg:
    if len(words) > 1 and f"{words[0]} {words[1]}" in table:
        return table[f"{words[0]} {words[1]}"]
    return table.get(words[0], "opaque") if words else "opaque"


def _subcommands(table: dict[str, Seg]) -> Handler:
    return lambda args, nest: _lookup(table, _positionals(args))


def _seg(verdict: KindGuess | None) -> Seg:
    return "opaque" if verdict is None else verdict


def _method(method: str) -> Seg:
    kind = HTTP_METHOD_KINDS.get(method.upper())
    return "opaque" if kind is None else kind


def _option_value(args: list[str], names: tuple[str, ...]) -> str | None:
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


# -- programs with subcommands ----------------------------------------------------------------


def _git(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args, _names("-C -c --git-dir --work-tree --namespace"))
    sub, flags = (words[0] if words else ""), _flags(args)
    if sub == "branch":  # lists, unless it names a branch to create or an option that changes
        if flags & _names("-d -D -m -M -c -C --delete --move --copy -u --set-upstream-to "
                          "--unset-upstream --edit-description"):
            return "write"
        listing = flags & _names("-l --list -a -r --all --remotes --contains --merged "
                                 "--no-merged --show-current -v -vv --points-at")
        return "write" if len(words) > 1 and not listing else "read"
    if sub == "tag":
        if flags & _names("-d --delete -a -s -f -m --annotate --sign --force"):
            return "write"
        return "write" if len(words) > 1 and not flags & _names("-l --list -n") else "read"
    if sub == "config":
        if flags & _names("--unset --unset-all --add --replace-all --rename-section "
                          "--remove-section -e --edit"):
            return "write"
        if flags & _names("--get --get-all --get-regexp --list -l --show-origin"):
            return "read"
        return "write" if len(words) > 2 else "read"  # git config key value
    return _lookup(GIT, words)


def _kubectl(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args)
    if words[:1] == ["exec"]:
        return nest.command(args[args.index("--") + 1 :]) if "--" in args else "opaque"
    if words[:1] == ["get"] and _flags(args) & _names("-w --watch --watch-only"):
        return "poll"
    return _lookup(KUBECTL, words)


def _docker(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args)
    if "exec" in words[:2]:  # docker exec [options] box cmd…; docker compose exec svc cmd…
        rest = args[args.index("exec") + 1 :]
        rest = after_options(rest, _names("-e --env -u --user -w --workdir --env-file"))
        return nest.command(rest[1:]) if len(rest) > 1 else "opaque"
    return _lookup(DOCKER, words)


def _gh(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args)
    flags = _flags(args)
    if words[:1] == ["api"]:
        method = _option_value(args, ("-X", "--method"))
        if method:
            return _method(method)
        return "write" if flags & _names("-f -F --field --raw-field --input") else "read"
    if words[:2] == ["pr", "checks"] and "--watch" in flags:
        return "poll"
    return _lookup(GH, words)


def _terraform(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args)
    if words[:1] == ["fmt"]:
        return "read" if _flags(args) & _names("-check --check -diff") else "write"
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
    options = _names("-C -f -j -l -o -W --directory --file --jobs")
    return _scripts([w for w in _positionals(args, options) if not is_assignment(w)])


def _build_tool(args: list[str], nest: Nest) -> Seg:  # mvn, gradle: phases and tasks
    return _scripts([w for w in _positionals(args) if not w.startswith("-D")])


def _npm(program: str) -> Handler:
    def handler(args: list[str], nest: Nest) -> Seg:
        words = _positionals(args)
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
        words = _positionals(args)
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
    flags = _flags(args)
    if _positionals(args)[:1] == ["format"]:
        return "read" if flags & _names("--check --diff") else "write"
    fixes = flags & _names("--fix --unsafe-fixes") and "--no-fix" not in flags
    return "write" if fixes else "read"


def _aws(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args)
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
    words = _positionals(args, _names("-h -p -a -n -u --user --pass -s"))
    return REDIS.get(words[0].upper(), "opaque") if words else "opaque"


def _service(args: list[str], nest: Nest) -> Seg:
    if "--status-all" in args:
        return "read"
    words = _positionals(args)
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
    if _flags(args) & _names("-delete -fprint -fprint0 -fprintf -fls"):
        return "write"
    for at, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            return nest.command([a for a in args[at + 1 :] if a not in ("{}", "+", ";")])
    return "read"


def _tar(args: list[str], nest: Nest) -> Seg:
    modes = "".join(a.lstrip("-") for i, a in enumerate(args)
                    if (i == 0 or a.startswith("-")) and not a.startswith("--"))
    long = _flags(args)
    if set(modes) & set("cxruA") or long & _names("--create --extract --get --append --update "
                                                  "--delete --concatenate"):
        return "write"
    return "read" if "t" in modes or "--list" in long else "opaque"


def _sql(names: tuple[str, ...]) -> Handler:
    """psql -c, mysql -e, duckdb -c: the statement decides."""
    def handler(args: list[str], nest: Nest) -> Seg:
        sql = _option_value(args, names)
        return _seg(statement_kind(sql)) if sql else "opaque"
    return handler


def _sqlite(args: list[str], nest: Nest) -> Seg:
    words = _positionals(args, _names("-cmd -separator -newline -nullvalue"))
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
        "pipenv": _runner(POETRY, "run"), "bundle": _runner(_table(write="install, update, add"),
                                                            "exec"),
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
