import pytest

from pipecat_harness.config import CONTROL_NAMES, ConfigError, HarnessConfig


def test_presets_set_domain_waits():
    assert HarnessConfig.preset("retail").identifier_hold.extra_wait_secs == 2.5
    assert HarnessConfig.preset("airline").identifier_hold.domain == "airline"
    assert HarnessConfig.preset("telecom").identifier_hold.extra_wait_secs == 1.5
    with pytest.raises(ConfigError, match="unknown domain"):
        HarnessConfig.preset("banking")  # type: ignore[arg-type]


def test_every_control_has_a_switch():
    config = HarnessConfig()
    for name in CONTROL_NAMES:
        assert isinstance(getattr(config, name).enabled, bool)
    assert config.only("tool_gate").enabled_controls() == {"tool_gate"}
    assert "history" not in config.with_controls(history=False).enabled_controls()
    with pytest.raises(ConfigError, match="unknown control"):
        config.with_controls(teleport=True)


def test_yaml_file_with_environment_override(tmp_path, monkeypatch):
    path = tmp_path / "harness.yaml"
    path.write_text("domain: telecom\ntool_gate:\n  write_tools: [issue_refund]\nhistory:\n  enabled: false\n")
    monkeypatch.setenv("PIPECAT_HARNESS_HISTORY__ENABLED", "true")
    config = HarnessConfig.from_yaml(path)
    assert config.domain == "telecom"
    assert config.identifier_hold.extra_wait_secs == 1.5  # the domain preset applies under the file
    assert config.tool_gate.write_tools == ["issue_refund"]
    assert config.history.enabled is True  # environment wins over the file


def test_bad_config_files_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tool_gate:\n  enabled: maybe\n")
    with pytest.raises(ConfigError, match=r"bad.yaml.*tool_gate"):
        HarnessConfig.from_yaml(bad)
    bad.write_text("tool_gat: {}\n")
    with pytest.raises(ConfigError, match="tool_gat"):
        HarnessConfig.from_yaml(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        HarnessConfig.from_yaml(tmp_path / "missing.yaml")
