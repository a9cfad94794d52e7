"""``HarnessConfig``: one switch and one settings block per control, with domain presets.

Settings load from keyword arguments, then environment variables (``PIPECAT_HARNESS_<BLOCK>__<FIELD>``, e.g.
``PIPECAT_HARNESS_TOOL_GATE__ENABLED=false``), then a YAML file::

    config = HarnessConfig.from_yaml("harness.yaml")        # env still overrides the file
    config = HarnessConfig.preset("airline")                  # domain defaults
    config = config.with_controls(tool_gate=False)            # switch one control off
"""

from pipecat_harness.config.call_blocks import (
    CallStateSettings,
    Domain,
    HistorySettings,
    IdentifierHoldSettings,
    RetrievalSettings,
    SilentReplySettings,
    SpellingSettings,
    ToolGateSettings,
    TraceSettings,
)
from pipecat_harness.config.database import check_database_url
from pipecat_harness.config.harness_config import (
    CONTROL_NAMES,
    ConfigError,
    HarnessConfig,
    describe_config_error,
    env_name,
)
from pipecat_harness.config.service_blocks import ChecklistSettings, GraderSettings, ProxySettings

__all__ = ["CONTROL_NAMES", "CallStateSettings", "ChecklistSettings", "ConfigError", "Domain", "GraderSettings",
           "HarnessConfig", "HistorySettings", "IdentifierHoldSettings", "ProxySettings", "RetrievalSettings",
           "SilentReplySettings", "SpellingSettings", "ToolGateSettings", "TraceSettings", "check_database_url",
           "describe_config_error", "env_name"]
