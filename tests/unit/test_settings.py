"""The operator's settings are read once from flags and environment; bad values name the source."""

from __future__ import annotations

import pytest

from warmgate.cli import main
from warmgate.settings import (
    DEFAULT_OPERATOR_IMAGE,
    DEFAULT_RESYNC_SECONDS,
    LeaseSettings,
    Settings,
    SettingsError,
)


def test_defaults_when_nothing_is_set() -> None:
    settings = Settings.from_environment({})
    assert settings == Settings(DEFAULT_OPERATOR_IMAGE, DEFAULT_RESYNC_SECONDS, None)


def test_the_environment_and_the_flag_are_read() -> None:
    env = {"WARMGATE_OPERATOR_IMAGE": "reg/warmgate:1", "WARMGATE_RESYNC_SECONDS": "2.5"}
    settings = Settings.from_environment(env, metrics_port=8080)
    assert settings == Settings("reg/warmgate:1", 2.5, 8080)


def test_an_empty_variable_means_the_default() -> None:
    env = {"WARMGATE_OPERATOR_IMAGE": " ", "WARMGATE_RESYNC_SECONDS": ""}
    assert Settings.from_environment(env) == Settings()


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan", "inf"])
def test_a_bad_resync_interval_names_the_variable(value: str) -> None:
    with pytest.raises(SettingsError, match="WARMGATE_RESYNC_SECONDS"):
        Settings.from_environment({"WARMGATE_RESYNC_SECONDS": value})


@pytest.mark.parametrize("value", ["many", "0", "-1", "257", "2.5"])
def test_a_bad_worker_count_names_the_variable(value: str) -> None:
    with pytest.raises(SettingsError, match="WARMGATE_SYNC_WORKERS"):
        Settings.from_environment({"WARMGATE_SYNC_WORKERS": value})


def test_the_worker_count_and_the_plan_cache_bound_are_read() -> None:
    env = {"WARMGATE_SYNC_WORKERS": "3", "WARMGATE_PLAN_CACHE_MB": "16"}
    settings = Settings.from_environment(env)
    assert (settings.sync_workers, settings.plan_cache_mb) == (3, 16)
    with pytest.raises(SettingsError, match="WARMGATE_PLAN_CACHE_MB"):
        Settings.from_environment({"WARMGATE_PLAN_CACHE_MB": "0"})


def test_a_bad_metrics_port_names_the_flag() -> None:
    with pytest.raises(SettingsError, match="--metrics-port"):
        Settings.from_environment({}, metrics_port=70000)


def test_the_operator_command_refuses_bad_settings_before_starting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WARMGATE_RESYNC_SECONDS", "soon")
    assert main(["operator", "--namespace", "x"]) == 2
    assert "WARMGATE_RESYNC_SECONDS: 'soon' is not a number" in capsys.readouterr().err


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(AttributeError):
        settings.operator_image = "other"  # type: ignore[misc]


def test_the_leader_lease_is_read_and_checked_as_client_go_does() -> None:
    env = {"WARMGATE_LEADER_LEASE": "warmgate", "WARMGATE_LEASE_DURATION": "20"}
    lease = Settings.from_environment(env).lease
    assert lease == LeaseSettings("warmgate", None, 20.0, 7.0, 2.0)
    assert Settings.from_environment({}).lease is None  # standalone
    with pytest.raises(SettingsError, match="WARMGATE_LEADER_LEASE: 'Not_A_Name'"):
        Settings.from_environment({"WARMGATE_LEADER_LEASE": "Not_A_Name"})
    too_short = {"WARMGATE_LEADER_LEASE": "w", "WARMGATE_LEASE_DURATION": "7"}
    with pytest.raises(SettingsError, match="must be greater than WARMGATE_LEASE_RENEW"):
        Settings.from_environment(too_short)  # 7 s is not more than the renew deadline
    no_retries = {"WARMGATE_LEADER_LEASE": "w", "WARMGATE_LEASE_RETRY_PERIOD": "9"}
    with pytest.raises(SettingsError, match=r"1\.2 x WARMGATE_LEASE_RETRY_PERIOD"):
        Settings.from_environment(no_retries)


def test_the_replaced_peering_settings_are_refused_not_ignored() -> None:
    with pytest.raises(SettingsError, match="WARMGATE_PEERING: kopf peering was replaced"):
        Settings.from_environment({"WARMGATE_PEERING": "warmgate"})


def test_the_api_timeouts_and_the_stall_bound_are_read() -> None:
    env = {
        "WARMGATE_API_CONNECT_TIMEOUT": "2",
        "WARMGATE_API_READ_TIMEOUT": "7.5",
        "WARMGATE_STALL_SECONDS": "60",
    }
    settings = Settings.from_environment(env)
    assert (settings.api_connect_timeout, settings.api_read_timeout) == (2.0, 7.5)
    assert settings.stall_seconds == 60.0
    defaults = Settings()
    assert (defaults.api_connect_timeout, defaults.api_read_timeout) == (5.0, 30.0)
    with pytest.raises(SettingsError, match="WARMGATE_API_READ_TIMEOUT"):
        Settings.from_environment({"WARMGATE_API_READ_TIMEOUT": "0"})


def test_the_operator_limits_glibc_malloc_arenas() -> None:
    import platform

    from warmgate.cli.operator import limit_malloc_arenas

    assert limit_malloc_arenas() is (platform.libc_ver()[0] == "glibc")
