"""The files of ``cluster/`` (issue 10 §2), checked with the tools' own schemas where they exist.

* ``cluster/aws.yaml``: Ray's cluster-launcher validator (``ray/autoscaler/ray-schema.json``, after
  Ray fills in its defaults, as ``ray up`` does before it starts anything).
* ``cluster/kuberay/*.yaml``: structure and required fields of KubeRay's ``RayCluster`` and
  ``RayJob`` (no KubeRay schema ships on PyPI), their pod templates and the MLflow server's
  objects against Kubernetes' own schemas (``kubernetes-validate``, strict: unknown keys fail).
* ``cluster/Dockerfile``: a Ray GPU base image whose Ray version ``pyproject.toml`` allows and the
  manifests name, the ``gpu`` extra, and every folder the package is built from.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path

import pytest
import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.helpers import make_cfg, plain

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
KUBERAY = {"RayCluster": CLUSTER / "kuberay" / "raycluster.yaml", "RayJob": CLUSTER / "kuberay" / "rayjob.yaml"}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def dockerfile() -> dict:
    """The Dockerfile's ARG defaults, its base image with them substituted, and its RUN/COPY lines."""
    lines = re.sub(r"\\\n\s*", " ", (CLUSTER / "Dockerfile").read_text()).splitlines()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", "\n".join(lines), re.M))
    (base,) = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    return {
        "args": args,
        "base": re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base),
        "run": [ln for ln in lines if ln.startswith("RUN ")],
        "copy": [ln for ln in lines if ln.startswith("COPY ")],
    }


def image_tag() -> str:
    """The image cluster/Dockerfile builds, as its own build command names it."""
    (tag,) = re.findall(r"docker build -f cluster/Dockerfile -t (\S+) \.", (CLUSTER / "Dockerfile").read_text())
    return tag


def ray_requirement() -> Requirement:
    (req,) = [Requirement(r) for r in PYPROJECT["project"]["dependencies"] if Requirement(r).name == "ray"]
    return req


def cluster_spec(doc: dict) -> dict:
    return doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]


def pod_templates(spec: dict) -> list[dict]:
    """The head's pod template, then each worker group's."""
    return [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]


def containers(template: dict) -> list[dict]:
    return template["spec"]["containers"]


def gpus(container: dict) -> int:
    return int(container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))


# ---------------------------------------------------------------- the Ray cluster launcher config


