"""The five clients as one product (issue 48): one version number, declared from
shared/clients/VERSION by each client's own build file, and the Apache-2.0 text beside
each client (each build puts it in its artifact: the wheel, the npm tarball, the jar, the
C install prefix, the Go module; the clients' own tests check their artifact)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CLIENTS = REPO / "shared" / "clients"
VERSION = (CLIENTS / "VERSION").read_text().strip()
FOLDERS = {
    "python": REPO / "shared" / "client",
    "node": CLIENTS / "node",
    "go": CLIENTS / "go",
    "c": CLIENTS / "c",
    "java": CLIENTS / "java",
}


def declared_versions() -> dict[str, str]:
    """Each client's version as its own build or code declares it."""
    python = (FOLDERS["python"] / "seatlease_client" / "_version.py").read_text()
    package = json.loads((FOLDERS["node"] / "package.json").read_text())
    lock = json.loads((FOLDERS["node"] / "package-lock.json").read_text())
    go = (FOLDERS["go"] / "client.go").read_text()
    pom = (FOLDERS["java"] / "pom.xml").read_text()
    pom_version = re.search(
        r"<artifactId>seatlease-client</artifactId>\s*<version>([^<]+)</version>", pom
    )
    cmake = (FOLDERS["c"] / "CMakeLists.txt").read_text()
    c_literal = re.search(r"project\(seatlease VERSION ([0-9.]+)", cmake)
    return {
        "python": re.search(r'__version__ = "([^"]+)"', python).group(1),  # type: ignore[union-attr]
        "node": package["version"],
        "node (package-lock.json)": lock["version"],
        "go": re.search(r'const Version = "([^"]+)"', go).group(1),  # type: ignore[union-attr]
        "java": pom_version.group(1) if pom_version else "(no <version> after its artifactId)",
        # CMake reads shared/clients/VERSION (or a copy beside it) unless it names one
        "c": c_literal.group(1) if c_literal else VERSION if "VERSION" in cmake else "?",
    }


def test_one_version_for_all_five_clients() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION
    assert declared_versions() == dict.fromkeys(declared_versions(), VERSION)


def test_the_c_client_reads_the_version_file() -> None:
    """The C build takes its version from the file (a copy of the folder alone keeps a
    copy of it), not from a literal that can drift."""
    cmake = (FOLDERS["c"] / "CMakeLists.txt").read_text()
    assert "VERSION" in cmake and re.search(r"file\(\s*(READ|STRINGS)", cmake), cmake[:400]


def test_the_license_is_the_apache_text_at_the_root_and_beside_each_client() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "4. Redistribution." in text and "END OF TERMS AND CONDITIONS" in text
    for name, folder in FOLDERS.items():
        assert (folder / "LICENSE").read_text() == text, name


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_each_client_declares_apache_2(name: str) -> None:
    folder = FOLDERS[name]
    declared = {
        "python": lambda: (folder / "pyproject.toml").read_text(),
        "node": lambda: json.loads((folder / "package.json").read_text())["license"],
        "go": lambda: (folder / "LICENSE").read_text(),
        # C has no license field: its install puts the text in the prefix
        "c": lambda: "Apache" if "LICENSE" in (folder / "CMakeLists.txt").read_text() else "",
        "java": lambda: (folder / "pom.xml").read_text(),
    }[name]()
    assert "Apache" in declared, name
