"""One headless-Chromium session for every PNG and PDF of a run (playwright, no browser download).

Starting Chromium costs about a second; a run has a dozen renderings, so they all share one
browser and one page, and a label's PNG and PDF come from one load of it. Every request that is
not a local file or inline data is aborted and recorded: the pages are self-contained, and a
request out would be a bug.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from causalrate.errors import UserError

log = logging.getLogger(__name__)

WIDTH = 1000  # px: the label and the reports are laid out for a laptop screen this wide
LABEL_HEIGHT = 1300  # px: the label must fit this without scrolling
PDF_SCALE = 0.7  # 1000 x 1300 px at 0.7 fits A4 and Letter inside 10 mm margins
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    # services a local page never needs: fewer to start
    "--disable-extensions",
    "--disable-breakpad",
    "--mute-audio",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,PaintHolding,"
    "CertificateTransparencyComponentUpdater,AutofillServerCommunication,InterestFeedContentSuggestions",
]


def find_chromium() -> str | None:
    """CAUSALRATE_CHROMIUM, else the first Chromium/Chrome on PATH."""
    configured = os.environ.get("CAUSALRATE_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def browser_problem() -> str | None:
    """Why PNG/PDF cannot be rendered here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "PNG/PDF cards need playwright (pip install playwright; no browser download is needed)"
    if find_chromium() is None:
        return "PNG/PDF cards need Chromium (Debian: apt-get install chromium); set CAUSALRATE_CHROMIUM to its path"
    return None


def picture_renderer(formats: tuple[str, ...], *, png_required: bool = False) -> Renderer | None:
    """A started Renderer for the PNG and PDF among `formats`, or None: none asked for, or they cannot be made
    here (a warning says so and the other formats are written; png_required: exit 2 instead).

    Called first: Chromium and playwright's driver take about a second to come up, in their own processes,
    while the caller imports its modules, reads the run and writes the pages the renderer is then given.
    """
    pictures = [f for f in ("png", "pdf") if f in formats]
    if not pictures:
        return None
    problem = browser_problem()
    if problem:
        if png_required:
            raise UserError(problem)
        log.warning(f"{problem}; wrote the other formats")
        return None
    renderer = Renderer(find_chromium() or "", png="png" in pictures, pdf="pdf" in pictures)  # found: no problem
    renderer.start()
    return renderer


# the width a page needs with every horizontally scrolled box shown whole (0: none scrolls)
# a page's PNG is a one-glance picture: what only the HTML should carry (the comparison's table of every rating,
# 40,000 px on a large suite) is marked .html-only, and a .png-only line says where to find it
PICTURE_ONLY = ".html-only { display: none !important; } .png-only { display: block !important; }"
UNSCROLL = """() => {
  if (![...document.querySelectorAll('.scroll')].some(e => e.scrollWidth > e.clientWidth)) return 0;
  const style = document.createElement('style');
  style.textContent = '.scroll { overflow: visible; } body { margin-left: 0; }';
  document.head.appendChild(style);
  return document.documentElement.scrollWidth;
}"""


@dataclass
class Session:
    """A Chromium with one page at WIDTH px; use as a context manager."""

    executable: str
    blocked: list[str] = field(default_factory=list)  # every request aborted (should stay empty)

    def __enter__(self) -> Session:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(executable_path=self.executable, args=ARGS)
        except Exception as exc:
            self._playwright.stop()
            raise UserError(f"Chromium at {self.executable} did not start: {str(exc)[:300]}") from None
        context = self._browser.new_context(viewport={"width": WIDTH, "height": LABEL_HEIGHT}, device_scale_factor=1)
        context.route("**/*", self._route)
        self.page = context.new_page()
        return self

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._browser.close()
        self._playwright.stop()

    def _route(self, route) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:")):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def open(self, html: Path) -> None:
        self.page.set_viewport_size({"width": WIDTH, "height": LABEL_HEIGHT})
        self.page.goto(html.resolve().as_uri(), wait_until="load")

    def png(self, html: Path, out: Path) -> Path:
        """The whole page, sized to its content (never cut, never padded with blank space)."""
        return self.render(html, png=out)[0]

    def render(self, html: Path, *, png: Path | None = None, pdf: Path | None = None) -> list[Path]:
        """A PNG and/or a PDF of a page from one load of it; returns the files written."""
        # a 100 px tall viewport: full_page then takes the content's height; print layout ignores it
        self.page.set_viewport_size({"width": WIDTH, "height": 100})
        self.page.goto(html.resolve().as_uri(), wait_until="load")
        if pdf:
            self.page.pdf(path=str(pdf), format="A4", scale=PDF_SCALE, print_background=True)
        if png:  # a table wider than the page (20 systems) is shown whole, the image widened to it: no column cut
            self.page.add_style_tag(content=PICTURE_ONLY)
            wide = self.page.evaluate(UNSCROLL)
            if wide > WIDTH:
                self.page.set_viewport_size({"width": int(wide) + 20, "height": 100})
            self.page.screenshot(path=str(png), full_page=True)
        return [p for p in (png, pdf) if p]

    def pdf(self, html: Path, out: Path, *, paper: str = "A4") -> Path:
        """A printed page (A4 by default; the label fits Letter too)."""
        self.open(html)
        self.page.pdf(path=str(out), format=paper, scale=PDF_SCALE, print_background=True)
        return out


class Renderer(threading.Thread):
    """A Session on its own thread: pages are rendered while the caller is still writing the next ones.

    Chromium renders in its own processes, so the labels' PNG/PDF are made while matplotlib draws
    the reports' figures. submit() queues a page; finish() waits and returns the files written.
    """

    def __init__(self, executable: str, *, png: bool, pdf: bool) -> None:
        super().__init__(name="causalrate-render", daemon=True)
        self.executable, self.want_png, self.want_pdf = executable, png, pdf
        self.pages: queue.Queue[tuple[Path, bool] | None] = queue.Queue()
        self.written: list[Path] = []
        self.blocked: list[str] = []
        self.error: BaseException | None = None

    def submit(self, html: Path, *, pdf: bool = False) -> None:
        self.pages.put((html, pdf))

    def run(self) -> None:
        try:
            with Session(self.executable) as session:
                while (item := self.pages.get()) is not None:
                    html, pdf = item
                    self.written += session.render(
                        html,
                        png=html.with_suffix(".png") if self.want_png else None,
                        pdf=html.with_suffix(".pdf") if pdf and self.want_pdf else None,
                    )
                self.blocked = session.blocked
        except BaseException as exc:  # handed to the caller's thread by finish()
            self.error = exc

    def finish(self) -> list[Path]:
        self.pages.put(None)
        self.join()
        if self.error is not None:
            raise self.error
        return self.written

    def close(self) -> None:
        """Stop without the pictures (the caller failed): Chromium is closed, a renderer's own error dropped."""
        self.pages.put(None)
        self.join()
