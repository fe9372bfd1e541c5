"""The chart builders on small hand-made frames: no Streamlit, no store."""

from __future__ import annotations

import pandas as pd

from loopscope_dashboard import cards, charts, tables


def _calls(*rows: tuple[str, str, str]) -> pd.DataFrame:
    return pd.DataFrame([
        {"call": i + 1, "span_id": f"s{i}", "tool": tool, "signature": sig,
         "collector_progress": progress, "status": "ok", "guard_decision": None,
         "guard_action": None}
        for i, (tool, sig, progress) in enumerate(rows)
    ])


SPIN = _calls(("search", "a1", "new_info"), ("read", "b1", "new_info"),
              ("search", "a2", "new_info"), ("search", "a2", "none"), ("search", "a2", "none"),
              ("search", "a2", "none"), ("done", "c1", "new_info"))


def test_repeated_signatures_get_a_colour_and_one_offs_stay_grey() -> None:
    colors = charts.signature_colors(SPIN)
    assert colors["a2"] == charts.PALETTE[0]
    assert colors["a1"] == colors["b1"] == colors["c1"] == charts.UNIQUE_COLOR


def test_timeline_has_one_trace_per_signature_coloured_by_it() -> None:
    fig = charts.tool_timeline(SPIN, pd.DataFrame({"span_id": ["s5"], "kind": ["exact_repeat"]}))
    by_name = {t.name: t for t in fig.data if t.legendgroup}
    assert set(by_name) == {"search · a1", "read · b1", "search · a2", "done · c1"}
    assert by_name["search · a2"].marker.color == charts.PALETTE[0]
    assert list(by_name["search · a2"].x) == [3, 4, 5, 6]  # call ordinals: call 1 is the first
    assert by_name["search · a2"].showlegend and not by_name["search · a1"].showlegend


def test_captured_arguments_name_the_signature() -> None:
    calls = SPIN.assign(args_text='{"q":"usb-c dock"}')
    names = {t.name for t in charts.tool_timeline(calls).data if t.legendgroup}
    assert 'search({"q":"usb-c dock"})' in names


def test_the_loop_segment_is_shaded_and_named_by_its_flag() -> None:
    detections = pd.DataFrame({"span_id": ["s5"], "kind": ["exact_repeat"]})
    assert charts.loop_segments(SPIN, detections) == [charts.Segment(4, 6, "exact_repeat")]
    fig = charts.tool_timeline(SPIN, detections)
    [shade] = fig.layout.shapes
    assert (shade.x0, shade.x1, shade.fillcolor) == (3.55, 6.45, charts.LOOP_FILL)


def test_an_oscillation_is_a_cycle_and_a_lone_flag_its_own_segment() -> None:
    calls = _calls(("a", "x", "new_info"), ("b", "y", "none"), ("a", "x", "none"),
                   ("b", "y", "none"), ("a", "x", "none"), ("w", "z", "new_info"),
                   ("w", "z", "new_info"))
    detections = pd.DataFrame({"span_id": ["s4", "s6"], "kind": ["oscillation", "other"]})
    segments = charts.loop_segments(calls, detections)
    assert segments == [charts.Segment(2, 5, "oscillation"), charts.Segment(7, 7, "other")]
    assert segments[0].is_cycle
    fig = charts.tool_timeline(calls, detections)
    assert fig.layout.shapes[0].fillcolor == charts.CYCLE_FILL


def test_no_progress_without_a_flag_is_not_a_loop_segment() -> None:
    calls = _calls(("poll", "p", "none"), ("poll", "p", "none"))
    assert charts.loop_segments(calls, pd.DataFrame()) == []


def test_what_the_guard_did_and_the_budget_show_under_the_timeline() -> None:
    calls = SPIN.copy()
    calls.loc[4, ["guard_action", "guard_decision"]] = "block"
    calls.loc[5, ["guard_action", "guard_decision"]] = "stop"
    fig = charts.tool_timeline(calls, budget_limit=6)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["blocked"].x) == [5] and by_name["blocked"].marker.symbol == "x"
    assert list(by_name["stopped"].x) == [6]
    assert not any("would" in str(name) for name in by_name)
    assert any(shape.y0 == 6 for shape in fig.layout.shapes)


