"""One false-kill rule (docs/metrics.md, "False-kill rate"): ``loopscope eval``, the Policy
page's replay and the collector's ``metrics_breakdown`` read give the same answer on the same
labelled and unlabelled runs, and the rule's SQL spelling equals its Python one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from loopscope.detect import Policy
from loopscope.detect.episode_records import parse_episode
from loopscope.detect.false_kill import kill_was_false
from loopscope.detect.replay import replay
from loopscope.offline.cli import main
from loopscope.offline.evaluation import evaluate
from loopscope.policy_file import load_policy
from loopscope_collector.metrics.compute import compute_metrics
from loopscope_collector.reads import fragment, read
from loopscope_collector.storage import open_database
from loopscope_dashboard import replays

pytestmark = pytest.mark.timeout(300)


def test_the_sql_rule_is_the_python_rule_on_every_combination() -> None:
    """The ``false_kill_rule`` fragment of reads.sql against ``kill_was_false``, over every
    combination of its inputs (nulls included)."""
    combos = list(itertools.product(
        (False, True), (None, False, True), (None, 2, 5), (None, 3), (None, "success",
        "failure", "aborted"), (False, True)))
    con = duckdb.connect()
    con.execute("create table k (human_false_kill boolean, loop_label boolean, "
                "first_loop_step integer, kill_step integer, outcome varchar, "
                "progress_after_kill boolean, i integer)")
    con.executemany("insert into k values (?, ?, ?, ?, ?, ?, ?)",
                    [(*combo, i) for i, combo in enumerate(combos)])
    got = dict(con.execute(f"select i, ({fragment('false_kill_rule')}) from k order by i")
               .fetchall())
    for i, (human, label, first, kill, outcome, progress) in enumerate(combos):
        want = kill_was_false(label=label, kill_step=kill, first_loop_step=first,
                              human_false_kill=human, outcome=outcome,
                              progress_after_kill=progress)
        assert got[i] == want, (human, label, first, kill, outcome, progress)
    assert {None, True, False} <= set(got.values())


SPIN = {"type": "tool", "tool": "search_orders", "args": {"q": "late"},
        "output": "orders 1 and 2 are late", "status": "ok", "kind": "read"}


def _progress(n: int) -> list[dict[str, Any]]:
    """``n`` reads that each find something new."""
    return [{"type": "tool", "tool": "get_order", "args": {"order": f"A-{i}"},
             "output": f"order A-{i} ships to {city} on day {i + 3}", "status": "ok",
             "kind": "read"}
            for i, city in zip(range(n), ("Lyon", "Porto", "Kyoto", "Tucson"), strict=False)]


def _episode(episode_id: str, steps: list[dict[str, Any]], *, outcome: str | None,
             label: dict[str, Any] | None = None) -> dict[str, Any]:
    timed = [{**step, "t": float(i), "tool_call_id": f"c{i}"} for i, step in enumerate(steps)]
    return {"episode_id": episode_id, "task_type": "lookup", "outcome": outcome,
            "label": label, "steps": timed}


EPISODES = [  # (episode, its verdict under the rule: True false kill, False right, None none)
    (_episode("loop-killed-in-loop", [SPIN] * 5, outcome="failure",
              label={"loop": True, "first_loop_step": 1}), False),
    (_episode("loop-killed-early", [SPIN] * 5 + _progress(3), outcome="failure",
              label={"loop": True, "first_loop_step": 6}), True),
    (_episode("no-loop-killed", [SPIN] * 5, outcome="success", label={"loop": False}), True),
    (_episode("no-loop-healthy", _progress(4), outcome="success", label={"loop": False}),
     None),
    (_episode("unlabelled-success-progress", [SPIN] * 4 + _progress(3), outcome="success"),
     True),
    (_episode("unlabelled-success-stuck", [SPIN] * 6, outcome="success"), False),
    (_episode("unlabelled-failure-progress", [SPIN] * 4 + _progress(3), outcome="failure"),
     False),
    (_episode("unlabelled-no-outcome", [SPIN] * 4 + _progress(3), outcome=None), "unjudged"),
]


def _counts(rate: dict[str, Any]) -> tuple[int, int]:
    return rate["count"], rate["n"]


def _eval(record: dict[str, Any]) -> tuple[int, int]:
    result = evaluate([replay(parse_episode(record), mode="enforce")])
    ours = next(s for s in result["systems"] if s["system"] == "loopscope")
    return _counts(ours["labelled"]["false_kill_rate"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runs stored by ``loopscope analyze --db`` (the collector's pipeline), one file and
    so one service per run."""
    folder = tmp_path_factory.mktemp("false-kill")
    paths = []
    for record, _ in EPISODES:
        path = folder / f"{record['episode_id']}.jsonl"
        path.write_text(json.dumps(record) + "\n", encoding="utf-8")
        paths.append(str(path))
    db = folder / "runs.duckdb"
    assert main(["analyze", "--db", str(db), *paths]) in (0, 1)
    return db


