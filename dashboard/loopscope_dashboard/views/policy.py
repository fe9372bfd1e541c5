"""Policy: try a policy on the stored runs before turning enforce mode on.

Choose settings, replay the stored runs (all, or the sidebar's filter) through the detection
core in enforce mode, and compare with the current policy: loops caught and false stops on
labelled runs, runs warned, blocked and stopped, what stopping would have saved, and the runs
whose verdict changes. A sweep shows one setting's trade-off; calibration from labels
searches the evidence caps and ignored_calls that catch the most labelled loops with no false
stop (``loopscope calibrate``). A policy is exported as the JSON file the guard, the collector
and ``loopscope analyze`` read.

Replays run behind the page (``replay_jobs``): it shows the newest finished one at once, says
when it ran, and redraws when the replay of the data as it is now lands.
"""

import json
import math
import time
from typing import Any

import pandas as pd
import streamlit as st

from loopscope_dashboard import (
    calibrations,
    charts,
    downloads,
    hints,
    plots,
    queries,
    replay_jobs,
    replays,
    state,
    tables,
)

WAIT_S = 1.5  # how long the page waits for a replay it has no result of, then shows progress

st.title("Policy")
st.caption("Replays stored runs through the same detection core the guard and the collector "
           "run, in enforce mode. Runs recorded in observe mode replay best: an enforce-mode "
           "run already stopped where its policy said. The replay sees what the store holds, "
           "which is less than a guard saw when content was not captured; the page says on "
           "which runs that changes the verdict. Loops caught and false stops count "
           "labelled runs only (a human label, else the run's scenario label).")

left, right = st.columns([2, 1])
scope = left.radio("Runs to replay", ["All stored runs", "The sidebar's filter"],
                   horizontal=True, key=state.POLICY_SCOPE)
newest = int(right.number_input("Newest runs, at most", min_value=100, max_value=10_000,
                                value=replay_jobs.DEFAULT_NEWEST, step=500, key="policy_limit"))
params = state.filters().params() if scope == "The sidebar's filter" else {}
params["limit"] = newest
summary = st.empty()  # filled once the replay is known: how many runs it covers

# -- the current policy: what the guards recorded ------------------------------------------
recorded = queries.guard_policies(**params)
with st.expander("Current policy", expanded=True):
    if recorded.empty:
        st.caption("No guard recorded its policy on these runs (runs sent before loopscope "
                   "recorded it, or by other instrumentations): the defaults, unless you "
                   "load the JSON file your agents or collector use below.")
        current = replay_jobs.current_policy(recorded)
    else:
        pick = 0
        if len(recorded) > 1:
            pick = st.selectbox(
                "The guards ran more than one policy on these runs; compare against",
                range(len(recorded)), key=state.POLICY_RECORDED,
                format_func=lambda i: f"{recorded['runs'].iloc[i]:,} runs "
                f"({recorded['modes'].iloc[i]}): {recorded['policy'].iloc[i]}")
        row = recorded.iloc[pick]
        current = replay_jobs.current_policy(recorded, pick)
        st.caption(f"The policy the in-process guards recorded on {row['runs']:,} of these "
                   f"runs ({row['modes']} mode; `loopscope.guard.policy` on each run's root "
                   "span); its settings that differ from the defaults, as a policy file "
                   "holds them, are under \"The current policy as JSON\".")
    loaded = st.file_uploader("Or compare against a policy file instead", type=["json"],
                              key="policy_current_file")
    if loaded is not None:
        try:
            current = replays.build(json.loads(loaded.getvalue() or b"{}"), source=loaded.name)
            st.caption(f"Current policy: {loaded.name}.")
        except ValueError as exc:
            st.error(str(exc))
shown_json = st.expander("The current policy as JSON",
                         key=state.POLICY_CURRENT_JSON, on_change="rerun")
if shown_json.open:
    shown_json.code(replays.to_json(current), language="json")
base = replays.plain(current)

