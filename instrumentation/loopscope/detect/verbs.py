"""What the words of a call say it does: the verbs of tool names and the statements of SQL.

A tool name is split into lower-case words (snake_case, camelCase, kebab-case, dots and
slashes) and matched word by word, so ``list_deployments`` is a read: ``deployments`` is not
``deploy``. Many write verbs are also nouns (``get_order``, ``get_post``, ``get_commit``), so
they are weighed in this order:

1. a browser UI action named first (``click``, ``type``, ``fill``, ``select_option``) tells
   nothing: a click can do anything;
2. a verb that is only a verb and writes (``create``, ``send``, ``delete``, ``update``);
3. a word that waits (``poll``, ``wait``, ``await``, ``watch``);
4. a verb or noun that reads (``get``, ``list``, ``search``, ``status``, ``navigate``);
5. a write verb that is also a noun (``order``, ``post``, ``book``, ``refund``, ``deploy``).

A SQL text is read by its statements' first keywords (comments and string literals set
aside): ``SELECT`` reads, ``INSERT`` writes, a ``WITH`` reads unless a data-modifying
statement hides in it.

Example:
    >>> name_kind("createInvoice"), name_kind("list_deployments"), name_kind("get_order")
    ('write', 'read', 'read')
    >>> name_kind("browser_click"), statement_kind("-- report\\nWITH t AS (SELECT 1) SELECT *")
    ('opaque', 'read')
"""

from __future__ import annotations

import re
from typing import Final, Literal

KindGuess = Literal["read", "write", "poll", "opaque"]
"""A kind, or ``opaque``: the words were understood and tell nothing (a click, a stored
procedure, a script); callers stop looking and answer ``None``."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


WRITE_VERBS: Final = _words("""
    create send delete remove update cancel submit insert put write edit modify upload
    publish apply approve purchase buy pay assign enroll rename move revoke notify upsert save
    destroy drop kill terminate restart reboot disable enable subscribe unsubscribe
    launch reject decline accept confirm reopen unlock
    ban mute unmute unfollow unlike forward retweet replace uninstall
    provision scale rollback revert migrate increment decrement append attach detach unassign
    withdraw deposit void authorize signup fulfill dispatch activate deactivate suspend
    resume pause unpause unblock deny respond rsvp duplicate clone undo redo
    initiate
""")
"""Verbs that are (almost) never nouns in a tool name: any of them makes the call a write."""
WRITE_NOUN_VERBS: Final = _words("""
    post order book refund charge transfer commit push merge deploy comment reply email tweet
    message invite register reserve place store record grant draft tag label flag issue
    complete archive sync share wire add set start stop block like copy schedule restore ship
    sign lock patch trigger clear mark reset install follow checkout
""")
"""Write verbs that are also nouns (``get_order``, ``list_posts``, ``get_commit``): they make a
call a write only when no other word reads."""
READ_WORDS: Final = _words("""
    get list search read fetch query describe status find lookup look show view check count
    browse inspect retrieve load scan grep cat ls head tail stat info details summary select
    explore analyze peek preview download verify validate ping diff compare summarize explain
    navigate goto visit screenshot snapshot crawl scrape is has exists lookups metadata stats
    health logs history whoami display
""")
"""Verbs, and the nouns a name asks for (``status``, ``info``, ``details``), that read."""
POLL_WORDS: Final = _words("poll wait await watch")
_JOINED: Final = _words("or and then")
"""A second verb joined to the first (``get_or_create``) may write."""
UI_WORDS: Final = _words("""
    click dblclick type fill press hover scroll drag tap swipe keypress mouse keyboard
""")
"""Browser and desktop UI actions: what they change depends on the page, not the name."""
UI_PHRASES: Final = frozenset({("select", "option"), ("file", "upload"), ("handle", "dialog")})

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of a tool name: ``sendSlackMessage`` → send, slack, message."""
    return tuple(word.lower() for word in _WORD.findall(name))


def name_kind(name: str) -> KindGuess | None:
    """What the words of ``name`` say the call does, or ``None`` when they say nothing."""
    return words_kind(name_words(name))


def words_kind(words: tuple[str, ...]) -> KindGuess | None:
    """What a sequence of lower-case words says (the weighing of the module docstring)."""
    for at, word in enumerate(words):
        if word in UI_WORDS or words[at : at + 2] in UI_PHRASES:
            return "opaque"  # a UI action named before any verb
        if word in WRITE_VERBS or word in READ_WORDS or word in POLL_WORDS:
            break
    present = frozenset(words)
    head = next((w for w in words if w in _VERBS), "")
    if not _JOINED.intersection(words):  # the first verb says it (get_or_create: both do)
        if head in READ_WORDS:
            return "read"  # get_restore_status, check_install_status, view_patch
        if head in WRITE_NOUN_VERBS:  # post_message, mark_as_read; as a noun: order_status
            after = words[words.index(head) + 1 : words.index(head) + 2]
            return "read" if after and after[0] in READ_WORDS else "write"
    if not present.isdisjoint(WRITE_VERBS):
        return "write"
    if not present.isdisjoint(POLL_WORDS):
        return "poll"
    if not present.isdisjoint(READ_WORDS):
        return "read"
    if not present.isdisjoint(WRITE_NOUN_VERBS):
        return "write"
    return None


