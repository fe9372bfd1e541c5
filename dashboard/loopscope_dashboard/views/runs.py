"""Runs: every run the store holds, healthy ones too, a page at a time, each a link to its
Episode page. Search, verdict, status, order and page live in the URL with the sidebar's
filters, so a copied link reopens the same list. Searching, sorting and paging run in the
collector's SQL (``run_list``): only one page of rows ever reaches the browser."""

import streamlit as st

from loopscope_dashboard import hints, queries, state, tables

PAGE_SIZE = 50
SILENT_MIN = queries.RUN_SILENT_S / 60


def _page_asked() -> int:
    """The page the session or the URL asks for (the pager draws once the count is known)."""
    asked = st.session_state.get(state.RUN_PAGE) or st.query_params.get(state.RUN_PAGE) or 1
    try:
        return max(1, int(asked))
    except (TypeError, ValueError):
        return 1


st.title("Runs")
search_box, verdict_box, status_box, sort_box, order_box = st.columns([4, 2, 2, 2, 1.3])
search = search_box.text_input(
    "Search", key=state.RUN_SEARCH, bind="query-params",
    placeholder="task, agent, service, tool or episode id",
    help="A piece of text, any case: runs whose task, agent, service, episode id or one of "
         "whose tools contains it.")
verdict = verdict_box.selectbox("Verdict", [state.ANY, *queries.RUN_VERDICTS],
                                key=state.RUN_VERDICT, bind="query-params")
status = status_box.selectbox(
    "Status", [state.ANY, *queries.RUN_STATUSES], key=state.RUN_STATUS, bind="query-params",
    help=f"running: no final span yet and active in the last {SILENT_MIN:g} minutes; ended "
         "without a summary: silent longer than that without its final span.")
order = sort_box.selectbox("Order by", list(queries.RUN_SORTS.values()), key=state.RUN_SORT,
                           bind="query-params")  # the URL holds the words: sort=tool+calls
sort = next(name for name, label in queries.RUN_SORTS.items() if label == order)
ascending = order_box.toggle("Ascending", key=state.RUN_ASCENDING, bind="query-params")

wanted = {"search": search.strip() or None,
          "verdict": None if verdict == state.ANY else verdict,
          "status": None if status == state.ANY else status,
          "sort": sort, "ascending": ascending, **state.filters().params()}
requested = _page_asked()
frame, total = queries.runs(limit=PAGE_SIZE, offset=(requested - 1) * PAGE_SIZE, **wanted)
pages = max(1, -(-total // PAGE_SIZE))
if requested > pages:
    st.session_state[state.RUN_PAGE] = 1  # a narrower search has fewer pages
number = st.pagination(pages, key=state.RUN_PAGE, bind="query-params")
if number != requested:
    frame, total = queries.runs(limit=PAGE_SIZE, offset=(number - 1) * PAGE_SIZE, **wanted)

if frame.empty:
    if queries.store_is_empty():
        st.info(hints.empty_store())
    else:
        st.info("No run matches — clear the search, pick another verdict or status, or widen "
                "the sidebar's filters.")
    st.stop()

first = (number - 1) * PAGE_SIZE + 1
st.caption(f"Runs {first:,}–{first + len(frame) - 1:,} of {total:,} (page {number} of "
           f"{pages:,}), by {order}, "
           f"{'ascending' if ascending else 'descending'}.")
frame["open"] = frame["episode_id"].map(state.episode_link)
tables.show(
    frame, height=tables.height(frame), hide_index=True, key="runs_table",
    column_order=["open", "status", "started", "service", "agent", "task", "outcome",
                  "stop_reason", "guard_mode", "happened", "would_be", "tool_calls", "flags",
                  "kinds", "stops", "would_stops", "duration_s", "cost_usd"],
    column_config={
        **tables.headers(frame),
        **state.EPISODE_COLUMNS,
        "status": st.column_config.TextColumn(
            "status", help=f"ended; running (no final span yet, active in the last "
            f"{SILENT_MIN:g} minutes); ended without a summary (silent longer, without its "
            "final span)."),
        "started": st.column_config.DatetimeColumn("started (UTC)"),
        "task": st.column_config.TextColumn("task", max_chars=120),
        "duration_s": st.column_config.NumberColumn("duration", format="%.1f s"),
    },
)
