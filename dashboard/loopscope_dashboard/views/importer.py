"""Import: load an Episode JSONL or OTLP JSON file and analyse it in place."""

import streamlit as st

from loopscope_dashboard import downloads, queries, state, tables, uploads

SENT_LINKS = 10  # runs linked by name after a send (the rest are on the Runs page)

st.title("Import runs")
st.caption("Episode JSONL (one run per line, see docs/episode-format.md) or OTLP JSON (the "
           "OpenTelemetry Collector's file exporter). The file is analysed here, by the same "
           "detectors the guard runs; nothing is stored until you send it to a collector.")
upload = st.file_uploader("Runs file", type=["jsonl", "json"], key="import_file")
mode = st.selectbox("Guard mode to replay", uploads.MODES, key="import_mode")
if upload is None:
    st.info("Choose a file to analyse, for example one written by "
            "`python -c 'from loopscope.offline.scenarios import generate, write_jsonl; "
            "write_jsonl(\"runs.jsonl\", generate())'`.")
    st.stop()

done = st.session_state.get(state.IMPORT_RESULT)
key = (upload.file_id, mode)
if done is None or done[0] != key:
    bar = st.progress(0.0, text="Reading…")

    def _progress(count: int, total: int) -> None:
        bar.progress(count / total, text=f"Analysed {count} of {total} runs")

    analysis = uploads.analyse(upload.name, upload.getvalue(), mode=mode, progress=_progress)
    bar.empty()
    st.session_state[state.IMPORT_RESULT] = (key, analysis)
else:
    analysis = done[1]

if (why := uploads.unreadable(analysis)) is not None:
    st.error(why)
    with st.expander(f"{len(analysis.problems)} unreadable line(s)"):
        tables.show(uploads.problems_frame(analysis), hide_index=True)
    st.stop()
if not analysis.reports:
    st.warning("The file holds no runs.")
    st.stop()

summary = analysis.summary
numbers = st.columns(4)
numbers[0].metric("Runs", summary["episodes"], border=True)
numbers[1].metric("Flagged", summary["flagged"], border=True)
numbers[2].metric("Would-stop runs", summary["killed"], border=True,
                  help="Runs enforce mode would block a call of or stop (docs/glossary.md).")
numbers[3].metric("Unreadable lines", summary["malformed_lines"], border=True)
if analysis.problems:
    with st.expander(f"{len(analysis.problems)} line(s) skipped"):
        tables.show(uploads.problems_frame(analysis), hide_index=True)

st.subheader("Flags")
flags = uploads.flags_frame(analysis)
if flags.empty:
    st.success("No run in this file is flagged.")
else:
    tables.show(flags, height=tables.height(flags), hide_index=True, key="import_flags",
                column_config=tables.headers(flags) | {"call": st.column_config.NumberColumn(
                    "call", help="Tool-call ordinal: call 1 is the run's first tool call.")})
    downloads.offer(flags, f"{upload.name}-flags", key="import_flags")
st.subheader("Runs")
runs = uploads.episodes_frame(analysis)
tables.show(runs, height=tables.height(runs), hide_index=True, key="import_runs",
            column_config=tables.headers(runs))
downloads.offer(runs, f"{upload.name}-runs", key="import_runs")

st.subheader("Browse them with the rest")
if queries.source_is_live():
    if st.button(f"Send {summary['episodes']} runs to the collector", key="import_send"):
        bodies = uploads.otlp_bodies(analysis)
        sending = st.progress(0.0, text="Sending…")
        for index, body in enumerate(bodies, start=1):
            queries.send_traces([body])
            sending.progress(index / len(bodies), text=f"Sent {index} of {len(bodies)}")
        st.success("Sent: the runs now appear on the other pages.")
        sent_ids = list(runs["episode_id"]) if "episode_id" in runs.columns else []
        links = [f"[{episode_id}]({state.episode_link(episode_id)})"
                 for episode_id in sent_ids[:SENT_LINKS]]
        if links:
            more = (f" (and {len(sent_ids) - SENT_LINKS} more: the Runs page lists them)"
                    if len(sent_ids) > SENT_LINKS else "")
            st.markdown(":material/open_in_new: Open on the Episode page: " + ", ".join(links)
                        + more)
else:
    st.info("To see these runs on the other pages, store them: "
            f"`loopscope analyze {upload.name} --db runs.duckdb` then "
            "`loopscope dashboard --db runs.duckdb`, or run the dashboard against a live "
            "collector and send them from here.")
