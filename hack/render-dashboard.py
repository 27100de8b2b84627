#!/usr/bin/env python3
"""Render the chart's Grafana dashboard to a PNG from a real Prometheus' data.

No Grafana runs here (docs/operator.md, "Monitoring"), so this draws each panel of
charts/warmgate/files/monitoring/dashboard.json where its gridPos puts it, from the panel's own
expressions sent to Prometheus' HTTP API (`query_range`) with the dashboard's variables as
Grafana would substitute them: state timelines as coloured bands, time series as lines with the
panel's legend format. It needs matplotlib (the dev extra has it; `pip install -e '.[picture]'`
alone), which the operator does not. E2e scenario m calls it at every run with its Prometheus
(tests/e2e/test_m_monitoring.py); `WARMGATE_DASHBOARD_PNG` keeps the picture:

  WARMGATE_DASHBOARD_PNG=docs/images/dashboard.png \\
    .venv/bin/python -m pytest tests/e2e/test_m_monitoring.py
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter
except ImportError:  # say what to install instead of a traceback
    sys.exit("render-dashboard: matplotlib is missing: pip install -e '.[picture]'")

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "charts" / "warmgate" / "files" / "monitoring" / "dashboard.json"
# Grafana's dark theme, approximately.
BACKGROUND, PANEL, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"
PALETTE = ["#73bf69", "#f2cc0c", "#5794f2", "#ff9830", "#f2495c", "#b877d9", "#8ab8ff", "#fade2a"]
UNIT_ROW_INCHES, WIDTH_INCHES = 0.42, 20.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def query_range(url: str, expr: str, start: float, end: float, step: float) -> list[Any]:
    params = {"query": expr, "start": f"{start}", "end": f"{end}", "step": f"{step}"}
    full = f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}"
    doc = json.loads(_OPENER.open(full, timeout=30).read())
    if doc.get("status") != "success":
        raise RuntimeError(f"{expr}: {doc.get('error')}")
    return list(doc["data"]["result"])


def substitute(expr: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        expr = expr.replace(f"${name}", value)
    return expr


def legend(fmt: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def series_of(url: str, panel: dict[str, Any], window: dict[str, Any]) -> list[Any]:
    """(legend, times, values) of every series of every target of the panel."""
    found = []
    for target in panel["targets"]:
        expr = substitute(target["expr"], window["variables"])
        for result in query_range(url, expr, window["start"], window["end"], window["step"]):
            times = [datetime.fromtimestamp(float(t)) for t, _ in result["values"]]
            values = [float(v) for _, v in result["values"]]
            found.append((legend(target.get("legendFormat", ""), result["metric"]), times, values))
    return found


def draw_timeline(ax: Any, series: list[Any], panel: dict[str, Any]) -> None:
    """One band per series: green while 1 (True), red while 0, nothing without data."""
    phase = "phase" in json.dumps(panel["targets"])
    for row, (_, times, values) in enumerate(series):
        for i, (at, value) in enumerate(zip(times, values, strict=True)):
            end = times[i + 1] if i + 1 < len(times) else at
            colour = PALETTE[row % len(PALETTE)] if phase else ("#73bf69" if value else "#f2495c")
            ax.barh(row, (end - at).total_seconds() / 86400 or 1e-5, left=at, color=colour)
    ax.set_yticks(range(len(series)))
    ax.set_yticklabels([name for name, _, _ in series], fontsize=7, color=TEXT)
    ax.invert_yaxis()


def draw_lines(ax: Any, series: list[Any], panel: dict[str, Any]) -> None:
    for i, (name, times, values) in enumerate(series):
        ax.plot(times, values, color=PALETTE[i % len(PALETTE)], linewidth=1.4, label=name)
    if series:
        ax.legend(fontsize=6.5, loc="upper left", facecolor=PANEL, edgecolor=GRID, labelcolor=TEXT)
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if unit == "percentunit":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    elif unit:
        ax.set_ylabel(unit, color=TEXT, fontsize=7)


def style(ax: Any, panel: dict[str, Any], empty: bool) -> None:
    ax.set_facecolor(PANEL)
    ax.set_title(panel["title"], color=TEXT, fontsize=9, loc="left")
    ax.tick_params(colors=TEXT, labelsize=7)
    ax.grid(color=GRID, linewidth=0.5)
    for spine in ax.spines.values():
        spine.set_color(GRID)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    if empty:
        ax.text(0.5, 0.5, "No data", color=TEXT, ha="center", va="center", transform=ax.transAxes)


def panel_axes(fig: Any, panel: dict[str, Any]) -> Any:
    """Axes where Grafana's gridPos puts the panel (24 columns, rows of UNIT_ROW_INCHES), with
    room for its title above, the time axis below and a timeline's row names on the left."""
    width, height = fig.get_size_inches()
    grid, names = panel["gridPos"], 2.9 if panel["type"] == "state-timeline" else 0.5
    left = grid["x"] / 24 + names / width
    right = (grid["x"] + grid["w"]) / 24 - 0.15 / width
    top = 1 - (grid["y"] * UNIT_ROW_INCHES + 0.75) / height
    bottom = 1 - ((grid["y"] + grid["h"]) * UNIT_ROW_INCHES + 0.2) / height
    return fig.add_axes((left, bottom, right - left, top - bottom))


def render(url: str, window: dict[str, Any], out: Path) -> int:
    """Draw every panel; returns how many had no data."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in doc["panels"])
    fig = plt.figure(figsize=(WIDTH_INCHES, rows * UNIT_ROW_INCHES + 0.9), facecolor=BACKGROUND)
    span = (datetime.fromtimestamp(window["start"]), datetime.fromtimestamp(window["end"]))
    empty = 0
    for panel in doc["panels"]:
        ax = panel_axes(fig, panel)
        series = series_of(url, panel, window)
        if panel["type"] == "state-timeline":
            draw_timeline(ax, series, panel)
        else:
            draw_lines(ax, series, panel)
        ax.set_xlim(*span)
        style(ax, panel, not series)
        empty += not series
    fig.text(0.005, 1 - 0.3 / fig.get_size_inches()[1], doc["title"], color=TEXT, fontsize=12)
    fig.savefig(out, dpi=90, facecolor=BACKGROUND)
    return empty


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--prometheus", required=True, help="e.g. http://127.0.0.1:9090")
    parser.add_argument("--start", type=float, required=True, help="Unix seconds")
    parser.add_argument("--end", type=float, required=True, help="Unix seconds")
    parser.add_argument("--namespace", default=".*", help="the namespace variable (regex)")
    parser.add_argument("--name", default=".*", help="the SpecDecodeDeployment variable (regex)")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    step = max(1.0, (args.end - args.start) / 400)
    variables = {
        "__rate_interval": "30s",
        "cluster": ".*",
        "namespace": args.namespace,
        "name": args.name,
    }
    window = {"start": args.start, "end": args.end, "step": step, "variables": variables}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    empty = render(args.prometheus, window, args.out)
    print(f"render-dashboard: wrote {args.out} ({empty} panel(s) without data)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
