"""The tree's promises: imports point one way (lab -> nameserver, chaos; never back, and never
between chaos and nameserver), no import cycle between modules (type-only imports aside), and no
module of one role at lab/'s top level."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nameserver", "chaos", "lab")
SHARED_AT_LAB_TOP = {"lab.cli", "lab.config", "lab.events"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if {"exercises", "solutions"} & set(path.parts):
                continue  # workshop files for learners, loaded by path
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in it but under `if TYPE_CHECKING:`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


# What each package may not import: the lab uses both others, and they use neither (DESIGN.md §3).
FORBIDDEN = {"nameserver": ("lab", "chaos"), "chaos": ("lab", "nameserver")}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_nameserver_and_chaos_import_neither_the_lab_nor_each_other():
    wrong = {name: sorted(d for d in deps if any(_in(d, p) for p in FORBIDDEN[package]))
             for name, deps in graph().items() for package in FORBIDDEN if _in(name, package)}
    assert {name: deps for name, deps in wrong.items() if deps} == {}


def test_there_is_no_import_cycle():
    edges = graph()
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_lab_top_level_holds_only_what_every_part_shares():
    top = {name for name in modules() if name.startswith("lab") and name.count(".") <= 1
           and not (ROOT / name.replace(".", "/")).is_dir()}
    assert top == SHARED_AT_LAB_TOP


# The simulator's aggregation of idle traffic lives in lab/sim (docs/rocketmq-map.md, "Simulation-only
# code inside role modules"); a NameServer module reads as RocketMQ's. Nothing is left (issue 35): the
# list may never grow again.
SIMULATION_WORDS = ("coast", "renew_peer_call", "call_renewer", "query_coaster", "hasattr(stream")
SIMULATION_LEFT: set[str] = set()


def test_nameserver_has_no_simulation_only_code_but_what_is_listed_as_left():
    found = {str(path.relative_to(ROOT)) for path in (ROOT / "nameserver").rglob("*.py")
             if any(word in path.read_text().lower() for word in SIMULATION_WORDS)}
    assert found - SIMULATION_LEFT == set(), "simulation-only code in a NameServer module: it belongs in lab/sim"
    assert SIMULATION_LEFT - found == set(), "gone from there: take it off SIMULATION_LEFT"
