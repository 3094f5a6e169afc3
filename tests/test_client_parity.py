"""docs/client.md's parity table (issue 48) read against the five clients' sources: every
name the table gives a client is declared in that client's public API (its package's
source, not its tests), and every capability has a name in all five, so the table cannot
claim what a client lacks, nor drift when a name changes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIENT_DOC = REPO / "docs" / "client.md"
COLUMNS = ("Python", "Node.js", "Go", "C", "Java")
# Each client's own source (never its tests, examples or hold program). A name counts only
# where that source declares it (a function, method, parameter, option field, type,
# constant); a quoted code or reason only as a string literal in code. Comments are
# stripped first: a word in a comment declares nothing.
SOURCES = {
    "Python": (("shared/client/seatlease_client", "*.py"),),
    "Node.js": (("shared/clients/node/src", "*.ts"),),
    "Go": (("shared/clients/go", "*.go"),),
    "C": (("shared/clients/c/include", "*.h"), ("shared/clients/c/src", "*.c")),
    "Java": (("shared/clients/java/src/main/java", "*.java"),),
}


def source_files(column: str) -> list[Path]:
    files = []
    for folder, pattern in SOURCES[column]:
        found = sorted((REPO / folder).rglob(pattern))
        assert found, folder
        files += [
            f for f in found
            if not f.name.endswith("_test.go")
            and not {"examples", "hold", "build", "node_modules"} & set(f.parts)
        ]  # fmt: skip
    return files


def python_api(files: list[Path]) -> tuple[set[str], set[str]]:
    """(names declared, string constants) of the Python client: by its syntax tree."""
    names: set[str] = set()
    strings: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            if isinstance(node, ast.arg):
                names.add(node.arg)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
    return names, strings


def without_comments(text: str) -> str:
    """C-family source without its comments (strings kept: none here holds ``//``
    followed by a declaration we look for)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"(?<![:\"'])//[^\n]*", " ", text)


def declares(column: str, code: str, word: str) -> bool:
    """Whether C-family ``code`` declares ``word``: a field, parameter or property
    (``word:``, ``word;``, ``Type word``), a function or method (``word(`` after a type or
    ``func``), a type, a constant or a macro."""
    w = re.escape(word)
    patterns = {
        "Node.js": [rf"\b{w}\??\s*[:(=]", rf"\b(class|interface|type|function|const|let)\s+{w}\b"],
        "Go": [rf"^\s*(\w+\s*,\s*)*{w}(\s*,\s*\w+)*\s+[\w\[\]\*\.{{}}()]",
               rf"\bfunc\s+(\([^)]*\)\s*)?{w}\s*\(", rf"\b{w}\s*=", rf"\btype\s+{w}\b",
               rf"\b{w}\s+\w+\s*=", rf"\(\s*{w}\s+\w"],
        "C": [rf"\b{w}\s*[;\[,)]", rf"\b{w}\s*\(", rf"#define\s+{w}\b", rf"\b{w}\s*="],
        "Java": [rf"[\w>\]]\s+{w}\s*[(;=,)]", rf"\b(class|interface|record|enum)\s+{w}\b"],
    }[column]  # fmt: skip
    return any(re.search(p, code, re.M) for p in patterns)


def missing_names(column: str, names: list[str]) -> list[str]:
    files = source_files(column)
    if column == "Python":
        declared, strings = python_api(files)
    else:
        code = without_comments("\n".join(f.read_text() for f in files))

    def found(word: str) -> bool:
        if column == "Python":
            return word[1:-1] in strings if word.startswith('"') else word in declared
        return word in code if word.startswith('"') else declares(column, code, word)

    return [word for name in names for word in identifiers(name) if not found(word)]


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


def test_every_name_in_the_parity_table_is_declared_by_that_client() -> None:
    missing = []
    for capability, names in parity_rows():
        for column in COLUMNS:
            for word in missing_names(column, names[column]):
                missing.append(f"{capability} / {column}: {word}")
    assert not missing, "\n".join(missing)


def test_a_name_only_in_a_comment_is_not_declared() -> None:
    """The check can fail: a word the sources only mention in comments, and one they do
    not have at all, are missing in every language."""
    for column in COLUMNS:
        assert missing_names(column, ["`no_such_option_here`"]) == ["no_such_option_here"]
        assert missing_names(column, ['`"no_such_code_here"`']) == ['"no_such_code_here"']
    assert not declares("Go", without_comments("// Verified by default\n"), "Verified")
    assert declares("Go", "type Options struct {\n\tTimeout time.Duration\n}", "Timeout")
    assert not declares("C", without_comments("/* pinned_keys: ... */ int x;"), "pinned_keys")
    assert declares("C", "const char *const *pinned_keys;", "pinned_keys")
    assert declares("Java", "public Builder pinnedKeys(List<String> keys) {", "pinnedKeys")
    assert not declares("Java", "client.pinnedKeys(keys);", "pinnedKeys")
    assert declares("Node.js", "  pinnedKeys?: readonly PinnedKey[];", "pinnedKeys")
