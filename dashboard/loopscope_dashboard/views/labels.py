"""Labels: a person's verdict on a flag (true loop, false kill, no loop); it feeds the metrics."""

import streamlit as st

from loopscope_dashboard import downloads, queries, state, truth

VERDICTS = {
    "true_loop": "True loop — the agent was stuck",
    "false_kill": "False kill — the guard stopped a run that was making progress",
    "no_loop": "No loop — a legitimate run",
}

st.title("Labels")
st.caption("Labels outrank the rules: the loop-detection rate counts episodes labelled true "
           "loop, and a false-kill label makes a kill count as false.")
live = queries.source_is_live()
if not live:
    st.warning("Labels need a live collector: this dashboard reads a snapshot file, which is "
               "read-only. Run `loopscope collector --db FILE` and "
               "`loopscope dashboard --collector http://127.0.0.1:4318` to label flags.")

flagged = queries.episodes(flagged=True, **state.filters().params())
if flagged.empty:
    st.info("No flagged episodes to label in this range. Flags appear here as the collector "
            "raises them.")
else:
    episode_id = st.selectbox("Flagged episode", list(flagged["episode_id"]),
                              key=state.LABEL_EPISODE)
    st.markdown(f":material/open_in_new: [Open {episode_id} on the Episode page]"
                f"({state.episode_link(episode_id)})")
    flags = truth.flag_calls(queries.episode_detections(episode_id),
                             queries.episode_tool_calls(episode_id))
    targets = {"": "the whole episode"} | {
        row.span_id: f"call {row.call}: {row.detector} (enforce would {row.action}, {row.kind})"
        for row in flags.itertuples()
    }
    with st.form("label_form"):
        span_id = st.selectbox("Flag", list(targets), format_func=targets.__getitem__,
                               key=state.LABEL_FLAG)
        verdict = st.radio("Verdict", list(VERDICTS), format_func=VERDICTS.__getitem__)
        note = st.text_input("Note (optional)")
        sent = st.form_submit_button("Save label", disabled=not live)
    if sent:
        try:
            queries.save_label(episode_id, verdict, span_id=span_id, note=note or None)
        except queries.SourceError as exc:
            st.error(str(exc))
        else:
            st.success(f"Labelled {targets[span_id]} of {episode_id} as {verdict}; the metrics "
                       "now count it.")
    flagged["open"] = flagged["episode_id"].map(state.episode_link)
    st.dataframe(flagged, hide_index=True, key="flagged_to_label",
                 column_order=["open", "service", "agent", "guard_mode", "happened",
                               "would_be", "kinds", "flags", "kills", "would_be_kills",
                               "outcome"],
                 column_config=state.EPISODE_COLUMNS)
    downloads.offer(flagged.drop(columns=["open"]), "flagged-to-label", key="flagged_to_label")

st.subheader("Labels so far")
existing = queries.labels()
if existing.empty:
    st.info("No labels yet.")
else:
    st.dataframe(existing, hide_index=True, key="labels_table")
    downloads.offer(existing, "labels", key="labels")
