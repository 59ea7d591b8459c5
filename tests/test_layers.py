"""The packages' layers (DESIGN.md, "Layout"): imports flow one way.

    app -> everything;  problems -> {trajopt, dynamics};  solvers -> trajopt;
    dynamics -> contact;  contact and trajopt -> none of ours;  nothing below app imports app.

Every ``import`` of every module of each package (at any depth: inside functions too, where a
late import would hide an arrow) is read from its syntax tree, not by importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OURS = {"app", "problems", "solvers", "trajopt", "dynamics", "contact"}
#: what each package may import of ours (besides itself)
ALLOWED = {
    "app": OURS,
    "problems": {"trajopt", "dynamics"},
    "solvers": {"trajopt"},
    "dynamics": {"contact"},
    "contact": set(),
    "trajopt": set(),
}
#: arrows that DESIGN.md does not draw but the code still has, each with its reason; listed so that no
#: new one can appear unnoticed (and test_known_exceptions_still_exist asks to drop a fixed one)
KNOWN = {
    # "auto" smoothing: the schedule kappa = weight x hover distance lives with the relaxed contact model
    ("solvers/continuation.py", "contact"),
    # catapult-design's fixed-design baseline solves the plain catapult with its own default method
    ("problems/design.py", "solvers"),
}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """``(line, top-level package)`` of each absolute import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def upward_imports(package: str) -> list[str]:
    """``file:line imports X`` for each import of ours that ``package`` may not make."""
    bad = []
    for path in modules(package):
        rel = path.relative_to(REPO).as_posix()
        for line, top in imports_of(path):
            if top in OURS and top != package and top not in ALLOWED[package] and (rel, top) not in KNOWN:
                bad.append(f"{rel}:{line} imports {top}")
    return bad


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_import_runs_back_up_the_layers(package):
    assert modules(package), f"no modules found in {package}/"
    assert upward_imports(package) == []


def test_the_command_line_is_its_own_package():
    assert not (REPO / "trajopt" / "cli.py").exists()
    assert (REPO / "app" / "cli.py").is_file() and (REPO / "app" / "__main__.py").is_file()
    text = (REPO / "pyproject.toml").read_text()
    assert 'trajopt = "app.cli:main"' in text
    assert '"app"' in text.split("wheel.packages", 1)[1].splitlines()[0]


def test_known_exceptions_still_exist():
    """An arrow in KNOWN that is gone from the code must leave the list too (it would hide a new one)."""
    for rel, top in KNOWN:
        assert top in {t for _, t in imports_of(REPO / rel)}, f"{rel} no longer imports {top}: drop it from KNOWN"


def test_the_check_sees_imports_inside_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import numpy\n\ndef f():\n    from problems import load\n    import solvers.ddp\n")
    assert imports_of(f) == [(1, "numpy"), (4, "problems"), (5, "solvers")]


def internals_read(path: Path) -> list[str]:
    """``line: expression`` for each read of a simulator's internals in ``path``: its contact model
    (``.contact_model``), a workspace's contact state (``data.contact``, ``....contact.lam``) or a private
    attribute of another object (``sim._x``; ``self._x`` is the module's own)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Attribute):
            continue
        a, v = node.attr, node.value
        own = isinstance(v, ast.Name) and v.id in ("self", "cls")
        if (a == "contact_model"
                or (a.startswith("_") and not a.startswith("__") and not own)
                or (a == "contact" and isinstance(v, ast.Name) and "data" in v.id)
                or (isinstance(v, ast.Attribute) and v.attr == "contact" and not own)):
            bad.append(f"{node.lineno}: {ast.unparse(node)}")
    return bad


@pytest.mark.parametrize("path", modules("problems"), ids=lambda p: p.name)
def test_problems_read_the_simulator_through_its_public_api(path):
    """Problems use Simulator.contact_report / contact_jacobian / contact_rows / planar /
    collision_geometry, not the contact model's or a workspace's internals."""
    assert internals_read(path) == []
