"""Loops: which tools, agents and models loop most, where in a run, and what it cost."""

import streamlit as st

from loopscope_dashboard import charts, queries, state

filters = state.filters()
st.title("Where agents loop")
report = queries.metrics(**filters.params())
if not report["episodes"]:
    st.info("No episodes match these filters — widen the time range, clear a filter, or send "
            "runs with `loopscope demo --endpoint http://127.0.0.1:4318`.")
    st.stop()

cost = report["cost_per_successful_task"]
top = st.columns(3)
top[0].metric("Looping episodes", f"{report['loops_detected']} of {report['episodes']}",
              border=True)
top[1].metric("Cost spent in loops", f"${report['cost_after_first_flag_usd']:,.4f}",
              help="Cost from each episode's first flag on.", border=True)
top[2].metric("Total cost", f"${cost['total_usd']:,.4f}", border=True)

tools = queries.loops_by_tool(**filters.params())
agents = queries.loops_by("agent", **filters.params())
models = queries.loops_by("model", **filters.params())
columns = st.columns(3)
columns[0].plotly_chart(charts.ranking(tools, key="tool", value="flags",
                                       title="Flags raised at each tool"), key="by_tool")
columns[1].plotly_chart(charts.ranking(agents, key="key", value="loops_detected",
                                       title="Looping episodes by agent"), key="by_agent")
columns[2].plotly_chart(charts.ranking(models, key="key", value="loops_detected",
                                       title="Looping episodes by model"), key="by_model")

st.subheader("Signature × step")
st.caption("Calls of flagged runs by signature (tool · hash) and step: a loop is a band of "
           "one signature across many steps; an oscillation, two bands taking turns.")
st.plotly_chart(charts.signature_heatmap(queries.signature_steps(**filters.params())),
                key="heatmap")

st.subheader("Cost spent in loops")
by_cost = agents.sort_values("cost_in_loops_usd", ascending=False) if not agents.empty \
    else agents
st.plotly_chart(charts.ranking(by_cost, key="key", value="cost_in_loops_usd",
                               title="Cost after the first flag, by agent", color="#9467bd"),
                key="cost_by_agent")
st.dataframe(tools, hide_index=True, key="tools_table")
