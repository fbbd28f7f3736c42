"""Notifications end to end: real nats-server with auth on, real services, a webhook receiver and an SMTP sink on
loopback (the allow flag set, as only a test or a lab deployment would)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiosmtpd.controller import Controller
from harness import Services, mint, run_cli, wait_for

from bench.webhook import Receiver
from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.bus.server import free_port
from jetcron.core.lifecycle.notify import NEVER_FIRED, Notice, verify
from jetcron.sdk.client import Client

NOTIFY_ENV = {"JETCRON_NOTIFY_ALLOW_PRIVATE": "true", "JETCRON_NOTIFY_BACKOFF": "0.2",
              "JETCRON_NOTIFY_MAX_ATTEMPTS": "3"}


@pytest.fixture
def admin_creds(authority: Authority, tmp_path: Path) -> str:
    return mint(authority, tmp_path / "admin.creds", Role.ADMIN)


@pytest.fixture
async def admin(secure_services: Services, admin_creds: str) -> AsyncIterator[Client]:
    c = await Client.connect(secure_services.server.url, identity=Identity(creds=admin_creds))
    try:
        yield c
    finally:
        await c.close()


async def start(services: Services, *, notifiers: int = 1, trackers: int = 1, core: tuple[str, ...] | None = None,
                notifier_env: dict[str, str] | None = None, **env: str) -> None:
    """`env` to every service, `notifier_env` on top of it to the notifiers alone."""
    env = {**NOTIFY_ENV, **env}
    await services.start_system(agents=1, core=core or ("api", "trigger", "placement", "run_tracker"), **env)
    for i in range(2, trackers + 1):
        services.start(f"run_tracker-{i}", "run_tracker", **env)
    for i in range(1, notifiers + 1):
        services.start(f"notifier-{i}", "notifier", **{**env, **(notifier_env or {})})
    await asyncio.gather(*(services[f"notifier-{i}"].wait_logged("notifier ready", 30)
                           for i in range(1, notifiers + 1)))


def _spec(name: str, command: list[str], **kw: Any) -> dict[str, Any]:
    return {"spec": {"name": name, "command": command, "retry": {"max_attempts": 1}, **kw}}


async def _deliveries(admin: Client, job: str, state: str | None = None) -> list[dict[str, Any]]:
    page = await admin.call("notifications.list", {"job": job, **({"state": state} if state else {})})
    return list(page["items"])


async def _read_request(reader: asyncio.StreamReader) -> None:
    headers: dict[str, str] = {}
    await reader.readline()
    while (h := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = h.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    await reader.readexactly(int(headers.get("content-length", "0")))


class Slow:
    """A webhook receiver on loopback that never finishes its answer: `trickle` sends a status line and a header,
    then one more byte of that header every 0.5 s; `flood` answers 200 with a body that never ends (64 KiB every
    20 ms). `ended`: connections the notifier closed on it."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.connections = 0
        self.ended = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> Slow:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await _read_request(reader)
            if self.how == "trickle":
                writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                piece, pause = b"a", 0.5
            else:  # no length: the body runs until the connection ends
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
                piece, pause = b"x" * 65536, 0.02
            while not reader.at_eof():
                await writer.drain()
                writer.write(piece)
                await asyncio.sleep(pause)
            self.ended += 1
        except (ConnectionError, asyncio.IncompleteReadError):
            self.ended += 1
        finally:
            writer.transport.abort()


class Sink:
    def __init__(self) -> None:
        self.messages: list[bytes] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope.content)
        return "250 OK"


