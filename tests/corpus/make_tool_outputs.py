"""Refresh ``tests/corpus/tool-outputs/``: what real tools print, with their error lines.

Each case sets up a throwaway project in a temporary folder, runs the real tool on it
(pytest, unittest, mypy, ruff, tsc, gcc and make, cargo, pip, npm, python, javac and java,
git) and saves what it printed, stdout and stderr together as an agent's shell tool reads
them, as ``NAME.txt``. Beside it ``NAME.labels.json`` lists the 1-based numbers of the lines
that report an error (and of the warning lines), found from what the case knows it broke:
the tests it made fail, the file it edited, the message it raised. The labels never come
from the outline's classifier: the corpus grades it, so it must not share its code.

Run by hand (the tests only read the files); needs the tools above and, for tsc, the npm
registry once:

    .venv/bin/python tests/corpus/make_tool_outputs.py [NAME ...]

The temporary folder is written ``/tmp/project`` in the saved text and this machine's
Python and home folders are replaced too, so the outputs hold no private path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent / "tool-outputs"
PROJECT = "/tmp/project"
ENV = {
    **os.environ,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "COLUMNS": "100",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "CARGO_TERM_COLOR": "never",
    "npm_config_color": "false",
    "npm_config_update_notifier": "false",
}
for _name in ("PYTEST_ADDOPTS", "PYTHONPATH", "VIRTUAL_ENV"):
    ENV.pop(_name, None)


@dataclass
class Output:
    """What one case saved: the text and the lines it knows report an error or warning."""

    command: str
    text: str
    errors: list[int] = field(default_factory=list)
    warnings: list[int] = field(default_factory=list)


def run(args: list[str], cwd: Path, *, env: dict[str, str] | None = None) -> str:
    """The tool's stdout and stderr, interleaved as a shell's ``2>&1`` gives them."""
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env or ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        timeout=600,
        check=False,
    )
    return done.stdout


def write(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def numbers(text: str, keep: Callable[[int, str], bool]) -> list[int]:
    """1-based numbers of the lines ``keep(number, line)`` accepts."""
    return [n for n, line in enumerate(text.splitlines(), 1) if keep(n, line)]


def containing(text: str, needles: Iterable[str]) -> list[int]:
    wanted = tuple(needles)
    return numbers(text, lambda _, line: any(needle in line for needle in wanted))


def sections(text: str, header: re.Pattern[str]) -> dict[str, range]:
    """Line ranges of the report sections ``header`` opens (its group 1 names one)."""
    lines = text.splitlines()
    starts = [(n, m.group(1)) for n, line in enumerate(lines, 1) if (m := header.match(line))]
    found = {}
    for (n, name), following in zip(starts, [*starts[1:], (len(lines) + 1, "")], strict=True):
        found[name] = range(n, following[0])
    return found


# ---------------------------------------------------------------- pytest, unittest

VERBS = ("parse", "render", "merge", "split", "load", "save", "encode", "decode", "validate",
         "normalise")  # fmt: skip
NOUNS = ("header", "record", "batch", "index", "column", "schema", "token", "cursor", "payload",
         "footer")  # fmt: skip
VARIANTS = ("empty", "unicode", "large", "nested")


def checksum(data: bytes) -> int:
    return sum(data) % 10_007


def pytest_verbose(root: Path) -> Output:
    """pytest -v over 400 tests, every 37th of them failing on a wrong checksum."""
    failing: dict[str, tuple[str, int]] = {}  # test name -> (its file, its assert's line)
    index = 0
    for variant in VARIANTS:
        body = ["from records import checksum, sample\n"]
        for verb in VERBS:
            for noun in NOUNS:
                name = f"test_{verb}_{noun}_{variant}"
                right = checksum(f"{verb}:{noun}:{variant}".encode())
                wrong = index % 37 == 36
                body.append(
                    f"\n\ndef {name}():\n    data = sample({verb!r}, {noun!r}, {variant!r})\n"
                )
                body.append(f"    assert checksum(data) == {right + 1 if wrong else right}\n")
                if wrong:
                    failing[name] = (f"tests/test_{variant}.py", len("".join(body).splitlines()))
                index += 1
        write(root, {f"tests/test_{variant}.py": "".join(body)})
    write(
        root,
        {
            "records.py": "def sample(*parts):\n    return ':'.join(parts).encode()\n\n\n"
            "def checksum(data):\n    return sum(data) % 10_007\n",
            "pytest.ini": "[pytest]\npythonpath = .\n",
        },
    )
    command = "python -m pytest -v -p no:cacheprovider tests"
    text = run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--color=no",
                "-p", "no:hypothesispytest", "tests"], root)  # fmt: skip
    text = normalise(text, root)
    failure = sections(text, re.compile(r"^_{3,} (test_\w+) _{3,}$"))
    errors = numbers(
        text,
        lambda n, line: any(
            f"::{name} FAILED" in line
            or line.startswith(f"FAILED tests/test_{name.rsplit('_', 1)[1]}.py::{name}")
            or (
                n in failure.get(name, ())
                and (line.startswith("E ") or line == f"{file}:{at}: AssertionError")
            )
            for name, (file, at) in failing.items()
        ),
    )
    return Output(command, text, errors)


def pytest_long_traceback(root: Path) -> Output:
    """pytest --tb=long: one failure twelve calls deep, among 80 passing tests and a
    deprecation warning."""
    stages = {}
    for i in range(12):
        follow = f"stage_{i + 1:02d}.run(rows[1:] + [row * 2])" if i < 11 else "check(rows)"
        stages[f"pipeline/stage_{i:02d}.py"] = (
            f'"""Stage {i} of the import pipeline."""\n'
            + (
                f"from pipeline import stage_{i + 1:02d}\n"
                if i < 11
                else "from pipeline.checks import check\n"
            )
            + f"\n\ndef run(rows):\n    row = rows[0] + {i}\n    total = sum(rows)\n"
            f"    if total < 0:\n        return []\n    return {follow}\n"
        )
    stages["pipeline/__init__.py"] = ""
    stages["pipeline/checks.py"] = (
        "def check(rows):\n    for position, row in enumerate(rows):\n"
        "        if row > 4_000:\n"
        "            raise ValueError(f'row {position} out of range: {row} > 4000 (stage limit)')\n"
        "    return rows\n"
    )
    tests = ["import warnings\n\nfrom pipeline import stage_00\n"]
    for i in range(80):
        tests.append(f"\n\ndef test_small_batch_{i:02d}():\n    assert stage_00.run([{i}, 1, 2])\n")
    tests.append("\n\ndef test_large_batch():\n    assert stage_00.run([300, 500, 700])\n")
    tests.append(
        "\n\ndef test_legacy_api():\n    warnings.warn('run_all() is deprecated, use "
        "run()', DeprecationWarning)\n"
    )
    write(root, {**stages, "tests/test_pipeline.py": "".join(tests),
                 "pytest.ini": "[pytest]\npythonpath = .\n"})  # fmt: skip
    command = "python -m pytest --tb=long -p no:cacheprovider tests"
    text = run([sys.executable, "-m", "pytest", "--tb=long", "-p", "no:cacheprovider",
                "--color=no", "-p", "no:hypothesispytest", "tests"], root)  # fmt: skip
    text = normalise(text, root)
    errors = numbers(
        text,
        lambda _, line: (
            (line.startswith("E ") and "out of range" in line)
            or line == "pipeline/checks.py:4: ValueError"
            or line.startswith("FAILED tests/test_pipeline.py::test_large_batch")
        ),
    )
    warnings = containing(text, ["DeprecationWarning: run_all() is deprecated"])
    return Output(command, text, errors, warnings)


def unittest_verbose(root: Path) -> Output:
    """python -m unittest -v: 160 tests, three failures and two errors."""
    broken = {17: "fail", 58: "error", 91: "fail", 120: "error", 143: "fail"}
    body = [
        "import unittest\n\nfrom inventory import Stock\n\n\nclass StockTest(unittest.TestCase):\n"
    ]
    messages = {}
    for i in range(160):
        name = f"test_{VERBS[i % 10]}_{NOUNS[i // 10 % 10]}_{i:03d}"
        kind = broken.get(i)
        if kind == "fail":
            messages[name] = f"stock of item {i} is {i + 1}, expected {i}"
            check = f"self.assertEqual(Stock({i}).count() + 1, {i}, {messages[name]!r})"
        elif kind == "error":
            messages[name] = f"'warehouse_{i}'"
            check = f"Stock({i}).locate('warehouse_{i}')"
        else:
            check = f"self.assertEqual(Stock({i}).count(), {i})"
        body.append(f"    def {name}(self):\n        {check}\n\n")
    write(
        root,
        {
            "test_inventory.py": "".join(body)
            + "\nif __name__ == '__main__':\n    unittest.main()\n",
            "inventory.py": "class Stock:\n    def __init__(self, n):\n        self.n = n\n\n"
            "    def count(self):\n        return self.n\n\n"
            "    def locate(self, where):\n        return {'main': 0}[where]\n",
        },
    )
    text = normalise(run([sys.executable, "-m", "unittest", "-v", "test_inventory"], root), root)
    errors = numbers(
        text,
        lambda _, line: any(
            (line.startswith(f"{name} ") and line.endswith((" FAIL", " ERROR")))
            or line.startswith((f"FAIL: {name} ", f"ERROR: {name} "))
            or (line.startswith(("AssertionError: ", "KeyError: ")) and message in line)
            for name, message in messages.items()
        ),
    )
    return Output("python -m unittest -v test_inventory", text, errors)


# ---------------------------------------------------------------- type checkers, linters

MODULE = '''"""Accounts module {i}."""

from dataclasses import dataclass


@dataclass
class Account{i}:
    owner: str
    balance: int = 0

    def deposit(self, amount: int) -> int:
        self.balance += amount
        return self.balance

    def label(self) -> str:
        return f"{{self.owner}}: {{self.balance}}"


def total_{i}(accounts: list[Account{i}]) -> int:
    return sum(a.balance for a in accounts)


def owners_{i}(accounts: list[Account{i}]) -> list[str]:
    return [a.owner for a in accounts]
'''


def mypy_errors(root: Path) -> Output:
    """mypy --strict --pretty on 90 modules, 45 of them with one type error each."""
    broken = {}
    for i in range(90):
        source = MODULE.format(i=i)
        if i % 2 == 1:
            source = source.replace("return self.balance\n", "return str(self.balance)\n", 1)
            broken[f"bank/accounts_{i:02d}.py"] = (
                source.splitlines().index("        return str(self.balance)") + 1
            )
        write(root, {f"bank/accounts_{i:02d}.py": source})
    write(root, {"bank/__init__.py": ""})
    command = "mypy --pretty --no-color-output --strict bank"
    text = run([sys.executable, "-m", "mypy", "--pretty", "--no-color-output", "--strict",
                "--cache-dir=/dev/null", "bank"], root)  # fmt: skip
    text = normalise(text, root)
    errors = numbers(
        text,
        lambda _, line: (
            any(
                line.startswith(f"{path}:{at}:") and ": error:" in line
                for path, at in broken.items()
            )
            or line.startswith("Found ")
        ),
    )
    return Output(command, text, errors)


def ruff_check(root: Path) -> Output:
    """ruff check (full output) on 60 modules with an issue in every third."""
    injected = []
    for i in range(60):
        source = MODULE.format(i=i)
        if i % 3 == 0:
            source = source.replace("from dataclasses", "import os\nfrom dataclasses", 1)
            injected.append((f"bank/accounts_{i:02d}.py", "F401"))
        elif i % 3 == 1 and i % 2 == 0:
            source = source.replace("return sum(", "return undefined_rate * sum(", 1)
            injected.append((f"bank/accounts_{i:02d}.py", "F821"))
        write(root, {f"bank/accounts_{i:02d}.py": source})
    write(root, {"bank/__init__.py": ""})
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    command = "ruff check --no-cache --select F,E bank"
    text = normalise(run([ruff, "check", "--no-cache", "--select", "F,E", "bank"], root), root)
    lines = text.splitlines()
    # Full output: the code and message, then " --> path:line:col" on the next line.
    errors = [
        n
        for n, line in enumerate(lines, 1)
        if n < len(lines)
        and any(
            line.startswith(code) and lines[n].strip().startswith(f"--> {path}:")
            for path, code in injected
        )
    ]
    return Output(command, text, errors)


def tsc_build(root: Path) -> Output:
    """tsc --build --verbose of a monorepo of six projects that list their files, the
    fourth (api) passing a string where a number is expected."""
    packages = ("core", "utils", "models", "api", "app", "cli")
    files: dict[str, str] = {}
    for k, package in enumerate(packages):
        for i in range(12):
            files[f"packages/{package}/src/{package}_{i:02d}.ts"] = (
                f"export interface {package.title()}{i} {{ id: number; name: string }}\n"
                f"export function load{i}(items: {package.title()}{i}[]): number {{\n"
                f"  return items.reduce((sum, item) => sum + item.id, {i});\n}}\n"
            )
        references = [{"path": f"../{packages[k - 1]}"}] if k else []
        files[f"packages/{package}/tsconfig.json"] = json.dumps({
            "compilerOptions": {"composite": True, "strict": True, "target": "es2022",
                                "module": "commonjs", "outDir": "dist", "rootDir": "src",
                                "lib": ["es2022", "dom"], "listFiles": True},
            "include": ["src"], "references": references}, indent=2)  # fmt: skip
    router = ["import { load7, Api7 } from './api_07';\n\n"]
    router += [f"export const route{i} = '/items/{i}';\n" for i in range(38)]
    router += [
        "\nexport function resolve(path: string): number {\n",
        "  const items: Api7[] = [{ id: path, name: 'x' }];\n",
        "  return load7(items) + path.length;\n}\n",
    ]
    files["packages/api/src/router.ts"] = "".join(router)
    files["tsconfig.json"] = json.dumps(
        {"files": [], "references": [{"path": f"packages/{p}"} for p in packages]}, indent=2
    )
    files["package.json"] = json.dumps({"name": "shop", "version": "1.0.0", "private": True})
    write(root, files)
    run(["npm", "install", "--no-audit", "--no-fund", "typescript@5"], root)
    tsc = str(root / "node_modules" / ".bin" / "tsc")
    command = "npx tsc --build --verbose --pretty false"
    text = normalise(run([tsc, "--build", "--verbose", "--pretty", "false"], root), root)
    errors = numbers(
        text, lambda _, line: line.startswith("packages/api/src/router.ts(") and "error TS" in line
    )
    return Output(command, text, errors)


# ---------------------------------------------------------------- compilers


def gcc_make(root: Path) -> Output:
    """make -k with gcc -Wall -Wextra: 70 files, warnings in 24, an error in one."""
    warned, broken = [], "src/codec_37.c"
    for i in range(70):
        lines = [
            f'#include "codec.h"\n\nint codec_{i}_encode(const int *data, int n)\n{{\n',
            "    int sum = 0;\n",
        ]
        if i % 3 == 0:
            lines.append(f"    int scratch_{i};\n")
            warned.append(f"src/codec_{i:02d}.c")
        lines.append("    for (int k = 0; k < n; k++)\n        sum += data[k];\n")
        if f"src/codec_{i:02d}.c" == broken:
            lines.append("    sum += checksum_table[n];\n")
        lines.append("    return sum;\n}\n")
        write(root, {f"src/codec_{i:02d}.c": "".join(lines)})
    objects = " ".join(f"build/codec_{i:02d}.o" for i in range(70))
    write(
        root,
        {
            "src/codec.h": "#pragma once\n",
            "Makefile": f"CFLAGS = -Wall -Wextra -O2 -Isrc\n\nall: libcodec.a\n\n"
            f"libcodec.a: {objects}\n\tar rcs $@ $^\n\n"
            "build/%.o: src/%.c\n\t@mkdir -p build\n\t$(CC) $(CFLAGS) -c $< -o $@\n",
        },
    )
    text = normalise(run(["make", "-k", "-j1"], root, env={**ENV, "CC": "gcc"}), root)
    errors = numbers(
        text,
        lambda _, line: (
            (line.startswith(f"{broken}:") and "error" in line)
            or (line.startswith("make: ***") and "codec_37.o" in line)
        ),
    )
    warnings = numbers(
        text,
        lambda _, line: any(
            line.startswith(f"{path}:")
            and f"scratch_{int(path[-4:-2])}" in line
            and "warning" in line
            for path in warned
        ),
    )
    return Output("make -k -j1", text, errors, warnings)


def cargo_workspace(root: Path) -> Output:
    """cargo build -v --keep-going over a workspace of 40 local crates: unused variables
    in some, a type mismatch in one."""
    members, broken = [], "crate_19"
    warned = []
    for i in range(40):
        name = f"crate_{i:02d}"
        members.append(f'"crates/{name}"')
        deps = f'crate_{i - 1:02d} = {{ path = "../crate_{i - 1:02d}" }}\n' if i % 5 else ""
        body = f"pub fn value_{i}(x: u64) -> u64 {{\n"
        if i % 7 == 3:
            body += f"    let unused_{i} = x * 2;\n"
            warned.append(name)
        if name == broken:
            body += '    let label: u64 = "nineteen";\n    x + label\n}\n'
        else:
            body += f"    x + {i}\n}}\n"
        write(
            root,
            {
                f"crates/{name}/Cargo.toml": f'[package]\nname = "{name}"\nversion = "0.1.{i}"\n'
                f'edition = "2021"\n\n[dependencies]\n{deps}',
                f"crates/{name}/src/lib.rs": body,
            },
        )
    write(root, {"Cargo.toml": f'[workspace]\nresolver = "2"\nmembers = [{", ".join(members)}]\n'})
    command = "cargo build -v --keep-going -j1 --offline"
    text = normalise(run(["cargo", "build", "-v", "--keep-going", "-j1", "--offline"], root), root)
    lines = text.splitlines()
    errors = numbers(
        text,
        lambda n, line: (
            (line.startswith("error[E0308]") and f"crates/{broken}/" in lines[n])
            or line.startswith(f"error: could not compile `{broken}`")
        ),
    )
    warnings = numbers(
        text,
        lambda n, line: (
            line.startswith("warning: unused variable")
            and any(f"crates/{name}/" in lines[n] for name in warned)
        ),
    )
    return Output(command, text, errors, warnings)


def maven_compile(root: Path) -> Output:
    """mvn -o compile of 40 classes, one with a type error, some using a deprecated API."""
    package = "src/main/java/com/example/shop"
    for i in range(40):
        extra = "        Integer boxed = new Integer(value);\n" if i % 6 == 0 else ""
        if i == 27:
            extra += '        int count = "twenty-seven";\n'
        write(root, {f"{package}/Service{i:02d}.java": (
            f"package com.example.shop;\n\npublic class Service{i:02d} {{\n"
            f"    public int price(int value) {{\n{extra}        return value + {i};\n    }}\n}}\n"
        )})  # fmt: skip
    write(
        root,
        {
            "pom.xml": """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId><artifactId>shop</artifactId><version>1.0.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId>
    <version>3.3.1</version>
  </plugin><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId>
    <version>3.13.0</version>
    <configuration><showWarnings>true</showWarnings><showDeprecation>true</showDeprecation>
    <compilerArgs><arg>-Xlint:all</arg></compilerArgs></configuration>
  </plugin></plugins></build>
