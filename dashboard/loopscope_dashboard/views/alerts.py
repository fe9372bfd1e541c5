"""Alerts: the no-progress spikes the collector raised, each with the rate around it."""

import pandas as pd
import streamlit as st

from loopscope_dashboard import charts, downloads, queries, state

filters = state.filters()
st.title("Alerts")
history = queries.alerts(service=filters.service)
if history.empty:
    st.info("No alerts yet. The collector fires one when a service's no-progress rate jumps "
            "above its baseline or 50% (with at least 20 calls in the window); tune it with "
            "`loopscope collector --alert-threshold RATE --alert-min-volume N`, and send "
            "alerts on with `--alert-webhook URL`.")
    st.stop()

firing = int((history["state"] == "firing").sum())
counts = st.columns(2)
counts[0].metric("Firing now", firing, border=True)
counts[1].metric("Alerts in history", len(history), border=True)
st.dataframe(history, hide_index=True, key="alerts_table",
             column_order=["fired_at", "service", "state", "rate", "baseline", "volume",
                           "resolved_at", "message"],
             column_config={"rate": st.column_config.NumberColumn(format="percent")})

downloads.offer(history, "alerts", key="alerts")

st.subheader("Around each alert")
st.caption("The series the rule evaluates: the service's no-progress rate over the rule's "
           "rolling window, with the threshold, the baseline (once there is enough history) "
           "and each firing marked.")
for number, (_, alert) in enumerate(history.head(20).iterrows()):
    title = f"{alert['fired_at']:%Y-%m-%d %H:%M:%S} UTC · {alert['service']} · {alert['state']}"
    with st.expander(title, expanded=number == 0):
        st.write(alert["message"])
        rule = queries.alert_rule(alert)
        if alert.get("baseline") is None or pd.isna(alert.get("baseline")):
            st.caption("No baseline yet: the service had too little history, so the alert "
                       f"fired on the threshold ({rule['threshold']:.0%}) alone.")
        series = queries.alert_series(alert)
        same = history[history["service"] == alert["service"]]
        st.plotly_chart(charts.alert_context(series, alert, rule, same),
                        key=f"alert_{alert['alert_id']}")
