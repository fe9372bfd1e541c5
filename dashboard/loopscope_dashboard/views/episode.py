"""Episode: one run — its task, what happened apart from what enforce would have done, its
calls on a timeline, its flags and guard decisions, and how it ended. Every table counts calls
the same way (call 1 is the first tool call), by the agent's own numbers where its SDK set
them, so calls whose spans never arrived are gaps, named. A click on a span of the trace, or
on a row of the Steps table, opens it in the span inspector under the trace. Deep link:
``/episode?episode=ID``, with ``&span=ID&trace=ID`` for the span inspected."""

import json
from functools import partial

import pandas as pd
import streamlit as st

from loopscope_dashboard import (
    charts,
    downloads,
    hints,
    inspector,
    plots,
    queries,
    state,
    tables,
    truth,
    waterfall,
)

filters = state.filters().params()
flagged = queries.episodes(flagged=True, limit=200, **filters)
recent = queries.episodes(limit=200, **filters)
# the latest flagged run first, then every run newest first
options = list(dict.fromkeys([*flagged.get("episode_id", []), *recent.get("episode_id", [])]))
wanted = st.query_params.get("episode")
if wanted and wanted not in options:
    options.insert(0, wanted)
if not options:
    st.title("Episode")
    st.info(f"No runs to show — point an agent at {hints.endpoint()}, run "
            f"{hints.demo_command()}, or widen the filters.")
    st.stop()
if wanted:
    st.session_state[state.EPISODE] = wanted


def _follow() -> None:
    st.query_params["episode"] = st.session_state[state.EPISODE]  # keep the URL a deep link
    for key in (state.SPAN, state.TRACE):  # the span inspected was the other run's
        st.query_params.pop(key, None)


def _clicked_trace() -> None:
    """A click on the waterfall opens the clicked span in the inspector."""
    points = st.session_state["waterfall"]["selection"]["points"]
    picked = next((p for p in map(waterfall.picked_span, points) if p), None)
    if picked is not None:
        state.inspect_span(*picked)


def _picked_step(ids: list[tuple[str, str]]) -> None:
    """A row picked in the Steps table opens its call's span in the inspector."""
    rows = st.session_state["steps_table"]["selection"]["rows"]
    if rows:
        state.inspect_span(*ids[rows[0]])
        st.toast("The call's span is open in the inspector, under the trace.")


episode_id = st.sidebar.selectbox("Episode", options, key=state.EPISODE, on_change=_follow)
episode = queries.episode(episode_id)
if episode is None:
    st.title("Episode")
    st.warning(f"This store has no run {episode_id!r}. Pick one in the sidebar, or check "
               "the link.")
    st.stop()

listed = queries.episodes(episode_id=episode_id, limit=1)
row = listed.iloc[0].to_dict() if not listed.empty else {}
episode = {**episode, **{k: row.get(k) for k in ("happened", "enforce_would", "would_be",
                                                  "stops", "would_stops")}}
calls = queries.episode_tool_calls(episode_id)
detections = truth.flag_calls(queries.episode_detections(episode_id), calls)
diagnostic = json.loads(episode["stop_diagnostic"]) if episode.get("stop_diagnostic") else None
missing = truth.missing_calls(calls, episode.get("agent_tool_calls"))
lost = sum(last - first + 1 for first, last in missing)

st.title(episode.get("agent") or f"Episode {episode_id}")
if episode.get("task"):
    st.markdown(f"**Task:** {episode['task']}")
st.caption(f"episode `{episode_id}` · service **{episode['service']}** · agent "
           f"**{episode.get('agent') or '— (name it: loopscope.episode(agent_name=…))'}** · model "
           f"**{episode.get('model') or '—'}** · task type {episode.get('task_type') or '—'} · "
           f"guard mode **{episode.get('guard_mode') or 'none'}**")

happened = episode.get("happened") or "—"
would = episode.get("would_be")
facts = st.columns(4)
facts[0].metric("What happened", happened, border=True,
                help="The strongest action the guard really took (loopscope.guard.action); "
                     "a run is stopped only when its guard stopped it.")
facts[1].metric("Enforce mode would have", would or "done the same", border=True,
                help="What the policy decided (loopscope.guard.decision, or the collector's "
                     "flags), where it is more than what happened: a would-be action.")
