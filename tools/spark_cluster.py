"""A Spark standalone cluster on loopback (one master, one worker), from the scripts shipped
in the pyspark package, and the project packaged as a zip for its executors.

    with StandaloneCluster(cores=2) as cluster:
        subprocess.run([*cluster.submit, "--py-files", package_zip(tmp), "job.py"])

Both daemons run in the foreground as children of this process and are stopped by their ids.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))
from tools.broker import accepts, free_port  # noqa: E402

REGISTERED = b"Successfully registered with master"


def spark_home():
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def stop_process(proc, grace=20):
    """End a daemon started by this module or a test: SIGTERM, then SIGKILL after `grace`
    seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def package_zip(directory):
    """The package as a zip, as --py-files / addPyFile take it."""
    from dissector.spark.ship import package_zip as zipped

    return zipped(directory)


class StandaloneCluster:
    def __init__(self, cores=2, memory="2g", timeout=120):
        self.cores = cores
        self.memory = memory
        self.timeout = timeout
        self.procs = []
        self.dir = None

    def _env(self):
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=self.dir,
            SPARK_WORKER_DIR=self.dir,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        return env

    def _daemon(self, name, *args):
        log = open(Path(self.dir) / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        cls = f"org.apache.spark.deploy.{name}.{name.capitalize()}"
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), cls, *args],
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append((proc, log))
        return proc

    def _await(self, ready, what):
        """Poll `ready()` until it holds; stop everything if a daemon dies or time runs out."""
        deadline = time.monotonic() + self.timeout
        while not ready():
            for proc, _ in self.procs:
                if proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"a Spark daemon exited: see {self.dir}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{what} not within {self.timeout}s: see {self.dir}")
            time.sleep(0.25)

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="spark-cluster-")
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        # Web UIs on port 0 (any free port): nothing here reads them, and two ports picked
        # ahead of time can collide with each other or with a daemon's retry.
        self._daemon("master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0")
        # A worker that finds no master waits 5 to 15 s before it tries again.
        self._await(lambda: accepts(port), "the master listening")
        self._daemon(
            "worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            "0",
            "--work-dir",
            self.dir,
        )
        # Ready on the worker's own word that the master took it.
        log = Path(self.dir) / "worker.log"
        self._await(lambda: REGISTERED in log.read_bytes(), "the worker registered")
        return self

    @property
    def submit(self):
        """The spark-submit command line for this cluster."""
        return [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            self.url,
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.pyspark.python={sys.executable}",
            "--conf",
            "spark.sql.shuffle.partitions=4",
        ]

    def stop(self):
        for proc, log in reversed(self.procs):
            stop_process(proc)
            log.close()
        self.procs = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":  # a cluster to try things on, until Ctrl-C
    with StandaloneCluster() as c:
        print(c.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
