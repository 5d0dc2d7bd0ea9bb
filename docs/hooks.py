"""MkDocs hooks: pages that the build makes rather than reads.

* ``reference/config.md``: generated from the dataclass schemas (``gen_config_reference.py``).
* ``results/``: the per-run logs, printouts and plots kept in ``benchmarks/results/`` (``*.md``,
  ``*.png``), so the benchmarks page links to them and ``--strict`` checks those links too.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mkdocs.structure.files import File, Files

DOCS_DIR = Path(__file__).resolve().parent
RESULTS_DIR = DOCS_DIR.parent / "benchmarks" / "results"
RESULT_SUFFIXES = (".md", ".png")


def _config_reference() -> str:
    path = DOCS_DIR / "gen_config_reference.py"
    spec = importlib.util.spec_from_file_location("gen_config_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render()


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - MkDocsConfig
    files.append(File.generated(config, "reference/config.md", content=_config_reference()))
    for path in sorted(RESULTS_DIR.iterdir()):
        if path.suffix in RESULT_SUFFIXES:
            files.append(File.generated(config, f"results/{path.name}", abs_src_path=str(path)))
    return files
