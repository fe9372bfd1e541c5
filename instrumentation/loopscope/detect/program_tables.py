"""The tables a command line's program is looked up in: data, no rules.

Programs that only read (``ls``, ``grep``, test runners and linters), that write (``rm``,
``mv``), that wait (``sleep``) or do nothing (``cd``, ``export``); the subcommands of the
programs that have them (``git status`` reads, ``git push`` writes); the programs whose
options decide (``black --check``); the option names that take a value. ``programs`` holds
the rules that read them, one per program that needs more than a table.
"""

from __future__ import annotations

from typing import Final, Literal

Seg = Literal["read", "write", "poll", "opaque", "sleep", "neutral"]
"""What one simple command does; ``sleep`` waits, ``neutral`` (``cd``, ``export``) is nothing."""


def word_set(text: str) -> frozenset[str]:
    """The words of ``text`` as a set (the tables here, and the rules of ``programs``, which
    name their option sets where they use them: a few short words, split in no time)."""
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


READS: Final = word_set("""
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
WRITES: Final = word_set("""
    rm rmdir mv cp mkdir touch chmod chown chgrp ln truncate shred unlink install mkfifo mktemp
    patch scp rsync kill pkill killall reboot shutdown halt poweroff mount umount useradd userdel
    usermod groupadd groupdel passwd chpasswd ssh-keygen ssh-copy-id zip
""")
"""Programs that change files, processes or the machine."""
NEUTRAL: Final = word_set("""
    cd pushd popd export set unset true false : exit return clear alias unalias shopt trap local
    declare typeset readonly wait hash ulimit umask break continue shift
""")
SLEEPS: Final = word_set("sleep Start-Sleep")
DEV_NULL: Final = word_set("/dev/null /dev/stdout /dev/stderr /dev/tty -")

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
BUNDLE: Final = _table(write="install, update, add")
AWS_S3: Final = _table(read="ls, presign", write="cp, mv, rm, sync, mb, rb")
REDIS: Final[dict[str, Seg]] = {
    **dict.fromkeys(word_set("""GET MGET HGET HGETALL HMGET KEYS SCAN EXISTS TTL PTTL TYPE LRANGE
        LLEN LINDEX SMEMBERS SCARD SISMEMBER ZRANGE ZCARD ZSCORE STRLEN HKEYS HVALS HLEN XRANGE
        XLEN INFO PING DBSIZE"""), "read"),
    **dict.fromkeys(word_set("""SET SETEX SETNX MSET DEL UNLINK HSET HMSET HDEL LPUSH RPUSH LPOP
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
SCRIPT_READS: Final = word_set("""
    test tests check lint typecheck type-check tsc verify validate unit e2e integration coverage
    audit
""")
SCRIPT_WRITES: Final = word_set(
    "deploy release publish install push migrate seed upload apply destroy clean")
"""``npm run X`` / ``make X`` targets, by the words of their names."""
VALUE_OPTIONS: Final = word_set("""
    -C -c --git-dir --work-tree -n --namespace --context --kubeconfig --cluster --user -s
    --server --token --as -H --host --config -l --log-level -f --file -p --project-name
    --project-directory --env-file --profile -R --repo --prefix -w --workspace --region
    --output --endpoint-url --kube-context -M
""")
"""Global options that take a value (``git -C dir``, ``kubectl -n prod``), skipped when looking
for the subcommand."""
RUN_OPTIONS: Final = word_set(
    "--with --python -p --directory --project --extra --group --package --env-file --from")
"""Options of ``uv run`` / ``poetry run`` that take a value."""
