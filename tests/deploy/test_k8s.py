"""k8s/: both overlays build, validate against Kubernetes and CRD schemas, and agree with the app.

Offline: `kubectl kustomize` only renders; nothing talks to a cluster.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest

from service.cli import GRACEFUL_SHUTDOWN_S
from service.config import Settings
from service.stores.keys import GROUP, RedisNames
from tests.support.deploy import (
    CRD_SCHEMAS,
    K8S_VERSIONS,
    NON_SETTINGS_ENV,
    OVERLAYS,
    by_kind,
    cli_accepts,
    containers,
    crd_schema,
    kustomize,
    one,
    settings_field,
)

CORE_KINDS = {
    "Namespace",
    "ConfigMap",
    "Secret",
    "Service",
    "Deployment",
    "StatefulSet",
    "PodDisruptionBudget",
}


@pytest.fixture(params=OVERLAYS)
def docs(request: pytest.FixtureRequest) -> tuple[dict[str, Any], ...]:
    return kustomize(request.param)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_every_resource(overlay: str) -> None:
    kinds = sorted({d["kind"] for d in kustomize(overlay)})
    assert set(kinds) == CORE_KINDS | {"ScaledObject", "TriggerAuthentication", "ServiceMonitor"}
    assert {d["metadata"].get("namespace") for d in kustomize(overlay) if d["kind"] != "Namespace"}
    assert by_kind(kustomize(overlay), "Namespace").keys() == {"verifier"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_core_manifests_match_kubernetes_schemas(
    docs: tuple[dict[str, Any], ...], version: str
) -> None:
    checked = 0
    for doc in docs:
        if doc["kind"] in CORE_KINDS:
            kubernetes_validate.validate(doc, version, strict=True)
            checked += 1
    assert checked >= 10


def test_kubernetes_validation_rejects_a_typo() -> None:
    """The strict schemas catch a misspelt field (so the test above can fail)."""
    deployment = copy.deepcopy(one(kustomize("cpu"), "Deployment", "verifier-api"))
    deployment["spec"]["replcias"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[0], strict=True)


def test_custom_resources_match_their_published_schemas(docs: tuple[dict[str, Any], ...]) -> None:
    checked = set()
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        if key in CRD_SCHEMAS:
            jsonschema.validate(doc, crd_schema(CRD_SCHEMAS[key]))
            checked.add(key)
    assert checked == set(CRD_SCHEMAS)


def test_crd_schema_rejects_a_typo() -> None:
    scaled = copy.deepcopy(one(kustomize("cpu"), "ScaledObject", "verifier-worker"))
    scaled["spec"]["minReplicas"] = 0  # the field is minReplicaCount
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, crd_schema(CRD_SCHEMAS[("keda.sh/v1alpha1", "ScaledObject")]))


def settings_env(docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    """The settings a pod sees: the ConfigMap plus the Redis URL (password filled in)."""
    env = dict(one(docs, "ConfigMap", "verifier-settings")["data"])
    env["VERIFIER_REDIS_URL"] = "redis://:pw@verifier-redis:6379/0"
    return env


def pod_settings(docs: tuple[dict[str, Any], ...], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in list(Settings.model_fields):
        monkeypatch.delenv(f"VERIFIER_{name.upper()}", raising=False)
    for name, value in settings_env(docs).items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_every_env_name_is_a_setting(docs: tuple[dict[str, Any], ...]) -> None:
    names = set(one(docs, "ConfigMap", "verifier-settings")["data"])
    for kind in ("Deployment", "StatefulSet"):
        for workload in by_kind(docs, kind).values():
            for container in containers(workload):
                names |= {e["name"] for e in container.get("env", [])}
    unknown = {n for n in names if not settings_field(n) and n not in NON_SETTINGS_ENV}
    assert not unknown, f"not settings of service/config.py: {sorted(unknown)}"
    assert settings_field("VERIFIER_REDIS__PREFIX")
    assert not settings_field("VERIFIER_REDIS__PREFIXX")  # the check itself can fail
    assert not settings_field("VERIFIER_QUEUE__REDIS_PREFIX")  # renamed to the one above
    assert not settings_field("VERIFIER_QUEUE")


def test_settings_accept_the_configmap(
    docs: tuple[dict[str, Any], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = pod_settings(docs, monkeypatch)
    assert settings.host == "0.0.0.0"
    assert settings.queue.worker_metrics_port is not None


def test_commands_exist(docs: tuple[dict[str, Any], ...]) -> None:
    seen = []
    for workload in by_kind(docs, "Deployment").values():
        for container in containers(workload):
            assert "command" not in container, "the image's entrypoint is `verifier`"
            assert cli_accepts(container["args"]), container["args"]
            seen.append(container["args"])
    assert ["serve", "--no-worker"] in seen
    assert ["worker"] in seen
    assert ["models", "prepare"] in seen
    assert not cli_accepts(["serve", "--no-workers"])  # the check itself can fail


def _port(container: dict[str, Any], name_or_number: str | int) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    return int(ports[name_or_number])


def _probes(container: dict[str, Any]) -> dict[str, tuple[str, int]]:
    out = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        out[probe] = (get["path"], _port(container, get["port"]))
    return out


def test_api_probes_match_the_app(
    docs: tuple[dict[str, Any], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.app import create_app

    settings = pod_settings(docs, monkeypatch)
    routes = {getattr(r, "path", None) for r in create_app(settings).routes}
    (api,) = one(docs, "Deployment", "verifier-api")["spec"]["template"]["spec"]["containers"]
    probes = _probes(api)
    assert probes == {
        "startupProbe": ("/ready", settings.port),
        "readinessProbe": ("/ready", settings.port),
        "livenessProbe": ("/health", settings.port),
    }
    assert {"/ready", "/health"} <= routes


def test_worker_probes_match_its_probe_port(
    docs: tuple[dict[str, Any], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import CollectorRegistry

    from service.ops.probe_server import ProbeState, probe_app

    settings = pod_settings(docs, monkeypatch)
    (worker,) = one(docs, "Deployment", "verifier-worker")["spec"]["template"]["spec"]["containers"]
    port = settings.queue.worker_metrics_port
    assert _probes(worker) == {
        "startupProbe": ("/ready", port),
        "readinessProbe": ("/ready", port),
        "livenessProbe": ("/health", port),
    }
    # The worker's probe app answers exactly those paths.
    app = probe_app(CollectorRegistry(), ProbeState(ready=True))
    statuses: list[str] = []
    for path in ("/ready", "/health"):
        app({"PATH_INFO": path}, lambda status, headers: statuses.append(status))
    assert statuses == ["200 OK", "200 OK"]


def test_services_and_monitors_point_at_real_ports(docs: tuple[dict[str, Any], ...]) -> None:
    deployments = by_kind(docs, "Deployment") | by_kind(docs, "StatefulSet")
    services = by_kind(docs, "Service")

    def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return selector.items() <= labels.items()

    for service in services.values():
        selector = service["spec"]["selector"]
        (target,) = [
            w
            for w in deployments.values()
            if matches(selector, w["spec"]["template"]["metadata"]["labels"])
        ]
        port_names = {p["name"] for c in containers(target) for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    for monitor in by_kind(docs, "ServiceMonitor").values():
        labels = monitor["spec"]["selector"]["matchLabels"]
        (service,) = [s for s in services.values() if matches(labels, s["metadata"]["labels"])]
        names = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= names
        assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])
    for pdb in by_kind(docs, "PodDisruptionBudget").values():
        labels = pdb["spec"]["selector"]["matchLabels"]
        assert [
            w for w in deployments.values() if matches(labels, w["spec"]["selector"]["matchLabels"])
        ]


def test_redis_url_and_keda_address_name_the_redis_service(
    docs: tuple[dict[str, Any], ...],
) -> None:
    redis_service = one(docs, "Service", "verifier-redis")
    (redis_port,) = [p["port"] for p in redis_service["spec"]["ports"]]
    namespace = redis_service["metadata"]["namespace"]
    for name in ("verifier-api", "verifier-worker"):
        for container in one(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"]:
            env = {e["name"]: e for e in container["env"]}
            url = urlsplit(env["VERIFIER_REDIS_URL"]["value"])
            assert (url.hostname, url.port) == ("verifier-redis", redis_port)
            assert url.password == "$(REDIS_PASSWORD)"
            # $(VAR) expands only for variables defined before it
            names = list(env)
            assert names.index("REDIS_PASSWORD") < names.index("VERIFIER_REDIS_URL")
    (trigger,) = one(docs, "ScaledObject", "verifier-worker")["spec"]["triggers"]
    host = f"verifier-redis.{namespace}.svc.cluster.local:{redis_port}"
    assert trigger["metadata"]["address"] == host


def test_keda_scales_the_worker_on_the_job_stream(
    docs: tuple[dict[str, Any], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = pod_settings(docs, monkeypatch)
    scaled = one(docs, "ScaledObject", "verifier-worker")["spec"]
    assert scaled["scaleTargetRef"]["name"] == "verifier-worker"
    one(docs, "Deployment", scaled["scaleTargetRef"]["name"])
    assert scaled["minReplicaCount"] == 0
    (trigger,) = scaled["triggers"]
    assert trigger["type"] == "redis-streams"
    meta = trigger["metadata"]
    assert meta["stream"] == RedisNames(settings.redis.prefix).stream
    assert meta["consumerGroup"] == GROUP
    # lagCount (Redis 7+ XINFO GROUPS lag) is the mode that scales to zero; KEDA picks the
    # pending-entries mode when it is absent.
    assert int(meta["lagCount"]) >= 1
    assert int(meta["activationLagCount"]) >= 0
    assert set(meta) == {"address", "stream", "consumerGroup", "lagCount", "activationLagCount"}
    auth = one(docs, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    (ref,) = auth["spec"]["secretTargetRef"]
    assert ref["parameter"] == "password"
    assert ref["key"] in one(docs, "Secret", ref["name"])["stringData"]


def test_redis_keeps_an_append_only_file(docs: tuple[dict[str, Any], ...]) -> None:
    (redis,) = one(docs, "StatefulSet", "verifier-redis")["spec"]["template"]["spec"]["containers"]
    args = redis["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--appendfsync") + 1] == "everysec"
    major = int(redis["image"].split(":")[1].split(".")[0])
    assert major >= 7, "KEDA's lagCount needs Redis 7+"


def test_grace_periods_cover_the_drains(
    docs: tuple[dict[str, Any], ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = pod_settings(docs, monkeypatch)
    api = one(docs, "Deployment", "verifier-api")["spec"]["template"]["spec"]
    (container,) = api["containers"]
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    assert api["terminationGracePeriodSeconds"] > int(command[1]) + GRACEFUL_SHUTDOWN_S
    worker = one(docs, "Deployment", "verifier-worker")["spec"]["template"]["spec"]
    drain = settings.limits.request_timeout_s + settings.queue.stuck_grace_s
    assert worker["terminationGracePeriodSeconds"] > drain


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gpu_resources_only_in_the_gpu_overlay(overlay: str) -> None:
    worker = one(kustomize(overlay), "Deployment", "verifier-worker")
    (container,) = worker["spec"]["template"]["spec"]["containers"]
    gpus = container["resources"]["limits"].get("nvidia.com/gpu")
    assert (gpus == "1") if overlay == "gpu" else (gpus is None)
    image = container["image"]
    assert image.endswith(":cuda" if overlay == "gpu" else ":cpu")
    api = one(kustomize(overlay), "Deployment", "verifier-api")
    assert "nvidia.com/gpu" not in str(api)


def test_pods_run_as_non_root(docs: tuple[dict[str, Any], ...]) -> None:
    for kind in ("Deployment", "StatefulSet"):
        for workload in by_kind(docs, kind).values():
            spec = workload["spec"]["template"]["spec"]
            assert spec["securityContext"]["runAsNonRoot"] is True
            assert spec["enableServiceLinks"] is False
            for container in containers(workload):
                assert container["securityContext"]["allowPrivilegeEscalation"] is False
