"""Issue 26, item 6: every default is written once, in the dataclasses (the schema of
``islands/config/schema.py`` for the runtime, each algorithm's ``Params`` for the algorithms); a YAML file
under ``conf/`` only chooses groups and overrides what differs (an experiment's or a paper's
settings). The golden of every composed config is computed from those dataclasses and the YAML
files' own values, never a dump."""

import copy
import dataclasses
import functools
import inspect
from pathlib import Path
from typing import get_type_hints

import pytest
from hydra.core.config_store import ConfigStore
from hydra.utils import get_object
from isles.islands.config import schema
from omegaconf import OmegaConf

from tests.helpers import CONF, make_cfg, plain

CONF_DIR = Path(CONF)
EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
#: the root's sections typed by a dataclass of the schema
SECTIONS = {
    f.name: t
    for f, t in ((f, get_type_hints(schema.IslesConfig)[f.name]) for f in dataclasses.fields(schema.IslesConfig))
    if dataclasses.is_dataclass(t)
}
MISSING = object()
#: the groups whose options' nodes are derived from their class (:func:`isles.islands.config.schema.class_node`)
DERIVED = ("algorithm", "topology")


@functools.cache
def _load(path: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}


def body(path: Path) -> dict:
    """The values a YAML file writes (its defaults list and Hydra's own node left out), unresolved."""
    return {k: copy.deepcopy(v) for k, v in _load(path).items() if k not in ("defaults", "hydra")}


def defaults_list(path: Path) -> list:
    """The entries of a YAML file's defaults list."""
    return copy.deepcopy(list(_load(path).get("defaults") or []))


def leaves(d: dict, prefix: str = ""):
    """``(dotted key, value)`` of every leaf of ``d`` (an empty dict is a leaf)."""
    for k, v in d.items():
        if isinstance(v, dict) and v:
            yield from leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def get(d: dict, key: str):
    """The value at dotted ``key`` of ``d``, or :data:`MISSING`."""
    for part in key.split("."):
        if not isinstance(d, dict) or part not in d:
            return MISSING
        d = d[part]
    return d


def schema_defaults() -> dict:
    """The root's defaults as the dataclasses write them (the open groups empty)."""
    return dataclasses.asdict(schema.IslesConfig(algorithm=None, problem=None, topology=None))


def parents(name: str) -> list:
    """The experiments that experiment ``name`` extends (its defaults list's plain entries), in order."""
    return [e for e in defaults_list(CONF_DIR / "experiment" / f"{name}.yaml") if isinstance(e, str) and e != "_self_"]


def chosen(name: str | None, group: str) -> str | None:
    """The option of ``group`` that experiment ``name`` composes (its ``override /group``, else its
    parents', else ``conf/config.yaml``'s)."""
    if name is not None:
        for entry in reversed(defaults_list(CONF_DIR / "experiment" / f"{name}.yaml")):
            if isinstance(entry, dict) and f"override /{group}" in entry:
                return entry[f"override /{group}"]
        for parent in reversed(parents(name)):
            found = chosen(parent, group)
            if found != chosen(None, group):
                return found
    for entry in defaults_list(CONF_DIR / "config.yaml"):
        if isinstance(entry, dict) and group in entry:
            return entry[group]
    return None


def chosen_plugin(name: str | None) -> str | None:
    """The ``conf/plugin/`` option that experiment ``name`` (or a parent) adds (``- /plugin: NAME``)."""
    if name is None:
        return None
    for entry in defaults_list(CONF_DIR / "experiment" / f"{name}.yaml"):
        if isinstance(entry, dict) and "/plugin" in entry:
            return entry["/plugin"]
    return next((found for parent in parents(name) if (found := chosen_plugin(parent))), None)