facts[2].metric("Tool calls", f"{len(calls)} of {len(calls) + lost}" if lost else len(calls),
                border=True, help="The calls the store holds, of the calls the agent numbered "
                "(the rest never arrived: see Steps)." if lost else None)
facts[3].metric("Cost", "—" if episode.get("cost_usd") is None
                else f"${episode['cost_usd']:.4f}", border=True)
if episode.get("status", "ended") == "ended":
    st.markdown(f"Outcome **{episode.get('outcome') or 'unknown'}** · stop reason "
                f"**{episode.get('stop_reason') or 'unknown'}** · {len(detections)} flag(s)")
else:  # no final span yet: no outcome or stop reason to tell
    st.markdown(f"Status **{episode['status']}** · {len(detections)} flag(s) so far")

st.subheader("Timeline")
limit = (diagnostic or {}).get("limit") if (diagnostic or {}).get("terminated_by") == "budget" \
    else None
plots.show(charts.tool_timeline(calls, detections, budget_limit=limit, missing=missing),
           key="timeline")
st.caption("One marker per call, coloured by signature (grey: called once); hollow markers "
           "made no progress. Red bands are loop segments, purple ones oscillation cycles. "
           "Below: calls used; filled red marks are what the guard did (◆ warned, ✕ blocked, "
           "■ stopped), hollow grey ones what enforce mode would have done where the call ran.")

st.subheader("Trace")
spans = queries.episode_spans(episode_id)
if spans.empty:
    st.info("The store holds no spans of this run (it was imported as rows, not spans).")
else:
    plots.show(waterfall.trace_waterfall(spans, calls, detections), key="waterfall",
               on_select=_clicked_trace, selection_mode="points")
    st.caption("Every span of the run from its start to its end: the agent's run, model turns, "
               "messages and tool calls, with duration, tokens and cost on hover. Markers at a call's "
               "end: red ◆ ✕ ■ the guard warned, blocked or stopped it; hollow grey what "
               "enforce mode would have done where the call ran; orange ● a flag only. "
               "Click a span (or a row of Steps) to inspect it here.")
    picked = state.inspected_span()
    if picked is not None:
        inspector.show(picked[1], picked[0])

left, right = st.columns(2)
with left:
    st.subheader("Flags")
    if detections.empty:
        st.success("The collector raised no flag on this run.")
    else:
        shown_flags = truth.flag_ladder(detections, calls)
        tables.show(shown_flags, height=tables.height(shown_flags),
                    hide_index=True, key="flags_table",
                    column_order=["call", "kind", "detector", "action", "climbed_to",
                                  "message"],
                    column_config=tables.headers(shown_flags) | {
                        "kind": st.column_config.TextColumn(
                            "loop kind", help="The shape of loop the flag names; several "
                            "detectors name one kind (state_cycle and edit_revert flag "
                            "oscillation; docs/glossary.md)."),
                        "detector": st.column_config.TextColumn(
                            "detector", help="The rule that raised the flag."),
                        "action": st.column_config.TextColumn(
                            "enforce would", help="What enforce mode does at the flag's "
                            "own call: warn, block or stop (a block or a stop counts as a stop; "
                            "docs/glossary.md)."),
                        "climbed_to": st.column_config.TextColumn(
                            "then", help="Where the guard's ladder for this detector went "
                            "from there (as in Guard decisions): what it did, or what "
                            "enforce would have done in observe and warn mode; — when "
                            "it went no further than a warning, or no in-process guard "
                            "reported a decision."),
                        "message": st.column_config.TextColumn(width="large")})
        downloads.offer(shown_flags, f"{episode_id}-flags", key="flags")
with right:
    st.subheader("Guard decisions")
    decisions = truth.guard_rows(calls)
    if calls.empty or calls["guard_mode"].isna().all():
        st.info("No in-process guard reported a decision (the agent ran without loopscope's "
                "guard, or another instrumentation sent the spans).")
    elif decisions.empty:
        st.success("The guard allowed every call.")
    else:
        tables.show(decisions, height=tables.height(decisions), hide_index=True, key="guard_table",
                    column_config=tables.headers(decisions) | {
                        "enforce_would": st.column_config.TextColumn(
                        "enforce would", help="Empty when it is what happened.")})
        downloads.offer(decisions, f"{episode_id}-guard-decisions", key="guard")

