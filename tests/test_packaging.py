"""The wheel ships the policies and schemas, and both install modes find them.

Each install goes into a fresh virtual environment created without pip. A ``.pth`` file
makes this test environment's packages (hatchling, pluggy, PyYAML...) importable *after* the
new environment's own site-packages, so nothing is downloaded and what the new environment
installed always comes first. (``--system-site-packages`` would expose the base
interpreter's packages, not this environment's.) pip itself runs from this environment,
aimed at the new one with ``--python``.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from locations import REPO

import middleware

PROBE = (
    "import middleware, middleware.policy.resources as r; "
    "print(middleware.__file__); print(r.default_policy_path()); "
    "print(r.policy_schema_path()); print(middleware.load_policy(env={}).name)"
)


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


def fresh_venv(root: Path) -> tuple[Path, Path]:
    """A new virtual environment: its python and its site-packages."""
    _run(sys.executable, "-m", "venv", "--without-pip", root)
    python = root / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .strip())  # fmt: skip
    here = sysconfig.get_paths()["purelib"]
    (site / "zz_test_environment.pth").write_text(f"{here}\n", encoding="utf-8")
    return python, site


def pip_install(python: Path, *args: str | Path) -> None:
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--no-index", *args)  # fmt: skip


def probe(python: Path, cwd: Path) -> tuple[Path, Path, Path, str]:
    package, policy, schema, name = _run(python, "-c", PROBE, cwd=cwd).splitlines()
    return Path(package), Path(policy), Path(schema), name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "-w", out, REPO)  # fmt: skip
    (built,) = out.glob("chatcli_middleware-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_carries_policies_schemas_and_py_typed(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "middleware/_data/policies/default.yaml",
        "middleware/_data/policies/baselines/chatcli.yaml",
        *(f"middleware/_data/policies/presets/{name}.yaml" for name in middleware.preset_names()),
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
    python, site = fresh_venv(tmp_path / "venv")
    pip_install(python, wheel)
    package, policy, schema, name = probe(python, cwd=tmp_path)
    assert package == site / "middleware" / "__init__.py"
    assert policy == site / "middleware" / "_data" / "policies" / "default.yaml"
    assert schema == site / "middleware" / "_data" / "schemas" / "policy.schema.json"
    assert name == "default"
    # The console script works from anywhere, and so does python -m middleware.
    script = tmp_path / "venv" / "bin" / "chatcli-mw"
    cleaned = _run(script, "process", REPO / "examples" / "anthropic-interrupted.json",
                   cwd=tmp_path)  # fmt: skip
    assert cleaned.startswith("[")
    assert _run(python, "-m", "middleware", "--version", cwd=tmp_path).startswith("chatcli-mw ")
    # The presets resolve inside the installed package, extends included.
    config = _run(script, "config", "--policy", "preset:pi", cwd=tmp_path)
    assert str(site / "middleware" / "_data" / "policies" / "presets" / "pi.yaml") in config


@pytest.mark.slow
def test_installed_editable_it_reads_the_source_tree(tmp_path: Path) -> None:
    python, site = fresh_venv(tmp_path / "venv")
    pip_install(python, "--editable", REPO)
    package, policy, schema, name = probe(python, cwd=tmp_path)
    assert package.resolve() == REPO / "middleware" / "__init__.py"
    assert policy.resolve() == REPO / "policies" / "default.yaml"
    assert schema.resolve() == REPO / "schemas" / "policy.schema.json"
    assert name == "default"
    # The data folders are not force-included into the editable wheel, so nothing named
    # middleware sits in site-packages beside the source tree (pypa/hatch#1627).
    assert not (site / "middleware").exists()
    (pth,) = site.glob("_chatcli_middleware*.pth")
    assert Path(pth.read_text(encoding="utf-8").strip()).resolve() == REPO
