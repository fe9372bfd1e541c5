"""A tool call's kind when nobody declared it, and where that kind came from.

A call's kind (read / write / poll) is declared where the user knows it (docs/detection.md). When it
is not, it is inferred from the first of these that tells, and the source is recorded
(``KindSource``) so the span and the diagnostic can say it:

1. ``annotation``: the MCP tool annotations. ``readOnlyHint: true`` reads;
   ``readOnlyHint: false`` or ``destructiveHint: true`` writes.
2. ``method``: an HTTP call's method (``method``, ``http_method`` or ``verb`` beside a
   ``url``, ``path`` or ``endpoint``, or on a tool whose name says HTTP). GET, HEAD and
   OPTIONS read; POST, PUT, PATCH and DELETE write.
3. ``name``: the tool's name and arguments. A shell tool's command line (``shell``), a SQL
   tool's statement, a GraphQL operation, a sub-command argument
   (``computer(action="screenshot")``), a CLI named in the tool's name (``git_log``), then
   the words of the name (``verbs``). A write by its name whose text arguments are all
   empty has nothing to write: it reads (``write_stdin(chars="")`` polls a running process).

Nothing here raises: an odd input tells nothing (``None``).

When none of them tells, the call is judged by what it does. A call whose answer confirms
that it did something ("Post successful", "Message sent.": ``confirms_change``) did a write,
whatever its name: its source is ``outcome``, and the same call again in the same turn is
that write again (a browser agent clicking "Post" once more).

Example:
    >>> infer_kind("search_docs", {"q": "x"}, {"readOnlyHint": True})
    ('read', 'annotation')
    >>> infer_kind("http_request", {"method": "post", "url": "https://example.com/api"})
    ('write', 'method')
    >>> infer_kind("bash", {"command": "sleep 30 && kubectl rollout status deploy/api"})
    ('poll', 'name')
    >>> infer_kind("write_stdin", {"session_id": 4, "chars": ""})
    ('read', 'name')
    >>> infer_kind("browser_click", {"element": "Submit"}) is None
    True
    >>> confirms_change("Clicked button 18: Post. Post successful. View post")
    True
    >>> confirms_change("Clicked button 3: Start a post")
    False
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any, Final

from .events import KindSource, ToolKind
from .limits import CONFIRM_CHARS
from .shell import command_kind, known_program
from .verbs import HTTP_METHOD_KINDS, KindGuess, name_kind, name_words, statement_kind

METHOD_KEYS: Final = ("method", "http_method", "httpMethod", "request_method", "verb")
URL_KEYS: Final = ("url", "uri", "path", "endpoint", "href", "route")
HTTP_WORDS: Final = frozenset({
    "http", "https", "request", "requests", "fetch", "api", "curl", "wget", "webhook", "rest",
    "httpx",
})
"""Words of a tool name that make it an HTTP call (with a method, even without a URL)."""
SHELL_WORDS: Final = frozenset({
    "bash", "shell", "sh", "zsh", "terminal", "exec", "execute", "run", "cmd", "command",
    "console", "powershell", "pwsh", "subprocess",
})
COMMAND_KEYS: Final = ("command", "cmd", "commands", "script", "shell_command")
"""Arguments that carry a command line; with a shell word in the tool's name, the line is
parsed (``shell``)."""
CLI_PROGRAMS: Final = frozenset({
    "git", "kubectl", "docker", "gh", "helm", "terraform", "npm", "yarn", "pnpm", "pip", "uv",
    "aws", "gcloud", "az", "psql",
})
"""Programs a tool may be named after (``git_log``, ``kubectl(command="get pods")``)."""
CLI_KEYS: Final = ("command", "cmd", "args", "arguments", "subcommand")
SQL_WORDS: Final = frozenset({
    "sql", "db", "database", "postgres", "postgresql", "pg", "psql", "mysql", "sqlite",
    "duckdb", "bigquery", "bq", "snowflake", "clickhouse", "redshift", "athena", "trino",
    "presto", "databricks", "mssql", "tsql", "oracle", "supabase",
})
SQL_NAMES: Final = frozenset({("query",), ("run", "query"), ("execute", "query")})
"""Names that are a SQL tool without a database word (a ``search(query=…)`` is not)."""
SQL_KEYS: Final = ("sql", "query", "statement", "sql_query", "query_text")
ACTION_KEYS: Final = ("action", "command", "operation", "op", "subcommand")
"""Arguments that name what a multi-purpose tool does (``str_replace_editor(command="view")``,
``computer(action="left_click")``)."""

_IDENTIFIER = re.compile(r"[A-Za-z][\w.\-/]{0,63}")
_GRAPHQL_COMMENT = re.compile(r"^(?:\s*#[^\n]*\n)*\s*")
_KINDS: Final[dict[KindGuess, ToolKind]] = {"read": "read", "write": "write", "poll": "poll"}


def infer_kind(
    tool: str, args: Any, annotations: Mapping[str, Any] | None = None
) -> tuple[ToolKind, KindSource] | None:
    """The kind of a call nobody declared and where it came from, or ``None`` when nothing
    tells (the module docstring gives the order)."""
    try:
        kind = _annotation_kind(annotations)
        if kind is not None:
            return kind, "annotation"
        name = tool if isinstance(tool, str) else ""
        kind = _method_kind(name, args)
        if kind is not None:
            return kind, "method"
        kind = _KINDS.get(_named_kind(name, args) or "opaque")
        if kind == "write" and writes_nothing(args):
            kind = "read"  # (an empty write_stdin to a running process reads its output)
        return (kind, "name") if kind is not None else None
    except Exception:  # an odd input (a broken Mapping, a hostile __eq__) tells nothing
        return None


def writes_nothing(args: Any) -> bool:
    """Whether a call's text arguments are all empty (``{"session_id": 4, "chars": ""}``):
    a call its name calls a write, given nothing to write, only reads what is there."""
    if not isinstance(args, Mapping):
        return False
    texts = [value for value in args.values() if isinstance(value, str)]
    return bool(texts) and not any(text.strip() for text in texts)


def idempotent_hint(annotations: Mapping[str, Any] | None) -> bool | None:
    """The MCP ``idempotentHint``: ``True`` when calling again with the same arguments has no
    further effect, ``None`` when not given."""
    try:
        return _hint(annotations, "idempotentHint", "idempotent_hint")
    except Exception:
        return None


def _hint(annotations: Any, name: str, python_name: str) -> bool | None:
    """One MCP hint by its wire name, else by the SDK's field name (a ``ToolAnnotations``
    object, or its ``model_dump()`` without aliases)."""
    if annotations is None:
        return None
    if isinstance(annotations, Mapping):
        value = annotations.get(name)
        if value is None:
            value = annotations.get(python_name)
    else:
        value = getattr(annotations, python_name, None)
        if value is None:
            value = getattr(annotations, name, None)
    return value if isinstance(value, bool) else None


def _annotation_kind(annotations: Any) -> ToolKind | None:
    read_only = _hint(annotations, "readOnlyHint", "read_only_hint")
    if read_only is True:
        return "read"
    if read_only is False or _hint(annotations, "destructiveHint", "destructive_hint") is True:
        return "write"
    return None


def _method_kind(name: str, args: Any) -> ToolKind | None:
    if not isinstance(args, Mapping) or args.keys().isdisjoint(METHOD_KEYS):
        return None  # (most calls: no method argument, ruled out at C speed)
    method = next((v for k in METHOD_KEYS if isinstance(v := args.get(k), str)), None)
    kind = HTTP_METHOD_KINDS.get(method.strip().upper()) if method is not None else None
    if kind is None:
        return None
    if any(isinstance(v := args.get(k), str) and v for k in URL_KEYS):
        return kind
    return kind if not HTTP_WORDS.isdisjoint(name_words(name)) else None


def _named_kind(name: str, args: Any) -> KindGuess | None:
    """What the tool's name and arguments say (``None``: nothing; ``opaque``: nothing to be
    had, stop looking)."""
    words = name_words(name)
    present = frozenset(words)
    shellish = not present.isdisjoint(SHELL_WORDS)
    sqlish = not present.isdisjoint(SQL_WORDS) or words in SQL_NAMES
    if not isinstance(args, Mapping):
        args = ({"command": args} if shellish else {"query": args} if sqlish else {})

    program = next((word for word in words if word in CLI_PROGRAMS), None)
    if program is not None:
        kind = _cli_kind(program, words, args)
        if kind is not None and kind != "opaque":
            return kind

    line = _text(args, COMMAND_KEYS)
    if line is not None and (shellish or (" " in line.strip()
                                          and known_program(line.split(None, 1)[0]))):
        kind = command_kind(line)
        if kind is not None:
            return kind  # opaque too: the command line is what runs, whatever the name says

    sql = _text(args, SQL_KEYS)
    if sql is not None and (sqlish or "sql" in args or "sql_query" in args):
        kind = statement_kind(sql)
        if kind is not None:
            return kind

    if "graphql" in present:
        kind = _graphql_kind(_text(args, ("query", "mutation", "document")))
        if kind is not None:
            return kind

    for key in ACTION_KEYS:
        action = args.get(key)
        if isinstance(action, str) and _IDENTIFIER.fullmatch(action):
            kind = name_kind(action)
            if kind is not None:
                return kind
    return name_kind(name)


def _text(args: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` that holds text; an argument vector is joined as a command line,
    a list of ``commands`` one per line."""
    if args.keys().isdisjoint(keys):
        return None  # (most calls: ruled out at C speed)
    for key in keys:
        value = args.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            return "\n".join(value) if key == "commands" else shlex.join(value)
    return None


