"""Look at a report page in a real browser (headless Chromium): a screenshot of the first screen, and
a check that the headline table is on it and that every image loads.

    python -m headtrace.report.browser results/findings/summary.html --screenshot docs/img/report-first-screen.png

The browser is ``$HEADTRACE_CHROMIUM`` or the first of ``chromium``, ``chromium-browser``,
``google-chrome`` on the PATH (Debian: ``apt-get install -y chromium``).
"""
from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["find", "screenshot", "check", "FIRST_SCREEN"]

FIRST_SCREEN = (1440, 900)  # a laptop browser window, CSS pixels
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

_PROBE = """<script>
window.addEventListener('load', function () {
  var vh = window.innerHeight, t = document.getElementById('headline');
  function box(e) { var r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; }
  var rows = t ? Array.prototype.map.call(t.querySelectorAll('tbody tr'), function (tr) {
    var b = box(tr); b.model = tr.getAttribute('data-model'); return b; }) : [];
  var imgs = Array.prototype.map.call(document.images, function (i) {
    return {src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0, width: i.naturalWidth, height: i.naturalHeight}; });
  var out = {viewport: [window.innerWidth, vh], table: t ? box(t) : null, rows: rows, images: imgs,
             scroll_width: document.documentElement.scrollWidth};
  var pre = document.createElement('pre'); pre.id = 'headtrace-check';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def find() -> str | None:
    """The Chromium executable, or None."""
    env = os.environ.get("HEADTRACE_CHROMIUM")
    if env:
        return env if shutil.which(env) or Path(env).exists() else None
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(exe: str, args: list[str], url: str, timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="headtrace-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--allow-file-access-from-files",
               *args, url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def screenshot(page: str | Path, png: str | Path, *, size: tuple[int, int] = FIRST_SCREEN,
               exe: str | None = None, timeout: float = 120) -> Path:
    """A PNG of the first screen of ``page`` (``size`` CSS pixels)."""
    exe = exe or find()
    if exe is None:
        raise FileNotFoundError("no Chromium found (apt-get install -y chromium, or set HEADTRACE_CHROMIUM)")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    proc = _run(exe, [f"--window-size={size[0]},{size[1]}", f"--screenshot={png}", "--virtual-time-budget=10000"],
                Path(page).resolve().as_uri(), timeout)
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot: {proc.stderr[-2000:]}")
    return png


def check(page: str | Path, *, size: tuple[int, int] = FIRST_SCREEN, exe: str | None = None,
          timeout: float = 120) -> dict:
    """Load ``page`` in the browser at ``size`` and measure it: ``{viewport, table (the headline's
    box), rows (one box per model row), images (src, ok = loaded with a width), scroll_width}``.
    The page is copied beside itself with a measuring script appended, so relative links resolve."""
    exe = exe or find()
    if exe is None:
        raise FileNotFoundError("no Chromium found (apt-get install -y chromium, or set HEADTRACE_CHROMIUM)")
    page = Path(page).resolve()
    text = page.read_text()
    probe = text.replace("</body>", _PROBE + "</body>") if "</body>" in text else text + _PROBE
    fd, tmp = tempfile.mkstemp(prefix=".check-", suffix=".html", dir=page.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(probe)
        proc = _run(exe, [f"--window-size={size[0]},{size[1]}", "--virtual-time-budget=10000", "--dump-dom"],
                    Path(tmp).as_uri(), timeout)
    finally:
        os.unlink(tmp)
    m = re.search(r'<pre id="headtrace-check">(.*?)</pre>', proc.stdout, flags=re.S)
    if not m:
        raise RuntimeError(f"the page did not report back (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(html.unescape(m.group(1)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("page", help="an HTML page, e.g. results/findings/summary.html")
    p.add_argument("--screenshot", metavar="PNG", help="write the first screen here")
    p.add_argument("--size", default=f"{FIRST_SCREEN[0]}x{FIRST_SCREEN[1]}", help="window, WxH CSS px")
    a = p.parse_args(argv)
    size = tuple(int(v) for v in a.size.lower().split("x"))
    if find() is None:
        print("headtrace.report.browser: no Chromium (apt-get install -y chromium)", file=sys.stderr)
        return 2
    res = check(a.page, size=size)
    bad = [i["src"] for i in res["images"] if not i["ok"]]
    vh = res["viewport"][1]
    on_screen = [r["model"] for r in res["rows"] if r["bottom"] <= vh]
    where = (f"headline table top {res['table']['top']:.0f}px of {vh}px" if res["table"]
             else "no headline table on this page")
    print(f"{where}; rows on the first screen: {len(on_screen)}/{len(res['rows'])}; "
          f"images loaded {len(res['images']) - len(bad)}/{len(res['images'])}"
          + (f" (broken: {', '.join(bad)})" if bad else ""))
    if a.screenshot:
        print(f"screenshot: {screenshot(a.page, a.screenshot, size=size)}")
    return 0 if res["table"] and res["table"]["top"] < vh and not bad else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
