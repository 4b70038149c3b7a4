"""A picture of a report page, taken by headless Chromium (Debian's `chromium`)."""

import shutil
import subprocess
import tempfile
from pathlib import Path


def chromium():
    """The Chromium executable, or None."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)


def screenshot(page, png, width=1280, height=2400, timeout=120):
    """Write a PNG of the top `width` x `height` pixels of the HTML file `page`."""
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("no chromium to take a screenshot with")
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no lock, no history
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",  # root has no user namespace sandbox
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={Path(png).resolve()}",
                Path(page).resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
    return Path(png)
