"""Every module has a README.md whose input and output tables are exactly what
tfdoc.py renders from its variables.tf and outputs.tf (run ``python
tests/terraform/tfdoc.py`` after changing a variable or an output)."""

from __future__ import annotations

import pytest
import tfdoc
from tfconfig import load, module_dirs


@pytest.mark.parametrize("directory", module_dirs(), ids=lambda d: d.name)
def test_module_readme_tables_are_current(directory):
    readme = (directory / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# `modules/{directory.name}`"), "title names the module"
    tables = tfdoc.tables_in(readme)
    assert tables is not None, f"{directory.name}/README.md has no TFDOC section"
    assert tables == tfdoc.render(load(directory)), (
        f"terraform/modules/{directory.name}/README.md is out of date: "
        "run python tests/terraform/tfdoc.py"
    )


def test_rendered_tables_list_every_input_and_output():
    """Not vacuous: the rendering names each variable and output once, in a row."""
    for directory in module_dirs():
        cfg = load(directory)
        inputs, outputs = tfdoc.render(cfg).split("| output | description |")
        for names, table in ((cfg.variables, inputs), (cfg.outputs, outputs)):
            for name in names:
                assert table.count(f"| `{name}` |") == 1, (directory.name, name)
    stack = load(module_dirs()[-1].parent / "stack")
    rendered = tfdoc.render(stack)
    assert "| `deletion_protection` | `bool` | *(required)* |" in rendered
    assert "| `function_settings` | `map(object({...}))` | `{}` |" in rendered


def test_a_stale_table_is_detected(tmp_path, monkeypatch):
    directory = module_dirs()[0]
    copy = tmp_path / directory.name
    copy.mkdir()
    for f in directory.iterdir():
        copy.joinpath(f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    variables = copy / "variables.tf"
    variables.write_text(
        variables.read_text()
        + '\nvariable "new_one" {\n  type        = string\n  description = "A new input."\n}\n'
    )
    assert tfdoc.update(copy, check=True) is False
    assert tfdoc.update(copy, check=False) is False  # rewrites it
    assert tfdoc.update(copy, check=True) is True
    assert (
        "| `new_one` | `string` | *(required)* | A new input. |" in (copy / "README.md").read_text()
    )