def test_a_would_be_stop_is_drawn_hollow_and_named_as_such() -> None:
    """Observe mode: the guard allowed the call; enforce would have stopped the run."""
    calls = SPIN.copy()
    calls["guard_action"] = "allow"
    calls.loc[5, "guard_decision"] = "stop"
    fig = charts.tool_timeline(calls)
    by_name = {t.name: t for t in fig.data}
    assert "stopped" not in by_name and "blocked" not in by_name
    would = by_name["would stop (enforce)"]
    assert list(would.x) == [6] and would.marker.symbol == "square-open"


def test_rate_chart_draws_a_line_per_service_and_the_alerts() -> None:
    t = pd.to_datetime(["2025-01-01 10:00", "2025-01-01 10:01"])
    rates = pd.DataFrame({"bucket": [*t, *t], "service": ["a", "a", "b", "b"],
                          "rate": [0.1, 0.8, 0.0, 0.2], "calls": [10, 10, 5, 5],
                          "no_progress": [1, 8, 0, 1]})
    alerts = pd.DataFrame({"fired_at": [t[1]], "rate": [0.8], "message": ["spike"]})
    fig = charts.rate_over_time(rates, alerts)
    assert [tr.name for tr in fig.data] == ["a", "b", "alert fired"]
    assert fig.data[2].marker.color == charts.ALERT_COLOR


def test_a_ranking_leaves_out_zeros_puts_the_largest_first_and_names_a_missing_key() -> None:
    frame = pd.DataFrame({"k": ["a", "b", "c", None], "v": [3, 0, 1, 2], "other": [1, 2, 3, 4]})
    ranked = tables.ranking(frame, key="k", value="v")
    assert ranked.to_dict("list") == {"k": ["a", "—", "c"], "v": [3, 2, 1]}
    many = pd.DataFrame({"k": [f"t{i:02d}" for i in range(40)], "v": range(1, 41)})
    assert list(tables.ranking(many, key="k", value="v")["v"]) == list(range(40, 25, -1))
    assert tables.ranking(pd.DataFrame(), key="k", value="v").empty


def test_empty_frames_give_a_figure_that_says_so() -> None:
    for fig in (charts.tool_timeline(pd.DataFrame()), charts.rate_over_time(pd.DataFrame())):
        assert fig.layout.annotations[0].text


def test_metric_cards_give_value_n_interval_and_trend() -> None:
    def report(count: int, n: int) -> dict:
        rate = {"value": count / n, "count": count, "n": n, "interval": [0.1, 0.9]}
        return {"loop_detection_rate": rate, "false_kill_rate": rate,
                "unknown_reconcile_latency": {"p50_s": 2.0, "p95_s": 3.0, "max_s": 4.0,
                                              "resolved": 2, "unresolved": 1},
                "cost_per_successful_task": {"value": 0.5, "total_usd": 1.0,
                                             "successful_episodes": 2,
                                             "cost_after_first_flag_usd": 0.25}}
    detection, false_kill, latency, cost = cards.metric_cards(report(3, 4), report(1, 4))
    assert (detection.value, detection.delta) == ("75.0%", "+50.0%")
    assert detection.caption == "3 of 4 labelled loops · 95% CI 10%–90%"
    assert false_kill.caption.startswith("3 of 4 judged stops · 95% CI")
    assert false_kill.delta_color == "inverse"
    assert false_kill.caption.endswith("· 0 budget stop(s) beside it")
    assert latency.value == "2.0 s p50" and "1 still unresolved" in latency.caption
    assert cost.value == "$0.5000" and cost.delta == "+0.0000"


