"""Episode: one run's tool calls on a timeline, its flags, guard decisions, steps and the stop
diagnostic. Deep link: ``/episode?episode=ID``."""

import json

import streamlit as st

from loopscope_dashboard import charts, queries, state

recent = queries.episodes(limit=200, **state.filters().params())
options = list(recent["episode_id"]) if not recent.empty else []
wanted = st.query_params.get("episode")
if wanted and wanted not in options:
    options.insert(0, wanted)
if not options:
    st.title("Episode")
    st.info("No episodes to show — point an agent at http://127.0.0.1:4318, run "
            "`loopscope demo --endpoint http://127.0.0.1:4318`, or widen the filters.")
    st.stop()
if wanted:
    st.session_state[state.EPISODE] = wanted


def _follow() -> None:
    st.query_params["episode"] = st.session_state[state.EPISODE]  # keep the URL a deep link


episode_id = st.sidebar.selectbox("Episode", options, key=state.EPISODE, on_change=_follow)
episode = queries.episode(episode_id)
st.title(f"Episode {episode_id}")
if episode is None:
    st.warning(f"This store has no episode {episode_id!r}. Pick one in the sidebar, or check "
               "the link.")
    st.stop()

calls = queries.episode_tool_calls(episode_id)
detections = queries.episode_detections(episode_id)
diagnostic = json.loads(episode["stop_diagnostic"]) if episode.get("stop_diagnostic") else None

facts = st.columns(4)
facts[0].metric("Outcome", episode.get("outcome") or "unknown")
facts[1].metric("Stop reason", episode.get("stop_reason") or "—")
facts[2].metric("Tool calls", len(calls))
facts[3].metric("Cost", "—" if episode.get("cost_usd") is None else f"${episode['cost_usd']:.4f}")
st.caption(f"service **{episode['service']}** · agent **{episode.get('agent') or '—'}**")
st.caption(f"model {episode.get('model') or '—'} · task type {episode.get('task_type') or '—'}"
           f" · guard mode {episode.get('guard_mode') or '—'} · {len(detections)} flag(s)")

st.subheader("Timeline")
limit = (diagnostic or {}).get("limit") if (diagnostic or {}).get("terminated_by") == "budget" \
    else None
st.plotly_chart(charts.tool_timeline(calls, detections, budget_limit=limit), key="timeline")
st.caption("One marker per call, coloured by signature (grey: called once); hollow markers "
           "made no progress. Red bands are loop segments, purple ones oscillation cycles. "
           "Below: calls used, with guard decisions (◆ warn, ✕ block, ■ stop).")

left, right = st.columns(2)
with left:
    st.subheader("Flags")
    if detections.empty:
        st.success("The collector raised no flag on this run.")
    else:
        st.dataframe(detections, hide_index=True, key="flags_table",
                     column_order=["ordinal", "severity", "kind", "detector", "action",
                                   "message"])
with right:
    st.subheader("Guard decisions")
    decisions = queries.guard_decisions(episode_id=episode_id)
    if decisions.empty:
        st.info("No in-process guard reported a decision (the agent ran without loopscope's "
                "guard, or another instrumentation sent the spans).")
    else:
        st.dataframe(decisions, hide_index=True, key="guard_table",
                     column_order=["tool", "mode", "action", "decision", "reason", "flags"])

st.subheader("Steps")
if calls.empty:
    st.info("This run has no tool calls yet.")
else:
    if not calls["content_captured"].any():
        st.caption("Arguments and outputs were not captured; start the agent with "
                   "`loopscope.instrument(capture_content=True)` to see previews.")
    st.dataframe(
        calls, hide_index=True, key="steps_table",
        column_order=["ordinal", "tool", "kind", "status", "collector_progress",
                      "collector_streak", "guard_action", "guard_decision", "args_text",
                      "output_text", "signature", "output_hash", "write_status",
                      "idempotency_key", "error_message"],
        column_config={
            "ordinal": st.column_config.NumberColumn("step"),
            "collector_progress": st.column_config.TextColumn("progress"),
            "collector_streak": st.column_config.NumberColumn("no-progress streak"),
            "args_text": st.column_config.TextColumn("arguments", max_chars=200),
            "output_text": st.column_config.TextColumn("output", max_chars=200),
        },
    )

st.subheader("Stop diagnostic")
if diagnostic is None:
    st.info(f"No stop diagnostic: the guard did not stop this run "
            f"(stop reason: {episode.get('stop_reason') or 'unknown'}).")
else:
    if diagnostic.get("hint"):
        st.warning(f"Stopped by {diagnostic.get('terminated_by', 'the guard')}: "
                   f"{diagnostic['hint']}")
    st.json(diagnostic)
