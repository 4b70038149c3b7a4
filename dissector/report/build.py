"""The report: the capture's findings, then notebooks 01 to 05 run on it (the capture given
as the value of their `parameters` cell, as papermill does), all on one HTML page with the
code hidden and the plots inline."""

import ast
import html
import os
from pathlib import Path

from ..errors import DissectorError

ROOT = Path(__file__).resolve().parents[2]  # the source checkout: notebooks/ beside the package
NOTEBOOKS = ROOT / "notebooks"
PARTS = ("01", "02", "03", "04", "05")  # 06 needs Spark: a capture set, not one capture
FINDING_COLUMNS = ["severity", "kind", "client_id", "client", "broker", "time", "detail", "frames"]


def notebook_paths(names=PARTS):
    """The notebooks a report runs, from the source checkout the package runs from."""
    paths = [p for n in names for p in sorted(NOTEBOOKS.glob(f"{n}-*.ipynb"))]
    if len(paths) != len(names):
        raise DissectorError(f"the notebooks of a report are not in {NOTEBOOKS}")
    return paths


def injected(source, capture):
    """The assignments that give the `parameters` cell `source` this capture: `CAPTURE`
    gets its path, `CAPTURES` (a notebook that reads several) a list of just it."""
    names = {
        t.id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    values = {"CAPTURE": str(capture), "CAPTURES": [str(capture)]}
    lines = [f"{name} = {values[name]!r}" for name in values if name in names]
    if not lines:
        raise DissectorError("a notebook's parameters cell names neither CAPTURE nor CAPTURES")
    return "\n".join(lines)


def parameterized(nb, capture):
    """The notebook for `capture`: a cell tagged `injected-parameters` after the one tagged
    `parameters`, and without the cells tagged `answer` (conclusions about the sample)."""
    import nbformat

    cells = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "answer" in tags:
            continue
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
        if "parameters" in tags:
            new = nbformat.v4.new_code_cell(injected(cell.source, capture))
            new.metadata["tags"] = ["injected-parameters"]
            cells.append(new)
    if not any("injected-parameters" in c.metadata.get("tags", []) for c in cells):
        raise DissectorError("a notebook of the report has no cell tagged parameters")
    nb.cells = cells
    return nb


def kernel_env():
    """The kernel imports the package this process runs, whatever is installed."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def run_notebook(path, capture, timeout=300):
    """The notebook at `path` run on `capture` in a new kernel; a failing cell keeps its
    error as output and the run goes on."""
    import nbformat
    from nbclient import NotebookClient

    nb = parameterized(nbformat.read(path, as_version=4), Path(capture).resolve())
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # not its transport warning
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute(env=kernel_env())
    return nb


def cell_errors(name, nb):
    """One line per failed cell: the notebook, the cell's number and the exception."""
    return [
        f"{name}: cell {i}: {o.get('ename')}: {o.get('evalue')}"
        for i, cell in enumerate(nb.cells, 1)
        if cell.cell_type == "code"
        for o in cell.outputs
        if o.output_type == "error"
    ]


def findings(capture):
    """`doctor`'s findings for the capture."""
    from ..analysis import diagnose
    from ..source import read_tables

    t = read_tables(capture, ("pairs", "streams", "partitions", "records"))
    return diagnose(t["pairs"], t["streams"], t["partitions"], t["records"])


def findings_html(found):
    from ..commands.render import text

    if found.empty:
        return "<p>No findings.</p>"
    shown = found[[c for c in FINDING_COLUMNS if c in found]].map(text)
    shown["frames"] = found["frames"].map(lambda f: ", ".join(map(str, f)))
    style = "<style>table.findings th, table.findings td {text-align: left !important}</style>"
    return style + shown.to_html(index=False, classes="findings", border=0)


def page(capture, found, notebooks):
    """One notebook of everything, in order: title, findings, each notebook's cells."""
    import nbformat

    name = html.escape(Path(capture).name)
    head = nbformat.v4.new_markdown_cell(f"# Kafka capture report: `{name}`\n\n## Findings")
    table = nbformat.v4.new_code_cell("")
    table.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": findings_html(found)})
    ]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [head, table]
    for one in notebooks:
        nb.cells += [c for c in one.cells if c.cell_type == "markdown" or c.outputs]
    return nb


def to_html(nb, title):
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body


def write_report(capture, output, timeout=300, names=PARTS, say=None):
    """Write the report of `capture` to `output`; returns the cells that failed, one line
    each (empty when every cell ran). `say`: called with each step as it starts."""
    say = say or (lambda step: None)
    say("findings")
    found = findings(capture)  # also: a file that is no capture stops here
    failed, notebooks = [], []
    for path in notebook_paths(names):
        say(path.stem)
        nb = run_notebook(path, capture, timeout)
        failed += cell_errors(path.stem, nb)
        notebooks.append(nb)
    text = to_html(page(capture, found, notebooks), f"Kafka capture report: {Path(capture).name}")
    Path(output).write_text(text, encoding="utf-8")
    return failed
