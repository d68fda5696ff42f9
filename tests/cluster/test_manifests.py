"""The KubeRay manifests against what the KubeRay release cluster/README.md names accepts, and
against the GPU sweep they are meant to run; the NetworkPolicies by their label selectors.

The field tables are KubeRay v1.6.2's API types (ray-operator/apis/ray/v1/raycluster_types.go:
RayClusterSpec, AuthOptions, HeadGroupSpec, WorkerGroupSpec; rayjob_types.go: RayJobSpec) and,
for pod templates and NetworkPolicies, the core Kubernetes fields the manifests use. The API
server prunes a field its structural schema does not know without a word, so a misspelled or
too-new field would simply vanish: every key here must be in the tables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import bundled_sweep
from tmem_core.pipeline import load_sweep
from tmem_core.pipeline._capacity import engine_asks, sweep_backbones

ROOT = Path(__file__).resolve().parents[2]
KUBERAY = ROOT / "cluster" / "kuberay"
MANIFESTS = {path.name: list(yaml.safe_load_all(path.read_text()))
             for path in sorted(KUBERAY.glob("*.yaml"))}

QTY = (str, int)  # a Kubernetes quantity
MAP = "map of strings"
SELECTOR = {"matchLabels": MAP, "matchExpressions": [{"key": str, "operator": str,
                                                        "values": [str]}]}
ENV = {"name": str, "value": str, "valueFrom": {"secretKeyRef": {"name": str, "key": str}}}
CONTAINER = {"name": str, "image": str, "command": [str], "args": [str], "env": [ENV],
             "ports": [{"containerPort": int, "name": str, "protocol": str}],
             "resources": {"limits": {str: QTY}, "requests": {str: QTY}},
             "volumeMounts": [{"name": str, "mountPath": str, "readOnly": bool}]}
POD_TEMPLATE = {
    "metadata": {"labels": MAP, "annotations": MAP},
    "spec": {"containers": [CONTAINER], "restartPolicy": str, "nodeSelector": MAP,
             "serviceAccountName": str,
             "tolerations": [{"key": str, "operator": str, "value": str, "effect": str}],
             "volumes": [{"name": str, "persistentVolumeClaim": {"claimName": str},
                          "emptyDir": {"medium": str, "sizeLimit": QTY}}]}}
AUTH_OPTIONS = {"mode": ("token", "disabled"), "secretName": str, "enableK8sTokenAuth": bool}
CLUSTER_SPEC = {
    "rayVersion": str, "authOptions": AUTH_OPTIONS, "suspend": bool, "managedBy": str,
    "enableInTreeAutoscaling": bool, "headServiceAnnotations": MAP,
    "headGroupSpec": {"template": POD_TEMPLATE, "rayStartParams": MAP, "serviceType": str,
                      "enableIngress": bool, "resources": MAP, "labels": MAP},
    "workerGroupSpecs": [{"groupName": str, "replicas": int, "minReplicas": int,
                          "maxReplicas": int, "idleTimeoutSeconds": int, "suspend": bool,
                          "rayStartParams": MAP, "template": POD_TEMPLATE, "numOfHosts": int,
                          "resources": MAP, "labels": MAP}]}
RAYJOB_SPEC = {
    "entrypoint": str, "runtimeEnvYAML": str, "shutdownAfterJobFinishes": bool,
    "ttlSecondsAfterFinished": int, "activeDeadlineSeconds": int, "backoffLimit": int,
    "submissionMode": ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"),
    "submitterPodTemplate": POD_TEMPLATE, "rayClusterSpec": CLUSTER_SPEC, "suspend": bool,
    "metadata": MAP, "clusterSelector": MAP, "entrypointNumCpus": (int, float),
    "entrypointNumGpus": (int, float), "entrypointResources": str}
NETWORK_POLICY_SPEC = {
    "podSelector": SELECTOR, "policyTypes": [str],
    "ingress": [{"from": [{"podSelector": SELECTOR, "namespaceSelector": SELECTOR}],
                 "ports": [{"protocol": str, "port": int}]}]}
KINDS = {("ray.io/v1", "RayCluster"): CLUSTER_SPEC, ("ray.io/v1", "RayJob"): RAYJOB_SPEC,
         ("networking.k8s.io/v1", "NetworkPolicy"): NETWORK_POLICY_SPEC}
SINCE = {"authOptions": (1, 5), "authOptions.secretName": (1, 6)}
"""The first KubeRay minor release whose API has the field (1.5.1 and 1.6.0 by their tags)."""
DASHBOARD, GCS = 8265, 6379


def _check(value: Any, spec: Any, where: str, used: set[str]) -> None:
    if isinstance(spec, dict) and str in spec:  # a map whose values follow one spec
        assert isinstance(value, dict), where
        for key, item in value.items():
            _check(item, spec[str], f"{where}.{key}", used)
    elif isinstance(spec, dict):
        assert isinstance(value, dict), f"{where}: expected an object, got {value!r}"
        for key, item in value.items():
            assert key in spec, f"{where}.{key}: not a field KubeRay 1.6 / Kubernetes accepts"
            used.add(f"{where}.{key}")
            _check(item, spec[key], f"{where}.{key}", used)
    elif isinstance(spec, list):
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            _check(item, spec[0], f"{where}[{i}]", used)
    elif spec == MAP:
        assert isinstance(value, dict) and all(isinstance(v, str) for v in value.values()), where
    elif isinstance(spec, tuple) and all(isinstance(s, str) for s in spec):
        assert value in spec, f"{where}: {value!r} is not one of {spec}"
    else:
        assert isinstance(value, spec) and not (isinstance(value, bool) and spec is not bool), (
            f"{where}: {value!r} is not {spec}")


def _used_fields() -> set[str]:
    used: set[str] = set()
    for docs in MANIFESTS.values():
        for doc in docs:
            assert set(doc) == {"apiVersion", "kind", "metadata", "spec"}
            _check(doc["spec"], KINDS[doc["apiVersion"], doc["kind"]], "", used)
    return {re.sub(r"\[\d+\]", "", f).removeprefix(".").removeprefix("rayClusterSpec.")
            for f in used}


def test_every_field_is_one_kuberay_accepts() -> None:
    assert {(d["apiVersion"], d["kind"]) for ds in MANIFESTS.values() for d in ds} == set(KINDS)
    assert {"authOptions.mode", "authOptions.secretName", "submitterPodTemplate"} <= (
        _used_fields())


def test_the_readme_names_the_kuberay_release_the_fields_need() -> None:
    readme = (ROOT / "cluster" / "README.md").read_text()
    named = re.search(r"KubeRay operator \(>= (\d+)\.(\d+)", readme)
    assert named, "cluster/README.md names no KubeRay version"
    needed = max(v for f, v in SINCE.items() if f in _used_fields())
    assert (int(named[1]), int(named[2])) >= needed == (1, 6)


def _cluster_specs() -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for docs in MANIFESTS.values():
        for doc in docs:
            if doc["kind"] == "RayCluster":
                specs.append((doc["metadata"]["name"], doc["spec"]))
            elif doc["kind"] == "RayJob":
                specs.append((doc["metadata"]["name"], doc["spec"]["rayClusterSpec"]))
    return specs


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize(("name", "spec"), _cluster_specs())
def test_token_authentication_is_kuberays_own(name: str, spec: dict[str, Any]) -> None:
    # validation.go: authOptions.mode token needs Ray >= 2.52; with secretName the operator
    # reads the key auth_token for its own dashboard calls and sets RAY_AUTH_MODE and
    # RAY_AUTH_TOKEN in every Ray container and in the submitter, unless one is set already
    # (pod.go SetContainerTokenAuthEnvVars), so none may be set by hand
    assert spec["authOptions"] == {"mode": "token", "secretName": "tmem-eval-ray-token"}
    assert tuple(int(p) for p in spec["rayVersion"].split(".")) >= (2, 52)
    for container in _containers(spec):
        assert not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN"} & set(_env(container)), name
    readme = (ROOT / "cluster" / "README.md").read_text()
    assert "--from-file=auth_token=" in readme


@pytest.mark.parametrize(("name", "spec"), _cluster_specs())
def test_kuberays_validation_rules_hold(name: str, spec: dict[str, Any]) -> None:
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 47
    head_params = spec["headGroupSpec"]["rayStartParams"]
    assert head_params["num-gpus"] == "0" and "resources" not in spec["headGroupSpec"]
    for group in spec["workerGroupSpecs"]:
        assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        assert not ({"num-cpus", "num-gpus", "memory"} & set(group["rayStartParams"])
                    and group.get("resources"))


@pytest.mark.parametrize(("name", "spec"), _cluster_specs())
def test_a_worker_pod_is_a_whole_gpu_node(name: str, spec: dict[str, Any]) -> None:
    for group in spec["workerGroupSpecs"]:
        pod = group["template"]["spec"]
        (container,) = pod["containers"]
        limits, requests = container["resources"]["limits"], container["resources"]["requests"]
        assert limits == requests and int(limits["nvidia.com/gpu"]) >= 2
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in (
            pod["tolerations"])
        assert pod["nodeSelector"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert set(mounts.values()) <= set(volumes)
        shm = volumes[mounts["/dev/shm"]]["emptyDir"]  # NCCL and vLLM's workers
        assert shm["medium"] == "Memory" and shm["sizeLimit"]


def _quantity(value: str | int, unit: str) -> float:
    """A Kubernetes CPU quantity in CPUs, or a memory quantity in GiB."""
    text = str(value)
    if unit == "cpu":
        return int(text[:-1]) / 1000 if text.endswith("m") else float(text)
    scale = {"Ki": 2**-20, "Mi": 2**-10, "Gi": 1, "Ti": 2**10}
    return float(text[:-2]) * scale[text[-2:]] if text[-2:] in scale else float(text) / 2**30


def _node_types() -> list[tuple[str, int, float]]:
    """The node types cluster/README.md names: (name, vCPU, memory GiB)."""
    readme = (ROOT / "cluster" / "README.md").read_text()
    rows = re.findall(r"^\| ([^|]+?) \| 8 x [^|]+ \| (\d+) \| (\d+) \|$", readme, re.MULTILINE)
    assert len(rows) >= 5
    return [(name, int(cpu), float(memory)) for name, cpu, memory in rows]


@pytest.mark.parametrize(("name", "spec"), _cluster_specs())
def test_worker_pods_schedule_on_every_common_8_gpu_node_type(name: str, spec: dict[str, Any]
                                                              ) -> None:
    """Requests within each node type's vCPUs less 4 (kubelet reservations, daemons) and
    90% of its memory; the head has a /dev/shm of its own; a RayJob has a deadline."""
    (group,) = spec["workerGroupSpecs"]
    requests = group["template"]["spec"]["containers"][0]["resources"]["requests"]
    for node, cpus, memory in _node_types():
        assert _quantity(requests["cpu"], "cpu") <= cpus - 4, node
        assert _quantity(requests["memory"], "memory") <= 0.9 * memory, node
    head = spec["headGroupSpec"]["template"]["spec"]
    shm = {m["mountPath"]: m["name"] for m in head["containers"][0]["volumeMounts"]}
    assert {v["name"]: v for v in head["volumes"]}[shm["/dev/shm"]]["emptyDir"]["medium"] == (
        "Memory")
    (job,) = MANIFESTS["rayjob.yaml"][:1]
    assert 0 < job["spec"]["activeDeadlineSeconds"] <= 7 * 86400


def test_every_node_and_job_sees_the_same_model_cache() -> None:
    homes = set()
    for _, spec in _cluster_specs():
        homes |= {_env(c).get("HF_HOME") for c in _containers(spec)}
    (job,) = MANIFESTS["rayjob.yaml"][:1]
    job_env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]
    submit_env = yaml.safe_load((ROOT / "cluster" / "runtime_env.yaml").read_text())["env_vars"]
    assert homes == {job_env["HF_HOME"]} == {submit_env["HF_HOME"]} == {"/mnt/cache/hf"}


@pytest.mark.parametrize(("name", "spec"), _cluster_specs())
def test_the_gpu_sweep_fits_the_worker_pods(name: str, spec: dict[str, Any], tmp_path: Path
                                           ) -> None:
    (group,) = spec["workerGroupSpecs"]
    pod_gpus = int(group["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"])
    config = load_sweep(bundled_sweep(ROOT / "jobs" / "configs" / "gpu_sweep.toml", tmp_path))
    assert config.resources.gpus_per_node == pod_gpus
    assert config.resources.cluster_gpus == pod_gpus * group["replicas"]
    asks = engine_asks(sweep_backbones(config), config.resources)
    assert asks and all(0 < ask.gpus <= pod_gpus for ask in asks)  # tp x pp on one pod
    assert sum(ask.gpus * ask.replicas for ask in asks) <= config.resources.cluster_gpus


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        present, value = expr["key"] in labels, labels.get(expr["key"])
        if not {"In": present and value in expr.get("values", []),
                "NotIn": not present or value not in expr.get("values", []),
                "Exists": present, "DoesNotExist": not present}[expr["operator"]]:
            return False
    return True


EVERY_PORT = frozenset({-1})


def _admitted(policy: dict[str, Any], target: dict[str, str], peer: dict[str, str],
              namespace: str) -> frozenset[int]:
    """Ports of `target` (in the policy's namespace, "tmem") that `peer` (labels, in
    `namespace`) may reach: `EVERY_PORT`, some, or none."""
    assert _selects(policy["spec"]["podSelector"], target), "the policy does not fence it"
    ports: set[int] = set()
    for rule in policy["spec"]["ingress"]:
        for source in rule["from"]:
            if "namespaceSelector" in source:
                here = _selects(source["namespaceSelector"],
                                {"kubernetes.io/metadata.name": namespace})
            else:  # a bare podSelector: the policy's own namespace
                here = namespace == "tmem"
            if here and _selects(source.get("podSelector", {}), peer):
                if "ports" not in rule:
                    return EVERY_PORT
                ports |= {p["port"] for p in rule["ports"]}
    return frozenset(ports)


OPERATOR = {"app.kubernetes.io/name": "kuberay-operator", "app.kubernetes.io/instance": "kr"}


def _ray_pods(name: str, spec: dict[str, Any], cluster: str) -> list[dict[str, str]]:
    """The labels KubeRay gives the cluster's pods: its own (pod.go labelPod) and the
    templates'."""
    groups = [("head", spec["headGroupSpec"]), *(("worker", g) for g in spec["workerGroupSpecs"])]
    return [{"ray.io/cluster": cluster, "ray.io/node-type": kind, "ray.io/is-ray-node": "yes",
             "app.kubernetes.io/created-by": "kuberay-operator",
             **group["template"].get("metadata", {}).get("labels", {})} for kind, group in groups]


