"""matplotlib figures as inline SVG for the HTML report, on the SVG canvas (no pyplot, no
global state, no files, nothing fetched when the page is opened).

The figures themselves are drawn where their data is understood (the load pictures in
``probes.load.plots``). Element ids inside each SVG get a per-figure prefix: several figures
share one HTML document, and matplotlib's ids (clip paths, glyphs) would otherwise collide.
"""

from __future__ import annotations

import io
import re

from matplotlib import rc_context
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_SIZE = re.compile(r'\s(width|height)="[^"]*"')


def to_svg(fig: Figure, key: str, title: str) -> str:
    """``fig`` as an inline ``<svg>`` whose ids start with ``key``."""
    buffer = io.StringIO()
    with rc_context({"svg.hashsalt": key, "svg.fonttype": "path"}):
        FigureCanvasSVG(fig).print_svg(  # type: ignore[no-untyped-call]
            buffer, metadata={"Date": None, "Creator": None}
        )
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = _ID.sub(lambda m: f'id="{key}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{key}-{m.group(2)}", text)
    head_end = text.index(">")
    head = _SIZE.sub("", text[:head_end])
    return f'{head} class="plot" role="img" aria-label="{title}"{text[head_end:]}'
