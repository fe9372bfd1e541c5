"""Overview: the four metrics, the no-progress rate with its alerts, the live flagged list."""

import streamlit as st

from loopscope_dashboard import cards, charts, downloads, hints, queries, state, tables

NO_MATCH = "No runs match these filters — widen the time range or clear a filter."

filters = state.filters()
st.title("Which agents are stuck")
if not queries.summary().get("episodes"):
    st.info(hints.empty_store())
    st.stop()

report = queries.metrics(**filters.params())
previous = filters.previous()
before = queries.metrics(**previous.params()) if previous else None
for column, card in zip(st.columns(4), cards.metric_cards(report, before), strict=True):
    column.metric(card.label, card.value, card.delta, delta_color=card.delta_color,
                  help=card.help, border=True)
    column.caption(card.caption)
if notice := cards.loss_notice(report):
    st.warning(notice, icon=":material/link_off:")
if not report["episodes"]:
    st.info(NO_MATCH)

st.subheader("No-progress rate")
rates = queries.no_progress_rate(**filters.params())
alerts = queries.alerts(service=filters.service)
st.plotly_chart(charts.rate_over_time(rates, alerts), key="rate_chart")


LIVE = queries.source_is_live()


@st.fragment(run_every="2s" if LIVE else None)
def flagged_list() -> None:
    """The newest flagged runs; reruns alone every two seconds from a live collector (a
    snapshot file does not change: it is neither refreshed nor called live)."""
    st.subheader("Flagged runs (live)" if LIVE else "Flagged runs")
    try:
        flagged = queries.episodes(flagged=True, limit=50, **state.filters().params())
    except queries.SourceError as exc:  # a fragment's rerun is not under the entrypoint's
        st.warning(str(exc))
        return
    if flagged.empty:
        st.success("No flagged runs in this range. Stuck agents appear here as they loop.")
        return
    flagged["open"] = flagged["episode_id"].map(state.episode_link)
    st.dataframe(
        flagged, height=tables.height(flagged), hide_index=True, key="flagged_table",
        column_order=["open", "service", "agent", "guard_mode", "happened", "would_be",
                      "kinds", "flags", "stops", "would_stops", "tool_calls", "outcome",
                      "stop_reason", "cost_usd", "last_flag_at"],
        column_config=tables.headers(flagged) | state.EPISODE_COLUMNS,
    )
    downloads.offer(flagged.drop(columns=["open"]), "flagged-runs", key="flagged")


flagged_list()