def test_a_stop_message_counts_the_streak_the_steps_table_shows() -> None:
    """An exact repeat is stopped before the call runs (its diagnostic counts the 3 calls
    before it), output stagnation after its output (4, the stopped call counted); the Steps
    table shows 4 at call 5 either way, so the message says 4 up to call 5 in both (issue 18:
    the table said 4 where the message said 3). Without a streak on the calls (no guard), the
    diagnostic's own count is given, and where it ends."""
    import pandas as pd

    from loopscope_dashboard import truth

    calls = pd.DataFrame({"call": [1, 2, 3, 4, 5], "step": [1, 3, 5, 7, 9],
                          "streak": [0, 1, 2, 3, 4]})
    episode = {"stop_reason": "repeated_tool_call", "happened": "stopped"}
    after = {"step": 9, "detector": "output_stagnation", "no_progress_streak": 4,
             "last_progress_step": 1}
    before = {"step": 9, "detector": "exact_repeat", "no_progress_streak": 3,
              "last_progress_step": 1}
    for diagnostic in (after, before):
        assert ("4 call(s) without progress up to call 5, that call included; last progress "
                "at call 1") in truth.stop_story(episode, diagnostic, calls)[1]
    bare = calls.drop(columns=["streak"])
    assert "3 call(s) without progress before it" in truth.stop_story(episode, before, bare)[1]


def test_calls_keep_the_agents_numbers_and_the_gaps_are_named() -> None:
    """Numbered by the agent (``call_ordinal``) when every call has a distinct number, else
    in the order they ran; the missing numbers, up to the run's own count, are ranges."""
    from loopscope_dashboard import truth

    stored = pd.DataFrame({"span_id": ["a", "b", "c", "d"], "call_ordinal": [1, 5, 6, 9]})
    numbered = truth.number_calls(stored)
    assert list(numbered["call"]) == [1, 5, 6, 9] and truth.by_agent(numbered)
    assert truth.missing_calls(numbered) == [(2, 4), (7, 8)]
    assert truth.missing_calls(numbered, 11) == [(2, 4), (7, 8), (10, 11)]
    assert truth.gap_text([(2, 4), (7, 8), (10, 10)]) == "calls 2–4, 7–8 and 10 not received"
    assert truth.gap_text([(9, 9)]) == "call 9 not received"
    for foreign in ([None, None, None, None], [1, 5, None, 9], [1, 5, 5, 9]):
        other = truth.number_calls(stored.assign(call_ordinal=foreign))
        assert list(other["call"]) == [1, 2, 3, 4] and not truth.by_agent(other)
        assert truth.missing_calls(other, 11) == []  # what arrived cannot tell what did not
    # a flag on a message is at the call after the last one received before it
    flags = truth.flag_calls(pd.DataFrame({"span_id": ["m", "d"], "ordinal": [2, 3],
                                           "detector": ["monologue", "exact_repeat"]}),
                             numbered)
    assert list(flags["call"]) == [6, 9]


def test_a_stop_at_a_call_that_never_arrived_is_named_by_the_agents_number() -> None:
    from loopscope_dashboard import truth

    calls = truth.number_calls(pd.DataFrame({"call_ordinal": [1, 5, 6, 7], "step": [0, 4, 5, 6],
                                             "streak": [0, 1, 2, 3]}))
    episode = {"stop_reason": "repeated_tool_call", "happened": "stopped"}
    lost = {"step": 7, "call": 8, "detector": "exact_repeat", "no_progress_streak": 4}
    assert truth.stop_story(episode, lost, calls)[1].startswith(
        "Stopped at call 8 by exact_repeat (4 call(s) without progress before it)")
    arrived = truth.number_calls(calls.drop(columns=["call", "call_ordinal"]))
    assert "at call 8 by" in truth.stop_story(episode, lost, arrived)[1]


def test_a_gap_is_a_grey_band_and_ends_a_loop_segment() -> None:
    calls = SPIN.assign(call=[1, 2, 3, 4, 8, 9, 10])
    detections = pd.DataFrame({"span_id": ["s3", "s5"], "kind": ["exact_repeat"] * 2})
    assert charts.loop_segments(calls, detections) == [
        charts.Segment(4, 4, "exact_repeat"), charts.Segment(8, 9, "exact_repeat")]
    fig = charts.tool_timeline(calls, detections, missing=[(5, 7)])
    gap = next(s for s in fig.layout.shapes if s.fillcolor == charts.GAP_FILL)
    assert (gap.x0, gap.x1) == (4.55, 7.45)
    assert "calls 5–7<br>not received" in {a.text for a in fig.layout.annotations}
    used = next(t for t in fig.data if t.name == "tool calls used")
    assert list(used.y) == [1, 2, 3, 4, 8, 9, 10]
