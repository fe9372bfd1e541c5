"""Labels: a person's verdict on a flag (true loop, false stop, no loop); it feeds the metrics.

A queue: the flagged runs, unlabelled ones first and labelled ones marked, picked by their
task, agent and verdict; a saved label moves the picker to the next unlabelled run, and the
last change can be undone.
"""

import pandas as pd
import streamlit as st

from loopscope_dashboard import downloads, hints, queries, state, tables, truth

VERDICTS = {
    "true_loop": "True loop — the agent was stuck",
    "false_kill": "False stop — the guard blocked or stopped (or would have, in observe or "
                  "warn mode) a run that was making progress",
    "no_loop": "No loop — a legitimate run",
}
# the stored labels (true_loop, false_kill, no_loop) in docs/glossary.md's words
SHORT = {"true_loop": "true loop", "false_kill": "false stop", "no_loop": "no loop"}
NOT_CAPTURED = "task not captured"
KILLED = {done: action for action, done in truth.DONE.items()}
# (a run's ``happened``: stopped, blocked, ... as the action it was: stop, block, ...)

st.title("Labels")
st.caption("Labels outrank the rules: the loop-detection rate counts runs labelled true "
           "loop, and a false-stop label makes a stop count as false.")
live = queries.source_is_live()
if not live:
    st.warning("Labels need a live collector: this dashboard reads a snapshot file, which is "
               "read-only. Run `loopscope collector --db FILE` and "
               f"`loopscope dashboard --collector {hints.endpoint()}` to label flags.")

if saved := st.session_state.pop(state.LABEL_SAVED, None):
    st.success(saved)
params = state.filters().params()
flagged = queries.episodes(flagged=True, **params)
existing = queries.labels(limit=100_000)


def _label_of(episode_id: str, span_id: str = "") -> tuple[str | None, str | None]:
    """The label (and note) stored for a run, or one of its calls."""
    if existing.empty:
        return None, None
    found = existing[(existing["episode_id"] == episode_id) & (existing["span_id"] == span_id)]
    if found.empty:
        return None, None
    note = found["note"].iloc[0]
    return str(found["label"].iloc[0]), (note if isinstance(note, str) else None)


def _undo() -> None:
    episode_id, span_id, before, note = st.session_state.pop(state.LABEL_UNDO)
    try:
        queries.save_label(episode_id, before, span_id=span_id, note=note)
    except queries.SourceError as exc:
        st.session_state[state.LABEL_UNDO] = (episode_id, span_id, before, note)
        st.error(str(exc))
        return
    st.session_state[state.LABEL_NEXT] = episode_id
    st.session_state[state.LABEL_SAVED] = (
        f"Undone: {episode_id} is {SHORT.get(before or '', 'unlabelled')} again.")


def _remove(episode_id: str, span_id: str) -> None:
    before, note = _label_of(episode_id, span_id)
    try:
        queries.save_label(episode_id, None, span_id=span_id)
    except queries.SourceError as exc:
        st.error(str(exc))
        return
    st.session_state[state.LABEL_UNDO] = (episode_id, span_id, before, note)
    st.session_state[state.LABEL_NEXT] = episode_id


if flagged.empty:
    st.info("No flagged runs to label in this range. Flags appear here as the collector "
            "raises them.")