_VERBS: Final = WRITE_VERBS | WRITE_NOUN_VERBS | READ_WORDS | POLL_WORDS

HTTP_METHOD_KINDS: Final[dict[str, Literal["read", "write"]]] = {
    "GET": "read", "HEAD": "read", "OPTIONS": "read",
    "POST": "write", "PUT": "write", "PATCH": "write", "DELETE": "write",
}
"""What an HTTP method does (upper case); other methods tell nothing."""


# -- SQL ---------------------------------------------------------------------------------------

SQL_READS: Final = _words("SELECT SHOW DESCRIBE DESC PRAGMA VALUES TABLE FROM FETCH SUMMARIZE")
SQL_WRITES: Final = _words("""
    INSERT UPDATE DELETE MERGE UPSERT REPLACE CREATE DROP ALTER TRUNCATE GRANT REVOKE RENAME
    COMMENT VACUUM REINDEX REFRESH CLUSTER NOTIFY IMPORT INSTALL
""")
SQL_NEUTRAL: Final = _words("BEGIN START COMMIT ROLLBACK END SET USE SAVEPOINT RELEASE ABORT")
"""Transaction control and session settings: they neither read nor write data."""
SQL_OPAQUE: Final = _words("""
    CALL EXEC EXECUTE DO PREPARE LOCK ANALYZE ATTACH DETACH LOAD LISTEN UNLISTEN DECLARE
    CHECKPOINT RESET DISCARD
""")
"""Statements whose effect the text does not show (a stored procedure, a prepared statement)."""

_SQL_NOISE = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|--[^\n]*|/\*.*?\*/|\$(\w*)\$.*?\$\1\$",
    re.DOTALL,
)
"""String literals, quoted identifiers, comments and dollar-quoted bodies, left to right (so a
``--`` inside a string is not a comment)."""
_SQL_HIDDEN_WRITE = re.compile(r"\b(?:INSERT|UPDATE|DELETE|MERGE)\b")
_SQL_LOCKING = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?(?:UPDATE|SHARE)\b")
_SQL_EXPLAIN = re.compile(r"EXPLAIN\s*(?:\(([^)]*)\))?\s*((?:ANALY[SZ]E\b)?)\s*(?:VERBOSE\b)?")
_SQL_KEYWORD = re.compile(r"[A-Z]+")


def statement_kind(sql: str) -> KindGuess | None:
    """What a SQL text does: a write if any statement writes, a read if they all read.

    ``None`` when the text does not start like SQL (a question in English), ``opaque`` when
    it is SQL whose effect cannot be told (``CALL``, ``EXECUTE``, only ``BEGIN``/``COMMIT``).
    """
    text = _SQL_NOISE.sub(lambda m: " " if m.group(0)[:2] in ("--", "/*") else "''", sql)
    kinds: list[KindGuess | Literal["neutral"]] = []
    for statement in text.upper().split(";"):
        statement = statement.strip().lstrip("(").strip()
        if not statement:
            continue
        kind = _statement(statement)
        if kind is None:
            if not kinds:
                return None  # not SQL at all
            kind = "opaque"
        kinds.append(kind)
    if not kinds:
        return None
    if "write" in kinds:
        return "write"
    return "read" if "read" in kinds and "opaque" not in kinds else "opaque"


def _statement(statement: str) -> KindGuess | Literal["neutral"] | None:
    first = _SQL_KEYWORD.match(statement)
    keyword = first.group(0) if first else ""
    if keyword == "WITH":  # a CTE reads unless a data-modifying statement hides in it
        body = _SQL_LOCKING.sub(" ", statement)
        return "write" if _SQL_HIDDEN_WRITE.search(body) else "read"
    if keyword == "EXPLAIN":  # EXPLAIN ANALYZE runs the statement it explains
        explain = _SQL_EXPLAIN.match(statement)
        if explain and (explain.group(2) or "ANALY" in (explain.group(1) or "")):
            return "write" if _statement(statement[explain.end() :]) == "write" else "read"
        return "read"
    if keyword == "COPY":
        return "read" if statement[4:].lstrip().startswith("(") or " TO " in statement else "write"
    if keyword in SQL_READS:
        return "read"
    if keyword in SQL_WRITES:
        return "write"
    if keyword in SQL_NEUTRAL:
        return "neutral"
    if keyword in SQL_OPAQUE:
        return "opaque"
    return None
