"""Settings are validated as values (issue 25, item 3): finite numbers in range, every form of listen address,
secret and key files that must be regular files (a FIFO never blocks), the commit-trust settings."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from reconciler.controller.http import ControllerHttp
from reconciler.controller.metrics import ControllerMetrics
from reconciler.model.errors import MigplanError
from reconciler.model.inventory import VerifyMode
from reconciler.settings import load_settings, verify_settings


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "1e400", "1e10", float("nan")])
@pytest.mark.parametrize("name", ["cycle_deadline_seconds", "http_read_timeout_seconds", "interval_seconds"])
def test_non_finite_and_huge_numbers_are_refused_naming_the_setting(name: str, raw: object) -> None:
    with pytest.raises(MigplanError) as err:
        load_settings(env={}, flags={name: raw})
    assert err.value.code == "MP800" and f"--{name.replace('_', '-')}" in err.value.message
    assert "finite" in err.value.message


def test_a_huge_value_is_cut_in_the_message() -> None:
    with pytest.raises(MigplanError) as err:
        load_settings(env={"MIGPLAN_INTERVAL_SECONDS": "9" * 100_000})
    assert err.value.code == "MP800" and len(err.value.message) < 200


@pytest.mark.parametrize(
    ("listen", "host", "port"),
    [("[::1]:8080", "::1", 8080), ("[::]:0", "::", 0), ("127.0.0.1:9", "127.0.0.1", 9), (":8080", "0.0.0.0", 8080)],
)
def test_listen_forms(listen: str, host: str, port: int) -> None:
    assert load_settings(env={}, flags={"listen": listen}).listen_host_port == (host, port)


@pytest.mark.parametrize(
    "listen", ["::1:8080", "[::1]", "[nope]:80", "host:\uff18\uff10", "a b:80", "1.2.3.4:99999", "x"]
)
def test_bad_listen_addresses_name_the_setting(listen: str) -> None:
    with pytest.raises(MigplanError) as err:
        load_settings(env={}, flags={"listen": listen})
    assert err.value.code == "MP800" and "listen" in err.value.message


def _http(host: str, port: int) -> ControllerHttp:
    return ControllerHttp(
        host=host,
        port=port,
        metrics=ControllerMetrics(),
        healthy=lambda: (True, ""),
        ready=lambda: (True, ""),
        on_push=lambda _why: None,
        secret=lambda: "s",
        branch="main",
        max_body=1024,
    )


def test_an_ipv6_literal_listens() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")  # not counted as passing: the IPv4 test below still runs
    try:
        srv = _http("::1", 0)
    except MigplanError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc.message}")
    try:
        srv.start()
        with socket.create_connection(("::1", srv.port), timeout=5) as conn:
            conn.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            assert conn.recv(64).startswith(b"HTTP/1.0 200")
    finally:
        srv.stop()


def test_a_port_in_use_is_a_settings_error_naming_the_address() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        with pytest.raises(MigplanError) as err:
            _http("127.0.0.1", taken.getsockname()[1])
        assert err.value.code == "MP800" and f"127.0.0.1:{taken.getsockname()[1]}" in err.value.message
        assert err.value.message.startswith("listen:")
    finally:
        taken.close()


@pytest.mark.parametrize("key", ["webhook_secret_file", "git_password_file"])
def test_a_fifo_secret_file_is_refused_without_blocking(tmp_path: Path, key: str) -> None:
    fifo = tmp_path / "secret"
    os.mkfifo(fifo)
    result: list[BaseException | None] = []

    def load() -> None:
        try:
            load_settings(env={}, flags={key: str(fifo)})
            result.append(None)
        except BaseException as exc:
            result.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(60)  # a generous bound for a loaded machine: the old code never returned at all
    assert result, "loading the settings blocked on a FIFO"
    err = result[0]
    assert isinstance(err, MigplanError) and err.code == "MP800" and "not a regular file" in err.message


def test_a_directory_or_huge_secret_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MigplanError, match="not a regular file"):
        load_settings(env={}, flags={"webhook_secret_file": str(tmp_path)})
    big = tmp_path / "big"
    big.write_bytes(b"x" * (2 * 1024 * 1024))
    with pytest.raises(MigplanError, match="larger than"):
        load_settings(env={}, flags={"webhook_secret_file": str(big)})


def test_verify_settings_come_from_files(tmp_path: Path) -> None:
    signers = tmp_path / "allowed_signers"
    signers.write_text("# the platform team\nops@example.com ssh-ed25519 AAAAC3Nza\n\n")
    s = load_settings(env={}, flags={"verify_mode": "head", "verify_allowed_signers_file": str(signers)})
    v = verify_settings(s)
    assert v.mode is VerifyMode.HEAD and v.allowed_signers == ("ops@example.com ssh-ed25519 AAAAC3Nza",)
    assert verify_settings(load_settings(env={})).mode is VerifyMode.NONE


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"verify_mode": "head"}, "verify_mode"),  # head and no key: nothing could ever be applied
        ({"verify_mode": "sometimes"}, "verify_mode"),
        ({"allow_rewind_to": "abc123"}, "allow_rewind_to"),
        ({"trust_state_config_map": "Not_A_Name"}, "trust_state_config_map"),
        ({"trust_state_config_map": "a", "trust_state_file": "/x"}, "trust_state_file"),
        ({"verify_gpg_keys_file": "/dev/null"}, "verify_gpg_keys_file"),
    ],
)
def test_bad_trust_settings_are_named(flags: dict[str, str], named: str) -> None:
    with pytest.raises(MigplanError) as err:
        verify_settings(load_settings(env={}, flags=flags))
    assert err.value.code == "MP800" and named in err.value.message


@pytest.mark.parametrize("name", ["git_ssh_key", "git_known_hosts", "report_signing_key", "trust_state_file"])
def test_file_settings_must_name_regular_files(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    flags = {name: str(fifo)}
    if name == "report_signing_key":
        flags["report_signing_format"] = "ssh"
    with pytest.raises(MigplanError) as err:
        load_settings(env={}, flags=flags)
    assert err.value.code == "MP800" and name in err.value.message and "not a regular file" in err.value.message
    assert load_settings(
        env={},
        flags={name: str(tmp_path / "missing")}
        | ({"report_signing_format": "ssh"} if name == "report_signing_key" else {}),
    )  # missing: the reader says so, with its code
