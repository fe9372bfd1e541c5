"""Overview: the four metrics, the live flagged list, the no-progress rate with its alerts,
all redrawn in place while a collector is live."""

import streamlit as st

from loopscope_dashboard import (
    cards,
    charts,
    downloads,
    hints,
    plots,
    queries,
    state,
    style,
    tables,
)

NO_MATCH = "No runs match these filters — widen the time range or clear a filter."

LIVE = queries.source_is_live()
REFRESH = "2s"  # how often the page reads again from a live collector (a file does not change)
FLAGGED_SHOWN = 50
RATE_POINTS = 300  # the rate chart's buckets per service at most, however long the store runs

st.title("Which agents are stuck")


@st.fragment(run_every=REFRESH if LIVE else None)
def overview() -> None:
    """The whole page below the title, redrawn in place every ``REFRESH`` from a live
    collector. The reads answer from the cache and refresh behind it (``queries``), and what
    is drawn stays at full strength while the next redraw runs (``style.LIVE``), so the cards
    never stand empty or greyed while new numbers load."""
    with st.container(key=style.LIVE):
        _draw()


def _draw() -> None:
    filters = state.filters()
    try:
        report = queries.metrics(**filters.params())
        if not report["episodes"] and not any(filters.params().values()):
            st.info(hints.empty_store())  # (the totals' read costs seconds on a big store)
            return
        previous = filters.previous()
        before = queries.metrics(**previous.params()) if previous else None
        rates = queries.no_progress_rate(points=RATE_POINTS, **filters.params())
        alerts = queries.alerts(service=filters.service)
        flagged = queries.episodes(flagged=True, limit=FLAGGED_SHOWN, **filters.params())
    except queries.SourceError as exc:  # a fragment's rerun is not under the entrypoint's
        st.warning(str(exc))
        return
    for column, card in zip(st.columns(4), cards.metric_cards(report, before), strict=True):
        column.metric(card.label, card.value, card.delta, delta_color=card.delta_color,
                      help=card.help, border=True)
        column.caption(card.caption)
    if notice := cards.loss_notice(report):
        st.warning(notice, icon=":material/link_off:")
    if not report["episodes"]:
        st.info(NO_MATCH)

    st.subheader("Flagged runs (live)" if LIVE else "Flagged runs")
    st.caption(f"Newest flag first: the runs the collector flagged most recently (by its "
               f"clock) lead, so an agent looping now stays on top; the {FLAGGED_SHOWN} "
               "newest." + (f" Refreshes every {REFRESH[:-1]} s." if LIVE else ""))
    if flagged.empty:
        st.success("No flagged runs in this range. Stuck agents appear here as they loop.")
    else:
        flagged["open"] = flagged["episode_id"].map(state.episode_link)
        tables.show(
            flagged, height=tables.height(flagged), hide_index=True, key="flagged_table",
            column_order=["open", "service", "agent", "guard_mode", "happened", "would_be",
                          "kinds", "flags", "stops", "would_stops", "tool_calls", "outcome",
                          "stop_reason", "cost_usd", "last_flag_at"],
            column_config=tables.headers(flagged) | state.EPISODE_COLUMNS,
        )
        downloads.offer(flagged.drop(columns=["open"]), "flagged-runs", key="flagged")

    # Below the table, where a chart that waits for Plotly's script (plots.show) moves nothing.
    st.subheader("No-progress rate")
    plots.show(charts.rate_over_time(rates, alerts), key="rate_chart")


overview()