# -- the candidate, field by field ---------------------------------------------------------
settings = replays.settings()
numbers = [s for s in settings if s.widget != "json"]
others = [s for s in settings if s.widget == "json"]
labels = {s.name: s.label for s in settings}
st.subheader("Candidate policy")
candidate_said = st.empty()  # what the candidate changes, once it is known
# The editor draws only when open: its fields were about 1 s of a fresh browser's first draw of
# this page (BENCHMARKS.md). The candidate last replayed stays while it is closed.
start = st.session_state.get(state.POLICY_CANDIDATE) or base
chosen: dict[str, Any] = {s.name: start[s.name] for s in numbers}
texts = {s.name: json.dumps(start[s.name], ensure_ascii=False) for s in others}
editor = st.expander("The candidate policy's settings", key=state.POLICY_EDIT, on_change="rerun")
if editor.open:
    with editor, st.form("policy_form"):
        st.caption("Hover the question mark beside a field for what it does and its name in "
                   "a policy file.")
        columns = st.columns(4)
        for i, setting in enumerate(numbers):
            column = columns[i % 4]
            value = start[setting.name]
            key = f"policy_field_{setting.name}"
            if setting.widget == "bool":
                chosen[setting.name] = column.checkbox(setting.label, value=value,
                                                       help=setting.help, key=key)
            elif setting.widget == "int":
                chosen[setting.name] = int(column.number_input(
                    setting.label, value=int(value), min_value=1, step=1, help=setting.help,
                    key=key))
            else:
                chosen[setting.name] = float(column.number_input(
                    setting.label, value=float(value), min_value=0.0, help=setting.help,
                    key=key, format="%g"))
        st.caption("Actions per detector, ladder rungs, K per task type, poll tools, budgets "
                   "and the other structured settings, as JSON (a policy file's syntax).")
        text_columns = st.columns(2)
        for i, setting in enumerate(others):
            texts[setting.name] = text_columns[i % 2].text_area(
                setting.label, texts[setting.name], help=setting.help,
                key=f"policy_field_{setting.name}", height=68)
        st.form_submit_button("Replay with this policy", type="primary")

problems = []
for name, text in texts.items():
    try:
        chosen[name] = json.loads(text)
    except ValueError as exc:
        problems.append(f"{labels[name]} (`{name}`): not valid JSON ({exc})")
candidate = None
if not problems:
    try:
        candidate = replays.build(chosen)
    except ValueError as exc:
        problems.append(str(exc))
for problem in problems:
    st.error(problem)
if candidate is not None:
    as_data = replays.plain(candidate)
    if as_data == base:  # the current policy: the candidate follows it if another is chosen
        st.session_state.pop(state.POLICY_CANDIDATE, None)
    else:
        st.session_state[state.POLICY_CANDIDATE] = as_data
    changed = [f"{labels[n]} (changed)" if n in texts else f"{labels[n]} {base[n]} → {v}"
               for n, v in as_data.items() if v != base[n]]  # a JSON setting: too long to say
    candidate_said.caption(
        ("Differs from the current policy in: " + "; ".join(changed) + "." if changed else
         "The current policy, until you change a setting below.")
        + " The comparison below replays every run under both.")

# the replay: the newest finished one of this view at once, a new one behind it (replay_jobs)
shared = replay_jobs.jobs()
if candidate is not None:
    view = replay_jobs.View.of(params, current, candidate)
    st.session_state[state.POLICY_RESULT] = (view, current, candidate)
elif state.POLICY_RESULT in st.session_state:
    view, current, candidate = st.session_state[state.POLICY_RESULT]
    st.warning("The results below are the last valid candidate's: fix the field above and "
               "replay again.")
else:
    st.stop()
fresh_for = replay_jobs.REFRESH_S if queries.source_is_live() else math.inf
shared.request(view, current, candidate, fresh_for=fresh_for, stamp=replay_jobs.data_stamp())
done = shared.latest(view) or shared.wait(view, WAIT_S)


def _when(epoch_s: float) -> str:
    """When a replay finished: the time of day, and the date when it was not today."""
    today = time.gmtime(epoch_s)[:3] == time.gmtime()[:3]
    return time.strftime("%H:%M:%S UTC" if today else "%Y-%m-%d %H:%M:%S UTC",
                         time.gmtime(epoch_s))


def _of_older_data(of: tuple[str, float], what: str) -> None:
    """Say when a result shown was computed on a replay (``of``: its data version and when it
    finished) that the replay shown above has since replaced: a live collector's data changed
    (a new run, call or label)."""
    if of[0] != version:
        st.caption(f"{what} of the runs as they were at {_when(of[1])}: the data has changed "
                   "since; run it again for the runs as they are now.")


def _await(view: replay_jobs.View, shown_at: float | None) -> None:
    """While a replay of ``view`` runs: its progress; the page redraws when it lands."""
    newest = shared.latest(view)
    if newest is not None and newest.finished_at != shown_at:
        st.rerun(scope="app")
    running = shared.running(view)
    if running is None:
        if shown_at is None:
            st.error("The replay failed: the dashboard's log says why.")
        return
    what = (f"{running.label}: replayed {running.done:,} of {running.total:,} runs"
            if running.total else f"{running.label}…")
    if shown_at is not None:
        what = (f"Replaying the data as it is now ({what}); the results below are of "
                f"{time.strftime('%H:%M:%S UTC', time.gmtime(shown_at))}.")
    st.progress(running.done / max(running.total, 1), text=what)