def test_launcher_config_passes_rays_validator():
    """What ``ray up`` checks first: Ray's defaults filled in, then Ray's JSON schema and its
    cross-field rules (head type among the node types, min_workers within max_workers). A key
    Ray does not know fails the same validator, so the check has teeth."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    cfg = load(CLUSTER / "aws.yaml")
    validate_config(prepare_config(copy.deepcopy(cfg)))
    bad = copy.deepcopy(cfg)
    bad["available_node_types"]["worker.gpu"]["min_worker"] = 1
    with pytest.raises(Exception, match="min_worker"):
        validate_config(prepare_config(bad))


def test_launcher_config_gpu_workers_and_safe_head():
    """A CPU head and GPU workers; isles with the ``gpu`` extra on every node; the head's
    dashboard and MLflow server on 127.0.0.1; token authentication on every node, with the token
    the user's machine has; the checkout uploaded without what Ray's working_dir leaves out."""
    from isles.app.ray_setup import RAY_EXCLUDES

    cfg = load(CLUSTER / "aws.yaml")
    types = cfg["available_node_types"]
    head = types[cfg["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    workers = [t for name, t in types.items() if name != cfg["head_node_type"]]
    assert workers and all(t["resources"]["GPU"] >= 1 for t in workers)
    assert any("$HOME/isles[gpu]" in c and c.startswith("pip install") for c in cfg["setup_commands"])
    assert cfg["file_mounts"]["~/isles"] == "."
    assert cfg["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert set(cfg["rsync_exclude"]) == set(RAY_EXCLUDES)

    def start(commands: list[str]) -> list[str]:
        (cmd,) = [c for c in commands if "ray start" in c]
        return shlex.split(cmd.split(";")[-1])

    head_start, worker_start = start(cfg["head_start_ray_commands"]), start(cfg["worker_start_ray_commands"])
    assert "RAY_AUTH_MODE=token" in head_start and "RAY_AUTH_MODE=token" in worker_start
    assert "--head" in head_start and "--dashboard-host=127.0.0.1" in head_start
    (mlflow,) = [shlex.split(c.split("||")[-1]) for c in cfg["head_start_ray_commands"] if "mlflow server" in c]
    assert mlflow[mlflow.index("--host") + 1] == "127.0.0.1"


# ---------------------------------------------------------------- the KubeRay manifests


@pytest.mark.parametrize("kind", sorted(KUBERAY))
def test_kuberay_manifest_structure(kind):
    """apiVersion/kind/metadata/spec; a head group and GPU worker groups with the fields KubeRay
    requires (groupName, minReplicas <= replicas <= maxReplicas, a pod template with containers);
    every container runs the image cluster/Dockerfile builds; rayVersion is the image's Ray; token
    authentication is on."""
    doc = load(KUBERAY[kind])
    assert doc["apiVersion"] == "ray.io/v1" and doc["kind"] == kind
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    spec = cluster_spec(doc)
    assert spec["rayVersion"] == dockerfile()["args"]["RAY_VERSION"]
    assert spec["authOptions"]["mode"] == "token"
    head = spec["headGroupSpec"]
    assert isinstance(head["rayStartParams"], dict)
    assert all(gpus(c) == 0 for c in containers(head["template"]))
    assert spec["workerGroupSpecs"]
    for group in spec["workerGroupSpecs"]:
        assert group["groupName"] and isinstance(group["rayStartParams"], dict)
        assert 0 <= group["minReplicas"] <= group.get("replicas", group["minReplicas"]) <= group["maxReplicas"]
        assert all(gpus(c) >= 1 for c in containers(group["template"]))
    for template in pod_templates(spec):
        assert containers(template) and all(c["image"] == image_tag() for c in containers(template))


def test_rayjob_runs_the_main_job_on_its_own_cluster_of_the_same_spec(monkeypatch):
    """The RayJob's entrypoint is isles' command with overrides that compose and validate as
    ``run.py`` would (joining the job's cluster, logging to the MLflow Service of mlflow.yaml), and
    its cluster is the RayCluster's spec (one spec, checked equal, not two that drift). The
    cluster the entrypoint joins exists only in Kubernetes: ``ray.address=auto`` is not looked up
    here (whether this machine runs a Ray cluster is not the config's business)."""
    from isles.app import job
    from isles.app.job import validate

    monkeypatch.setattr(job, "check_ray_address", lambda address: None)

    job, cluster = load(KUBERAY["RayJob"]), load(KUBERAY["RayCluster"])
    assert job["spec"]["rayClusterSpec"] == cluster["spec"]
    assert job["spec"]["shutdownAfterJobFinishes"] is True
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[0] in PYPROJECT["project"]["scripts"]
    overrides = argv[1:]
    assert "ray.address=auto" in overrides
    cfg = plain(make_cfg(*overrides))
    validate(cfg)
    (service,) = [
        d for d in yaml.safe_load_all((CLUSTER / "kuberay" / "mlflow.yaml").read_text()) if d["kind"] == "Service"
    ]
    assert (
        cfg["logger"]["tracking_uri"] == f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    )


def test_pod_templates_and_mlflow_objects_pass_kubernetes_schemas():
    """Every pod template of the RayCluster and RayJob (a core PodTemplateSpec) and every object of
    mlflow.yaml against Kubernetes' published schemas, strict (a misspelt key fails)."""
    import kubernetes_validate as kv  # the test extra installs it

    version = kv.latest_version()
    for path in KUBERAY.values():
        for template in pod_templates(cluster_spec(load(path))):
            kv.validate(
                {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template},
                version,
                strict=True,
            )
    docs = list(yaml.safe_load_all((CLUSTER / "kuberay" / "mlflow.yaml").read_text()))
    assert {d["kind"] for d in docs} == {"PersistentVolumeClaim", "Deployment", "Service", "NetworkPolicy"}
    for d in docs:
        kv.validate(d, version, strict=True)
    typo = copy.deepcopy(load(KUBERAY["RayCluster"])["spec"]["headGroupSpec"]["template"])
    typo["spec"]["containers"][0]["resource"] = typo["spec"]["containers"][0].pop("resources")
    with pytest.raises(kv.ValidationError):
        kv.validate(
            {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": typo},
            version,
            strict=True,
        )


def test_mlflow_server_admits_isles_ray_pods_only():
    """The MLflow server's Service selects its Deployment; its NetworkPolicy admits exactly the pods
    the Ray manifests label as isles'; the Host header drivers send is allowed; its image is isles'."""
    docs = {d["kind"]: d for d in yaml.safe_load_all((CLUSTER / "kuberay" / "mlflow.yaml").read_text())}
    pod_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert docs["Service"]["spec"]["type"] == "ClusterIP"
    assert docs["Service"]["spec"]["selector"].items() <= pod_labels.items()
    assert docs["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    (rule,) = docs["NetworkPolicy"]["spec"]["ingress"]
    (source,) = rule["from"]
    for path in KUBERAY.values():
        for template in pod_templates(cluster_spec(load(path))):
            assert source["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    (server,) = containers(docs["Deployment"]["spec"]["template"])
    assert server["image"] == image_tag()
    allowed = [a.split("=", 1)[1] for a in server["command"] if a.startswith("--allowed-hosts=")][0].split(",")
    service = docs["Service"]
    assert f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}" in allowed


# ---------------------------------------------------------------- the container recipe


def test_dockerfile_installs_isles_gpu_on_a_ray_gpu_image_pyproject_allows():
    """Base ``rayproject/ray:<version>-py3xx-gpu``; that version satisfies pyproject.toml's ray
    requirement and is pinned in the install; its Python satisfies requires-python; the install
    has the ``gpu`` extra; every folder the package is built from is copied; the tag is isles'
    version."""
    d = dockerfile()
    m = re.fullmatch(r"rayproject/ray:(?P<ray>[\d.]+)-py3(?P<minor>\d+)-gpu", d["base"])
    assert m, d["base"]
    assert ray_requirement().specifier.contains(m["ray"])
    assert Version(f"3.{m['minor']}") in SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert "gpu" in PYPROJECT["project"]["optional-dependencies"]
    (install,) = [r for r in d["run"] if "pip install" in r]
    assert "[gpu]" in install and '"ray[default]==${RAY_VERSION}"' in install
    copied = {src for ln in d["copy"] for src in ln.split()[1:-1] if not src.startswith("--")}
    needed = set(PYPROJECT["tool"]["setuptools"]["package-dir"].values()) | {
        "pyproject.toml",
        PYPROJECT["project"]["readme"],
    }
    assert needed <= copied, needed - copied
    assert image_tag() == f"isles:{PYPROJECT['project']['version']}-gpu"


def test_launcher_images_are_the_dockerfiles_ray():
    """``ray up``'s head and worker images run the same Ray as cluster/Dockerfile, on the same
    Python, and the workers' is a GPU image."""
    docker = load(CLUSTER / "aws.yaml")["docker"]
    base = dockerfile()["base"]
    assert docker["worker_image"] == base
    assert docker["head_image"] == base.removesuffix("-gpu") + "-cpu"


def test_readme_names_files_that_exist():
    """Every ``cluster/...`` path that cluster/README.md tells the user to run exists."""
    text = (CLUSTER / "README.md").read_text()
    paths = set(re.findall(r"\bcluster/[\w./-]+\.(?:yaml|md)\b|\bcluster/Dockerfile\b", text))
    assert {"cluster/aws.yaml", "cluster/Dockerfile", "cluster/kuberay/rayjob.yaml"} <= paths
    assert all((ROOT / p).is_file() for p in paths), [p for p in paths if not (ROOT / p).is_file()]
