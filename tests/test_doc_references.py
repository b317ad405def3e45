"""References in the runtime's docs and docstrings name what exists (issue 36 §4): every module of
``islands/`` is on docs/architecture.md's map, and every ``:mod:``/``:class:``/``:func:``/``:meth:``
reference to ``isles.islands.*`` in ``islands/`` resolves (no removed module, class or method)."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLE = re.compile(r":(?:mod|class|func|meth|attr|data):`~?(isles\.islands\.[\w.]+)`")


def resolves(ref: str) -> bool:
    """Whether ``ref`` (``isles.islands.a.b.C.m``) is a module, or an attribute path inside one."""
    parts = ref.split(".")
    for i in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name) and name not in getattr(obj, "__dataclass_fields__", {}):
                return False
            obj = getattr(obj, name, None)
        return True
    return False


def test_every_runtime_module_is_on_the_architecture_map():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "islands").rglob("*.py"))
        if p.name != "__init__.py" and not re.search(rf"\b{re.escape(p.name)}\b", text)
    ]
    assert missing == []


def test_the_runtime_s_docstring_references_resolve():
    stale = []
    for path in sorted((ROOT / "islands").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            stale += [f"{path.relative_to(ROOT)}:{n}: {ref}" for ref in ROLE.findall(line) if not resolves(ref)]
    assert stale == []
