"""The notebooks run top to bottom in a real Jupyter kernel, on the sample captures, and
their committed outputs are the outputs of that run (no cell fails, none is left unrun)."""

import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))
from make_notebooks import NOTEBOOKS as CELLS  # noqa: E402

#: 06 runs Spark, which gets a budget of its own.
PLAIN = sorted(p.stem for p in NOTEBOOKS.glob("0[1-5]-*.ipynb"))


def test_every_notebook_is_committed_with_its_outputs():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(CELLS)
    for name, cells in CELLS.items():
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        assert [c.source for c in nb.cells] == [src for _, src in cells], name
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name}: a cell not run"
        assert all(c.outputs for c in code[1:]), f"{name}: a cell without an answer"
        errors = [o for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, name
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{name}: no plot"


def run(name, timeout=120):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,  # per cell
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs for c in code[1:])  # every cell after the imports shows something


@pytest.mark.parametrize("name", PLAIN)
def test_notebook_runs(name):
    run(name)


@pytest.mark.spark
def test_spark_notebook_runs():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    run("06-spark-at-scale", timeout=300)  # a JVM starting on a busy machine