async def test_a_dead_run_a_blocked_downstream_and_an_email_each_notify_once(
        secure_services: Services, admin: Client, receiver: Receiver) -> None:
    sink = Sink()
    smtp = Controller(sink, hostname="127.0.0.1", port=free_port())
    smtp.start()
    try:
        await start(secure_services, JETCRON_SMTP_HOST="127.0.0.1", JETCRON_SMTP_PORT=str(smtp.port),
                    JETCRON_SMTP_STARTTLS="false")
        await admin.call("secrets.set", {"tenant": "default", "name": "HOOK_KEY", "value": "hush"})
        # Given an upstream that fails twice, then dies (in 2 s), and a downstream told about its blocked runs
        at = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
        await admin.call("jobs.create", _spec("up", ["sh", "-c", "exit 3"], schedule={"kind": "at", "at": at}, retry={
            "max_attempts": 2, "initial_seconds": 0.1}, env={"API_TOKEN": "not-for-receivers"}, notify=[
            {"on": ["dead"], "webhook": receiver.url("/up"), "secret": "HOOK_KEY"},
            {"on": ["dead"], "email": "owner@example.com"}]))
        await admin.call("jobs.create", _spec("down", ["true"], depends_on=["up"], notify=[
            {"on": ["blocked"], "webhook": receiver.url("/down")}]))

        # Then the webhook gets one signed `dead` payload, naming the run and its last attempt
        (dead,) = await wait_for(lambda: receiver.events("dead"), 40, what="the dead notification")
        assert verify(b"hush", dead.headers["jetcron-signature"], dead.body, now=int(time.time()))
        assert not verify(b"wrong", dead.headers["jetcron-signature"], dead.body, now=int(time.time()))
        notice = msgspec.json.decode(dead.body, type=Notice)
        assert (notice.event, notice.job, notice.attempt, notice.exit_code) == ("dead", "up", 2, 3)
        assert notice.run_id.startswith("up.") and dead.headers["jetcron-delivery"] == f"{notice.id}-0"
        assert b"not-for-receivers" not in dead.body and b"API_TOKEN" not in dead.body
        # and the downstream's blocked run is told, unsigned (its rule has no secret)
        (blocked,) = await wait_for(lambda: receiver.events("blocked"), 30, what="the blocked notification")
        assert blocked.json()["job"] == "down" and "jetcron-signature" not in blocked.headers
        assert blocked.json()["reason"].startswith("upstream up run ")
        # and the owner gets one email
        (mail,) = await wait_for(lambda: sink.messages, 30, what="the email")
        text = mail.decode()
        assert "Subject: [jetcron] up: dead (up." in text and "To: owner@example.com" in text
        assert "exit code: 3" in text and "not-for-receivers" not in text

        # And each delivery is logged once, delivered at the first try; no `failed` was asked for, none sent
        # (a delivery is logged once its target answered: the email's log can come after the sink has the mail)
        async def both_logged() -> list[dict[str, Any]] | None:
            found = await _deliveries(admin, "up", "delivered")
            return found if len(found) >= 2 else None

        deliveries = await wait_for(both_logged, 10, what="up's two deliveries logged")
        assert sorted(d["target"] for d in deliveries) == [
            "email owner@example.com", f"webhook http://127.0.0.1:{receiver.port}"]
        assert all(len(d["attempts"]) == 1 and d["attempts"][0]["ok"] for d in deliveries)
        assert len(await _deliveries(admin, "up")) == 2
        assert sorted(r.path for r in receiver.received) == ["/down", "/up"]
    finally:
        smtp.stop()


