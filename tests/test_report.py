"""`kafka-dissect report`: notebooks 01 to 05 run on a capture that is not their default, one
HTML page with the findings first, opened in headless Chromium."""

import base64
import html
import io
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("nbconvert")
pytest.importorskip("nbclient")

from PIL import Image  # noqa: E402

import dissector  # noqa: E402
from dissector import analysis as ka  # noqa: E402
from dissector import cli  # noqa: E402
from dissector.report.build import injected  # noqa: E402
from dissector.report.screenshot import chromium, screenshot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "captures" / "transactions.pcap"  # the default of 04 only
PNG = re.compile(r'<img[^>]+src="data:image/png;base64,([^"]+)"')


def plot_cells():
    """How many plots notebooks 01 to 05 draw: one per cell that calls ka.plots."""
    import sys

    sys.path.insert(0, str(ROOT / "notebooks"))
    from make_notebooks import NOTEBOOKS

    return sum(
        "ka.plots." in src
        for name, cells in NOTEBOOKS.items()
        if name[:2] in ("01", "02", "03", "04", "05")
        for kind, src in cells
        if kind == "code"
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(exit status, path, HTML) of one report on CAPTURE: one kernel run per notebook."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    status = cli.main(["report", str(CAPTURE), "-o", str(out)])
    return status, out, out.read_text(encoding="utf-8")


def text_of(page):
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_every_cell_ran_without_error(report):
    status, _, page = report
    assert status == 0  # a failed cell makes it 1
    assert "Traceback" not in page and "CellExecutionError" not in page


def test_findings_come_first_and_are_doctors(report):
    _, _, page = report
    words = text_of(page)
    assert words.index("Findings") < words.index("A first look at a capture")
    t = dissector.read_pcap(CAPTURE, records="full")
    found = ka.diagnose(
        t,
        streams=dissector.read_pcap(CAPTURE, table="streams"),
        partitions=dissector.read_pcap(CAPTURE, table="partitions", records="full"),
        records=dissector.read_pcap(CAPTURE, table="records"),
    )
    table = words[words.index("Findings") : words.index("A first look at a capture")]
    assert len(found) > 0
    for f in found.itertuples():
        assert f.kind in table and f.detail in table
        assert ", ".join(map(str, f.frames)) in table


def test_every_notebook_ran_on_the_capture_given(report):
    _, _, page = report
    words = text_of(page)
    for title in (
        "A first look at a capture",
        "Where does the time go?",
        "What happened to the consumer group?",
        "Did the transactions do what they should",
        "What went wrong, across several captures?",
    ):
        assert title in words
    # 01's summary is of this capture: 3 EndTxn requests, a Metadata left unanswered.
    summary = re.search(r"transactions\.pcap\napi.*?\n\n", words, re.S)
    assert summary, "no summary of transactions.pcap"
    endtxn = next(line.split() for line in summary[0].splitlines() if line.startswith("EndTxn"))
    assert endtxn[1:3] == ["1", "3"]
    # 04: the three transactions, commit, abort, commit.
    outcomes = re.findall(r"tx-producer\s+1\s+0\s+tx-producer.*?(commit|abort)", words, re.S)
    assert outcomes[:3] == ["commit", "abort", "commit"]


def test_code_and_the_samples_answers_are_left_out(report):
    _, _, page = report
    words = text_of(page)
    assert "ka.latency(" not in words and "read_pcap(" not in words
    assert "Answer." not in words


def test_every_plot_is_an_image_with_something_drawn(report):
    _, _, page = report
    images = PNG.findall(page)
    assert len(images) == plot_cells() == 7
    for data in images:
        img = Image.open(io.BytesIO(base64.b64decode(data))).convert("L")
        assert img.width >= 400 and img.height >= 200
        dark = sum(img.histogram()[:200])
        assert dark > 0.005 * img.width * img.height  # axes, labels, lines


@pytest.mark.skipif(chromium() is None, reason="no chromium (tools/setup.sh installs it)")
def test_the_page_opens_in_chromium_with_its_plots(report, tmp_path):
    _, path, _ = report
    shot = screenshot(path, tmp_path / "report.png", width=1280, height=7000)
    rgb = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert rgb.shape == (7000, 1280, 3)
    nonwhite = (rgb.min(axis=2) < 240).sum()
    # Tables and text alone draw no saturated colour; the plots' lines and heat map do.
    coloured = (rgb.max(axis=2) - rgb.min(axis=2) > 60).sum()
    assert nonwhite > 0.01 * 7000 * 1280
    assert coloured > 10_000


def test_parameters_are_injected_by_name():
    assert injected('CAPTURE = SAMPLES / "x.pcap"', "/c/a.pcap") == "CAPTURE = '/c/a.pcap'"
    several = 'names = ["a"]\nCAPTURES = [SAMPLES / f"{n}.pcap" for n in names]'
    assert injected(several, "/c/a.pcap") == "CAPTURES = ['/c/a.pcap']"


def test_a_file_that_is_no_capture_is_one_line_before_any_kernel(tmp_path, capsys):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    assert cli.main(["report", str(junk), "-o", str(tmp_path / "r.html")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "not a capture file" in err
    assert not (tmp_path / "r.html").exists()
