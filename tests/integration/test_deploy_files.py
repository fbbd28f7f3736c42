"""The deploy files: `jetcron deploy init` output, the Kubernetes manifests checked field by field against the
Kubernetes API types (the `kubernetes` client's models) and rendered with `kubectl kustomize` when it is
present, the compose file's wiring, and a NATS node config run for real on loopback."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest
import yaml
from harness import JETCRON, ServiceProcess, Services, clean_env

from jetcron.auth.local import SERVICE_ROLES
from jetcron.bus.server import EmbeddedNats, free_ports, nats_server_binary
from jetcron.config import Settings
from jetcron.core.host.uid_pool import parse_uid_range
from jetcron.sdk.client import Client
from jetcron_services.agent.host.confine import SWITCH_CAPABILITIES

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KINDS = {("v1", "Namespace"): "V1Namespace", ("v1", "ConfigMap"): "V1ConfigMap", ("v1", "Secret"): "V1Secret",
         ("v1", "Service"): "V1Service", ("apps/v1", "Deployment"): "V1Deployment",
         ("apps/v1", "StatefulSet"): "V1StatefulSet", ("apps/v1", "DaemonSet"): "V1DaemonSet",
         ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget"}


def strict(value: Any, kind: str, path: str = "") -> None:
    """Every field of `value` is a field of the Kubernetes type `kind`, recursively (deserialising alone would
    drop a misspelt one silently); required fields are present."""
    if kind.startswith("list["):
        assert isinstance(value, list), f"{path}: expected a list"
        for i, item in enumerate(value):
            strict(item, kind[5:-1], f"{path}[{i}]")
        return
    if kind.startswith("dict("):
        assert isinstance(value, dict), f"{path}: expected a map"
        inner = kind[5:-1].split(", ", 1)[1]
        for key, item in value.items():
            strict(item, inner, f"{path}.{key}")
        return
    model = getattr(k8s, kind, None)
    if model is None:  # str, int, bool, object, datetime: leaves
        return
    assert isinstance(value, dict), f"{path}: expected a {kind} object, got {value!r}"
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    unknown = sorted(set(value) - set(by_json))
    assert not unknown, f"{path}: {kind} has no field(s) {unknown}"
    for key, item in value.items():
        strict(item, model.openapi_types[by_json[key]], f"{path}.{key}")
    # the client's own checks (required fields, enums it knows) run when the model is built
    k8s.ApiClient()._ApiClient__deserialize(value, kind)  # type: ignore[attr-defined]


def _init(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([JETCRON, "deploy", "init", "--dir", str(directory), *args], capture_output=True,
                          text=True, timeout=60, env=clean_env(), check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each overlay rendered (kubectl kustomize) with its generated Secrets and NATS config."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the overlays are checked file by file instead")
    out: dict[str, list[dict[str, Any]]] = {}
    for overlay, nodes in (("dev", "1"), ("prod", "3")):
        tree = tmp_path_factory.mktemp(overlay) / "deploy"
        shutil.copytree(DEPLOY, tree, ignore=shutil.ignore_patterns("generated"))
        made = _init(tree / "kubernetes" / "overlays" / overlay / "generated", "--nodes", nodes,
                     "--kubernetes", "jetcron", "--agent", "node-a")
        assert made.returncode == 0, made.stderr
        text = subprocess.run(["kubectl", "kustomize", str(tree / "kubernetes" / "overlays" / overlay)],
                              capture_output=True, text=True, timeout=60, check=True).stdout
        out[overlay] = [d for d in yaml.safe_load_all(text) if d]
    return out


def _by(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_every_rendered_object_is_a_valid_kubernetes_object(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for overlay, docs in rendered.items():
        kinds = {(d["apiVersion"], d["kind"]) for d in docs}
        assert kinds >= set(KINDS) | {("monitoring.coreos.com/v1", "ServiceMonitor"),
                                      ("monitoring.coreos.com/v1", "PrometheusRule")}, overlay
        for doc in docs:
            if (doc["apiVersion"], doc["kind"]) in KINDS:
                strict(doc, KINDS[(doc["apiVersion"], doc["kind"])], f"{overlay}:{doc['kind']}/"
                                                                     f"{doc['metadata']['name']}")
            assert doc["metadata"].get("namespace", "jetcron") == "jetcron" or doc["kind"] == "Namespace"


def test_what_the_overlays_promise(rendered: dict[str, list[dict[str, Any]]]) -> None:
    dev, prod = rendered["dev"], rendered["prod"]
    assert _by(dev, "StatefulSet", "jetcron-nats")["spec"]["replicas"] == 1
    nats = _by(prod, "StatefulSet", "jetcron-nats")
    assert nats["spec"]["replicas"] == 3
    anti = nats["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert nats["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "100Gi"
    services = {"api", "trigger", "placement", "tracker", "notifier", "gateway"}
    for name in services:
        deployment = _by(prod, "Deployment", f"jetcron-{name}")
        assert deployment["spec"]["replicas"] == 2 and _by(dev, "Deployment", f"jetcron-{name}")["spec"][
            "replicas"] == 1
        pod = deployment["spec"]["template"]["spec"]
        container = pod["containers"][0]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
        assert container["resources"]["requests"] and pod["securityContext"]["runAsNonRoot"] is True
        # each pod gets its own role's credential, nothing else of the Secret
        creds = next(v for v in pod["volumes"] if v["name"] == "creds")["secret"]["items"]
        assert creds[0]["path"] == "creds" and creds[0]["key"].endswith(".creds")
        _by(prod, "PodDisruptionBudget", f"jetcron-{name}")
    assert _by(prod, "DaemonSet", "jetcron-agent")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 25
    settings = _by(dev, "ConfigMap", "jetcron-settings")["data"]
    assert settings["JETCRON_REPLICAS"] == "1" and _by(prod, "ConfigMap", "jetcron-settings")["data"][
        "JETCRON_REPLICAS"] == "3"


def test_the_prometheus_rules_are_the_same_in_both_homes(rendered: dict[str, list[dict[str, Any]]]) -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "jetcron-rules.yml").read_text())
    assert _by(rendered["prod"], "PrometheusRule", "jetcron")["spec"] == rules


def test_the_generated_secrets_hold_each_credential_and_the_nats_config_parses(
        rendered: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    prod = rendered["prod"]
    creds = _by(prod, "Secret", "jetcron-creds")["data"]
    assert {f"{p}.creds" for p in SERVICE_ROLES} | {"secrets.key", "job-signing.seed"} == set(creds)
    assert "node-a.creds" in _by(prod, "Secret", "jetcron-agent-creds")["data"]
    tls = _by(prod, "Secret", "jetcron-nats-tls")["data"]
    assert set(tls) == {"ca.pem", "server.pem", "server-key.pem"}  # never the CA's key
    config = _by(prod, "ConfigMap", "jetcron-nats-config")["data"]["nats.conf"]
    assert "server_name: $POD_NAME" in config and "sync_interval: always" in config
    routes = re.search(r"routes: \[(.*)\]", config)
    assert routes and routes.group(1).count("jetcron-nats-cluster.jetcron.svc:6222") == 3
    # nats-server accepts it (-t: check the config and exit), with the mounted files where a pod has them
    for name, data in tls.items():
        (tmp_path / name).write_bytes(base64.b64decode(data))
    local = config.replace("/etc/jetcron/tls", str(tmp_path)).replace("/data", str(tmp_path / "data"))
    (tmp_path / "nats.conf").write_text(local)
    checked = subprocess.run([nats_server_binary(), "-c", str(tmp_path / "nats.conf"), "-t"], capture_output=True,
                             text=True, timeout=30, env={"POD_NAME": "jetcron-nats-0"}, check=False)
    assert checked.returncode == 0, checked.stderr


def test_deploy_init_refuses_bad_input_and_keeps_what_it_made(tmp_path: Path) -> None:
    even = _init(tmp_path / "d", "--nodes", "2")
    assert even.returncode == 2 and "use 1, 3 or 5 nodes" in even.stderr and not (tmp_path / "d").exists()
    bad = _init(tmp_path / "d", "--agent", "no/slash")
    assert bad.returncode == 2 and "--agent 'no/slash'" in bad.stderr
    assert _init(tmp_path / "e").returncode == 0
    first = (tmp_path / "e" / "auth" / "creds" / "api.creds").read_text()
    assert _init(tmp_path / "e", "--agents", "3").returncode == 0
    assert (tmp_path / "e" / "auth" / "creds" / "api.creds").read_text() == first  # kept, not re-minted
    assert (tmp_path / "e" / "auth" / "creds" / "agent-3.creds").exists()
    for name in ("nats-1", "nats-2", "nats-3"):
        text = (tmp_path / "e" / "nats" / f"{name}.conf").read_text()
        assert f'server_name: "{name}"' in text and "nats://nats-2:6222" in text and "verify: true" in text


def test_the_compose_file_gives_each_process_its_own_credential_and_the_stack_its_parts() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = compose["services"]
    assert {"nats-1", "nats-2", "nats-3", "prometheus", "otel-collector"} <= set(services)
    for role in ("api", "trigger", "placement", "tracker", "notifier", "gateway", "agent"):
        assert {f"{role}-1", f"{role}-2"} <= set(services), role
    credential = {"tracker": "run_tracker"}
    for name, svc in services.items():
        if name.startswith("nats-"):
            assert svc["entrypoint"][:1] == ["nats-server"]
            assert not any("ca-key" in v or v.endswith("/tls:/etc/jetcron/tls:ro") for v in svc["volumes"])
            continue
        if name in ("prometheus", "otel-collector", "grafana"):
            continue
        role = name.rsplit("-", 1)[0]
        own = name if role == "agent" else credential.get(role, role)
        mounts = [v for v in svc["volumes"] if v.endswith(":/etc/jetcron/creds:ro")]
        assert mounts == [f"./generated/auth/creds/{own}.creds:/etc/jetcron/creds:ro"], name
        env = svc["environment"]
        assert env["JETCRON_NATS_CREDS"] == "/etc/jetcron/creds" and env["JETCRON_NATS_TLS_CA"]
        assert env["JETCRON_NATS_MONITOR_URL"].count("http://nats-") == 3
        assert ("JETCRON_SECRETS_KEY_FILE" in env) == (role in ("api", "notifier", "agent")), name
    targets = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())["scrape_configs"][0]
    # A service under a profile runs only when asked for (the sibling-container agent): its target is added then
    assert set(targets["static_configs"][0]["targets"]) == {
        f"{n}:9100" for n, svc in services.items()
        if n.split("-")[0] not in ("nats", "prometheus", "otel", "grafana") and not svc.get("profiles")}
    assert services["agent-images"]["profiles"] == ["sibling"]
    assert services["agent-images"]["environment"]["DOCKER_HOST"] == "unix:///run/jetcron/engine.sock"


SWITCH = {name.removeprefix("CAP_") for name in SWITCH_CAPABILITIES}
"""What an agent that runs each job as a user of its own takes (services/jetcron_services/agent/host/confine.py)."""


def _uids(text: str) -> range:
    uids = parse_uid_range(text)
    assert len(uids) >= Settings().agent_slots, f"{text}: fewer uids than an agent's slots"
    return uids


def test_deployed_agents_can_switch_users_and_give_each_attempt_a_uid_of_its_own(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    # compose: every agent root in its container, with exactly the capabilities the switch takes, a uid range
    services = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())["services"]
    agents = [name for name in services if name.startswith("agent-")]
    assert agents == ["agent-1", "agent-2", "agent-images"]
    for name in agents:
        svc = services[name]
        assert svc["user"] == "0:0" and svc["cap_drop"] == ["ALL"] and set(svc["cap_add"]) == SWITCH, name
        assert "no-new-privileges:true" in svc["security_opt"], name
        _uids(svc["environment"]["JETCRON_AGENT_JOB_UIDS"])
    # and no other process of the stack runs as root or with capabilities added
    for name, svc in services.items():
        if not name.startswith("agent-"):
            assert "user" not in svc and "cap_add" not in svc, name
    # Kubernetes: the agents' DaemonSet likewise, in both overlays; every other pod stays non-root
    for overlay, docs in rendered.items():
        pod = _by(docs, "DaemonSet", "jetcron-agent")["spec"]["template"]["spec"]
        (agent,) = pod["containers"]
        assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsNonRoot"]) == (0, False), overlay
        caps = agent["securityContext"]["capabilities"]
        assert caps["drop"] == ["ALL"] and set(caps["add"]) == SWITCH, overlay
        assert agent["securityContext"]["allowPrivilegeEscalation"] is False
        _uids(next(e["value"] for e in agent["env"] if e["name"] == "JETCRON_AGENT_JOB_UIDS"))
        for doc in docs:
            if doc["kind"] in ("Deployment", "StatefulSet"):
                context = doc["spec"]["template"]["spec"].get("securityContext", {})
                assert context.get("runAsUser") != 0, doc["metadata"]["name"]
    # a VM's systemd unit: an agent that is not root, with the capabilities as ambient ones (its helpers keep them)
    unit = (DEPLOY / "nats" / "jetcron-agent.service").read_text()
    lines = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert lines["User"] == "jetcron"
    assert {c.removeprefix("CAP_") for c in lines["AmbientCapabilities"].split()} == SWITCH


def test_the_agents_manifest_switches_users_without_kubectl() -> None:
    """The same of the base manifest, read as a file (where kubectl is missing, the rendered check is skipped)."""
    (daemonset,) = [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / "base" / "agents.yaml").read_text())
                    if d and d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    (agent,) = pod["containers"]
    assert pod["securityContext"]["runAsUser"] == 0
    assert set(agent["securityContext"]["capabilities"]["add"]) == SWITCH
    _uids(next(e["value"] for e in agent["env"] if e["name"] == "JETCRON_AGENT_JOB_UIDS"))


async def test_a_node_config_from_deploy_init_runs_and_a_service_joins_it_with_tls_and_its_credential(
        tmp_path: Path) -> None:
    made = _init(tmp_path / "gen", "--nodes", "1", "--host", "localhost")
    assert made.returncode == 0, made.stderr
    gen = tmp_path / "gen"
    client, monitor = free_ports(2)
    # The shipped config, moved to loopback and this test's files: listening on every interface is for hosts.
    config = (gen / "nats" / "localhost.conf").read_text()
    config = (config.replace("0.0.0.0:4222", f"127.0.0.1:{client}").replace("0.0.0.0:8222", f"127.0.0.1:{monitor}")
              .replace("/etc/jetcron/tls", str(gen / "tls")).replace("/data", str(tmp_path / "data")))
    (tmp_path / "node.conf").write_text(config)
    node = subprocess.Popen([nats_server_binary(), "-c", str(tmp_path / "node.conf")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    api = ServiceProcess("api", [sys.executable, "-m", "jetcron_services.api"], clean_env(
        JETCRON_NATS_URL=f"nats://localhost:{client}", JETCRON_NATS_MONITOR_URL=f"http://127.0.0.1:{monitor}",
        JETCRON_NATS_CREDS=str(gen / "auth" / "creds" / "api.creds"), JETCRON_NATS_TLS_CA=str(gen / "tls" / "ca.pem"),
        JETCRON_METRICS_HOST="127.0.0.1"), tmp_path / "api.log")
    try:
        api.start()
        # Then the api connects over TLS with its own credential, checks the node fsyncs, and serves
        await api.wait_logged("api ready", 30)
        # and a connection without a credential is refused
        refused = subprocess.run([JETCRON, "--nats", f"nats://localhost:{client}", "--tls-ca",
                                  str(gen / "tls" / "ca.pem"), "--creds", str(tmp_path / "none.creds"), "jobs",
                                  "list"], capture_output=True, text=True, timeout=30, env=clean_env(), check=False)
        assert refused.returncode != 0
        admin = subprocess.run([JETCRON, "--nats", f"nats://localhost:{client}", "--tls-ca",
                                str(gen / "tls" / "ca.pem"), "--creds", str(gen / "auth" / "admin.creds"), "jobs",
                                "list", "-o", "json"], capture_output=True, text=True, timeout=30, env=clean_env(),
                               check=False)
        assert admin.returncode == 0 and json.loads(admin.stdout) == [], admin
    finally:
        api.stop()
        node.terminate()
        node.wait(timeout=10)


async def test_a_store_copied_while_stopped_restores_every_job(tmp_path: Path) -> None:
    # Given a system with a job updated twice (three versions in its history) and a run recorded
    first = EmbeddedNats(tmp_path / "first")
    first.start()
    try:
        harness = Services(first, _logs(tmp_path / "a"), tmp_path / "a")
        harness.start("api", "api")
        await harness["api"].wait_logged("api ready", 30)
        client = await Client.connect(first.url)
        try:
            spec = {"name": "nightly", "command": ["true"], "schedule": {"kind": "cron", "cron": "0 3 * * *"}}
            await client.call("jobs.create", {"spec": spec})
            for attempts in (2, 3):
                await client.call("jobs.update", {"spec": {**spec, "retry": {"max_attempts": attempts}}})
            run = await client.call("jobs.trigger", {"name": "nightly"})
        finally:
            await client.close()
        harness.stop_all()
    finally:
        first.stop()
    # When its store is copied while the server is stopped, and a fresh server starts on the copy
    shutil.copytree(tmp_path / "first" / "jetcron" / "store", tmp_path / "second" / "jetcron" / "store")
    second = EmbeddedNats(tmp_path / "second")
    second.start()
    try:
        harness = Services(second, _logs(tmp_path / "b"), tmp_path / "b")
        harness.start("api", "api")
        await harness["api"].wait_logged("api ready", 30)
        client = await Client.connect(second.url)
        try:
            # Then the job, its history and its run are all there
            job = (await client.call("jobs.get", {"name": "nightly"}))["job"]
            assert (job["version"], job["spec"]["retry"]["max_attempts"]) == (3, 3)
            runs = (await client.call("runs.list", {"job": "nightly"}))["items"]
            assert [r["run_id"] for r in runs] == [run["run_id"]]
            js = client.nc.jetstream()
            assert (await (await js.key_value("jc_jobs")).history("nightly"))[0].revision == 1
        finally:
            await client.close()
        harness.stop_all()
    finally:
        second.stop()


def _logs(base: Path) -> Path:
    (base / "logs").mkdir(parents=True)
    return base / "logs"


def test_the_compose_stack_provisions_grafana_with_the_dashboard_over_its_prometheus() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = compose["services"]
    grafana = services["grafana"]
    # a registry's image, like Prometheus's: make test-deploy starts the stack without it (docs/deploy.md)
    assert re.fullmatch(r"\$\{GRAFANA_IMAGE:-docker\.io/grafana/grafana:\d+\.\d+\.\d+\}", grafana["image"])
    assert not grafana.get("profiles") and grafana["depends_on"] == ["prometheus"]
    assert grafana["ports"] == ["127.0.0.1:3000:3000"]
    mounts: dict[str, str] = {}
    for volume in grafana["volumes"]:
        source, target, *_ = volume.split(":")
        if source.startswith("."):  # a file of the repository, not a named volume
            assert (DEPLOY / "compose" / source).resolve().exists(), volume
            assert volume.endswith(":ro"), volume
        mounts[target] = source
    assert mounts["/var/lib/grafana"] in compose["volumes"]
    provisioning = DEPLOY / "grafana" / "provisioning"
    for kind in ("datasources", "dashboards"):
        assert (DEPLOY / "compose" / mounts[f"/etc/grafana/provisioning/{kind}"]).resolve() == provisioning / kind
    # The datasource is the stack's Prometheus, by its service name and the port it listens on
    datasource, = yaml.safe_load((provisioning / "datasources" / "jetcron.yaml").read_text())["datasources"]
    prometheus_port = services["prometheus"]["ports"][0].rsplit(":", 1)[1]
    assert datasource["url"] == f"http://prometheus:{prometheus_port}" and datasource["access"] == "proxy"
    # The provider loads the directory the dashboard is mounted in, and Grafana opens it as its home
    provider, = yaml.safe_load((provisioning / "dashboards" / "jetcron.yaml").read_text())["providers"]
    inside = f"{provider['options']['path']}/jetcron.json"
    assert inside in mounts, f"the provider loads {provider['options']['path']}, where compose mounts no dashboard"
    assert (DEPLOY / "compose" / mounts[inside]).resolve() == DEPLOY / "grafana" / "jetcron.json"
    assert grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == inside
    assert provider["allowUiUpdates"] is False  # the repository's file is the dashboard its test checks
