"""docs/client.md's parity table (issue 48) read against the five clients' sources: every
name the table gives a client is declared in that client's public API (its package's
source, not its tests), and every capability has a name in all five, so the table cannot
claim what a client lacks, nor drift when a name changes."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIENT_DOC = REPO / "docs" / "client.md"
COLUMNS = ("Python", "Node.js", "Go", "C", "Java")
# Each client's own source (never its tests): names are looked for in its public
# declarations; a quoted code or reason may be in the code that produces it (C's src/).
SOURCES = {
    "Python": (("shared/client/seatlease_client", "*.py"),),
    "Node.js": (("shared/clients/node/src", "*.ts"),),
    "Go": (("shared/clients/go", "*.go"),),
    "C": (("shared/clients/c/include", "*.h"), ("shared/clients/c/src", "*.c")),
    "Java": (("shared/clients/java/src/main/java", "*.java"),),
}


def api_text(column: str) -> str:
    files = []
    for folder, pattern in SOURCES[column]:
        found = sorted((REPO / folder).rglob(pattern))
        assert found, folder
        files += [
            f for f in found
            if not f.name.endswith("_test.go")
            and not {"examples", "hold", "build", "node_modules"} & set(f.parts)
        ]  # fmt: skip
    return "\n".join(f.read_text() for f in files)


def parity_rows() -> list[tuple[str, dict[str, list[str]]]]:
    """The table under "### Parity": (capability, {column: names}) per row."""
    text = CLIENT_DOC.read_text()
    section = text[text.index("### Parity") :]
    lines = [line for line in section.splitlines()[1:] if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert tuple(header[1:]) == COLUMNS, header
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        names = {
            column: re.findall(r"`([^`]+)`", cell)
            for column, cell in zip(COLUMNS, cells[1:], strict=True)
        }
        rows.append((cells[0], names))
    return rows


STOP_WORDS = {"True", "False", "true", "false", "None", "null", "nil", "new", "int", "str"}


def identifiers(name: str) -> list[str]:
    """What a table cell's name must have in the source: each identifier in it (``a.b(c=1)``
    is ``a``, ``b`` and ``c``) and each quoted string (a reason, an error code) as a
    string literal."""
    strings = re.findall(r'"[^"]*"', name)
    rest = re.sub(r'"[^"]*"', " ", name)
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", rest)
    return strings + [w for w in words if w not in STOP_WORDS]


def test_the_parity_table_covers_every_capability_in_every_client() -> None:
    rows = parity_rows()
    assert len(rows) >= 12, rows
    for capability, names in rows:
        for column in COLUMNS:
            assert names[column], f"{capability}: no name for {column}"


def test_every_name_in_the_parity_table_is_in_that_clients_api() -> None:
    sources = {column: api_text(column) for column in COLUMNS}
    missing = []
    for capability, names in parity_rows():
        for column in COLUMNS:
            for name in names[column]:
                for word in identifiers(name):
                    pattern = re.escape(word) if word.startswith('"') else rf"\b{word}\b"
                    if not re.search(pattern, sources[column]):
                        missing.append(f"{capability} / {column}: {word} (from `{name}`)")
    assert not missing, "\n".join(missing)
