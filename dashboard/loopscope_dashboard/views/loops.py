"""Loops: which calls loop, in which tools, agents and models, and what the loops cost."""

import streamlit as st

from loopscope_dashboard import downloads, hints, queries, state, tables

filters = state.filters()
st.title("Where agents loop")
report = queries.metrics(**filters.params())
if not report["episodes"]:
    st.info("No runs match these filters — widen the time range, clear a filter, or send "
            f"runs with {hints.demo_command()}.")
    st.stop()

cost = report["cost_per_successful_task"]
top = st.columns(3)
top[0].metric("Flagged runs", f"{report['loops_detected']} of {report['episodes']} runs",
              help="Runs with a flag, of every run in these filters. The Overview's "
              "loop-detection rate is another number: flagged runs of labelled loops.",
              border=True)
top[1].metric("Cost spent in loops", f"${report['cost_after_first_flag_usd']:,.4f}",
              help="Cost from each run's first flag on; the tools below add up to it.",
              border=True)
top[2].metric("Total cost", f"${cost['total_usd']:,.4f}", border=True)

st.subheader("Calls that looped")
st.caption("Each call signature the collector flagged, most calls first: the runs it looped "
           "in, its calls there, the cost of those calls from their run's first flag on, and "
           "the newest such run as a strip (one bar per call, high where it was this call).")
signatures = queries.looping_signatures(**filters.params())
if signatures.empty:
    st.success("No call looped in this range.")
else:
    signatures["open"] = signatures["newest_episode"].map(state.episode_link)
    uncaptured = signatures["args_preview"].isna()
    signatures.loc[uncaptured, "args_preview"] = (
        "(not captured) signature " + signatures.loc[uncaptured, "signature"].str[:10])
    if uncaptured.any():
        st.caption("“(not captured)”: the agent ran without content capture, so only the "
                   "arguments' hash reached the store. Turn it on with "
                   "`loopscope.instrument(capture_content=True)` (or "
                   "`LOOPSCOPE_CAPTURE_CONTENT=true`); it is off by default for privacy.")
    tables.show(
        signatures, height=tables.height(signatures), hide_index=True, key="signatures_table",
        column_order=["tool", "args_preview", "runs", "calls", "no_progress_calls",
                      "cost_in_loops_usd", "first_seen", "strip", "open"],
        column_config=tables.headers(signatures) | {
            "args_preview": st.column_config.TextColumn(
                "arguments", help="Empty when content was not captured "
                "(instrument(capture_content=True)).", max_chars=80),
            "no_progress_calls": st.column_config.NumberColumn("no progress"),
            "cost_in_loops_usd": st.column_config.NumberColumn("cost in loops",
                                                               format="$%.4f"),
            "first_seen": st.column_config.DatetimeColumn("first seen (UTC)"),
            "strip": st.column_config.BarChartColumn("newest run, by call", y_min=0, y_max=1),
            "open": st.column_config.LinkColumn("newest run", display_text=r"episode=(.*)$"),
        },
    )
    downloads.offer(signatures.drop(columns=["open", "strip"]), "looping-signatures",
                    key="signatures")

tools = queries.loops_by_tool(**filters.params())
agents = queries.loops_by("agent", **filters.params())
models = queries.loops_by("model", **filters.params())
for column, (frame, key, value, title, name, counted) in zip(st.columns(3), [
        (tools, "tool", "flags", "Flags raised at each tool", "tool", "flags"),
        (agents, "key", "loops_detected", "Flagged runs by agent", "agent", "flagged runs"),
        (models, "key", "loops_detected", "Flagged runs by model", "model", "flagged runs")],
        strict=True):
    column.markdown(f"**{title}**")
    ranked = tables.ranking(frame, key=key, value=value)
    if ranked.empty:
        column.caption("Nothing to rank in this range.")
        continue
    tables.show(ranked, into=column, hide_index=True, height=tables.height(ranked), key=f"by_{name}",
                column_config={key: st.column_config.TextColumn(name),
                               value: tables.bar(counted, ranked[value])})

st.subheader("Cost spent in loops, by tool")
st.caption("Each tool's calls after the first flag of their run, most cost first.")
tools = tools.sort_values(["cost_in_loops_usd", "tool"], ascending=[False, True])
tables.show(tools, height=tables.height(tools), hide_index=True, key="tools_table",
            column_config=tables.headers(tools) | {
                "no_progress_calls": st.column_config.NumberColumn("no progress"),
                "flagged_runs": st.column_config.NumberColumn("flagged runs"),
                "cost_in_loops_usd": tables.bar("cost in loops", tools["cost_in_loops_usd"],
                                                "$%.4f")})
downloads.offer(tools, "loops-by-tool", key="tools")