else:
    tasks = queries.episode_tasks(flagged=True, **params)
    labelled = existing.groupby("episode_id")["label"].agg(
        lambda s: ", ".join(sorted({SHORT.get(v, v) for v in s}))) if not existing.empty \
        else pd.Series(dtype=object)
    queue = flagged.assign(
        task=flagged["episode_id"].map(lambda e: tasks.get(e) or f"({NOT_CAPTURED})"),
        label=flagged["episode_id"].map(labelled).where(
            flagged["episode_id"].isin(labelled.index), None),
        scenario_label=flagged["scenario_label"].map(  # the agent's own: a label too
            lambda v: SHORT.get(v) if isinstance(v, str) else None))
    queue = queue.assign(_done=queue["label"].notna()).sort_values(
        "_done", kind="stable").drop(columns=["_done"])  # unlabelled first, newest first
    waiting = int(queue["label"].isna().sum())
    scenario = int(queue["scenario_label"].notna().sum())
    st.caption(f"{waiting} of {len(queue)} flagged runs have no label saved here yet; they come "
               "first. A saved label moves on to the next one." + (
                   f" {scenario} of them carry their agent's scenario label, which counts "
                   "as a label until you save one here." if scenario else ""))
    if queue["task"].eq(f"({NOT_CAPTURED})").any():
        st.caption("A run shows “task not captured” when its agent ran without "
                   "`loopscope.instrument(capture_content=True)` (tasks, arguments and "
                   "outputs are opt-in).")

    def _describe(episode_id: str) -> str:
        row = queue[queue["episode_id"] == episode_id].iloc[0]
        mark = f"✓ {row['label']}" if isinstance(row["label"], str) else "○ unlabelled"
        would = row["would_be"]  # None, or NaN once a frame went through JSON
        verdict = str(row["happened"]) + (f", {would}" if isinstance(would, str) else "")
        task = str(row["task"])
        task = task if len(task) <= 60 else task[:57] + "…"
        return f"{mark} · {task} · agent {row['agent'] or '—'} · {verdict}"

    ids = list(queue["episode_id"])
    wanted = st.session_state.pop(state.LABEL_NEXT, None)
    if wanted in ids:
        st.session_state[state.LABEL_EPISODE] = wanted
    elif st.session_state.get(state.LABEL_EPISODE) not in ids:
        st.session_state.pop(state.LABEL_EPISODE, None)
    episode_id = st.selectbox("Flagged run", ids, format_func=_describe,
                              key=state.LABEL_EPISODE)
    st.markdown(f":material/open_in_new: [Open {episode_id} on the Episode page]"
                f"({state.episode_link(episode_id)})")
    flags = truth.flag_calls(queries.episode_detections(episode_id),
                             queries.episode_tool_calls(episode_id))
    targets: dict[str, str] = {"": "the whole run"} | {
        str(row.span_id):
            f"call {row.call}: {row.detector} (enforce would {row.action}, {row.kind})"
        for row in flags.itertuples()
    }

    if st.session_state.get(state.LABEL_FLAG) not in targets:  # another run's flag
        st.session_state.pop(state.LABEL_FLAG, None)
    marked = [f"{targets[span]}: {SHORT.get(label, label)}" for span in targets
              if (label := _label_of(episode_id, span)[0])]
    if marked:
        st.caption("Labelled already: " + "; ".join(marked) + ".")
    picked = queue[queue["episode_id"] == episode_id].iloc[0]
    killed = truth.rank(KILLED.get(str(picked["happened"]))) >= truth.rank("block") or str(
        picked["would_be"]) in (truth.WOULD["block"], truth.WOULD["stop"])
    verdicts = [v for v in VERDICTS if killed or v != "false_kill"]
    with st.form("label_form"):
        span_id = st.selectbox("Flag", list(targets), format_func=targets.__getitem__,
                               key=state.LABEL_FLAG)
        verdict = st.radio("Verdict", verdicts, format_func=VERDICTS.__getitem__, index=None)
        note = st.text_input("Note (optional)")
        sent = st.form_submit_button("Save label", disabled=not live)
    if not killed:
        st.caption("False stop is not offered: the guard neither blocked nor stopped this run, "
                   "and enforce mode would not have either.")
    if sent and verdict is None:
        st.error("Pick a verdict first: true loop, no loop" + (", or false stop." if killed
                                                                 else "."))
    elif sent and verdict is not None:
        before, before_note = _label_of(episode_id, span_id)
        try:
            queries.save_label(episode_id, verdict, span_id=span_id, note=note or None)
        except queries.SourceError as exc:
            st.error(str(exc))
        else:
            st.session_state[state.LABEL_UNDO] = (episode_id, span_id, before, before_note)
            rest = [e for e, done in zip(queue["episode_id"], queue["label"], strict=True)
                    if e != episode_id and not isinstance(done, str)]
            if rest:
                st.session_state[state.LABEL_NEXT] = rest[0]
            st.session_state[state.LABEL_SAVED] = (
                f"Labelled {targets[span_id]} of {episode_id} as {SHORT[verdict]}; the metrics "
                "now count it." + (" Next: the newest unlabelled run." if rest else
                                   " Every flagged run here is labelled."))
            st.rerun()
    undo = st.session_state.get(state.LABEL_UNDO)
    if undo is not None:
        what = "the whole run" if not undo[1] else f"a call of {undo[0]}"
        st.button(f"Undo the last label ({what} of {undo[0]}, back to "
                  f"{SHORT.get(undo[2] or '', 'unlabelled')})", key="label_undo_button",
                  on_click=_undo, icon=":material/undo:", disabled=not live)
    elif _label_of(episode_id, span_id)[0] is not None:
        st.button("Remove this label", key="label_remove", disabled=not live,
                  on_click=lambda: _remove(episode_id, span_id))
    queue["open"] = queue["episode_id"].map(state.episode_link)
    tables.show(queue, height=tables.height(queue), hide_index=True, key="flagged_to_label",
                column_order=["label", "scenario_label", "open", "task", "service", "agent",
                              "guard_mode",
                              "happened", "would_be", "kinds", "flags", "stops",
                              "would_stops", "outcome"],
                column_config=tables.headers(queue) | state.EPISODE_COLUMNS | {
                    "label": st.column_config.TextColumn(
                        "label", help="Empty: not labelled here yet (these come first)."),
                    "scenario_label": st.column_config.TextColumn(
                        "scenario label", help="The label the agent gave its own run "
                        "(loopscope.episode(label=...)): it counts as a label, and a label "
                        "saved here outranks it.")})
    downloads.offer(queue.drop(columns=["open"]), "flagged-to-label", key="flagged_to_label")


st.subheader("Labels so far")
by_source = queries.metrics(**params)["labels"]["by_source"]
st.caption(f"{by_source['human']:,} runs labelled here and {by_source['scenario']:,} by their "
           "own agent (a scenario label, `loopscope.episode(label=...)`, as the demo's runs "
           "do); both count as labels everywhere: the loop-detection and false-stop rates, "
           "the Policy page, this queue. A label saved here outranks the scenario's.")
if existing.empty:
    st.info("No label saved here yet.")
else:
    shown = existing.assign(label=existing["label"].map(lambda v: SHORT.get(v, v)))
    tables.show(shown, height=tables.height(shown), hide_index=True, key="labels_table",
                column_config=tables.headers(shown))
    downloads.offer(shown, "labels", key="labels")
