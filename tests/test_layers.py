"""Every module of the package belongs to a layer the import contracts (``[tool.importlinter]``) name.

``lint-imports`` checks what the core may import; this keeps a new module from standing outside every contract.
"""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _contract(contracts: list[dict], contract_id: str) -> dict:
    return next(c for c in contracts if c["id"] == contract_id)


def _modules() -> list[str]:
    package = ROOT / "pipecat_harness"
    names = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _under(module: str, roots: list[str]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def test_every_module_is_core_lab_or_server():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = config["contracts"]
    core = _contract(contracts, "core-lab")["source_modules"]
    lab = [m for m in _contract(contracts, "core-lab")["forbidden_modules"] if m.startswith("pipecat_harness")]
    servers = [m for m in _contract(contracts, "core-servers")["forbidden_modules"] if m.startswith("pipecat_harness")]
    # Package modules of packages that hold modules of two layers are checked alone; the root imports lazily.
    mixed = {"pipecat_harness", *_contract(contracts, "core-package-inits")["source_modules"]}
    unplaced = [m for m in _modules()
                if m not in mixed and not _under(m, core) and not _under(m, lab) and not _under(m, servers)]
    assert unplaced == [], f"modules in no layer of [tool.importlinter]: {unplaced}"


def test_the_server_contract_covers_the_core_controls():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = set(_contract(contracts, "core-lab")["source_modules"])
    servers_sources = set(_contract(contracts, "core-servers")["source_modules"])
    assert {"pipecat_harness.harness", "pipecat_harness.control", "pipecat_harness.tools",
            "pipecat_harness.grader.control", "pipecat_harness.business.control"} <= servers_sources
    assert servers_sources <= core


def test_the_cycle_contract_excuses_no_import():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    acyclic = _contract(contracts, "acyclic")
    assert acyclic["type"] == "acyclic_siblings" and acyclic["ancestors"] == ["pipecat_harness"]
    assert not acyclic.get("ignore_imports"), "an import cycle is excused in [tool.importlinter]"


def test_every_core_module_is_checked_for_store_imports():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = _contract(contracts, "core-lab")["source_modules"]
    stores = [m for m in _contract(contracts, "core-stores")["forbidden_modules"] if m.startswith("pipecat_harness")]
    assert stores == [m for m in _contract(contracts, "core-stores-in-mixed-packages")["forbidden_modules"]
                      if m.startswith("pipecat_harness")]
    checked = _contract(contracts, "core-stores")["source_modules"]
    alone = set(_contract(contracts, "core-stores-in-mixed-packages")["source_modules"])
    unchecked = [m for m in _modules() if _under(m, core) and m not in stores and not _under(m, checked)
                 and m not in alone]
    assert unchecked == [], f"core modules no store contract checks: {unchecked}"
    assert all(m in _modules() for m in stores), "a store module the contracts name does not exist"
