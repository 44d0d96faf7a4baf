"""Loading deploy/ and k8s/ for the static checks, and resolving names against the app."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel
from typer.main import get_command

from service.cli import app as cli_app
from service.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = ROOT / "k8s"
SCHEMAS = ROOT / "tests" / "deploy" / "schemas"
OVERLAYS = ("cpu", "gpu")
# Kubernetes versions the manifests are checked against (kubernetes-validate ships 1.25-1.37):
# 1.32, a release still in support by the large providers, and the newest one shipped.
K8S_VERSIONS = ("1.32.0", "1.37.0")
# Environment names that are not settings, and why they are there.
NON_SETTINGS_ENV = {
    "REDIS_PASSWORD",  # k8s: composed into VERIFIER_REDIS_URL with $(REDIS_PASSWORD)
    "PATH",
    "PYTHONUNBUFFERED",
    "DEBIAN_FRONTEND",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_NO_CACHE_DIR",
    "PIP_EXTRA_INDEX_URL",
}


@cache
def kustomize(overlay: str) -> tuple[dict[str, Any], ...]:
    """The overlay as `kubectl kustomize` builds it (raises if it does not build)."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to build the kustomize overlays"
    out = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d)


def by_kind(docs: tuple[dict[str, Any], ...], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def one(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert name in found, f"no {kind} {name}; have {sorted(found)}"
    return found[name]


def settings_field(name: str) -> bool:
    """True if ``VERIFIER_A__B`` names a field of `Settings` (nested with ``__``)."""
    if not name.startswith("VERIFIER_"):
        return False
    model: type[BaseModel] = Settings
    parts = name.removeprefix("VERIFIER_").lower().split("__")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        last = i == len(parts) - 1
        is_group = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        if last:
            return not is_group  # a group itself is not one setting
        if not is_group:
            return False
        model = annotation
    return False


def cli_accepts(args: list[str]) -> bool:
    """True if `verifier <args>` resolves to a command and every option exists."""
    command: Any = get_command(cli_app)
    rest = list(args)
    while hasattr(command, "commands"):  # a group: the next word names a subcommand
        if not rest or rest[0] not in command.commands:
            return False
        command = command.commands[rest.pop(0)]
    try:
        command.make_context("verifier", rest)
    # typer ships its own copy of click, whose exception classes are private: any parse error
    except Exception:
        return False
    return True


def containers(workload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def strict(schema: Any) -> Any:
    """What the API server's strict field validation rejects: unknown fields of an object
    whose properties the schema lists (unless it preserves unknown fields)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_schema(filename: str) -> dict[str, Any]:
    loaded: dict[str, Any] = strict(json.loads((SCHEMAS / filename).read_text()))
    return loaded


CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobject_v1alpha1.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda.sh_triggerauthentication_v1alpha1.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_servicemonitor_v1.json",
}

_METRIC = re.compile(r"\b(verifier_[a-z0-9_]+|vllm:[a-z0-9_]+)")


def dashboard() -> dict[str, Any]:
    path = DEPLOY / "grafana" / "dashboards" / "verifier-service.json"
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def dashboard_metrics() -> set[str]:
    """Every series name the dashboard's queries read (as exposed, e.g. ``..._bucket``)."""
    return {m for expr in dashboard_exprs() for m in _METRIC.findall(expr)}


def exposed_names(text: str) -> set[str]:
    """Series (sample) names in a Prometheus text exposition."""
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}