st.subheader("Steps")
if missing:
    st.warning(f"{truth.gap_text(missing).capitalize()}: the agent made {len(calls) + lost} "
               f"tool calls and {lost} of their spans never reached the store (its exporter "
               "dropped them, or they were lost or sampled out on the way). Calls keep the "
               "numbers the agent gave them, as its log and its stop diagnostic do; the "
               "collector's own verdicts judge only the calls that arrived.")
if calls.empty:
    st.info("This run has no tool calls yet.")
else:
    if not calls["content_captured"].any():
        st.caption("Arguments and outputs were not captured; start the agent with "
                   "`loopscope.instrument(capture_content=True)` to see previews.")
    steps = truth.step_progress(calls).assign(would_be=pd.Series([
        truth.would_be(a, d) for a, d in zip(calls["guard_action"], calls["guard_decision"],
                                             strict=True)], index=calls.index),
        latency_ms=(calls["end_ns"] - calls["start_ns"]) / 1e6,
        happened=calls["guard_action"].map(truth.DONE))
    by_guard = bool((steps["progress_by"] == "guard").any())
    differs = truth.collector_differs(steps)
    if by_guard:
        st.caption("Progress and no-progress streak are the guard's, as it recorded them at "
                   "each call: the values its decisions and the stop diagnostic below were "
                   "made from." + (
                       " The collector's own verdicts are beside them; they differ where "
                       "it could not see what the guard saw (outputs and arguments not "
                       "captured, the model's messages not stored)." if differs else ""))
    tables.show(
        steps, height=tables.height(steps), hide_index=True, key="steps_table",
        on_select=partial(_picked_step, list(zip(steps["trace_id"], steps["span_id"],
                                                 strict=True))),
        selection_mode="single-row",
        column_order=["call", "tool", "args_text", "output_text", "status", "latency_ms",
                      "shown_progress", "shown_streak",
                      *(["collector_progress", "collector_streak"] if differs else []),
                      "happened", "would_be",
                      "kind", "write_status", "idempotency_key", "error_message", "signature",
                      "output_hash"],
        column_config=tables.headers(steps) | {
            "call": st.column_config.NumberColumn("call", help="Tool-call ordinal: call 1 is "
                                                  "the run's first tool call, numbered by the "
                                                  "agent where its SDK did (a gap is a call "
                                                  "that never arrived)."),
            "shown_progress": st.column_config.TextColumn(
                "progress", help="The guard's verdict where it reported one (what its "
                "decisions used), else the collector's."),
            "shown_streak": st.column_config.NumberColumn(
                "no-progress streak", help="Calls in a row without progress, this one "
                "included: the guard's where it reported one, else the collector's. A stop "
                "diagnostic counts up to the call its guard decided at (the stopped call "
                "itself when the guard decided after its output, else the call before)."),
            "collector_progress": st.column_config.TextColumn(
                "collector: progress", help="The collector's own verdict, from what it "
                "stored."),
            "collector_streak": st.column_config.NumberColumn(
                "collector: streak", help="The collector's own no-progress streak, from "
                "what it stored."),
            "latency_ms": st.column_config.NumberColumn(
                "latency", format="%.1f ms", help="How long the call ran: its span's end "
                "minus its start."),
            "happened": st.column_config.TextColumn(
                "happened", help="What the guard did to the call: allowed, warned, blocked or "
                "stopped (empty: no in-process guard reported)."),
            "would_be": st.column_config.TextColumn("enforce would"),
            # (medium: a captured argument or output is long, and an auto-sized column would
            # push the latency, progress and guard columns out of view)
            "args_text": st.column_config.TextColumn("arguments", max_chars=200, width="medium"),
            "output_text": st.column_config.TextColumn("output", max_chars=200, width="medium"),
        },
    )
    downloads.offer(steps, f"{episode_id}-steps", key="steps")

st.subheader("How the run ended")
kind, story = truth.stop_story(episode, diagnostic, calls)
if kind == "stopped":
    st.warning(story)
elif kind in ("would", "open"):
    st.info(story)
else:
    st.success(story)
if diagnostic is not None:
    title = "Stop diagnostic" if kind == "stopped" else "Would-be stop diagnostic (enforce)"
    with st.expander(title, expanded=kind == "stopped"):
        st.caption("As the guard recorded it: its `step` counts the agent's steps (messages "
                   "included); the text above gives call numbers.")
        st.json(diagnostic)