if done is None or shared.running(view) is not None:
    st.fragment(_await, run_every="1s")(view, done.finished_at if done else None)
if done is None:
    st.stop()
runs, was, now, (guarded_runs, disagree) = done.runs, done.current, done.candidate, done.guarded
if not runs:
    st.info(f"No stored runs to replay. Run agents in observe mode (or "
            f"{hints.demo_command()}), label a few on the Labels page, then come back to "
            "tune the policy.")
    st.stop()
summary.caption(f"{len(runs)} runs, {sum(r.calls for r in runs):,} tool calls; "
                f"{sum(r.label is not None for r in runs)} labelled. Replayed at "
                f"{_when(done.finished_at)}"
                + (", before the dashboard started (kept from its last run)." if done.restored
                   else "."))
version = done.version
replay = shared.replay_for(version)

# -- side by side ----------------------------------------------------------------------------
st.subheader("Current vs candidate")
before, after = replays.score(was), replays.score(now)
cards = st.columns(6)
for column, (label, field, inverse) in zip(cards, [
        ("Loops caught", "caught", False), ("False stops", "false_stops", True),
        ("Runs warned", "warned", False), ("Runs blocked", "blocked", False),
        ("Runs stopped", "stopped", False), ("Tool calls saved", "calls_saved", False)],
        strict=True):
    value, prior = getattr(after, field), getattr(before, field)
    of = {"caught": f" of {after.labelled_loops:,}",  # the n each count is out of
          "false_stops": f" of {after.judged_stops:,}"}.get(field, "")
    column.metric(label, f"{value:,}{of}", f"{value - prior:+,}" if value != prior else None,
                  delta_color="inverse" if inverse else "normal", border=True)
table = pd.DataFrame([before.as_row(), after.as_row()], index=["current", "candidate"])
table["differs_from_guards"] = [len(disagree), None]
tables.show(table.T.rename(index=tables.header).rename_axis("measure"), key="policy_compare",
            column_config={"current": st.column_config.NumberColumn(format="%g"),
                           "candidate": st.column_config.NumberColumn(format="%g")})
downloads.offer(table.T.rename_axis("measure").reset_index(), "policy-comparison",
                key="policy_compare")
st.caption(f"Loops caught of {after.labelled_loops} labelled loops; false stops of "
           f"{after.judged_stops} runs with a detector's stop judged by a label or an outcome "
           f"(docs/metrics.md); {after.budget_stops} "
           f"budget stop(s) beside them. Cost saved: ${before.cost_saved:,.4f} → "
           f"${after.cost_saved:,.4f} (the recorded cost after each stop).")

st.subheader("Current policy vs what the guards recorded")
if not guarded_runs:
    st.info("No in-process guard reported on these runs, so there is nothing to check the "
            "replay against.")
elif disagree.empty:
    st.success(f"On all {guarded_runs:,} runs a guard reported on, the replay under the "
               "current policy gives what the guard recorded (its strongest action, at the "
               "same call).")
else:
    st.warning(
        f"On {len(disagree):,} of the {guarded_runs:,} runs a guard reported on, the replay "
        "under the current policy does not give what the guard recorded. The replay sees "
        "only what the store holds: without captured content it compares arguments and "
        "outputs by hash; the model's messages are stored only when the agent records them "
        "(`ep.record_message`), and the agent's own clock never is. "
        "Where a guard saw more, the same policy running live can decide otherwise, so read "
        "these runs' verdicts, current and candidate, as the replay's, not the guard's (a "
        "different policy on your guards is the other reason they differ).")
    listed = disagree.copy()
    listed.insert(0, "open", listed["episode_id"].map(state.episode_link))
    tables.show(listed.drop(columns=["episode_id"]), hide_index=True, key="policy_guards",
                column_config=tables.headers(listed) | {
                               "open": state.EPISODE_COLUMNS["open"],
                               "guard": st.column_config.TextColumn(
                                   "guard recorded", help="Its strongest decision (enforce "
                                   "would, in observe mode) and the call it came first."),
                               "replay": st.column_config.TextColumn("replay (current)"),
                               "why": st.column_config.TextColumn(width="large")})
    downloads.offer(disagree, "policy-guard-disagreements", key="policy_guards")