</project>
"""
        },
    )
    command = "mvn -o -B -e compile"
    text = normalise(run(["mvn", "-o", "-B", "-e", "compile"], root), root)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    errors = containing(
        text, ["Service27.java", "BUILD FAILURE", "Failed to execute goal", "Caused by: "]
    )
    warnings = numbers(
        text,
        lambda _, line: (
            line.startswith("[WARNING]")
            and any(f"Service{i:02d}.java" in line for i in range(0, 40, 6))
        ),
    )
    return Output(command, text, errors, warnings)


# ---------------------------------------------------------------- package managers


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> None:
    """A minimal pure-Python wheel: enough for pip to resolve and install it."""
    dist = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": metadata,
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: handmade\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, content in files.items():
            wheel.writestr(path, content)


def pip_conflict(root: Path) -> Output:
    """pip install -v from a local wheel folder: 80 plugins need ``corelib<2``, the app
    needs ``corelib>=2``; no version satisfies both."""
    wheels = root / "wheels"
    wheels.mkdir()
    for version in ("1.0.0", "1.4.2", "1.9.0", "2.0.0", "2.1.3"):
        _wheel(wheels, "corelib", version, [])
    plugins = [f"plugin_{i:02d}" for i in range(80)]
    for i, plugin in enumerate(plugins):
        for version in ("0.9.0", "1.0.0"):
            _wheel(wheels, plugin, version, ["corelib>=1.0"] if i != 47 else ["corelib<2"])
    _wheel(wheels, "shopapp", "3.0.0", [*plugins, "corelib>=2"])
    run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], root)
    pip = [sys.executable, "-m", "pip", "--isolated", "--python", str(root / "venv/bin/python")]
    command = "pip install -v --no-index --find-links wheels shopapp"
    text = run([*pip, "install", "-v", "--no-index", "--find-links", "wheels", "shopapp"], root)
    text = normalise(text, root)
    errors = numbers(
        text,
        lambda _, line: (
            line.startswith("ERROR: ") or ("plugin-47" in line.lower() and "corelib<2" in line)
        ),
    )
    return Output(command, text, errors)


def npm_install_script(root: Path) -> Output:
    """npm install --loglevel silly --offline of 30 local packages, one of whose
    install scripts fails."""
    deps = {}
    for i in range(30):
        name = f"widget-{i:02d}"
        scripts = {"install": "node -e \"console.error('native build failed: missing "
                              "libwidget.so'); process.exit(3)\""} if i == 21 else {}  # fmt: skip
        write(
            root,
            {
                f"packages/{name}/package.json": json.dumps(
                    {"name": name, "version": f"1.{i}.0", "main": "index.js", "scripts": scripts}
                )
            },
        )
        write(root, {f"packages/{name}/index.js": f"module.exports = {i};\n"})
        deps[name] = f"file:packages/{name}"
    write(
        root,
        {
            "package.json": json.dumps(
                {"name": "storefront", "version": "1.0.0", "private": True, "dependencies": deps}
            )
        },
    )
    command = "npm install --loglevel silly --offline --no-audit --no-fund --foreground-scripts"
    env = {**ENV, "npm_config_cache": str(root / ".npm-cache")}
    text = run(["npm", "install", "--loglevel", "silly", "--offline", "--no-audit",
                "--no-fund", "--foreground-scripts"], root, env=env)  # fmt: skip
    text = normalise(text, root)
    text = re.sub(r"_logs/[\w.-]+\.log", "_logs/debug-0.log", text)
    errors = numbers(
        text,
        lambda _, line: (
            line.startswith(("npm error", "npm verbose stack Error"))
            or line == "native build failed: missing libwidget.so"
        ),
    )
    return Output(command, text, errors)


# ---------------------------------------------------------------- runtimes, logs, git

CHAIN = '''"""Resolve a configuration through its layers."""

import sys

{functions}

def resolve(settings):
    try:
        return layer_00(settings, 0)
    except KeyError as exc:
        raise RuntimeError(f"cannot resolve settings: missing key {{exc}}") from exc


for round in range(3):
    print(f"round {{round}}: resolving {{8 * round}} settings", flush=True)
{handlers}
if __name__ == "__main__":
    handle_00({{"region": "eu-west-1"}})
'''


def python_chained_traceback(root: Path) -> Output:
    """A KeyError 45 calls deep, re-raised as a RuntimeError 30 calls deep: two
    tracebacks, chained."""
    functions = (
        "".join(
            f"def layer_{i:02d}(settings, depth):\n"
            f"    return layer_{i + 1:02d}(settings, depth + 1)\n\n\n"
            for i in range(45)
        )
        + "def layer_45(settings, depth):\n    return settings['database_url']\n\n"
    )
    handlers = (
        "".join(
            f"def handle_{i:02d}(settings):\n    return handle_{i + 1:02d}(settings)\n\n\n"
            for i in range(30)
        )
        + "def handle_30(settings):\n    return resolve(settings)\n\n"
    )
    write(root, {"resolve.py": CHAIN.format(functions=functions, handlers=handlers)})
    text = normalise(run([sys.executable, "resolve.py"], root), root)
    errors = numbers(
        text,
        lambda _, line: (
            line.startswith("Traceback (most recent call last)")
            or line
            in (
                "KeyError: 'database_url'",
                "RuntimeError: cannot resolve settings: missing key 'database_url'",
            )
        ),
    )
    return Output("python resolve.py", text, errors)


WORKER = '''"""Import orders in batches; a malformed order is logged and skipped."""

import logging
import sys

logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                    format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
log = logging.getLogger("orders.import")
sys.setrecursionlimit(120)


def depth(node):
    return 1 + max((depth(child) for child in node.get("children", [])), default=0)


def cyclic():
    node = {"children": []}
    node["children"].append(node)
    return node


for batch in range(220):
    order = cyclic() if batch == 131 else {"children": [{"children": []}]}
    try:
        levels = depth(order)
    except RecursionError:
        log.exception("batch %d: order tree too deep, skipped", batch)
        continue
    if batch % 50 == 49:
        log.warning("batch %d: slow upstream, retried once", batch)
    log.info("batch %d: imported %d orders in %d levels", batch, 40 + batch % 7, levels)
log.info("done: 219 of 220 batches imported")
'''


def python_log_recursion(root: Path) -> Output:
    """A long log with timestamps: one batch fails with a RecursionError (logged with its
    traceback) among 220 imported ones, and a few warnings."""
    write(root, {"worker.py": WORKER})
    text = normalise(run([sys.executable, "worker.py"], root), root)
    errors = numbers(
        text,
        lambda _, line: (
            "batch 131: order tree too deep" in line
            or line.startswith(("RecursionError:", "Traceback"))
        ),
    )
    warnings = numbers(text, lambda _, line: "slow upstream" in line)
    return Output("python worker.py", text, errors, warnings)


JAVA = """package com.example.billing;

