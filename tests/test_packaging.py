"""The wheel ships the policies and schemas, and both install modes find them."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import middleware

REPO = Path(__file__).resolve().parents[1]
PROBE = (
    "import middleware, middleware.resources as r; "
    "print(middleware.__file__); print(r.default_policy_path()); "
    "print(r.policy_schema_path()); print(middleware.load_policy(env={}).name)"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)],
        check=True, capture_output=True,
    )  # fmt: skip
    (built,) = out.glob("chatcli_middleware-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_policies_schemas_and_py_typed(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "middleware/_data/policies/default.yaml",
        "middleware/_data/policies/baselines/chatcli.yaml",
        "middleware/_data/schemas/policy.schema.json",
        "middleware/py.typed",
    ):
        assert required in names
    sources = {f"middleware/{p.relative_to(REPO / 'middleware')}" for p in
               (REPO / "middleware").rglob("*.py")}  # fmt: skip
    assert sources <= names
    metadata = next(n for n in names if n.endswith("entry_points.txt"))
    assert "chatcli-mw = middleware.cli:main" in zipfile.ZipFile(wheel).read(metadata).decode()


@pytest.mark.slow
def test_installed_from_the_wheel_it_finds_its_data_inside_the_package(
    wheel: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True)  # fmt: skip
    package, policy, schema, name = probe.stdout.splitlines()
    assert Path(package).is_relative_to(target)
    assert Path(policy) == target / "middleware" / "_data" / "policies" / "default.yaml"
    assert Path(schema) == target / "middleware" / "_data" / "schemas" / "policy.schema.json"
    assert name == "default"


@pytest.mark.slow
def test_installed_editable_it_reads_the_source_tree(tmp_path: Path) -> None:
    if not Path(middleware.__file__).resolve().is_relative_to(REPO):
        pytest.skip("this environment has middleware installed from a wheel, not editable")
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True,
                           text=True, check=True)  # fmt: skip
    package, policy, schema, name = probe.stdout.splitlines()
    assert Path(package).resolve() == REPO / "middleware" / "__init__.py"
    assert Path(policy).resolve() == REPO / "policies" / "default.yaml"
    assert Path(schema).resolve() == REPO / "schemas" / "policy.schema.json"
    assert name == "default"
    # Nothing in site-packages shadows the package (pypa/hatch#1627).
    site = Path(sysconfig.get_paths()["purelib"])
    assert not (site / "middleware").exists()