st.subheader("Runs whose verdict changes")
changes = replays.changed(was, now)
if changes.empty:
    st.success("No run's verdict changes under the candidate policy.")
else:
    changes.insert(0, "open", changes["episode_id"].map(state.episode_link))
    tables.show(changes.drop(columns=["episode_id"]), hide_index=True, key="policy_changes",
                column_config=tables.headers(changes) | {
                    "open": state.EPISODE_COLUMNS["open"]})
    downloads.offer(changes.drop(columns=["open"]), "policy-changes", key="policy_changes")

every_run = st.expander(f"Every run under the candidate policy ({len(now)})",
                        key=state.POLICY_EVERY_RUN, on_change="rerun")
if every_run.open:  # drawn only when asked for: a table of every run weighs on the first draw
    with every_run:
        every = replays.verdicts_frame(now)
        tables.show(every, height=tables.height(every), hide_index=True,
                    key="policy_verdicts", column_config=tables.headers(every))
        downloads.offer(every, "policy-verdicts", key="policy_verdicts")

st.download_button("Export the candidate policy (JSON)", replays.to_json(candidate),
                   "loopscope-policy.json", "application/json", key="policy_export",
                   icon=":material/download:")
st.caption("Only the settings that differ from the defaults. Use it with "
           "`loopscope.instrument(policy=\"loopscope-policy.json\")`, "
           "`loopscope collector --policy loopscope-policy.json` or "
           "`loopscope analyze runs.jsonl --policy loopscope-policy.json`. "
           "`analyze --policy` over the same spans (OTLP JSON, as the OpenTelemetry "
           "Collector's file exporter writes them) gives this page's verdicts. A guard "
           "running it live sees more than the store holds when content is not captured "
           "(arguments and outputs as text, the model's messages, its own clock), so on such "
           "runs it can decide otherwise; the section above lists where that already "
           "happened under the current policy.")
candidate_json = st.expander("The candidate policy as JSON",
                             key=state.POLICY_CANDIDATE_JSON, on_change="rerun")
if candidate_json.open:
    candidate_json.code(replays.to_json(candidate), language="json")

# -- sweep -------------------------------------------------------------------------------------
st.subheader("Sweep one setting")
numeric = [s for s in numbers if s.widget in ("int", "float")]
names = [s.name for s in numeric]
name = st.selectbox("Setting", names, index=names.index("repeat_threshold")
                    if "repeat_threshold" in names else 0, key="policy_sweep_setting",
                    format_func=lambda n: f"{labels[n]} ({n})")
setting = numeric[names.index(name)]
at_candidate, at_current = replays.plain(candidate)[name], base[name]
values = replays.sweep_around(setting, at_candidate, at_current)
marks = {at_candidate: "candidate", at_current: "current"}
if at_candidate == at_current:
    marks[at_current] = "current = candidate"
st.caption(f"Replays every run for {name} = {', '.join(map(str, values))} (the current "
           f"policy's value is {at_current}, the candidate's {at_candidate}), the other "
           "settings as in the candidate.")
# Kept by the view and the setting, not by the data's version: on a live collector a new
# replay lands every REFRESH_S, and a sweep the user ran must not vanish at the next one.
sweep_key = (view, name)
swept = st.session_state.get(state.POLICY_SWEEP)
if st.button("Run the sweep", key="policy_sweep_run"):
    bar = st.progress(0.0, text="Sweeping…")

    def _swept(count: int, total: int) -> None:
        bar.progress(count / max(total, 1), text=f"Sweep: {count:,} of {total:,} replays")

    frame = replays.sweep(runs, replays.plain(candidate), name, values, replay=replay,
                          marks=marks, progress=_swept)
    bar.empty()
    swept = (sweep_key, (version, done.finished_at), frame)
    st.session_state[state.POLICY_SWEEP] = swept
if swept is not None and swept[0] == sweep_key:
    _of_older_data(swept[1], "This sweep is")
    plots.show(charts.sweep_chart(swept[2], name), key="policy_sweep_chart")
    tables.show(swept[2], hide_index=True, key="policy_sweep_table",
                column_config=tables.headers(swept[2].columns))
    downloads.offer(swept[2], f"policy-sweep-{name}", key="policy_sweep")

