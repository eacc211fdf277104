"""The wheel ships the policies and schemas, and both install modes find them.

Each install goes into a fresh virtual environment created without pip. A ``.pth`` file
makes this test environment's packages (hatchling, pluggy, PyYAML...) importable *after* the
new environment's own site-packages, so nothing is downloaded and what the new environment
installed always comes first. (``--system-site-packages`` would expose the base
interpreter's packages, not this environment's.) pip itself runs from this environment,
aimed at the new one with ``--python``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import metadata
from pathlib import Path

import pytest
from locations import REPO

import middleware
from middleware.proxy.console.pages import STATIC

PROBE = (
    "import middleware, middleware.policy.resources as r; "
    "print(middleware.__file__); print(r.default_policy_path()); "
    "print(r.policy_schema_path()); print(middleware.load_policy(env={}).name)"
)


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done.stdout


def fresh_venv(root: Path) -> tuple[Path, Path]:
    """A new virtual environment: its python and its site-packages."""
    _run(sys.executable, "-m", "venv", "--without-pip", root)
    python = root / "bin" / "python"
    site = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    here = sysconfig.get_paths()["purelib"]
    (site / "zz_test_environment.pth").write_text(f"{here}\n", encoding="utf-8")
    return python, site


def pip_install(python: Path, *args: str | Path) -> None:
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        *args,
    )


def probe(python: Path, cwd: Path) -> tuple[Path, Path, Path, str]:
    package, policy, schema, name = _run(python, "-c", PROBE, cwd=cwd).splitlines()
    return Path(package), Path(policy), Path(schema), name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--quiet",
        "-w",
        out,
        REPO,
    )
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
        # the console's page, served from the package (no build step, nothing fetched)
        *(f"middleware/proxy/console/static/{name}" for name in STATIC),
    ):
        assert required in names
    sources = {
        f"middleware/{p.relative_to(REPO / 'middleware')}"
        for p in (REPO / "middleware").rglob("*.py")
    }
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
    cleaned = _run(
        script, "process", REPO / "examples" / "anthropic-interrupted.json", cwd=tmp_path
    )
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


#: A ``pip install`` in the docs: its options and target (quoted or not).
PIP_INSTALL = re.compile(r"pip install ((?:(?:-e|--editable) )?(?:'[^']*'|\"[^\"]*\"|[^\s`']+))")
#: How the docs name a wheel built from the checkout (``pip wheel --no-deps -w dist .``).
WHEEL_PLACEHOLDER = "dist/chatcli_middleware-VERSION-py3-none-any.whl"


def documented_installs() -> dict[str, list[str]]:
    """Every ``pip install`` of this project that README.md and docs/ give, by where."""
    found: dict[str, list[str]] = {}
    for page in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        for match in PIP_INSTALL.finditer(page.read_text(encoding="utf-8")):
            words = match.group(1).split()
            target = words[-1].strip("'\"")
            if target.split("[")[0] in (".", WHEEL_PLACEHOLDER, "chatcli-middleware"):
                found.setdefault(" ".join([*words[:-1], target]), []).append(page.name)
    return found


@pytest.mark.slow
def test_every_documented_install_works_without_an_index(wheel: Path) -> None:
    """The package is on no index (issue 38, item 4): each install the docs give is from
    the checkout or a wheel built from it, names extras that exist, and pip resolves it
    with no index at all, as a user's machine with nothing installed would."""
    extras = metadata("chatcli-middleware").get_all("Provides-Extra") or []
    installs = documented_installs()
    assert any(i.startswith("-e .") for i in installs) and any(
        WHEEL_PLACEHOLDER in i for i in installs
    )
    for install, pages in installs.items():
        named = install.split("[", 1)[1].rstrip("]").split(",") if "[" in install else []
        assert set(named) <= set(extras), f"{pages}: {install} names an extra that does not exist"
        args = install.replace(WHEEL_PLACEHOLDER, str(wheel)).split()
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
             "--no-index", "--no-deps", "--no-build-isolation", "--quiet", *args],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{pages}: pip install {install}: {done.stderr}"


def test_ci_runs_the_readme_test_command_exactly() -> None:
    """What CI runs, and times, is what a newcomer following README.md runs."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = readme.split("\nRun the tests", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert command.strip() in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
