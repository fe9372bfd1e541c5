"""The dashboard's entrypoint: page config, the shared sidebar filters, the router."""

import streamlit as st

from loopscope_dashboard import banner, plots, queries, replay_jobs, sidebar, style


def main() -> None:
    st.set_page_config(page_title="loopscope", page_icon=":material/repeat:", layout="wide")
    style.apply()
    try:
        first = "Live" if queries.source_is_live() else "Snapshot"  # a --db file is not live
    except queries.SourceError:
        first = "Overview"
    page = st.navigation({
        first: [
            st.Page("views/overview.py", title="Overview", icon=":material/monitoring:", default=True),
            st.Page("views/alerts.py", title="Alerts", icon=":material/notifications_active:"),
        ],
        "Investigate": [
            st.Page("views/runs.py", title="Runs", icon=":material/list:", url_path="runs"),
            st.Page("views/episode.py", title="Episode", icon=":material/timeline:", url_path="episode"),
            st.Page("views/spans.py", title="Spans", icon=":material/view_list:", url_path="spans"),
            st.Page("views/loops.py", title="Loops", icon=":material/repeat:"),
            st.Page("views/labels.py", title="Labels", icon=":material/label:"),
            st.Page("views/importer.py", title="Import", icon=":material/upload_file:"),
        ],
        "Tune": [
            st.Page("views/policy.py", title="Policy", icon=":material/tune:", url_path="policy"),
        ],
    })
    try:
        sidebar.render()
    except queries.SourceError as exc:  # the Import page still works without a source
        st.sidebar.error(str(exc))
    banner.watch()
    try:
        page.run()
        # The Policy page's default replay, once, started only once the first page has drawn
        # (begun before it, the replay's reads and thread slowed every page's first visit).
        replay_jobs.warm()
        plots.finish()  # the charts held back in the session's first run (plots.show)
    except queries.SourceError as exc:
        st.error(str(exc))


# A process spawned from the dashboard (the Policy page's replay workers) re-runs its parent's
# main script as ``__mp_main__``: that must draw nothing and start nothing (replays.neutral_main).
if __name__ != "__mp_main__":
    main()
