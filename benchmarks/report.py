"""Figures, their targets, the printed table and the JSON file.

Every figure carries its own baseline, measured in the same run, and ``ratio`` is always
``value / baseline``: for a time lower is better, for a rate higher is better; the target
says which way it must go.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Target:
    """``of`` the figure's "value" or "ratio" must be ``op`` ("<=" or ">=") ``limit``."""

    of: str
    op: str
    limit: float
    text: str
    p95_limit: float | None = None  # and the 95th percentile at most this (latency)

    def met(self, value: float, ratio: float, p95: float | None = None) -> bool:
        seen = value if self.of == "value" else ratio
        ok = seen <= self.limit if self.op == "<=" else seen >= self.limit
        return ok and (self.p95_limit is None or (p95 is not None and p95 <= self.p95_limit))


@dataclass
class Figure:
    key: str  # stable id, e.g. "warm_latency"
    title: str
    unit: str  # "ms", "letters/s"
    value: float | None
    baseline: float | None
    baseline_label: str
    target: Target | None = None
    runs: int = 0  # how many measurements the value is the median of
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # why the figure was not measured

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    @property
    def met(self) -> bool | None:
        ratio = self.ratio
        if self.target is None or self.value is None or ratio is None:
            return None
        return self.target.met(self.value, ratio, self.details.get("p95"))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = self.ratio
        data["met"] = self.met
        return data


def median(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _num(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"
    return f"{value:,.0f} {unit}"


def table(figures: list[Figure]) -> str:
    """One plain-text table: figure, agentmail, baseline, ratio, target, verdict."""
    rows = [("figure", "agentmail", "baseline", "ratio", "target", "")]
    for fig in figures:
        if fig.skipped:
            rows.append((fig.title, "skipped", "-", "-", "-", fig.skipped))
            continue
        value = _num(fig.value, fig.unit)
        if "p95" in fig.details:
            value += f" (p95 {_num(fig.details['p95'], fig.unit)})"
        ratio = f"{fig.ratio:.2f}x" if fig.ratio is not None else "-"
        verdict = {True: "ok", False: "MISSED", None: ""}[fig.met]
        rows.append(
            (
                fig.title,
                value,
                f"{_num(fig.baseline, fig.unit)} {fig.baseline_label}",
                ratio,
                fig.target.text if fig.target else "-",
                verdict,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, machine: dict[str, Any], mode: str, seconds: float, figures: list[Figure]) -> None:
    data = {"machine": machine, "mode": mode, "seconds": round(seconds, 1), "figures": [f.to_json() for f in figures]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
