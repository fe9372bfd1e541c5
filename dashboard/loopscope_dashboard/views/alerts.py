"""Alerts: the no-progress spikes the collector raised, each with the rate around it."""

import streamlit as st

from loopscope_dashboard import charts, queries, state

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

st.subheader("Around each alert")
for number, (_, alert) in enumerate(history.head(20).iterrows()):
    title = f"{alert['fired_at']:%Y-%m-%d %H:%M:%S} UTC · {alert['service']} · {alert['state']}"
    with st.expander(title, expanded=number == 0):
        st.write(alert["message"])
        rates = queries.rate_around(alert["fired_at"], service=alert["service"])
        st.plotly_chart(charts.alert_context(rates, alert), key=f"alert_{alert['alert_id']}")
