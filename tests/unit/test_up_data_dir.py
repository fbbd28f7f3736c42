"""What `jetcron up` keeps under its data dir is its user's alone (libs/jetcron/cli/up.py): a job running as another
user can list none of it and read none of its logs or the NATS server's config."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from jetcron.bus.server import ServerNode, write_config
from jetcron.cli.up import Supervisor, close_data_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_dir_its_logs_and_the_nats_store_are_closed_even_if_an_earlier_start_left_them_open(
        tmp_path: Path) -> None:
    # Given a data dir as an earlier version left it: everything readable by anyone
    data = tmp_path / "jetcron"
    (data / "logs").mkdir(parents=True)
    (data / "logs" / "api.log").write_text("a service's log")
    for path, was in ((data, 0o755), (data / "logs", 0o755), (data / "logs" / "api.log", 0o644)):
        os.chmod(path, was)

    # When `up` starts on it
    close_data_dir(data)

    # Then the folder, its logs and the NATS store are the user's alone
    assert (mode(data), mode(data / "logs"), mode(data / "nats")) == (0o700, 0o700, 0o700)
    assert mode(data / "logs" / "api.log") == 0o600


def test_a_services_log_is_made_mode_0600_whatever_the_umask(tmp_path: Path) -> None:
    supervisor = Supervisor({}, tmp_path)
    old = os.umask(0o022)
    try:
        supervisor.start("api", [sys.executable, "-c", "print('started')"], {})
    finally:
        os.umask(old)
    supervisor.children["api"][2].wait(timeout=30)
    assert mode(tmp_path / "api.log") == 0o600
    assert (tmp_path / "api.log").read_text() == "started\n"


def test_the_nats_servers_config_is_its_users_alone(tmp_path: Path) -> None:
    node = ServerNode(name="n", port=4222, monitor_port=8222, cluster_port=None, store_dir=tmp_path / "store",
                      config_path=tmp_path / "n.conf")
    write_config(node, sync_always=True, routes=[])
    assert mode(node.config_path) == 0o600