import java.util.logging.Logger;
import java.util.logging.Level;

public class Billing {
    private static final Logger LOG = Logger.getLogger("billing");

    static int charge(int account, int depth) {
        if (depth == 0) {
            if (account == 77)
                throw new IllegalStateException("card expired for account " + account);
            return account * 3;
        }
        return charge(account, depth - 1);
    }

    static int invoice(int account) {
        try {
            return charge(account, 18);
        } catch (IllegalStateException e) {
            throw new RuntimeException("invoice " + (9000 + account) + " failed", e);
        }
    }

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format",
                           "%1$tF %1$tT %4$s %5$s%6$s%n");
        for (int account = 0; account < 160; account++) {
            try {
                int total = invoice(account);
                LOG.info("account " + account + ": invoiced " + total + " EUR");
            } catch (RuntimeException e) {
                LOG.log(Level.SEVERE, "account " + account + ": invoice failed", e);
            }
        }
    }
}
"""


def java_stack_trace(root: Path) -> Output:
    """javac + java: a billing run logs 160 accounts; one fails with a chained exception
    (RuntimeException caused by IllegalStateException), logged with its stack trace."""
    write(root, {"src/com/example/billing/Billing.java": JAVA})
    run(["javac", "-d", "classes", "src/com/example/billing/Billing.java"], root)
    text = run(["java", "-cp", "classes", "com.example.billing.Billing"], root)
    text = normalise(
        re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "2026-03-02 09:14:07", text, flags=re.MULTILINE),
        root,
    )
    errors = numbers(
        text,
        lambda _, line: (
            "account 77: invoice failed" in line
            or "invoice 9077 failed" in line
            or "card expired for account 77" in line
        ),
    )
    return Output("java -cp classes com.example.billing.Billing", text, errors)


def node_stack_trace(root: Path) -> Output:
    """node: a sync job logs 300 records; one record breaks with a TypeError whose stack is
    printed, and the job goes on."""
    script = """const records = Array.from({ length: 300 }, (_, i) => ({ id: 1000 + i,
  owner: i === 187 ? null : { name: `user${i}`, email: `user${i}@example.com` } }));
