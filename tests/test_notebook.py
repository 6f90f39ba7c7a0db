"""notebooks/explore.ipynb runs top to bottom without error and keeps its outputs small."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("ipywidgets")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore.ipynb"


def test_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")  # jupyter_core's path migration, no warning
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert not any(cell.get("outputs") for cell in code), "commit the notebook without outputs"
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "No: the reduce-scatter is the sum of gradients over ranks" in text
    assert "consistent schemes: dp" in text
    assert "V_colocated = V_zero2 / 2 at one wire width: True" in text
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    widget = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert widget, "the sliders render as a widget"
    size = len(nbformat.writes(nb))
    assert size < 400_000, size
