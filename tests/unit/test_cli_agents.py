"""`jetcron agents add|revoke` without a server: ids checked, the credential and key files, what it prints; and
`jetcron up --listen`, checked before anything is made."""

from __future__ import annotations

import re
import shlex
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jetcron.auth import jwt
from jetcron.auth.authority import Authority, identity_of
from jetcron.auth.local import LocalCreds
from jetcron.bus.server import EmbeddedNats
from jetcron.cli.agents import remote_url
from jetcron.cli.main import app


@pytest.fixture
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The auth/ folder of a `jetcron up` with two agents; no context of a real system is read."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("JETCRON_DATA_DIR", str(tmp_path / "nothing-here"))
    monkeypatch.delenv("JETCRON_AUTH_DIR", raising=False)
    monkeypatch.delenv("JETCRON_NATS_URL", raising=False)
    monkeypatch.delenv("JETCRON_NATS_CREDS", raising=False)
    monkeypatch.delenv("JETCRON_NATS_TLS_CA", raising=False)
    root = tmp_path / "auth"
    LocalCreds.ensure(root, 2)
    return root


README = Path(__file__).parents[2] / "README.md"


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def said(result: Result) -> str:
    """stdout and stderr with rich's line folding undone."""
    return " ".join(result.output.split())


def test_an_added_agent_gets_its_own_credential_the_key_and_the_command_to_run(keys: Path, tmp_path: Path) -> None:
    creds = tmp_path / "out" / "host-b.creds"
    added = cli("agents", "add", "host-b", "--creds-out", str(creds), "--auth-dir", str(keys))
    assert added.exit_code == 0, added.output

    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    who = identity_of(creds.read_text())
    assert (who["role"], who["agent"], who["inbox"]) == ("agent", "host-b", "_INBOX.a-host-b")
    allowed = jwt.decode(jwt.creds_jwt(creds.read_text()))["nats"]["pub"]["allow"]
    assert "$KV.jc_agents.host-b" in allowed and "jc.mint.host-b" in allowed
    assert not any("agent-1" in subject for subject in allowed)
    key = tmp_path / "out" / "host-b.secrets.key"
    assert key.read_bytes() == (keys / "secrets.key").read_bytes()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    issued = [i for i in Authority(keys).issued() if i.subject == "host-b"]
    assert len(issued) == 1 and issued[0].public in added.output

    out = said(added)
    assert ("JETCRON_NATS_CREDS=host-b.creds JETCRON_SECRETS_KEY_FILE=host-b.secrets.key "
            "JETCRON_AGENT_ID=host-b jetcron agent") in out
    assert "JETCRON_NATS_URL=nats://" in out and "JETCRON_NATS_URL=nats://127.0.0.1" not in out
    assert "jetcron up --listen 0.0.0.0" in out


def test_without_the_secrets_key_and_with_a_url_of_ones_own(keys: Path, tmp_path: Path) -> None:
    creds = tmp_path / "host-c.creds"
    added = cli("agents", "add", "host-c", "--creds-out", str(creds), "--no-secrets-key",
                "--url", "tls://nats.example.internal:4222", "--auth-dir", str(keys))
    assert added.exit_code == 0, added.output
    assert not (tmp_path / "host-c.secrets.key").exists()
    out = said(added)
    assert "JETCRON_NATS_URL=tls://nats.example.internal:4222 JETCRON_NATS_CREDS=host-c.creds " \
           "JETCRON_AGENT_ID=host-c jetcron agent" in out
    assert "SECRETS_KEY" not in out and "--listen" not in out


