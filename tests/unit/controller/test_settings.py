"""Settings: defaults < file < env < flags, secrets never printed, bad values named by source."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reconciler.model.errors import MigplanError
from reconciler.settings import LogFormat, Secret, load_settings


def test_defaults_are_valid() -> None:
    s = load_settings(env={})
    assert s.interval_seconds == 60.0 and s.lease_name == "migplan-leader" and s.namespace == "migplan"
    assert s.leader_election is True and s.log_format is LogFormat.TEXT


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "migplan.yaml"
    cfg.write_text("intervalSeconds: 30\nbranch: prod\nrepo: https://git.example/inv.git\nlogFormat: json\n")
    s = load_settings(env={}, config_file=cfg)
    assert (s.interval_seconds, s.branch, s.log_format) == (30.0, "prod", LogFormat.JSON)
    s = load_settings(env={"MIGPLAN_INTERVAL_SECONDS": "20", "MIGPLAN_BRANCH": "staging"}, config_file=cfg)
    assert (s.interval_seconds, s.branch, s.repo) == (20.0, "staging", "https://git.example/inv.git")
    s = load_settings(
        flags={"interval_seconds": 10, "branch": None}, env={"MIGPLAN_INTERVAL_SECONDS": "20"}, config_file=cfg
    )
    assert s.interval_seconds == 10.0 and s.branch == "prod"  # None flag = not given


def test_config_file_from_env(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("namespace: gpu-ops\n")
    assert load_settings(env={"MIGPLAN_CONFIG": str(cfg)}).namespace == "gpu-ops"


def test_secrets_are_redacted_everywhere(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret_file = tmp_path / "hook"
    secret_file.write_text("s3cr3t-from-file\n")
    s = load_settings(env={"MIGPLAN_GIT_PASSWORD": "ghp_topsecret", "MIGPLAN_WEBHOOK_SECRET_FILE": str(secret_file)})
    assert s.webhook_secret.reveal() == "s3cr3t-from-file"  # trailing newline of the mounted file dropped
    assert s.git_password.reveal() == "ghp_topsecret"
    for text in (repr(s), str(s), str(s.redacted())):
        assert "ghp_topsecret" not in text and "s3cr3t" not in text
    assert s.redacted()["git_password"] == "***" and s.redacted()["git_ssh_key"] == ""
    with caplog.at_level(logging.INFO):
        logging.getLogger("t").info("settings %s %r", s, s.redacted())
    assert "topsecret" not in caplog.text
    assert Secret("a") == Secret("a") and Secret("a") != Secret("b")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"MIGPLAN_INTERVAL_SECONDS": "soon"}, "MIGPLAN_INTERVAL_SECONDS: expected a number"),
        ({"MIGPLAN_INTERVAL_SECONDS": "-5"}, "must not be negative"),
        ({"MIGPLAN_LEADER_ELECTION": "maybe"}, "expected true or false"),
        ({"MIGPLAN_LOG_FORMAT": "xml"}, "expected one of text, json"),
        ({"MIGPLAN_NO_SUCH": "1"}, "MIGPLAN_NO_SUCH: unknown setting"),
        ({"MIGPLAN_LEASE_DURATION_SECONDS": "0"}, "must be at least 1"),
        ({"MIGPLAN_RENEW_DEADLINE_SECONDS": "20"}, "renew_deadline_seconds"),
        ({"MIGPLAN_JITTER_SECONDS": "90"}, "jitter_seconds"),
        ({"MIGPLAN_LISTEN": "nowhere"}, "expected HOST:PORT"),
        ({"MIGPLAN_WEBHOOK_SECRET_FILE": "/nonexistent/secret"}, "cannot read secret file"),
    ],
)
def test_bad_values_are_named_errors(env: dict[str, str], needle: str) -> None:
    with pytest.raises(MigplanError) as err:
        load_settings(env=env)
    assert needle in str(err.value)
    assert err.value.code == "MP800"


def test_bad_config_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("interval: [1,\n")
    with pytest.raises(MigplanError, match=r"bad.yaml:\d+: not valid YAML"):
        load_settings(env={}, config_file=bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n")
    with pytest.raises(MigplanError, match="expected a mapping"):
        load_settings(env={}, config_file=lst)
    with pytest.raises(MigplanError, match="cannot read config file"):
        load_settings(env={}, config_file=tmp_path / "missing.yaml")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("intervalSecs: 3\n")
    with pytest.raises(MigplanError, match="interval_secs: unknown setting"):
        load_settings(env={}, config_file=unknown)


def test_report_signing_settings(tmp_path: Path) -> None:
    assert load_settings(env={}).report_signing_format == ""  # unsigned unless configured
    cfg = tmp_path / "c.yaml"
    cfg.write_text("reportSigningFormat: openpgp\nreportSigningKey: /etc/migplan/signing/key\nreportAuthorEmail: b@x\n")
    s = load_settings(env={}, config_file=cfg)
    assert (s.report_signing_format, s.report_signing_key, s.report_author_email) == (
        "openpgp",
        "/etc/migplan/signing/key",
        "b@x",
    )
    s = load_settings(env={"MIGPLAN_REPORT_SIGNING_FORMAT": "ssh", "MIGPLAN_REPORT_SIGNING_KEY": "/k"})
    assert (s.report_signing_format, s.report_signing_key) == ("ssh", "/k")
    for env, needle in (
        ({"MIGPLAN_REPORT_SIGNING_FORMAT": "x509", "MIGPLAN_REPORT_SIGNING_KEY": "/k"}, "expected ssh or openpgp"),
        ({"MIGPLAN_REPORT_SIGNING_FORMAT": "ssh"}, "go together"),
        ({"MIGPLAN_REPORT_SIGNING_KEY": "/k"}, "go together"),
        ({"MIGPLAN_REPORT_SIGNING_KEYFILE": "/k"}, "unknown setting"),
    ):
        with pytest.raises(MigplanError) as err:
            load_settings(env=env)
        assert err.value.code == "MP800" and needle in err.value.message, err.value.message


def test_observer_silent_threshold_is_a_setting() -> None:
    from reconciler.settings import load_settings

    s = load_settings(env={"MIGPLAN_OBSERVE_SILENT_HEARTBEATS": "5", "MIGPLAN_OBSERVE_HEARTBEAT_SECONDS": "60"})
    assert s.observe_silent_heartbeats == 5 and s.observe_heartbeat_seconds == 60
    assert load_settings(env={}).observe_silent_heartbeats == 3
    with pytest.raises(MigplanError, match="observe_silent_heartbeats"):
        load_settings(env={"MIGPLAN_OBSERVE_SILENT_HEARTBEATS": "0"})