function domainOf(owner) { return owner.email.split('@')[1]; }
function normalise(record) { return { id: record.id, domain: domainOf(record.owner) }; }
function sync(record) { return normalise(record); }
for (const record of records) {
  try {
    const out = sync(record);
    console.log(`[sync] record ${out.id} -> ${out.domain} ok (${(record.id * 7) % 97} ms)`);
  } catch (err) {
    console.error(`[sync] record ${record.id} failed`);
    console.error(err.stack);
  }
}
console.log('[sync] 299 of 300 records synced');
"""
    write(root, {"sync.js": script})
    text = normalise(run(["node", "sync.js"], root), root)
    errors = numbers(
        text,
        lambda _, line: (
            "record 1187 failed" in line
            or line.startswith("TypeError: Cannot read properties of null")
        ),
    )
    return Output("node sync.js", text, errors)


def git_merge_conflict(root: Path) -> Output:
    """git merge: 240 files changed on both branches, three of them in the same lines."""

    def git(*args: str) -> str:
        return run(["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com",
                    "-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false",
                    *args], root)  # fmt: skip

    conflicted = {"docs/page_041.md", "docs/page_118.md", "docs/page_197.md"}

    def page(i: int, top: str, bottom: str) -> str:
        return f"# Page {i}\n\n{top}\n\n" + "body line\n" * 12 + f"\n{bottom}\n"

    git("init", "-q")
    write(root, {f"docs/page_{i:03d}.md": page(i, "intro", "outro") for i in range(240)})
    git("add", "-A")
    git("commit", "-q", "-m", "pages")
    git("checkout", "-q", "-b", "feature")
    write(
        root,
        {
            f"docs/page_{i:03d}.md": page(
                i,
                "intro (feature)",
                "outro" if f"docs/page_{i:03d}.md" not in conflicted else "outro (feature)",
            )
            for i in range(240)
        },
    )
    git("commit", "-q", "-am", "feature intros")
    git("checkout", "-q", "main")
    write(root, {f"docs/page_{i:03d}.md": page(i, "intro", "outro (main)") for i in range(240)})
    git("commit", "-q", "-am", "main outros")
    text = normalise(git("merge", "--no-edit", "feature"), root)
    errors = numbers(
        text,
        lambda _, line: line.startswith(("CONFLICT", "Automatic merge failed")),
    )
    return Output("git merge --no-edit feature", text, errors)


CASES: dict[str, Callable[[Path], Output]] = {
    "pytest-verbose": pytest_verbose,
    "pytest-long-traceback": pytest_long_traceback,
    "unittest-verbose": unittest_verbose,
    "mypy-pretty": mypy_errors,
    "ruff-check": ruff_check,
    "tsc-build-verbose": tsc_build,
    "gcc-make": gcc_make,
    "cargo-workspace": cargo_workspace,
    "maven-compile": maven_compile,
    "pip-conflict": pip_conflict,
    "npm-install-script": npm_install_script,
    "python-chained-traceback": python_chained_traceback,
    "python-log-recursion": python_log_recursion,
    "java-stack-trace": java_stack_trace,
    "node-stack-trace": node_stack_trace,
    "git-merge-conflict": git_merge_conflict,
}


def normalise(text: str, root: Path) -> str:
    """``text`` with the temporary folder written ``/tmp/project`` and this machine's own
    folders (Python, home) replaced, so a saved output names no private path."""
    swaps = {
        str(root.resolve()): PROJECT,
        str(root): PROJECT,
        sys.prefix: "/opt/venv",
        sys.base_prefix: "/usr/local",
        str(Path.home()): "/home/user",
    }
    for old in sorted(swaps, key=len, reverse=True):
        text = text.replace(old, swaps[old])
    return text


def main(names: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or list(CASES):
        with tempfile.TemporaryDirectory(prefix="tool-output-") as folder:
            output = CASES[name](Path(folder))
        if not output.errors:
            print(f"{name}: no error line found; not saved", file=sys.stderr)
            continue
        (OUT / f"{name}.txt").write_text(output.text)
        labels = {"command": output.command, "errors": output.errors, "warnings": output.warnings}
        (OUT / f"{name}.labels.json").write_text(json.dumps(labels, indent=1) + "\n")
        print(
            f"{name}: {len(output.text):,} chars, {len(output.text.splitlines())} lines, "
            f"{len(output.errors)} error and {len(output.warnings)} warning lines"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
