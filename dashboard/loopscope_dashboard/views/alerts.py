"""Alerts: the no-progress spikes the collector raised, each with the rate around it."""

import pandas as pd
import streamlit as st

from loopscope_dashboard import charts, downloads, plots, queries, state, tables

filters = state.filters()
st.title("Alerts")
history = queries.alerts(service=filters.service)
if history.empty:
    st.info("No alerts yet. The collector fires one when a service's no-progress rate jumps "
            "above its baseline or 50% (with at least 20 calls in the window); tune it with "
            "`loopscope collector --alert-threshold RATE --alert-min-volume N`, and send "
            "alerts on with `--webhook URL` (they always go to the collector's log and to "
            "/metrics; `loopscope export --prometheus-rules FILE` gives Prometheus the same "
            "rule).")
    st.stop()

history["sent_to"] = history.get("sent_to", pd.Series(index=history.index, dtype=object)).map(
    queries.alert_destinations)
firing = int((history["state"] == "firing").sum())
counts = st.columns(2)
counts[0].metric("Firing now", firing, border=True)
counts[1].metric("Alerts in history", len(history), border=True)
tables.show(history, height=tables.height(history), hide_index=True, key="alerts_table",
            column_order=["fired_at", "service", "state", "rate", "baseline", "volume",
                          "resolved_at", "resolved_because", "sent_to", "message"],
            column_config=tables.headers(history) | {
                           "rate": st.column_config.NumberColumn(format="percent"),
                           "resolved_because": st.column_config.TextColumn(
                               "why it resolved", width="large"),
                           "sent_to": st.column_config.TextColumn(
                               "sent to", help="The collector's log, each webhook (its host), "
                               "and Prometheus: every alert is counted on /metrics "
                               "(loopscope_alerts_total), and `loopscope export "
                               "--prometheus-rules` gives Prometheus the same rule.")})

downloads.offer(history, "alerts", key="alerts")

st.subheader("Around each alert")
st.caption("The series the rule evaluates: the service's no-progress rate over the rule's "
           "rolling window, with the threshold, the baseline (once there is enough history) "
           "and each firing marked.")
for number, (_, alert) in enumerate(history.head(20).iterrows()):
    title = f"{alert['fired_at']:%Y-%m-%d %H:%M:%S} UTC · {alert['service']} · {alert['state']}"
    with st.expander(title, expanded=number == 0):
        st.write(alert["message"])
        st.caption(f"**Sent to:** {alert['sent_to']}.")
        if alert["state"] == "resolved":
            because = alert.get("resolved_because")
            st.caption("**Resolved because** " + (
                because if isinstance(because, str) and because else
                "— not recorded (the alert was stored by a collector older than schema "
                "version 12)."))
        rule = queries.alert_rule(alert)
        if alert.get("baseline") is None or pd.isna(alert.get("baseline")):
            st.caption("No baseline yet: the service had too little history, so the alert "
                       f"fired on the threshold ({rule['threshold']:.0%}) alone.")
        series = queries.alert_series(alert)
        same = history[history["service"] == alert["service"]]
        plots.show(charts.alert_context(series, alert, rule, same),
                   key=f"alert_{alert['alert_id']}")