def declared_defaults(target: str) -> dict:
    """The defaults that the class ``target`` declares: its ``Params`` dataclass's fields, else its
    constructor's parameters that have one (what :func:`isles.islands.config.schema.class_node` puts in a
    node, read here on their own so that this module also counts a tree without that node)."""
    cls = get_object(target)
    params = getattr(cls, "Params", None)
    if dataclasses.is_dataclass(params):
        return {f.name: f.default for f in dataclasses.fields(params) if f.default is not dataclasses.MISSING}
    sig = inspect.signature(cls).parameters.values()
    return {
        p.name: list(p.default) if isinstance(p.default, tuple) else p.default
        for p in sig
        if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def extended(path: Path) -> dict:
    """The node that YAML file ``path`` extends (its defaults list's ``/schema/GROUP/NAME@_here_``:
    a class's :func:`~isles.islands.config.schema.class_node` in Hydra's ConfigStore); for a file of a
    :data:`DERIVED` group that names its ``_target_`` itself, the defaults that class declares
    (:func:`declared_defaults`); else ``{}``."""
    for entry in defaults_list(path):
        if isinstance(entry, str) and entry.startswith("/schema/"):
            name = entry[1:].partition("@")[0]
            return OmegaConf.to_container(ConfigStore.instance().load(f"{name}.yaml").node)
    target = body(path).get("_target_")
    return declared_defaults(target) if target and path.parent.name in DERIVED else {}


def group_node(group: str, option: str | None) -> dict | None:
    """The node of ``group``'s option ``option`` before an experiment: what its YAML file extends
    (an algorithm's or a topology's class node) with the file's own values; ``None`` for no option."""
    if option is None:
        return None
    path = CONF_DIR / group / f"{option}.yaml"
    return OmegaConf.to_container(OmegaConf.merge(extended(path), body(path)))


def experiment_chain(name: str) -> list:
    """The bodies that experiment ``name`` applies, its parents' first (recursively)."""
    out = []
    for parent in parents(name):
        out += experiment_chain(parent)
    return out + [body(CONF_DIR / "experiment" / f"{name}.yaml")]


def golden(name: str | None) -> dict:
    """The resolved config of experiment ``name`` (``None``: the default job) computed from the
    dataclasses and the YAML files' own values: the schema's defaults, each chosen group's node
    (an algorithm's from its Params, a topology's from its constructor), then the experiment
    chain's values, merged as Hydra does."""
    cfg = schema_defaults()
    cfg = OmegaConf.to_container(OmegaConf.merge(cfg, body(CONF_DIR / "config.yaml")))
    for group in ("algorithm", "problem", "topology"):
        cfg[group] = group_node(group, chosen(name, group))
    plugin = chosen_plugin(name)  # a plug-in group's file sets the global plugins list
    merged = OmegaConf.merge(
        cfg,
        {"logger": body(CONF_DIR / "logger" / f"{chosen(name, 'logger')}.yaml")},
        {"callbacks": body(CONF_DIR / "callbacks" / f"{chosen(name, 'callbacks')}.yaml")},
        *([body(CONF_DIR / "plugin" / f"{plugin}.yaml")] if plugin else []),
        *(placed(name) if name else []),
        *(experiment_chain(name) if name else []),
    )
    return OmegaConf.to_container(merged, resolve=True)


def placed(name: str) -> list:
    """The group options that experiment ``name`` composes at a package of their own
    (``- /GROUP@PKG: OPTION``, e.g. a mixed archipelago's ``/algorithm@groups.de.algorithm: de``), each
    its :func:`group_node` nested at ``PKG``."""
    out = []
    for entry in defaults_list(CONF_DIR / "experiment" / f"{name}.yaml"):
        for key, option in entry.items() if isinstance(entry, dict) else ():
            if key.startswith("/") and "@" in key:
                group, package = key[1:].split("@", 1)
                node = group_node(group, option)
                for part in reversed(package.split(".")):
                    node = {part: node}
                out.append(node)
    return out


def applied_default(path: Path, key: str):
    """The value that ``key`` of YAML file ``path`` would have if the file did not write it: the
    schema's default for the runtime's files, the class node's for an algorithm's or a topology's
    (its ``Params`` or constructor), and for an experiment what its parents, its chosen algorithm
    and topology give (else the schema's default); :data:`MISSING` where nothing defaults the key
    (a problem's node, a plug-in's node)."""
    group = path.parent.name
    if path.parent == CONF_DIR:
        return get(schema_defaults(), key)
    if group in ("islands", "logger"):
        return get(schema_defaults(), f"{group}.{key}")
    if group in DERIVED:
        return get(extended(path), key)
    if group == "experiment":
        name = path.stem
        for parent in reversed(parents(name)):
            value = get(OmegaConf.to_container(OmegaConf.merge(*experiment_chain(parent))), key)
            if value is not MISSING:
                return value
        head, _, rest = key.partition(".")
        if head in DERIVED and rest:
            return get(group_node(head, chosen(name, head)), rest)
        return get(schema_defaults(), key) if key.split(".")[0] in SECTIONS or "." not in key else MISSING
    return MISSING


def duplicates() -> list:
    """``(file, key, value)`` of every YAML value under ``conf/`` that repeats the default that
    applies there (:func:`applied_default`)."""
    out = []
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        if path.parent.name in ("hydra", "launcher", "hparams_search"):  # Hydra's own
            continue
        for key, value in leaves(body(path)):
            if key.endswith("_target_"):
                continue
            default = applied_default(path, key)
            if default is not MISSING and value == default:
                out.append((str(path.relative_to(CONF_DIR)), key, value))
    return out


def test_no_yaml_value_repeats_its_default():
    """A value written in a YAML file under ``conf/`` differs from the default (or the parent
    experiment's value) that applies without it: each default is written once. Before issue 26
    item 6, ``conf/`` repeated 44 runtime defaults (config.yaml, islands/default.yaml,
    logger/mlflow.yaml), 57 of the algorithms' Params, 7 of the topologies' constructors and 38
    in the experiments."""
    found = duplicates()
    assert not found, f"{len(found)} YAML values repeat the default that applies there: {found}"


def test_duplicate_finder_sees_a_repeated_default(tmp_path, monkeypatch):
    """The finder itself, on a copy of ``conf/``: ``de.yaml`` writing ``F: 0.5`` (DEParams'
    default), ``ring_one_way.yaml`` writing ``weight: 1.0`` (Ring's), ``config.yaml`` writing
    ``seed: 0`` and an experiment repeating ``islands.n: 8`` (the schema's) or its parent's
    ``islands.n_actors: 1`` are flagged; values that differ are not."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    for name, text in [
        ("algorithm/de.yaml", "F: 0.5\nCR: 0.3\n"),
        ("topology/ring_one_way.yaml", "weight: 1.0\n"),
        ("config.yaml", "seed: 0\ngenerations: 7\n"),
    ]:
        with open(conf / name, "a") as fh:
            fh.write(text)
    (conf / "experiment" / "extra.yaml").write_text("# @package _global_\nislands:\n  n: 8\n  n_migrants: 2\n")
    (conf / "experiment" / "child.yaml").write_text(
        "# @package _global_\ndefaults:\n  - cde\n  - _self_\nislands:\n  n_actors: 1\n  n: 8\n"
    )
    monkeypatch.setattr(__import__(__name__, fromlist=["CONF_DIR"]), "CONF_DIR", conf)
    found = {(f, k) for f, k, _ in duplicates()}
    assert found == {
        ("algorithm/de.yaml", "F"),
        ("topology/ring_one_way.yaml", "weight"),
        ("config.yaml", "seed"),
        ("experiment/extra.yaml", "islands.n"),
        ("experiment/child.yaml", "islands.n_actors"),
    }


@pytest.mark.parametrize("name", [None, *EXPERIMENTS])
def test_composed_config_is_the_dataclasses_defaults_with_the_yaml_overrides(name):
    """``+experiment=NAME`` (and the default job) composes to the golden computed from the
    dataclasses and the YAML files' own values: no default comes from anywhere else, and every
    field of an algorithm's Params is in its node (recorded by MLflow, overridable without ``+``)."""
    composed = plain(make_cfg(*([f"+experiment={name}"] if name else [])))
    expected = golden(name)
    assert composed == expected
    from isles.algorithms.options import ALGORITHMS

    algorithm = ALGORITHMS[chosen(name, "algorithm")]
    assert {f.name for f in dataclasses.fields(algorithm.Params)} <= set(composed["algorithm"])


def test_defaults_override_as_typed():
    """A key that only a dataclass or a constructor defaults (no YAML writes it) is overridden as
    users type it, without ``+``: an algorithm's, a topology's and the root schema's."""
    cfg = plain(
        make_cfg(
            "+experiment=de_ackley_bin",
            "algorithm.F=0.3",
            "algorithm.epoch=false",
            "islands.n=3",
            "topology=ring_one_way",
            "topology.weight=0.5",
        )
    )
    assert (cfg["algorithm"]["F"], cfg["algorithm"]["epoch"], cfg["islands"]["n"]) == (0.3, False, 3)
    assert cfg["algorithm"]["CR"] == 0.2  # the experiment's (seed 004 Table II)
    assert cfg["topology"] == {
        "_target_": "isles.islands.migration.topology.Ring",
        "bidirectional": False,
        "weight": 0.5,
    }


if __name__ == "__main__":  # python -m tests.test_defaults: the repeated values by kind of file
    import collections

    KINDS = {".": "runtime", "islands": "runtime", "logger": "runtime"}
    found = duplicates()
    for kind, n in sorted(
        collections.Counter(KINDS.get(str(Path(f).parent), str(Path(f).parent)) for f, _, _ in found).items()
    ):
        print(f"{kind}: {n}")
    print(f"total: {len(found)}")
