"""notebooks/run_pipeline.ipynb, executed top to bottom in local mode as a user would: any
error in any cell fails the test."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "run_pipeline.ipynb"


def outputs_of(cell) -> list[str]:
    """The MIME types a code cell displayed."""
    return [mime for output in cell.get("outputs", []) for mime in output.get("data", {})]


def test_the_notebook_is_in_local_mode_and_holds_no_pipeline_logic():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    assert "RUN_IN_THE_CLOUD = False" in code
    # Only the package's entry points: no SDK, no boto3, no step wiring in the notebook.
    for forbidden in ("import sagemaker", "import boto3", "ProcessingStep", "TrainingStep", "def "):
        assert forbidden not in code, forbidden
    # Saved without outputs: the repository holds the notebook, not one run of it.
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom_locally(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # The "python3" kernel is this interpreter (jupyter_client runs a kernelspec's "python" as
    # sys.executable), working in a scratch folder.
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()

    cells = [c for c in notebook.cells if c.cell_type == "code"]
    shown = [outputs_of(c) for c in cells]
    assert "image/svg+xml" in shown[1]  # the DAG
    assert "image/png" in shown[4]  # the training curves
    # The default run is not tuned, and the tuning cell says so (a tuned run plots its trials).
    assert "this run was not tuned" in "".join(o.get("text", "") for o in cells[5].outputs)
    assert "text/html" in shown[3] and "text/html" in shown[6] and "text/html" in shown[9]
    assert "image/png" in shown[7]  # the confusion matrix
    # The default run is a table: no misclassified images, and the cell says so.
    assert "no misclassified images to show" in "".join(o.get("text", "") for o in cells[8].outputs)
    assert "image/png" in shown[-1]  # trainpipe advise's plot
    printed = "".join(o.get("text", "") for o in cells[3].outputs if o.get("name") == "stdout")
    assert "execution: Succeeded" in printed
    assert (tmp_path / ".trainpipe" / "registry.sqlite").exists()