async def test_a_receiver_that_is_down_parks_the_delivery_and_a_redelivery_lands(
        secure_services: Services, admin: Client, admin_creds: str, receiver: Receiver,
        authority: Authority, tmp_path: Path) -> None:
    receiver.status = 503
    await start(secure_services)
    url = secure_services.server.url
    # Given a job made with the CLI's notification flags (an unknown event is refused, naming the field)
    wrong = run_cli(url, "--creds", admin_creds, "jobs", "create", "flaky", "--max-attempts", "1",
                    "--notify-on", "dead,exploded", "--webhook", receiver.url(), "--", "false")
    assert wrong.returncode == 2 and "notify[0].on[1]" in wrong.stderr and "exploded" in wrong.stderr, wrong
    made = run_cli(url, "--creds", admin_creds, "jobs", "create", "flaky", "--max-attempts", "1",
                   "--notify-on", "dead", "--webhook", receiver.url(), "--", "false")
    assert made.returncode == 0, made

    # When every try is answered 503, the delivery is parked after JETCRON_NOTIFY_MAX_ATTEMPTS tries
    (parked,) = await wait_for(lambda: _deliveries(admin, "flaky", "parked"), 40, what="a parked delivery")
    assert [a["error"] for a in parked["attempts"]] == ["HTTP 503"] * 3
    assert len(receiver.received) == 3 and not receiver.events("dead")
    # and the CLI lists it
    listed = run_cli(url, "--creds", admin_creds, "notifications", "list", "--job", "flaky", "--parked")
    assert listed.returncode == 0 and parked["delivery_id"] in listed.stdout and "parked" in listed.stdout, listed
    assert "HTTP 503" in listed.stdout

    # And another tenant can neither see nor redeliver it
    other = mint(authority, tmp_path / "other.creds", Role.TENANT, tenant="other")
    hidden = run_cli(url, "--creds", other, "notifications", "list", "--job", "flaky", "-o", "json")
    assert hidden.returncode == 0 and json.loads(hidden.stdout) == [], hidden
    refused = run_cli(url, "--creds", other, "notifications", "redeliver", parked["delivery_id"])
    assert refused.returncode == 1 and "error (not_found)" in refused.stderr, refused

    # When the receiver is back and the owner asks for a redelivery, it lands once
    receiver.status = 200
    again = run_cli(url, "--creds", admin_creds, "notifications", "redeliver", parked["delivery_id"])
    assert again.returncode == 0, again
    (landed,) = await wait_for(lambda: receiver.events("dead"), 20, what="the redelivery")
    assert landed.json()["run_id"] == parked["notice"]["run_id"]
    (done,) = await wait_for(lambda: _deliveries(admin, "flaky", "delivered"), 10, what="delivered")
    assert [a["ok"] for a in done["attempts"]] == [False, False, False, True] and done["budget_from"] == 3
    # and a delivered one is not redelivered
    twice = run_cli(url, "--creds", admin_creds, "notifications", "redeliver", parked["delivery_id"])
    assert twice.returncode == 1 and "only a parked delivery is tried again" in twice.stderr, twice


async def test_start_missed_is_told_once_across_a_tracker_and_a_notifier_killed(
        secure_services: Services, admin: Client, receiver: Receiver) -> None:
    await start(secure_services, trackers=2, notifiers=2)
    # Given a run no agent can take (no agent has the label) with a 3 s start deadline
    await admin.call("jobs.create", _spec("stuck", ["true"], require={"zone": "nowhere"}, start_deadline_seconds=3,
                                          notify=[{"on": ["start_missed"], "webhook": receiver.url()}]))
    # When the first tracker (the leader that watches deadlines) and a notifier die before the deadline
    secure_services["run_tracker"].kill9()
    secure_services["notifier-1"].kill9()

    # Then the survivors record the miss once and tell it once
    (told,) = await wait_for(lambda: receiver.events("start_missed"), 30, what="start_missed")
    assert told.json()["job"] == "stuck" and told.json()["state"] == "scheduled"
    (run,) = (await admin.call("runs.list", {"job": "stuck"}))["items"]
    assert run["missed"] == ["start"] and run["state"] == "scheduled"
    # and the miss is on the events stream too (the audit trail)
    audit = await admin.nc.jetstream().get_last_msg("JC_EVENTS", "jc.event.missed.tracker")
    assert json.loads(audit.data)["run_id"] == run["run_id"]
    (delivery,) = await wait_for(lambda: _deliveries(admin, "stuck", "delivered"), 10, what="delivered")
    assert len(delivery["attempts"]) == 1 and len(receiver.received) == 1