def _cli_kind(program: str, words: tuple[str, ...], args: Mapping[str, Any]) -> KindGuess | None:
    """A tool named after a CLI: its arguments are the rest of the command line
    (``kubectl(command="get pods")``); without them, the rest of its name (``git_log``).
    ``opaque`` lets the caller look further (``git_create_branch``: the name's verbs)."""
    line = _text(args, CLI_KEYS)
    if line is not None:
        if line.split(None, 1)[:1] != [program]:
            line = f"{program} {line}"
        return command_kind(line)
    rest = words[words.index(program) + 1 :]
    return command_kind(" ".join((program, *rest))) if rest else None


def _graphql_kind(document: str | None) -> KindGuess | None:
    if document is None:
        return None
    body = _GRAPHQL_COMMENT.sub("", document, count=1)
    if body.startswith("mutation"):
        return "write"
    if body.startswith(("query", "{")):
        return "read"
    return "opaque" if body.startswith("subscription") else None


WAIT_VERBS: Final = ("sleep", "wait", "pause", "delay")
WAIT_WORDS: Final = frozenset({*WAIT_VERBS, "for", "seconds", "time"})
_SLEEP_LINE = re.compile(r"\s*sleep\s+\d+(?:\.\d+)?[smh]?\s*;?\s*")


