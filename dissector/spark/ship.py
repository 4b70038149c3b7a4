"""The package itself, zipped for executors that do not have it installed."""

import tempfile
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def package_zip(directory=None):
    """dissector.zip (Python sources, data files) in `directory` (default: a new temporary one)."""
    directory = Path(directory or tempfile.mkdtemp(prefix="kafka-dissect-"))
    out = directory / f"{PACKAGE.name}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(PACKAGE.rglob("*")):
            # Compiled modules cannot load from a zip: executors run the Python source.
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".so":
                z.write(path, path.relative_to(PACKAGE.parent))
    return str(out)


def ship(spark):
    """Send the package to the session's executors (classic session or Spark Connect), unless
    it was itself loaded from a zip (spark-submit --py-files: they have it)."""
    if not PACKAGE.exists():
        return
    zipped = package_zip()
    if hasattr(spark, "addArtifacts") and not hasattr(spark, "sparkContext"):
        spark.addArtifacts(zipped, pyfile=True)
    else:
        spark.sparkContext.addPyFile(zipped)
