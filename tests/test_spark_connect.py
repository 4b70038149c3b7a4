"""A Spark Connect client: a Connect server on loopback (local[2]), the package sent as an
artifact, `spark.read.format("kafka_pcap")` through the client's DataFrameReader."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_support import reference, spark_rows

pytest.importorskip("pyspark")
pytest.importorskip("grpc")
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.broker import accepts  # noqa: E402
from tools.spark_cluster import free_port, spark_home, stop_process  # noqa: E402


@pytest.fixture
def connect_server(tmp_path):
    port = free_port()
    log = open(tmp_path / "connect.log", "wb")  # noqa: SIM115 - closed below
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    server = subprocess.Popen(
        [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            "local[2]",
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=4",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not accepts(port):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no Spark Connect server: {(tmp_path / 'connect.log')}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop_process(server, grace=30)
        log.close()


CLIENT = """
import sys

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from dissector.spark import register
from dissector.spark.ship import ship

url, path, out = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
ship(spark)
register(spark)
df = spark.read.format("kafka_pcap").option("split_bytes", "8k").load(path)
pq.write_table(df.toArrow(), out)
spark.stop()
"""


def test_a_spark_connect_client_reads_captures(connect_server, tmp_path):
    """The client runs in a process of its own: a process holds one kind of session."""
    import pyarrow.parquet as pq

    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    path = str(ROOT / "captures" / "confluent-kafka.pcap")
    out = tmp_path / "pairs.parquet"
    run = subprocess.run(
        [sys.executable, str(client), connect_server, path, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert spark_rows(pq.read_table(out), path) == reference(path, "pairs")