async def test_a_receiver_that_never_answers_does_not_hold_up_other_deliveries(
        secure_services: Services, admin: Client, receiver: Receiver) -> None:
    slow = await Slow("trickle").start()
    try:
        # Given a notifier working on 4 run records at once, 2 of its tries in flight to one host at most, and a
        # deadline far away
        await start(secure_services, JETCRON_NOTIFY_TIMEOUT="60", JETCRON_NOTIFY_CONCURRENCY="4",
                    JETCRON_NOTIFY_PER_TARGET="2")
        # and six dead runs whose webhook host trickles its answer (more deliveries than the notifier's places)
        for i in range(6):
            await admin.call("jobs.create", _spec(f"hung-{i}", ["false"], notify=[
                {"on": ["dead"], "webhook": slow.url()}]))

        async def all_owed() -> bool:
            return all([await _deliveries(admin, f"hung-{i}") for i in range(6)])

        await wait_for(all_owed, 30, what="the six deliveries to the slow host to be owed")
        await wait_for(lambda: slow.connections >= 2, 30, what="the slow host to hold its deliveries")
        # When another job's run dies, with a healthy receiver
        await admin.call("jobs.create", _spec("healthy", ["false"], notify=[
            {"on": ["dead"], "webhook": receiver.url()}]))
        # Then its notice lands while the slow host holds its two, none of the six finished or even tried
        # otherwise (one more to that host is put off, holding none of the notifier's places meanwhile)
        await wait_for(lambda: receiver.events("dead"), 30, what="the healthy delivery")
        assert (slow.connections, slow.ended) == (2, 0)
        pending = [await _deliveries(admin, f"hung-{i}") for i in range(6)]
        assert all(d["state"] == "pending" and d["attempts"] == [] for ds in pending for d in ds), pending
    finally:
        await slow.close()


async def test_one_tenants_slow_receivers_on_many_hosts_do_not_hold_up_another_tenant(
        secure_services: Services, admin: Client, receiver: Receiver) -> None:
    hosts = [await Slow("trickle").start() for _ in range(4)]
    try:
        # Given a notifier working on 4 run records at once, 2 tries in flight per host and 2 per tenant
        await start(secure_services, JETCRON_NOTIFY_TIMEOUT="60", JETCRON_NOTIFY_CONCURRENCY="4",
                    JETCRON_NOTIFY_PER_TARGET="2", JETCRON_NOTIFY_PER_TENANT="2")
        # and one tenant's four dead runs, each told at a host of its own that trickles its answer
        for i, slow in enumerate(hosts):
            await admin.call("jobs.create", _spec(f"hung-{i}", ["false"], tenant="mallory", notify=[
                {"on": ["dead"], "webhook": slow.url()}]))

        async def all_owed() -> bool:
            return all([await _deliveries(admin, f"mallory.hung-{i}") for i in range(4)])

        await wait_for(all_owed, 30, what="the four deliveries to the slow hosts to be owed")
        await wait_for(lambda: sum(h.connections for h in hosts) >= 2, 30, what="the slow hosts to hold two")
        # When another tenant's run dies, with a healthy receiver
        await admin.call("jobs.create", _spec("healthy", ["false"], tenant="acme", notify=[
            {"on": ["dead"], "webhook": receiver.url()}]))
        # Then its notice lands while the first tenant holds only its two places, whatever its hosts
        await wait_for(lambda: receiver.events("dead"), 30, what="the healthy delivery")
        assert sum(h.connections for h in hosts) == 2
    finally:
        for slow in hosts:
            await slow.close()


async def test_a_trickling_receiver_is_cut_at_the_deadline_and_an_endless_answer_is_not_read_whole(
        secure_services: Services, admin: Client, receiver: Receiver) -> None:
    trickle, flood = await Slow("trickle").start(), await Slow("flood").start()
    try:
        # Given a 2 s deadline per try and 2 tries per delivery (the waits below are hang guards: under a loaded suite
        # the notifier's start and the jobs' runs take a while)
        await start(secure_services, JETCRON_NOTIFY_TIMEOUT="2", JETCRON_NOTIFY_MAX_ATTEMPTS="2")
        # When three jobs die at once: one told through a receiver that trickles its answer a byte at a time, one
        # through a receiver whose 200 comes with a body that never ends, one through a healthy receiver
        for name, url in (("trickled", trickle.url()), ("flooded", flood.url()), ("healthy", receiver.url())):
            await admin.call("jobs.create", _spec(name, ["false"], notify=[{"on": ["dead"], "webhook": url}]))

        # Then the healthy receiver gets its notice
        await wait_for(lambda: receiver.events("dead"), 60, what="the healthy delivery")
        # and each try at the trickling receiver is cut at the deadline, which the owner reads, then parked
        try:
            (parked,) = await wait_for(lambda: _deliveries(admin, "trickled", "parked"), 60, what="trickle parked")
        except AssertionError as exc:  # say where it stood: its delivery's tries, its run's state
            tries = [(d["state"], [a["error"] for a in d["attempts"]]) for d in await _deliveries(admin, "trickled")]
            runs = [(r["state"], r["attempt"]) for r in (await admin.call("runs.list", {"job": "trickled"}))["items"]]
            raise AssertionError(f"{exc}; deliveries: {tries}; runs: {runs}; trickle connections "
                                 f"{trickle.connections}, ended {trickle.ended}") from None
        assert [a["error"] for a in parked["attempts"]] == ["timed out after 2 s"] * 2
        await wait_for(lambda: trickle.ended == 2, 10, what="the notifier to close both trickling connections")
        # and the endless answer is taken by its status at the first try, its connection ended by the notifier
        (flooded,) = await wait_for(lambda: _deliveries(admin, "flooded", "delivered"), 60, what="flood delivered")
        assert [(a["ok"], a["status"]) for a in flooded["attempts"]] == [(True, 200)]
        await wait_for(lambda: flood.ended == 1, 10, what="the notifier to close the endless answer")
    finally:
        await trickle.close()
        await flood.close()