def is_wait(tool: str, args: Any) -> bool:
    """Whether a call only waits: a tool named for waiting (``sleep``, ``wait``,
    ``wait_for_seconds``), or a shell line that is nothing but ``sleep N``."""
    try:
        words = name_words(tool)
        if words and words[0] in WAIT_VERBS and WAIT_WORDS.issuperset(words):
            return True
        line = _text(args, COMMAND_KEYS) if isinstance(args, Mapping) else None
        return line is not None and _SLEEP_LINE.fullmatch(line) is not None
    except Exception:  # an odd input tells nothing
        return False


CONFIRM_WORDS: Final = frozenset({
    "successful", "successfully", "sent", "posted", "published", "submitted", "placed",
    "booked", "saved", "created", "scheduled",
})
"""Words of an answer that confirms an action done: one of them must be in its word sketch
before ``_CONFIRMS`` is read."""
_CONFIRMS: Final = re.compile(
    r"(?<![\w-])(?:successful(?:ly)?\b(?! *(?:=|:|\"))"
    r"|(?:has been|have been|was|were|is now|are now)\s+(?:sent|posted|published|submitted"
    r"|placed|booked|saved|created|scheduled)\b"
    r"|(?:sent|posted|published|submitted|placed|booked|saved|created|scheduled)"
    r"(?: successfully)?\s*[.!](?:\s|$|<))"
)
_DENIES: Final = re.compile(r"\b(?:not|un\w*|fail\w*|error|couldn|cannot|can't|unable)\b")


def confirms_change(text: str, words: frozenset[str] | None = None) -> bool:
    """Whether an answer says that the call did something: "Post successful", "Message
    sent.", "Your order has been placed", and no "not" or "failed" beside it. ``words`` (the
    answer's word sketch, when at hand) rules most answers out at once."""
    if words is not None and words.isdisjoint(CONFIRM_WORDS):
        return False
    head = text[:CONFIRM_CHARS].lower()
    found = _CONFIRMS.search(head)
    if found is None:
        return False
    sentence = head[max(head.rfind(".", 0, found.start()), head.rfind("\n", 0, found.start()))
                    + 1:found.end()]
    return _DENIES.search(sentence) is None
