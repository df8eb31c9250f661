"""The repository's layout: five distributions, each a folder whose files sit at their import paths, and each
importing only the distributions below it (sdk <- server <- export <- research <- cli)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESEARCH = {"data", "metrics", "baselines", "evaluation", "attacks", "population", "utility", "emulator",
            "jvm_device", "reporting", "plots", "training"}
# folder -> the pategail subpackages its code may import
ALLOWED = {
    "sdk": {"sdk"},
    "server": {"sdk", "server"},
    "export": {"sdk", "server", "export"},
    "research": {"sdk", "server", "export"} | RESEARCH,
    "cli": {"sdk", "server", "export", "cli"} | RESEARCH,
}


def _pategail_imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            if name == "pategail" or name.startswith("pategail."):
                yield node.lineno, name


def _sources(folder: str):
    return sorted(p for p in (ROOT / folder / "pategail").rglob("*.py") if "egg-info" not in str(p))


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_a_distribution_imports_only_those_below_it(folder):
    bad = []
    for path in _sources(folder):
        for line, name in _pategail_imports(path):
            part = name.split(".")[1] if "." in name else ""
            if part not in ALLOWED[folder]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_every_module_has_one_home():
    """pategail is a namespace package: no folder may claim it with an __init__.py, and no import path may be
    defined in two folders."""
    seen: dict[str, str] = {}
    for folder in ALLOWED:
        assert not (ROOT / folder / "pategail" / "__init__.py").exists(), folder
        for path in _sources(folder):
            module = ".".join(path.relative_to(ROOT / folder).with_suffix("").parts)
            assert module not in seen, f"{module} is in {seen[module]} and {folder}"
            seen[module] = folder
    assert {m.split(".")[1] for m in seen if m.count(".") >= 1} >= {"sdk", "server", "export", "cli", "data"}
    assert not (ROOT / "pategail").exists(), "code belongs in one of the distribution folders"