def readme_second_host() -> list[str]:
    """The command lines of the README's "A second host" section, without their comments."""
    section = README.read_text().split("\n## A second host\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    return [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_the_readmes_second_host_joins_with_the_url_and_one_file(keys: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lines = readme_second_host()
    (add,) = [line for line in lines if line.startswith("jetcron agents add ")]
    (agent,) = [line for line in lines if line.endswith(" jetcron agent")]
    # The README's command, run where it writes its file; the README calls the first host host-a, which
    # `agents add` prints only when told (otherwise it prints this machine's name)
    monkeypatch.chdir(tmp_path)
    added = cli(*shlex.split(add)[1:], "--url", "nats://host-a:4222", "--auth-dir", str(keys))
    assert added.exit_code == 0, added.output
    assert agent in said(added)
    # The line host-b runs names the URL and that one file, and that file is all `agents add` wrote
    env = dict(word.split("=", 1) for word in shlex.split(agent)[:-2])
    assert env == {"JETCRON_NATS_URL": "nats://host-a:4222", "JETCRON_NATS_CREDS": "host-b.creds",
                   "JETCRON_AGENT_ID": "host-b"}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["host-b.creds"]
    assert identity_of((tmp_path / "host-b.creds").read_text())["agent"] == "host-b"


@pytest.mark.parametrize("command", ["add", "revoke"])
@pytest.mark.parametrize("bad", ["host b", "-leading-dash", "a.b", "x" * 64, "host/b"])
def test_a_bad_agent_id_is_refused_naming_the_field_and_value(keys: Path, tmp_path: Path, command: str,
                                                              bad: str) -> None:
    extra = ["--creds-out", str(tmp_path / "x.creds")] if command == "add" else []
    refused = cli("agents", command, "--auth-dir", str(keys), *extra, "--", bad)
    assert refused.exit_code == 2, refused.output
    assert f"agent id {bad!r}: must be 1-63 letters" in said(refused)
    assert not (tmp_path / "x.creds").exists()


def test_an_id_that_has_a_credential_is_refused_unless_rotated(keys: Path, tmp_path: Path) -> None:
    # agent-1 is `jetcron up`'s own: a second agent under its id would take its work
    taken = cli("agents", "add", "agent-1", "--creds-out", str(tmp_path / "a.creds"), "--auth-dir", str(keys))
    assert taken.exit_code == 2
    assert "agent id 'agent-1' already has a credential" in said(taken)
    assert not (tmp_path / "a.creds").exists()

    old = [i.public for i in Authority(keys).issued() if i.subject == "agent-1"]
    rotated = cli("agents", "add", "agent-1", "--rotate", "--creds-out", str(tmp_path / "a.creds"),
                  "--auth-dir", str(keys))
    assert rotated.exit_code == 0, rotated.output
    assert f"jetcron agents revoke agent-1 --key {old[0]}" in said(rotated)


def test_a_revoked_id_may_be_added_again(keys: Path, tmp_path: Path) -> None:
    authority = Authority(keys)
    authority.revoke([i.public for i in authority.issued() if i.subject == "agent-2"])  # as `agents revoke` does
    again = cli("agents", "add", "agent-2", "--creds-out", str(tmp_path / "a2.creds"), "--auth-dir", str(keys))
    assert again.exit_code == 0, again.output


def test_revoking_what_was_never_issued_is_refused(keys: Path) -> None:
    none = cli("agents", "revoke", "host-z", "--auth-dir", str(keys))
    assert none.exit_code == 2 and "agent id 'host-z' has no credential issued" in said(none)
    foreign = cli("agents", "revoke", "agent-1", "--key", "UNOTONEOFTHEM", "--auth-dir", str(keys))
    assert foreign.exit_code == 2 and "agent id 'agent-1' has no credential UNOTONEOFTHEM" in said(foreign)


def test_without_keys_the_commands_say_where_they_looked(keys: Path, tmp_path: Path) -> None:
    missing = cli("agents", "add", "host-b", "--creds-out", str(tmp_path / "b.creds"),
                  "--auth-dir", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2
    assert f"--auth-dir: no keys found at {tmp_path / 'nowhere'}" in said(missing)


def test_the_agents_group_keeps_list_beside_add_and_revoke() -> None:
    shown = cli("agents", "--help")
    assert shown.exit_code == 0
    for command in ("list", "add", "revoke"):
        assert f"│ {command} " in shown.output


def test_another_host_is_given_this_hosts_name_for_loopback() -> None:
    assert remote_url("nats://127.0.0.1:4222", "host-a") == "nats://host-a:4222"
    assert remote_url("tls://localhost:4222,tls://127.0.0.1:4223", "host-a") == "tls://host-a:4222,tls://host-a:4223"
    assert remote_url("nats://nats-1.internal:4222", "host-a") == "nats://nats-1.internal:4222"


@pytest.mark.parametrize(("args", "message"), [
    (["--listen", "everywhere"], "--listen 'everywhere': an IPv4 address of this host, or 0.0.0.0 for all"),
    (["--listen", "0.0.0.0", "--no-auth"], "--listen 0.0.0.0 with --no-auth would give every host"),
])
def test_up_refuses_a_bad_listen_before_it_makes_anything(tmp_path: Path, args: list[str], message: str) -> None:
    refused = cli("up", "--data-dir", str(tmp_path / "data"), *args)
    assert refused.exit_code == 2
    assert message in said(refused)
    assert not (tmp_path / "data").exists()


def test_a_server_listening_on_every_interface_is_still_dialled_on_loopback(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats", listen="0.0.0.0")
    node = server.nodes[0]
    text = node.config_path.read_text()
    assert f"listen: 0.0.0.0:{node.port}" in text and f"http: 127.0.0.1:{node.monitor_port}" in text
    assert server.url == f"nats://127.0.0.1:{node.port}"


def test_a_certificate_for_other_hosts_names_this_host_and_the_address() -> None:
    import socket

    from jetcron.cli.up import _tls_names

    names = _tls_names("10.0.0.5")
    assert {"localhost", "127.0.0.1", socket.gethostname(), "10.0.0.5"} <= set(names)
    assert "0.0.0.0" not in _tls_names("0.0.0.0")
