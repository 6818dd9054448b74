"""summary.html in a real browser (headless Chromium): the headline table is on the first screen,
every image loads, nothing is wider than the window. Skipped where no Chromium is installed
(Debian/Ubuntu: ``apt-get install -y chromium``; or set HEADTRACE_CHROMIUM)."""
from __future__ import annotations

import pytest
from helpers.headline_tables import findings, verdicts

from headtrace.report import browser, html
from headtrace.report.plotting import plt, save

pytestmark = pytest.mark.skipif(browser.find() is None,
                                reason="no Chromium on this machine: apt-get install -y chromium "
                                       "(or set HEADTRACE_CHROMIUM) to run the browser test")


@pytest.fixture
def page(tmp_path):
    figs = tmp_path / "results" / "figures"
    for name in ("milestones", "layer_onset"):
        fig, ax = plt.subplots(figsize=(4, 2))
        ax.plot([1, 2], [1, 2])
        save(fig, figs / f"{name}.png")
    out = tmp_path / "results" / "findings" / "summary.html"
    html.write(findings(), verdicts(), out, families={"A": "gpt_neox"},
               figures=[(f"../figures/{n}.png", n, "<p>caption</p>") for n in ("milestones", "layer_onset")])
    return out


def test_headline_on_the_first_screen_and_images_load(page):
    res = browser.check(page)
    width, height = res["viewport"]
    t = res["table"]
    assert t is not None and 0 <= t["top"] < height, res
    assert [r["model"] for r in res["rows"]] == ["A", "B", "C"]
    assert all(r["bottom"] <= height for r in res["rows"]), "every headline row on the first screen"
    assert len(res["images"]) == 2 and all(i["ok"] for i in res["images"]), res["images"]
    assert res["scroll_width"] <= width, "no horizontal scrolling"


def test_a_broken_image_is_caught(page):
    page.write_text(page.read_text().replace("../figures/milestones.png", "../figures/missing.png"))
    res = browser.check(page)
    assert [i["ok"] for i in res["images"]] == [False, True]


def test_screenshot(page, tmp_path):
    png = browser.screenshot(page, tmp_path / "shot.png")
    assert png.stat().st_size > 1000
