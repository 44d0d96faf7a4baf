"""Several models deployed from one list: the Kubernetes overlay and the compose override that
scripts/gen_model_deploy.py generates from deploy/models.example.json are current, build,
validate offline, and give each model its own worker, scaler and stream."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from service.config import Settings
from service.stores.keys import GROUP, RedisNames
from tests.support.deploy import (
    CRD_SCHEMAS,
    DEPLOY,
    K8S_VERSIONS,
    ROOT,
    by_kind,
    cli_accepts,
    crd_schema,
    kustomize,
    one,
)

OVERLAY = "models-cpu"
OVERRIDE = DEPLOY / f"docker-compose.{OVERLAY}.yml"
EXAMPLE = DEPLOY / "models.example.json"


@cache
def generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_model_deploy.py"
    spec = importlib.util.spec_from_file_location("gen_model_deploy", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def models() -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(EXAMPLE.read_text())
    return listed


@pytest.fixture(scope="module")
def docs() -> tuple[dict[str, Any], ...]:
    return kustomize(OVERLAY)


def test_the_generated_files_are_current() -> None:
    files = generator().outputs(EXAMPLE, "cpu", OVERLAY)
    assert set(files) == {
        ROOT / "k8s" / "overlays" / OVERLAY / "kustomization.yaml",
        ROOT / "k8s" / "overlays" / OVERLAY / "models.yaml",
        OVERRIDE,
    }
    for path, text in files.items():
        assert path.read_text() == text, f"{path} drifted: run scripts/gen_model_deploy.py"
    check = [sys.executable, str(ROOT / "scripts" / "gen_model_deploy.py"), "--check"]
    assert subprocess.run(check, cwd=ROOT, capture_output=True, timeout=60).returncode == 0


def test_a_list_the_service_would_refuse_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "models.json"
    bad.write_text(json.dumps([{"name": "a"}, {"name": "a"}]))
    with pytest.raises(ValueError, match="repeated: a"):
        generator().outputs(bad, "cpu", "bad")


def test_each_model_has_its_own_worker_scaler_and_stream(docs: tuple[dict[str, Any], ...]) -> None:
    names = [m["name"] for m in models()]
    settings_map = one(docs, "ConfigMap", "verifier-settings")["data"]
    settings = Settings.model_validate({"models": json.loads(settings_map["VERIFIER_MODELS"])})
    assert settings.model_names == names
    prefix = settings_map["VERIFIER_REDIS__PREFIX"]
    deployments = by_kind(docs, "Deployment")
    scaled = by_kind(docs, "ScaledObject")
    # The base overlay's single worker is gone; one of each per model instead.
    assert "verifier-worker" not in deployments
    assert set(scaled) == {f"verifier-worker-{n}" for n in names}
    cpu_worker = one(kustomize("cpu"), "Deployment", "verifier-worker")
    (cpu_container,) = cpu_worker["spec"]["template"]["spec"]["containers"]
    monitor = one(docs, "ServiceMonitor", "verifier-worker")["spec"]["selector"]["matchLabels"]
    for name in names:
        deployment = deployments[f"verifier-worker-{name}"]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["args"] == ["worker", "--model", name]
        assert cli_accepts(container["args"])
        # The cpu overlay's patch (whole cores, memory) holds for every model's worker.
        assert container["resources"] == cpu_container["resources"]
        pods = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"] == pods
        service = one(docs, "Service", f"verifier-worker-{name}")
        assert service["spec"]["selector"] == pods
        assert monitor.items() <= service["metadata"]["labels"].items()
        spec = scaled[f"verifier-worker-{name}"]["spec"]
        assert spec["scaleTargetRef"]["name"] == f"verifier-worker-{name}"
        (trigger,) = spec["triggers"]
        assert trigger["metadata"]["stream"] == RedisNames(prefix, name).stream
        assert trigger["metadata"]["consumerGroup"] == GROUP
    # Pods of one model are never selected by another's Deployment.
    selectors = [d["spec"]["selector"]["matchLabels"] for d in deployments.values()]
    assert len({json.dumps(s, sort_keys=True) for s in selectors}) == len(selectors)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_overlay_matches_kubernetes_and_crd_schemas(
    docs: tuple[dict[str, Any], ...], version: str
) -> None:
    crds = 0
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        if key in CRD_SCHEMAS:
            jsonschema.validate(doc, crd_schema(CRD_SCHEMAS[key]))
            crds += 1
        elif doc["kind"] != "ServiceMonitor":
            kubernetes_validate.validate(doc, version, strict=True)
    assert crds >= len(models()) + 1


def _compose() -> dict[str, Any]:
    """The stack as `docker compose -f docker-compose.yml -f <override>` merges it (maps
    merged, lists and scalars replaced; each ``extends`` resolved against the base file)."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {k: merge(base.get(k), over[k]) if k in base else over[k] for k in over} | {
                k: v for k, v in base.items() if k not in over
            }
        return over

    base = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    override = yaml.safe_load(OVERRIDE.read_text())
    services = dict(base["services"])
    for name, service in override["services"].items():
        extends = service.get("extends")
        start = services.get(name, {})
        if extends is not None:
            assert extends["file"] == "docker-compose.yml"
            start = base["services"][extends["service"]]
        services[name] = merge(start, {k: v for k, v in service.items() if k != "extends"})
    return {**base, "services": services}


def test_the_compose_override_runs_one_worker_per_model() -> None:
    check = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
    result = subprocess.run([*check, str(OVERRIDE)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    services = _compose()["services"]
    assert services["worker"]["deploy"]["replicas"] == 0
    listed = services["api"]["environment"]["VERIFIER_MODELS"]
    assert json.loads(listed) == models()
    for m in models():
        worker = services[f"worker-{m['name']}"]
        assert worker["command"] == ["worker", "--model", m["name"]]
        assert cli_accepts(worker["command"])
        assert worker["environment"]["VERIFIER_MODELS"] == listed
        assert worker["environment"]["VERIFIER_REDIS_URL"].startswith("redis://redis:6379/")
        assert worker["depends_on"] == services["worker"]["depends_on"]
        assert worker["shm_size"] == services["worker"]["shm_size"]
        # Prometheus' DNS discovery of the name "worker" finds every model's workers.
        assert "worker" in worker["networks"]["default"]["aliases"]
