"""Kinds without a declaration: MCP annotations, then the HTTP method, then the name and args.

Each table row is one call as an agent makes it, and the kind and source the core should
infer for it (``None``: nothing tells, and guessing would be worse than not knowing).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopscope.detect import Decision, EpisodeMonitor, ToolResult
from loopscope.detect.kinds import confirms_change, idempotent_hint, infer_kind
from loopscope.detect.shell import command_kind
from loopscope.detect.steps import MessageStep, ToolStep, feed, recorded_call
from loopscope.detect.texts import word_sketch
from loopscope.detect.verbs import name_kind, name_words, statement_kind

# -- the order of the sources -----------------------------------------------------------------

ANNOTATIONS = [
    ("search_docs", {"q": "x"}, {"readOnlyHint": True}, ("read", "annotation")),
    # the server's word beats the name, both ways
    ("delete_cache_entry", {"key": "k"}, {"readOnlyHint": True}, ("read", "annotation")),
    ("get_report", {"id": 1}, {"readOnlyHint": False}, ("write", "annotation")),
    ("get_report", {"id": 1}, {"destructiveHint": True}, ("write", "annotation")),
    ("list_things", {}, {"readOnlyHint": True, "destructiveHint": True}, ("read", "annotation")),
    # the SDK's own field names (a ToolAnnotations dumped without aliases)
    ("lookup", {}, {"read_only_hint": True}, ("read", "annotation")),
    # hints that say nothing about reading or writing fall through to the name
    ("get_report", {"id": 1}, {"idempotentHint": True}, ("read", "name")),
    ("get_report", {"id": 1}, {"openWorldHint": True, "title": "Report"}, ("read", "name")),
    ("get_report", {"id": 1}, {"destructiveHint": False}, ("read", "name")),
    ("get_report", {"id": 1}, {"readOnlyHint": "true"}, ("read", "name")),  # not a boolean
    ("frobnicate", {}, {"idempotentHint": True}, None),
    ("frobnicate", {}, {}, None),
]

METHODS = [
    ("http_request", {"method": "post", "url": "https://api.example.com/x"}, ("write", "method")),
    ("http_request", {"method": "GET", "url": "https://api.example.com/x"}, ("read", "method")),
    ("call", {"verb": "DELETE", "endpoint": "/orders/7"}, ("write", "method")),
    ("call", {"http_method": "head", "uri": "https://x"}, ("read", "method")),
    ("invoke", {"method": "PATCH", "path": "/users/1"}, ("write", "method")),
    ("invoke", {"method": "OPTIONS", "path": "/"}, ("read", "method")),
    # no URL: only a tool whose name says HTTP
    ("api_call", {"method": "PUT"}, ("write", "method")),
    ("send_webhook", {"method": "GET"}, ("read", "method")),
    ("sort_rows", {"method": "POST"}, None),
    # an unknown method tells nothing; the name decides
    ("fetch", {"method": "TRACE", "url": "https://x"}, ("read", "name")),
    # a method beats the name
    ("get_resource", {"method": "DELETE", "url": "https://x/1"}, ("write", "method")),
]


@pytest.mark.parametrize(("tool", "args", "annotations", "expected"), ANNOTATIONS)
def test_mcp_annotations_come_first(
    tool: str, args: Any, annotations: dict[str, Any], expected: Any
) -> None:
    assert infer_kind(tool, args, annotations) == expected


@pytest.mark.parametrize(("tool", "args", "expected"), METHODS)
def test_the_http_method_of_an_http_call(tool: str, args: Any, expected: Any) -> None:
    assert infer_kind(tool, args) == expected


def test_annotations_beat_the_method_and_the_method_beats_the_name() -> None:
    args = {"method": "POST", "url": "https://x/search"}
    assert infer_kind("search", args, {"readOnlyHint": True}) == ("read", "annotation")
    assert infer_kind("search", args) == ("write", "method")
    assert infer_kind("search", {"url": "https://x/search"}) == ("read", "name")


def test_annotations_may_be_an_sdk_object() -> None:
    class ToolAnnotations:  # the shape of mcp's pydantic model
        read_only_hint = None
        destructive_hint = True
        idempotent_hint = False

    annotations: Any = ToolAnnotations()
    assert infer_kind("get_x", {}, annotations) == ("write", "annotation")
    assert idempotent_hint(annotations) is False


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [({"idempotentHint": True}, True), ({"idempotentHint": False}, False),
     ({"idempotent_hint": True}, True), ({"idempotentHint": "yes"}, None), ({}, None),
     (None, None), ([1, 2], None)],
)
def test_idempotent_hint(annotations: Any, expected: bool | None) -> None:
    assert idempotent_hint(annotations) is expected


# -- tool names -------------------------------------------------------------------------------

NAMES = [
    # write verbs, in every spelling of a name
    ("createInvoice", "write"), ("sendSlackMessage", "write"), ("send_email", "write"),
    ("refund_order", "write"), ("charge-card", "write"), ("book_flight", "write"),
    ("delete_file", "write"), ("update_ticket", "write"), ("git_commit", "write"),
    ("push_changes", "write"), ("deploy_service", "write"), ("mcp__github__create_issue",
                                                              "write"),
    ("stripe.charges.create", "write"), ("payments/refund", "write"), ("place_order", "write"),
    ("post_message", "write"), ("mark_as_read", "write"), ("get_or_create_user", "write"),
    ("write_file", "write"), ("str_replace_editor", "write"),
    # reads; whole words only: deployments is not deploy, posts is not post
    ("list_deployments", "read"), ("search_orders", "read"), ("get_order", "read"),
    ("get_post", "read"), ("list_posts", "read"), ("get_commit", "read"), ("get_booking", "read"),
    ("order_status", "read"), ("getURLStatus", "read"), ("describe_instances", "read"),
    ("issues/list", "read"), ("lookup_customer", "read"), ("read_file", "read"),
    ("fetch", "read"), ("get_place_details", "read"), ("user_info", "read"),
    ("check_background_tasks", "read"),
    # polls
    ("poll_job", "poll"), ("wait_for_export", "poll"), ("await_completion", "poll"),
    ("watchDeployment", "poll"),
    # browser and desktop UI: a click can do anything
    ("browser_click", None), ("browser_type", None), ("browser_fill_form", None),
    ("browser_press_key", None), ("browser_select_option", None), ("browser_hover", None),
    ("browser_file_upload", None), ("scroll_page", None), ("type_text", None),
    ("browser_navigate", "read"), ("browser_take_screenshot", "read"),
    ("browser_snapshot", "read"), ("goto", "read"), ("get_text", "read"), ("get_type", "read"),
    # nothing to go on
    ("condense_context", None), ("think", None), ("frobnicate", None), ("", None),
    ("HTTPRequest", None), ("deployments", None),
]


@pytest.mark.parametrize(("tool", "expected"), NAMES)
def test_the_words_of_a_tool_name(tool: str, expected: str | None) -> None:
    assert infer_kind(tool, {"x": 1}) == ((expected, "name") if expected else None)


def test_names_split_into_words() -> None:
    assert name_words("sendSlackMessage") == ("send", "slack", "message")
    assert name_words("HTTPRequest_v2") == ("http", "request", "v")
    assert name_words("mcp__github__create_issue") == ("mcp", "github", "create", "issue")
    assert name_words("stripe.charges/create-refund") == ("stripe", "charges", "create", "refund")
    assert name_kind("list_deployments") == "read" and name_kind("deploy") == "write"


# -- shell commands ---------------------------------------------------------------------------

COMMANDS = [
    # reads
    ("git status", "read"), ("git log --oneline -5", "read"), ("git -C repo diff", "read"),
    ("git branch -a", "read"), ("git remote -v", "read"), ("git stash list", "read"),
    ("ls -la | head -20", "read"), ("cat a.txt | grep foo | wc -l", "read"),
    ("grep -rn 'foo(' src", "read"), ("kubectl get pods -n prod", "read"),
    ("kubectl -n prod describe pod api-1", "read"), ("kubectl rollout status deploy/api", "read"),
    ("docker ps -a", "read"), ("docker compose -f dev.yml logs", "read"),
    ("curl -s https://api.example.com/health", "read"), ("curl -I https://x", "read"),
    ("curl -G -d q=1 https://x/search", "read"), ("pytest -q tests/", "read"),
    ("python -m pytest -x", "read"), ("npm test", "read"), ("npm run test:unit", "read"),
    ("go test ./...", "read"), ("cargo test", "read"), ("make test", "read"),
    ("yarn lint", "read"), ("ruff check .", "read"), ("black --check .", "read"),
    ("echo hi 2>&1", "read"), ("ls >/dev/null 2>&1", "read"), ("git log | tee /dev/null", "read"),
    ("terraform plan", "read"), ("gh pr list", "read"), ("aws ec2 describe-instances", "read"),
    ("gcloud compute instances list", "read"), ("psql -c 'SELECT count(*) FROM orders'", "read"),
    ("sqlite3 app.db 'select * from t'", "read"), ("redis-cli GET session:1", "read"),
    ("FOO=1 sudo -E env BAR=2 git status", "read"), ("if [ -f x ]; then cat x; fi", "read"),
    ("ssh web-1 'systemctl status nginx'", "read"), ("docker exec -it box ls /app", "read"),
    ("bash -lc \"ls && pwd\"", "read"), ("echo \"a > b\"", "read"), ("find . -name '*.py'", "read"),
    ("tar tzf a.tgz", "read"), ("uv run pytest", "read"), ("cd repo && git status", "read"),
    # writes
    ("cd x && git push", "write"), ("cd repo && git push origin main 2>&1", "write"),
    ("git commit -am 'fix(parser): x; y'", "write"), ("git checkout -b feature", "write"),
    ("git branch feature", "write"), ("git tag v1.2", "write"), ("git stash", "write"),
    ("git config user.name Ana", "write"), ("rm -rf build", "write"), ("mkdir -p a && ls", "write"),
    ("echo hi > notes.txt", "write"), ("cat a >> b", "write"), ("ls 2> errors.log", "write"),
    ("git log | tee log.txt", "write"), ("sed -i 's/a/b/' f.py", "write"),
    ("sed -Ei.bak 's/a/b/' f.py", "write"), ("pip install requests", "write"),
    ("npm install", "write"), ("sudo apt-get install -y jq", "write"),
    ("kubectl apply -f deploy.yaml", "write"), ("kubectl rollout restart deploy/api", "write"),
    ("kubectl exec api-1 -- rm /tmp/lock", "write"), ("docker run -d nginx", "write"),
    ("docker compose up -d", "write"), ("terraform apply -auto-approve", "write"),
    ("curl -X POST https://x/orders", "write"), ("curl -sSfX DELETE https://x/1", "write"),
    ("curl -XPUT https://x/1", "write"), ("curl -d 'a=1' https://x", "write"),
    ("curl --data-raw '{}' https://x", "write"), ("curl --json '{}' https://x", "write"),
    ("psql -c \"INSERT INTO t VALUES (1)\"", "write"), ("psql -c 'DROP TABLE t'", "write"),
    ("gh pr create --fill", "write"), ("gh pr merge 12 --squash", "write"),
    ("gh api -X POST repos/o/r/issues", "write"), ("make deploy", "write"),
    ("find . -name '*.pyc' -delete", "write"), ("find . -name x -exec rm {} \\;", "write"),
    ("xargs rm < files.txt", "write"), ("echo $(rm -rf tmp)", "write"),
    ("bash -c 'git push'", "write"), ("ssh web-1 'sudo systemctl restart nginx'", "write"),
    ("aws s3 cp a.txt s3://bucket/a.txt", "write"), ("gcloud run deploy api --image x", "write"),
    ("ruff check --fix .", "write"), ("black src", "write"), ("git log # then\ngit push", "write"),
    ("cat <<'EOF' > conf.py\nx = \"it's\"\nEOF\npython conf.py", "write"),
    # polls
    ("sleep 30 && kubectl rollout status deploy/x", "poll"), ("sleep 10; git status", "poll"),
    ("sleep 5", "poll"), ("watch -n 5 kubectl get pods", "poll"),
    ("until curl -sf https://x/health; do sleep 2; done", "poll"),
    ("until ./ready.sh; do sleep 5; done", "poll"),
    ("for i in $(seq 1 10); do curl -s https://x/job/1; sleep 5; done", "poll"),
    ("kubectl wait --for=condition=ready pod/api-1", "poll"), ("kubectl get pods -w", "poll"),
    ("gh run watch 42", "poll"),
    # unknown: anything could happen
    ("python -c 'print(1)'", None), ("python manage.py migrate", None), ("./deploy.sh", None),
    ("npm run build", None), ("make", None), ("cd /tmp", None), ("ls && ./build.sh", None),
    ("python - <<EOF\nimport os\nEOF", None), ("echo 'unterminated", None),
    ("while true; do ./x; done", None), ("", None), ("   ", None),
]


@pytest.mark.parametrize(("command", "expected"), COMMANDS)
def test_shell_commands_are_parsed(command: str, expected: str | None) -> None:
    assert infer_kind("bash", {"command": command}) == ((expected, "name") if expected else None)


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("run_command", {"command": ["git", "push", "origin"]}, "write"),  # an argv
        ("local_shell", {"command": ["bash", "-lc", "ls -la"]}, "read"),
        ("shell", {"commands": ["ls", "rm -rf build"]}, "write"),
        ("execute_command", {"cmd": "git status"}, "read"),
        ("terminal", {"script": "sleep 60\nkubectl get job export"}, "poll"),
        ("bash", "git diff", "read"),  # the arguments are the command itself
        ("bash", {"restart": True}, None),
        ("bash", {"command": 42}, None),
        # a command line that starts with a known program, whatever the tool is called
        ("remote", {"command": "git push origin main"}, "write"),
        # a tool named after a CLI: the arguments, or the rest of the name, are the command
        ("kubectl", {"command": "get pods -n prod"}, "read"),
        ("git", {"args": ["push", "origin"]}, "write"),
        ("run_git_command", {"command": "status"}, "read"),
        ("git_log", {"max_count": 5}, "read"), ("git_diff_unstaged", {}, "read"),
        ("git_create_branch", {"branch_name": "x"}, "write"),  # the name's verbs decide
    ],
)
def test_shell_tools_in_their_many_shapes(tool: str, args: Any, expected: str | None) -> None:
    assert infer_kind(tool, args) == ((expected, "name") if expected else None)


def test_shell_is_not_judged_by_an_action_word() -> None:
    # a multi-purpose tool's command is a sub-command, not a shell line
    assert infer_kind("str_replace_editor", {"command": "view", "path": "a.py"}) == (
        "read", "name")
    assert infer_kind("str_replace_editor", {"command": "create", "path": "a.py"}) == (
        "write", "name")
    assert infer_kind("computer", {"action": "screenshot"}) == ("read", "name")
    assert infer_kind("computer", {"action": "left_click", "coordinate": [1, 2]}) is None
    assert infer_kind("computer", {"action": "type", "text": "rm -rf /"}) is None


# -- SQL and GraphQL ---------------------------------------------------------------------------

STATEMENTS = [
    ("SELECT * FROM orders", "read"), ("  select 1", "read"),
    ("-- monthly report\n/* v2 */\n  SELECT sum(total) FROM orders", "read"),
    ("WITH late AS (SELECT * FROM orders WHERE late) SELECT count(*) FROM late", "read"),
    ("with recursive t(n) as (select 1 union all select n+1 from t) select * from t", "read"),
    ("WITH gone AS (DELETE FROM orders WHERE old RETURNING id) SELECT * FROM gone", "write"),
    ("WITH x AS (SELECT * FROM t FOR UPDATE) SELECT 1", "read"),
    ("SHOW TABLES", "read"), ("DESCRIBE orders", "read"), ("EXPLAIN SELECT 1", "read"),
    ("EXPLAIN ANALYZE DELETE FROM t", "write"), ("PRAGMA table_info(t)", "read"),
    ("SELECT 'delete from t; drop table t' AS note", "read"),
    ("SELECT 1 -- ; DROP TABLE t", "read"),
    ("INSERT INTO t VALUES (1)", "write"), ("update t set a = 1", "write"),
    ("DELETE FROM t WHERE id = 1", "write"), ("MERGE INTO t USING s ON t.id = s.id", "write"),
    ("CREATE TABLE t (id int)", "write"), ("DROP TABLE t", "write"), ("TRUNCATE t", "write"),
    ("ALTER TABLE t ADD c int", "write"), ("GRANT SELECT ON t TO bob", "write"),
    ("BEGIN; UPDATE t SET a = 1; COMMIT;", "write"), ("select 1; drop table x", "write"),
    ("COPY t TO STDOUT", "read"), ("COPY t FROM STDIN", "write"),
    ("CALL refresh_all()", "opaque"), ("BEGIN; COMMIT;", "opaque"),
    ("how many orders were late last week?", None), ("", None),
]


@pytest.mark.parametrize(("sql", "expected"), STATEMENTS)
def test_sql_statements(sql: str, expected: str | None) -> None:
    assert statement_kind(sql) == expected


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("execute_sql", {"sql": "DROP TABLE sessions"}, ("write", "name")),
        ("run_query", {"query": "  -- check\nSELECT 1"}, ("read", "name")),
        ("query", {"query": "DELETE FROM t"}, ("write", "name")),
        ("postgres_query", {"statement": "INSERT INTO t VALUES (1)"}, ("write", "name")),
        ("duckdb", "select 42", ("read", "name")),
        ("postgres_query", {"query": "CALL archive_orders()"}, None),  # a procedure: unknown
        # not SQL: the name decides
        ("run_query", {"query": "how many orders?"}, ("read", "name")),
        ("search", {"query": "delete my account"}, ("read", "name")),
        # a `sql` argument is SQL whatever the tool is called
        ("analytics", {"sql": "UPDATE t SET a = 1"}, ("write", "name")),
        ("graphql", {"query": "mutation { cancelOrder(id: 1) { ok } }"}, ("write", "name")),
        ("graphql", {"query": "# orders\nquery { orders { id } }"}, ("read", "name")),
        ("graphql", {"query": "{ orders { id } }"}, ("read", "name")),
    ],
)
def test_sql_and_graphql_tools(tool: str, args: Any, expected: Any) -> None:
    assert infer_kind(tool, args) == expected


# -- never raising ----------------------------------------------------------------------------


class Hostile(dict[str, Any]):
    def get(self, key: Any, default: Any = None) -> Any:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("tool", "args", "annotations"),
    [
        (None, None, None), (3, {"a": 1}, [1]), ("bash", object(), None),
        ("bash", {"command": None}, None), ("bash", {"command": ["ls", 3]}, None),
        ("bash", {"command": "x" * 200_000}, None), ("get_x", Hostile(), None),
        ("get_x", {}, Hostile()), ("bash", {"command": "bash -c " * 50 + "ls"}, None),
        ("bash", {"command": "((((((((("}, None), ("bash", {"command": "< > | && ;;"}, None),
    ],
)
def test_garbage_tells_nothing(tool: Any, args: Any, annotations: Any) -> None:
    assert infer_kind(tool, args, annotations) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
shellish = st.lists(
    st.sampled_from(["git", "push", "status", "ls", ">", "2>&1", "&&", "|", ";", "'", "\"",
                     "sleep", "5", "-X", "POST", "curl", "$(", ")", "<<EOF", "EOF", "\n",
                     "bash", "-c", "sudo", "A=b", "#", "\\"]),
    max_size=12,
).map(" ".join)
tool_names = st.text(max_size=30) | st.sampled_from(
    ["bash", "run_command", "execute_sql", "http_request", "git", "graphql", "computer"])
arg_keys = st.sampled_from(["command", "cmd", "commands", "query", "sql", "method", "url",
                            "action", "args"]) | st.text(max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    tool=tool_names,
    args=json_values | st.dictionaries(arg_keys, json_values | shellish, max_size=4),
    annotations=st.none() | st.dictionaries(
        st.sampled_from(["readOnlyHint", "destructiveHint", "idempotentHint", "x"]), json_values),
)
def test_infer_kind_never_raises(tool: str, args: Any, annotations: Any) -> None:
    result = infer_kind(tool, args, annotations)
    assert result is None or (result[0] in ("read", "write", "poll")
                              and result[1] in ("annotation", "method", "name"))


@settings(max_examples=300, deadline=None)
@given(text=shellish | st.text(max_size=80))
def test_command_kind_never_raises(text: str) -> None:
    assert command_kind(text) in (None, "read", "write", "poll", "opaque")


# -- the outcome: an undeclared call that says it did something wrote ------------------------

CONFIRMATIONS = [
    ("Clicked button with index 18: Post\n[9]<div>Post successful. <a>View post</a></div>", True),
    ("Message sent.", True),
    ("Your order has been placed. Order number 1182.", True),
    ("Successfully installed numpy-1.26.4", True),
    ("Settings saved successfully.", True),
    ("The message was not sent.", False),
    ("Upload failed: the file was not saved.", False),
    ("Unsuccessful login attempt", False),
    ('{"successful": true, "items": []}', False),
    ("Sent items (3)\nInbox (12)", False),
    ("created_at: 2024-06-01", False),
    ("Clicked button with index 3: Start a post", False),
    ("x" * 700 + " Message sent.", False),  # past the head that is read
]


@pytest.mark.parametrize(("text", "confirms"), CONFIRMATIONS)
def test_confirms_change(text: str, confirms: bool) -> None:
    assert confirms_change(text) is confirms
    assert confirms_change(text, word_sketch(text)) is confirms  # the quick look agrees


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_confirms_change_never_raises(text: str) -> None:
    assert confirms_change(text) in (True, False)


def _click(m: EpisodeMonitor, index: int, output: str) -> tuple[Decision, Decision]:
    return feed(m, ToolStep(recorded_call("click_element", args={"index": index}),
                            ToolResult(output)))


def test_a_click_that_confirms_is_a_write_and_the_same_click_after_the_same_steps_is_again() -> None:
    m = EpisodeMonitor()
    feed(m, MessageStep("user", "Post the job ad."))

    def post(count: int) -> tuple[Decision, Decision]:
        _click(m, 3, "Composer open")
        feed(m, ToolStep(recorded_call("input_text", args={"index": 14, "text": "We're hiring"}),
                         ToolResult("Input typed")))
        return _click(m, 18, f"Post successful. Page posts ({count})")

    before, after = post(119)
    assert (before.kind, after.kind, after.write_status) == (None, "write", "ok")
    before, after = post(120)  # the same steps, the same answer but for the count
    assert (before.kind, before.kind_source, before.action) == ("write", "outcome", "allow")
    assert after.action == "warn"
    before, _ = post(121)
    assert before.action == "block"
    # a new user turn is a new intent: the same click is a new write
    feed(m, MessageStep("user", "Great, now post it on the careers page too."))
    before, after = _click(m, 18, "Post successful. Page posts (122)")
    assert (before.action, after.action) == ("allow", "allow")


def test_a_button_whose_answers_are_new_pages_is_clicked_again_without_a_flag() -> None:
    """A "Next" clicked through a wizard confirms a save each time, but each answer is a new
    page: no redo."""
    m = EpisodeMonitor()
    feed(m, MessageStep("user", "Go through the onboarding wizard and accept the defaults."))
    for page, title in enumerate(("Company details", "Billing contact", "Invoice settings",
                                  "Team members", "Review"), start=1):
        before, after = _click(m, 5, f"Progress saved successfully. Page {page} of 5: {title}")
        assert (before.action, after.action) == ("allow", "allow"), page


def test_the_same_click_after_a_new_step_is_a_new_write() -> None:
    m = EpisodeMonitor()
    feed(m, MessageStep("user", "Update the profile; save after each field."))
    for index, value in ((4, "Tidewater Systems B.V."), (5, "NL859341207B01")):
        feed(m, ToolStep(recorded_call("input_text", args={"index": index, "text": value}),
                         ToolResult(f'Input "{value}" into index {index}')))
        before, after = _click(m, 9, "Settings saved successfully.")
        assert before.action == "allow" and after.kind == "write"
