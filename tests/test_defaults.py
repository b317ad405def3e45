"""Issue 26, item 6: every default is written once, in the dataclasses (the schema of
``islands/schema.py`` for the runtime, each algorithm's ``Params`` for the algorithms); a YAML file
under ``conf/`` only chooses groups and overrides what differs (an experiment's or a paper's
settings). The golden of every composed config is computed from those dataclasses and the YAML
files' own values, never a dump."""

import dataclasses
from pathlib import Path
from typing import get_type_hints

import pytest
from omegaconf import OmegaConf

from isles.algorithms.options import ALGORITHMS
from isles.islands import schema
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


def body(path: Path) -> dict:
    """The values a YAML file writes (its defaults list and Hydra's own node left out), unresolved."""
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
    return {k: v for k, v in raw.items() if k not in ("defaults", "hydra")}


def defaults_list(path: Path) -> list:
    """The entries of a YAML file's defaults list."""
    return list(OmegaConf.to_container(OmegaConf.load(path), resolve=False).get("defaults") or [])


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


def algorithm_base(option: str) -> dict:
    """The ``algorithm`` node of option ``option`` before an experiment: the class's
    :func:`~isles.islands.schema.algorithm_node` with ``conf/algorithm/OPTION.yaml``'s values."""
    return OmegaConf.to_container(
        OmegaConf.merge(schema.algorithm_node(ALGORITHMS[option]), body(CONF_DIR / "algorithm" / f"{option}.yaml"))
    )


def experiment_chain(name: str) -> list:
    """The bodies that experiment ``name`` applies, its parents' first (recursively)."""
    out = []
    for parent in parents(name):
        out += experiment_chain(parent)
    return out + [body(CONF_DIR / "experiment" / f"{name}.yaml")]


def golden(name: str | None) -> dict:
    """The resolved config of experiment ``name`` (``None``: the default job) computed from the
    dataclasses and the YAML files' own values: the schema's defaults, each chosen group's node
    (an algorithm's from its Params), then the experiment chain's values, merged as Hydra does."""
    cfg = schema_defaults()
    cfg = OmegaConf.to_container(OmegaConf.merge(cfg, body(CONF_DIR / "config.yaml")))
    cfg["algorithm"] = algorithm_base(chosen(name, "algorithm"))
    for group in ("problem", "topology", "master"):
        option = chosen(name, group)
        cfg[group] = None if option is None else body(CONF_DIR / group / f"{option}.yaml")
    merged = OmegaConf.merge(
        cfg,
        {"logger": body(CONF_DIR / "logger" / f"{chosen(name, 'logger')}.yaml")},
        *(experiment_chain(name) if name else []),
    )
    return OmegaConf.to_container(merged, resolve=True)


def applied_default(path: Path, key: str):
    """The value that ``key`` of YAML file ``path`` would have if the file did not write it: the
    dataclass default for the runtime's files and the algorithms', and for an experiment what its
    parents and chosen algorithm give (else the schema's default); :data:`MISSING` where no
    dataclass defaults the key (a problem's or topology's constructor, a master's node)."""
    group = path.parent.name
    if path.parent == CONF_DIR:
        return get(schema_defaults(), key)
    if group in ("islands", "logger"):
        return get(schema_defaults(), f"{group}.{key}")
    if group == "algorithm":
        return get(schema.algorithm_node(ALGORITHMS[path.stem]), key)
    if group == "experiment":
        name = path.stem
        for parent in reversed(parents(name)):
            value = get(OmegaConf.to_container(OmegaConf.merge(*experiment_chain(parent))), key)
            if value is not MISSING:
                return value
        if key.startswith("algorithm."):
            return get(algorithm_base(chosen(name, "algorithm")), key.partition(".")[2])
        return get(schema_defaults(), key) if key.split(".")[0] in SECTIONS or "." not in key else MISSING
    return MISSING


def duplicates() -> list:
    """``(file, key, value)`` of every YAML value under ``conf/`` that repeats the default that
    applies there (:func:`applied_default`)."""
    out = []
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        if path.parent.name in ("hydra", "launcher", "hparams_search", "master"):  # Hydra's own; master: branch loop
            continue
        for key, value in leaves(body(path)):
            if key.endswith("_target_"):
                continue
            default = applied_default(path, key)
            if default is not MISSING and value == default:
                out.append((str(path.relative_to(CONF_DIR)), key, value))
    return out


def test_no_yaml_value_repeats_its_default():
    """A value written in a YAML file under ``conf/`` differs from the dataclass default (or the
    parent experiment's value) that applies without it: each default is written once. Today's
    ``conf/`` repeats 44 runtime and 54 algorithm defaults and 34 in the experiments."""
    found = duplicates()
    assert not found, f"{len(found)} YAML values repeat the default that applies there: {found}"


def test_duplicate_finder_sees_a_repeated_default(tmp_path, monkeypatch):
    """The finder itself: a copy of ``conf/`` whose ``de.yaml`` writes ``F: 0.5`` (DEParams' default)
    and whose experiment repeats ``islands.n: 8`` is flagged on both; ``CR: 0.3`` is not."""
    import shutil

    copy = tmp_path / "conf"
    shutil.copytree(CONF_DIR, copy)
    with open(copy / "algorithm" / "de.yaml", "a") as fh:
        fh.write("F: 0.5\nCR: 0.3\n")
    with open(copy / "experiment" / "cmepso.yaml", "a") as fh:
        fh.write("islands:\n  n: 8\n" if "islands:" not in (copy / "experiment" / "cmepso.yaml").read_text() else "")
    (copy / "experiment" / "extra.yaml").write_text("# @package _global_\nislands:\n  n: 8\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["CONF_DIR"]), "CONF_DIR", copy)
    found = {(f, k) for f, k, _ in duplicates()}
    assert ("algorithm/de.yaml", "F") in found and ("experiment/extra.yaml", "islands.n") in found
    assert ("algorithm/de.yaml", "CR") not in found


@pytest.mark.parametrize("name", [None, *EXPERIMENTS])
def test_composed_config_is_the_dataclasses_defaults_with_the_yaml_overrides(name):
    """``+experiment=NAME`` (and the default job) composes to the golden computed from the
    dataclasses and the YAML files' own values: no default comes from anywhere else, and every
    field of an algorithm's Params is in its node (recorded by MLflow, overridable without ``+``)."""
    composed = plain(make_cfg(*([f"+experiment={name}"] if name else [])))
    expected = golden(name)
    assert composed == expected
    algorithm = ALGORITHMS[chosen(name, "algorithm")]
    assert {f.name for f in dataclasses.fields(algorithm.Params)} <= set(composed["algorithm"])


def test_algorithm_option_overrides_as_typed():
    """A key that only the dataclass defaults (no YAML writes it) is overridden as users type it,
    and a field of the root's schema likewise."""
    cfg = plain(make_cfg("+experiment=de_ackley_bin", "algorithm.F=0.3", "algorithm.epoch=false", "islands.n=3"))
    assert (cfg["algorithm"]["F"], cfg["algorithm"]["epoch"], cfg["islands"]["n"]) == (0.3, False, 3)
    assert cfg["algorithm"]["CR"] == 0.2  # the experiment's (seed 004 Table II)
