"""The offline tooling: what runs beside an agent, never inside it. The ``loopscope``
command (``cli``), recorded runs replayed through the core (``analysis``), scored against
baselines (``evaluation``), the scenario library (``scenarios``) and its scripted demo agents
(``demo``). The runtime an agent imports (``loopscope.tool``, ``episode``, ``guard``, the
integrations) never imports this package."""
