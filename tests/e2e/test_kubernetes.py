"""deploy/kubernetes (issue #40): every overlay renders with kubectl's built-in kustomize, each
resource passes kubernetes-validate's strict schema check for a current Kubernetes (the
ServiceMonitor, a custom resource without a schema there, is checked field by field), and the
pieces fit: the Service, the PodDisruptionBudget and the ServiceMonitor select the pods; the
ports they name exist; the HPA scales the Deployment on the metric the prometheus-adapter rule
defines, from counters nereid really exports; the grace period outlasts the exit timeout. Then
nereid itself starts with each overlay's container args (a local repository and free ports in
place of the bucket and the fixed ports) and answers the probes' paths on the port they name.
"""
import re
import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from conftest import ROOT, free_port
from e2e_util import get

DEPLOY = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
# the version of the kubectl on these machines, and the newest the validator knows
K8S_VERSIONS = ("1.32.0", kubernetes_validate.latest_version())


def render(overlay):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with its built-in kustomize) is needed to render the manifests"
    p = subprocess.run([kubectl, "kustomize", str(DEPLOY / "overlays" / overlay)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    docs = [d for d in yaml.safe_load_all(p.stdout) if d]
    return {d["kind"]: d for d in docs}, docs


def matches(selector, labels):
    return selector and all(labels.get(k) == v for k, v in selector.items())


def test_there_are_overlays():
    assert set(OVERLAYS) >= {"volume", "s3"}, OVERLAYS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates(overlay):
    kinds, docs = render(overlay)
    for d in docs:
        if d["apiVersion"].startswith("monitoring.coreos.com/"):
            continue
        for version in K8S_VERSIONS:
            kubernetes_validate.validate(d, version, strict=True)
    assert {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler",
            "ServiceMonitor"} <= set(kinds), set(kinds)

    dep, svc = kinds["Deployment"], kinds["Service"]
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert matches(dep["spec"]["selector"]["matchLabels"], labels)
    assert matches(svc["spec"]["selector"], labels)
    assert matches(kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"], labels)
    (c,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8000, "grpc": 8001, "metrics": 8002}, ports
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= set(ports)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[probe]["httpGet"]["port"] in ports, probe
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    exit_timeout = next(int(a.split("=", 1)[1]) for a in c["args"]
                        if a.startswith("--exit-timeout-secs="))
    quiet_ms = next((int(a.split("=", 1)[1]) for a in c["args"]
                     if a.startswith("--drain-quiet-ms=")), 1000)
    assert pod["spec"]["terminationGracePeriodSeconds"] > exit_timeout + quiet_ms / 1000
    assert any(a.startswith("--model-repository=") for a in c["args"])

    sm = kinds["ServiceMonitor"]
    assert matches(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])
    assert {e["port"] for e in sm["spec"]["endpoints"]} <= {p["name"] for p in
                                                             svc["spec"]["ports"]}

    hpa = kinds["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"]["kind"] == "Deployment"
    assert hpa["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    rules = yaml.safe_load((DEPLOY / "prometheus-adapter" / "rules.yaml").read_text())["rules"]
    served = {r["name"]["as"] for r in rules}
    assert {m["pods"]["metric"]["name"] for m in hpa["metrics"]} <= served


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_nereid_starts_with_the_overlays_args(server_factory, repos, overlay):
    """The container's args are flags nereid takes (with the repository and the ports swapped
    for the test's), the probes' paths answer on the HTTP port, and the metrics the adapter
    rule reads are exported."""
    kinds, _ = render(overlay)
    (c,) = kinds["Deployment"]["spec"]["template"]["spec"]["containers"]
    keep = [a for a in c["args"] if not re.match(r"--(model-repository|http-port|grpc-port|"
                                                 r"metrics-port)=", a)]
    srv = server_factory([repos["repo_small"]], keep, name=f"k8s-{overlay}")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        path = c[probe]["httpGet"]["path"]
        assert get(srv.port, path).status == 200, (probe, path)
    text = get(srv.metrics_port, "/metrics").body.decode()
    rules = yaml.safe_load((DEPLOY / "prometheus-adapter" / "rules.yaml").read_text())["rules"]
    for r in rules:
        for name in set(re.findall(r"\b(nv_[a-z_]+)\{", r["seriesQuery"] + r["metricsQuery"])):
            assert f"\n{name}{{" in text, name
