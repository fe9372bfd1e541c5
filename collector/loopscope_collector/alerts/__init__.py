"""Alerts: a service's no-progress spikes judged (``manager``: ``SpikeDetector`` and the
pipeline's ``AlertManager``), recorded as an ``Alert`` (``alert``) and delivered (``sinks``).
The manager and the sinks both take ``Alert`` from its own module and never import each
other's way back."""