async def test_a_webhook_to_an_inner_address_is_refused_and_its_owner_learns_no_address(
        secure_services: Services, admin: Client, admin_creds: str, receiver: Receiver) -> None:
    # Given an api that stores loopback webhooks (a lab's setting) and a notifier that delivers to public
    # addresses only (the default)
    await start(secure_services, notifier_env={"JETCRON_NOTIFY_ALLOW_PRIVATE": "false"})
    # When dead runs are to be told at a loopback address and at a name that resolves to one
    for name, url in (("literal", receiver.url()), ("named", f"http://localhost:{receiver.port}/hook")):
        await admin.call("jobs.create", _spec(name, ["false"], notify=[{"on": ["dead"], "webhook": url}]))

    # Then each delivery is refused at every try, the owner reading a generic reason that names no address or
    # port, and nothing reaches the receiver
    for name in ("literal", "named"):
        (parked,) = await wait_for(lambda n=name: _deliveries(admin, n, "parked"), 40, what=f"{name} parked")
        assert [a["error"] for a in parked["attempts"]] == ["refused: not a public address"] * 3, parked
    assert receiver.received == []
    listed = run_cli(secure_services.server.url, "--creds", admin_creds, "notifications", "list", "--job", "named",
                     "-o", "json")
    assert listed.returncode == 0, listed
    errors = [a["error"] for d in json.loads(listed.stdout) for a in d["attempts"]]
    assert errors == ["refused: not a public address"] * 3
    # and the notifier's own log says what the name resolved to
    log = secure_services["notifier-1"].output()
    assert "webhook refused" in log and "localhost resolves to" in log and "127.0.0.1" in log


async def test_an_occurrence_never_fired_is_recorded_and_published_to_the_tenants_subject(
        secure_services: Services, admin: Client, authority: Authority, tmp_path: Path) -> None:
    # Given no trigger at all (it is down) and a tenant service listening on its notification subject
    await start(secure_services, core=("api", "placement", "run_tracker"))
    tenant = mint(authority, tmp_path / "acme.creds", Role.TENANT, tenant="acme")
    acme = await Client.connect(secure_services.server.url, identity=Identity(creds=tenant))
    got: list[Notice] = []

    async def on_msg(msg: Any) -> None:
        got.append(msgspec.json.decode(msg.data, type=Notice))

    try:
        await acme.nc.subscribe("jc.notify.acme.ops.>", cb=on_msg)
        await acme.call("jobs.create", {"spec": {
            "name": "beat", "command": ["true"], "schedule": {"kind": "every", "every_seconds": 2},
            "start_deadline_seconds": 1, "notify": [{"on": ["start_missed"], "subject": "ops.beats"}]}})
        # Then an occurrence that was due and never fired is recorded skipped with the miss, and published
        await wait_for(lambda: got, 20, what="a start_missed on jc.notify.acme.ops.beats")
        assert got[0].event == "start_missed" and got[0].reason == NEVER_FIRED and got[0].tenant == "acme"
        run = (await acme.call("runs.get", {"run_id": got[0].run_id}))
        assert (run["state"], run["reason"], run["missed"]) == ("skipped", NEVER_FIRED, ["start"])
    finally:
        await acme.close()