def test_the_rayjobs_policy_admits_its_submitter_and_the_operator_to_the_dashboard_only() -> None:
    job, policy = MANIFESTS["rayjob.yaml"]
    spec = job["spec"]
    # the operator names the job's cluster <rayjob>-<suffix>; its pods carry the template labels
    pods = _ray_pods(job["metadata"]["name"], spec["rayClusterSpec"],
                     f"{job['metadata']['name']}-x7k2p")
    submitter = spec["submitterPodTemplate"]["metadata"]["labels"]
    for pod in pods:
        assert _admitted(policy, pod, pods[-1], "tmem") == EVERY_PORT  # each other
        assert _admitted(policy, pod, submitter, "tmem") == {DASHBOARD}
        assert _admitted(policy, pod, OPERATOR, "default") == {DASHBOARD}
        assert _admitted(policy, pod, OPERATOR, "elsewhere") == set()
        assert _admitted(policy, pod, {"app": "anything"}, "tmem") == set()
        assert GCS not in _admitted(policy, pod, submitter, "tmem")


def test_the_clusters_policy_admits_its_pods_and_the_operators_dashboard_calls() -> None:
    cluster, policy = MANIFESTS["raycluster.yaml"]
    pods = _ray_pods(cluster["metadata"]["name"], cluster["spec"], cluster["metadata"]["name"])
    for pod in pods:
        assert _admitted(policy, pod, pods[0], "tmem") == EVERY_PORT
        assert _admitted(policy, pod, OPERATOR, "default") == {DASHBOARD}
        assert _admitted(policy, pod, {"app": "anything"}, "tmem") == set()
