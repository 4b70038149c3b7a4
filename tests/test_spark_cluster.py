"""The pipeline on a real Spark standalone cluster (master and worker on loopback), driven by
spark-submit with the project shipped to the executors as a zip."""

import subprocess
import sys
from pathlib import Path

import pytest
from spark_support import reference, rows

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.spark_cluster import StandaloneCluster, package_zip  # noqa: E402

JOB = """
import sys

import pyarrow as pa
from pyspark.sql import SparkSession

from dissector.cli import main


def where(batches):
    import dissector

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"path": [dissector.__file__]})


spark = SparkSession.builder.getOrCreate()
print("executors import", spark.range(1).mapInArrow(where, "path string").first()[0])
sys.exit(main())
"""


def test_spark_submit_on_a_standalone_cluster(tmp_path):
    import pyarrow.parquet as pq

    job = tmp_path / "job.py"
    job.write_text(JOB)
    zipped = package_zip(tmp_path)
    captures = [str(ROOT / "captures" / "kafka-python.pcap"), str(ROOT / "captures" / "sasl.pcap")]
    out = tmp_path / "out"
    with StandaloneCluster(cores=2, memory="1g") as cluster:
        run = subprocess.run(
            [
                *cluster.submit,
                "--py-files",
                zipped,
                str(job),
                "spark",
                *captures,
                "-o",
                str(out),
                "--split-bytes",
                "16k",
            ],
            capture_output=True,
            text=True,
            timeout=400,
            cwd=tmp_path,  # not the checkout: the package comes from the zip
        )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "wrote" in run.stdout and "kafka-python.pcap:" in run.stdout
    assert "dissector.zip/dissector/__init__.py" in run.stdout  # shipped, not installed
    table = pq.read_table(out).to_pandas()
    for path in captures:
        mine = table[table["capture"].astype(str) == path].drop(columns=["capture"])
        got = rows(mine.to_dict("records"), [c for c in mine.columns])
        assert got == reference(path, "pairs"), path
