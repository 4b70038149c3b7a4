"""The notebooks run top to bottom in a real Jupyter kernel, on the sample captures, and
their committed outputs are the outputs of that run (no cell fails, none is left unrun).
Notebooks 01 to 05 take their capture as a parameter: `tests/test_report.py` runs them all on
transactions.pcap, and 04 (whose sample that is) runs here on group-rebalance.pcap too."""

import shutil
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CAPTURES = NOTEBOOKS.parent / "captures"
sys.path.insert(0, str(NOTEBOOKS))
from make_notebooks import NOTEBOOKS as CELLS  # noqa: E402

from dissector.report.build import kernel_env, parameterized  # noqa: E402

#: 06 runs Spark, which gets a budget of its own.
PLAIN = sorted(p.stem for p in NOTEBOOKS.glob("0[1-5]-*.ipynb"))


def test_every_notebook_is_committed_with_its_outputs():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(CELLS)
    for name, cells in CELLS.items():
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        assert [c.source for c in nb.cells] == [src for _, src in cells], name
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"{name}: a cell not run"
        answers = [c for c in code[1:] if "parameters" not in c.metadata.get("tags", [])]
        assert all(c.outputs for c in answers), f"{name}: a cell without an answer"
        errors = [o for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, name
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{name}: no plot"


def test_notebooks_take_their_capture_as_a_parameter():
    for name in sorted(CELLS):
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1 and tagged[0].cell_type == "code", name
        assert "CAPTURE" in tagged[0].source and "SAMPLES" in tagged[0].source, name
        later = "".join(c.source for c in nb.cells[nb.cells.index(tagged[0]) + 1 :])
        assert "../captures" not in later and "CAPTURE" in later, name


def run(name, timeout=120, capture=None, probe=None):
    """The notebook run in a new kernel (on `capture` when given, else its sample); `probe`:
    code run last in the same kernel, whose printed lines are returned."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    if capture is not None:
        nb = parameterized(nb, capture)
    if probe is not None:
        nb.cells.append(nbformat.v4.new_code_cell(probe))
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,  # per cell
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute(env=kernel_env())  # raises CellExecutionError on the first failing cell
    code = [c for c in nb.cells if c.cell_type == "code" and c.source]
    # every cell but the imports and the parameters shows something
    parameters = ("parameters", "injected-parameters")
    shown = [c for c in code if not set(parameters) & set(c.metadata.get("tags", []))]
    assert all(c.outputs for c in shown if not c.source.startswith("%"))
    return nb.cells[-1].outputs[0].text.splitlines() if probe is not None else None


@pytest.mark.parametrize("name", PLAIN)
def test_notebook_runs(name):
    run(name)


def test_transactions_notebook_on_a_capture_without_transactions():
    """04 on the rebalancing group: no transaction, but every record produced is delivered."""
    probe = """print(len(ka.transactions(pairs)), len(ka.aborted_reads(pairs)))
print(matched[["partition", "offset"]].drop_duplicates().shape[0], matched.consumer.nunique())
print(int(parts.records.sum()))"""
    out = run(
        "04-transactions-and-delivery", capture=CAPTURES / "group-rebalance.pcap", probe=probe
    )
    assert out[0] == "0 0"
    assert out[1] == "72 3"  # 72 records produced, all fetched; three consumers
    assert out[2] == "162"  # data records produced (72) and fetched (90), not the sample's 21


@pytest.mark.spark
def test_spark_notebook_runs():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime")
    run("06-spark-at-scale", timeout=300)  # a JVM starting on a busy machine