# -- calibrate from labels ---------------------------------------------------------------------
st.subheader("Calibrate from labels")
st.caption("Searches the policy that, on these runs, catches the most labelled loops with no "
           "false stop: each evidence source a finding rests on (its detector, and a kind "
           "declared or guessed, outputs equal or only similar, a deadline stated or the "
           "default, ...) may block or stop only if it never stopped a healthy run (a run "
           "labelled no loop, a loop before it began, a successful run that went on making "
           "progress); else it may only warn. Then the calls without progress after a warning "
           "that stop the run (ignored_calls). The current policy's other settings stay. The "
           "labels are a human's (the Labels page), else the run's scenario label; "
           "`loopscope calibrate --db` gives the same on a copy of the store.")
calibration_key = (view.params, replays.to_json(current))  # kept as the sweep is
calibrated = st.session_state.get(state.POLICY_CALIBRATION)
if st.button("Calibrate from labels", key="policy_calibrate_run"):
    ran_on = (version, done.finished_at)
    judged = calibrations.judged(runs)
    with st.spinner(f"Calibrating on {len(judged):,} labelled and successful runs…",
                    show_time=True):
        line = st.empty()

        def _said(text: str) -> None:
            line.caption(text)

        try:
            result = calibrations.run(judged, current, progress=_said)
        except calibrations.TooFewLabels as exc:
            calibrated = (calibration_key, ran_on, str(exc))
        else:
            line.caption("Replaying every run under the calibrated policy…")
            moved = replays.changed(replay(runs, current), replay(runs, result.policy))
            calibrated = (calibration_key, ran_on, (result, moved))
        line.empty()
    st.session_state[state.POLICY_CALIBRATION] = calibrated
shown = None
if calibrated is not None and calibrated[0] == calibration_key:
    _of_older_data(calibrated[1], "This calibration is")
    shown = calibrated[2]
if isinstance(shown, str):  # too few labels: what calibration said, and what to do
    st.info(shown, icon=":material/label:")
elif shown is not None:
    result, moved = shown
    found = st.columns(4)
    found[0].metric("Labelled loops caught", f"{result.score.caught} of {result.loops}",
                    border=True)
    found[1].metric("False stops on healthy runs", f"{len(result.false_kills)} of "
                    f"{result.healthy}", border=True)
    found[2].metric("False-stop rate, at most", f"{result.bound:.1%}", border=True,
                    help="The exact (Clopper-Pearson) 95% upper bound: no false stop in a "
                    "few runs still allows a rate above zero.")
    found[3].metric("Calls ignored after a warning", result.ignored_calls, border=True,
                    help="ignored_calls: calls without progress after a warning that stop "
                    "the run.")
    st.caption(f"False stops {calibrations.bound_text(result)}. {result.score.ended} of "
               f"{result.score.goes_on} caught loops that go on are ended by the third "
               f"step. ignored_calls = {result.ignored_calls} (tried: "
               + ", ".join(f"{t['ignored_calls']}: caught {t['caught']}, "
                           f"{t['false_kills']} false stops" for t in result.tried) + ").")
    for still in result.false_kills[:10]:
        st.warning(f"Still a false stop (no evidence source left to cap): {still}")
    st.markdown("**The calibrated policy vs the current one**")
    differs = calibrations.policy_changes(current, result.policy)
    if differs.empty:
        st.success("Calibration keeps the current policy's evidence caps and ignored_calls.")
    else:
        tables.show(differs, height=tables.height(differs),
                    hide_index=True, key="policy_calibration_changes",
                    column_config=tables.headers(differs))
    st.markdown("**Runs whose verdict changes under the calibrated policy**")
    if moved.empty:
        st.success("No run's verdict changes under the calibrated policy.")
    else:
        listed = moved.rename(columns={"candidate": "calibrated",
                                       "false_stop_now": "false_stop_calibrated",
                                       "caught_now": "caught_calibrated"})
        listed.insert(0, "open", listed["episode_id"].map(state.episode_link))
        tables.show(listed.drop(columns=["episode_id"]), hide_index=True,
                    key="policy_calibration_runs",
                    column_config=tables.headers(listed) | {
                        "open": state.EPISODE_COLUMNS["open"]})
        downloads.offer(listed.drop(columns=["open"]), "policy-calibration-changes",
                        key="policy_calibration_runs")
    with st.expander("What each evidence source did (blocks and stops before any cap)"):
        tables.show(calibrations.sources_frame(result), hide_index=True,
                    key="policy_calibration_sources")
    st.download_button("Export the calibrated policy (JSON)", replays.to_json(result.policy),
                       "loopscope-policy-calibrated.json", "application/json",
                       key="policy_calibration_export", icon=":material/download:")
    st.code(replays.to_json(result.policy), language="json")