def _metrics_and_runs(path: Path) -> tuple[dict[str, Any], list[replays.StoredRun]]:
    """What the metrics and the Policy page read from the store at ``path``."""
    db = open_database(path, read_only=True)
    try:
        return compute_metrics(db), replays.stored_runs(
            pd.DataFrame(read(db, "replay_episodes", {})), read(db, "replay_calls", {}))
    finally:
        db.close()


def test_eval_the_policy_page_and_the_metrics_agree_run_by_run(store: Path) -> None:
    """Each run's (false kills, judged kills) under each of the three, and the expected
    verdict; then the totals."""
    metrics, runs = _metrics_and_runs(store)
    by_service = {row["key"]: _counts(row["false_kill_rate"])
                  for row in metrics["breakdown"]["service"]}
    verdicts = {v.episode_id: v for v in replays.replay_all(runs, Policy(), workers=1)}
    expected = {None: (0, 0), "unjudged": (0, 0), True: (1, 1), False: (0, 1)}
    for record, want in EPISODES:
        episode_id = record["episode_id"]
        page = verdicts[episode_id]
        seen = {"eval": _eval(record), "metrics": by_service[episode_id],
                "policy page": (int(page.false_kill), int(page.kill_judged))}
        assert seen == dict.fromkeys(seen, expected[want]), episode_id
        killed = want is not None
        assert (page.first_kill_call is not None) == killed, episode_id
    score = replays.score(list(verdicts.values()))
    total = _counts(metrics["false_kill_rate"])
    assert total == (score.false_stops, score.judged_stops) == (3, 6)
    everything = evaluate([replay(parse_episode(r), mode="enforce") for r, _ in EPISODES])
    assert _counts(everything["systems"][0]["labelled"]["false_kill_rate"]) == total
    assert metrics["false_kill_rate"]["rule_kills_with_unknown_outcome"] == 1


def test_a_kill_after_the_runs_budget_stop_is_no_kill_by_all_three(tmp_path: Path) -> None:
    """A run stopped by a budget (three tool calls) whose recorded calls go on into a spin
    the detectors would stop: under enforce it ended at the budget stop, so it has no kill
    (``false_kill.first_kill``) for eval, the Policy page and the metrics alike; a run whose
    spin comes before the budget stop keeps its kill."""
    policy = {"budgets": {"tool_calls": 3}}
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(policy), encoding="utf-8")
    after = _episode("kill-after-budget-stop", _progress(3) + [SPIN] * 6, outcome="success")
    before = _episode("kill-before-budget-stop", [SPIN] * 6, outcome="success")
    paths = []
    for record in (after, before):
        path = tmp_path / f"{record['episode_id']}.jsonl"
        path.write_text(json.dumps(record) + "\n", encoding="utf-8")
        paths.append(str(path))
    db_path = tmp_path / "runs.duckdb"
    assert main(["analyze", "--db", str(db_path), "--policy", str(policy_file), *paths]) in (0, 1)
    metrics, runs = _metrics_and_runs(db_path)
    by_service = {row["key"]: row for row in metrics["breakdown"]["service"]}
    loaded = load_policy(str(policy_file))
    assert loaded is not None
    verdicts = {v.episode_id: v for v in replays.replay_all(runs, loaded, workers=1)}
    for record, killed in ((after, False), (before, True)):
        episode_id = record["episode_id"]
        report = replay(parse_episode(record), loaded, mode="enforce")
        ours = evaluate([report])["systems"][0]["labelled"]
        seen = {"eval": ours["false_kill_rate"]["n"],
                "metrics": by_service[episode_id]["false_kill_rate"]["n"],
                "policy page": int(verdicts[episode_id].kill_judged)}
        assert seen == dict.fromkeys(seen, int(killed)), (episode_id, seen)
        assert (verdicts[episode_id].first_kill_call is not None) == killed
