"""The pipeline's DAG as the notebook draws it: its steps and edges from the definition JSON,
the edges a longer path implies left out, one box per step (matplotlib imported when it is drawn)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable

# Step type -> box colour in the DAG picture.
STEP_COLOURS = {
    "Processing": "#cfe2f3",
    "Training": "#d9ead3",
    "Condition": "#fff2cc",
    "RegisterModel": "#ead1dc",
    "Fail": "#f4cccc",
}
_STEP_REFERENCE = re.compile(r'"Steps\.([A-Za-z0-9_-]+)[."]')


def dag_edges(definition: dict) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """(every step, edges as (from, to, label)) of a definition. An edge is a data reference
    (``Get: Steps.X...``, a property file), a ``DependsOn``, or a condition's branch, whose
    label is ``if`` or ``else``; the others have an empty label."""
    steps: list[dict] = []
    edges: list[tuple[str, str, str]] = []

    def visit(items: Iterable[dict]):
        for step in items:
            steps.append(step)
            arguments = dict(step.get("Arguments") or {})
            branches = {}
            if step.get("Type") == "Condition":
                branches = {"if": arguments.pop("IfSteps", []), "else": arguments.pop("ElseSteps", [])}
            body = {k: v for k, v in step.items() if k != "Arguments"} | {"Arguments": arguments}
            sources = set(_STEP_REFERENCE.findall(json.dumps(body))) | set(step.get("DependsOn") or [])
            edges.extend((source, step["Name"], "") for source in sorted(sources) if source != step["Name"])
            for label, branch in branches.items():
                edges.extend((step["Name"], child["Name"], label) for child in branch)
                visit(branch)

    visit(definition.get("Steps") or [])
    return steps, edges


def reduced_edges(edges: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """``edges`` without those implied by a longer path (the transitive reduction): the
    picture shows the order of the steps, not every data reference. Branch edges stay."""
    targets: dict[str, set[str]] = {}
    for source, target, _label in edges:
        targets.setdefault(source, set()).add(target)

    def reachable_without(source: str, target: str) -> bool:
        seen, todo = set(), [t for t in targets.get(source, ()) if t != target]
        while todo:
            node = todo.pop()
            if node == target:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(targets.get(node, ()))
        return False

    return [e for e in edges if e[2] or not reachable_without(e[0], e[1])]


def _layers(steps: list[dict], edges: list[tuple[str, str, str]]) -> dict[str, int]:
    """Each step's column: the length of the longest chain of edges leading to it."""
    depth = {s["Name"]: 0 for s in steps}
    for _ in range(len(steps)):
        changed = False
        for source, target, _label in edges:
            if source in depth and depth[target] < depth[source] + 1:
                depth[target] = depth[source] + 1
                changed = True
        if not changed:
            break
    return depth


def dag_figure(definition: dict):
    """The DAG as a matplotlib Figure: one box per step (name and type), arrows between them,
    condition branches labelled."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    steps, edges = dag_edges(definition)
    depth = _layers(steps, edges)
    edges = reduced_edges(edges)
    columns: dict[int, list[str]] = {}
    for step in steps:
        columns.setdefault(depth[step["Name"]], []).append(step["Name"])
    kinds = {s["Name"]: s.get("Type", "?") for s in steps}
    width, height, gap_x, gap_y = 2.6, 0.9, 0.9, 0.6
    position = {}
    tallest = max(len(names) for names in columns.values()) if columns else 1
    for column, names in columns.items():
        top = (tallest - len(names)) * (height + gap_y) / 2
        for row, name in enumerate(names):
            position[name] = (column * (width + gap_x), -(top + row * (height + gap_y)))

    figure = Figure(figsize=(max(4.0, len(columns) * (width + gap_x) * 0.9),
                             max(2.0, tallest * (height + gap_y) * 0.9)))
    axes = figure.subplots()
    for name, (x, y) in position.items():
        axes.add_patch(FancyBboxPatch(
            (x, y - height / 2), width, height, boxstyle="round,pad=0.05",
            facecolor=STEP_COLOURS.get(kinds[name], "#eeeeee"), edgecolor="#444444",
        ))
        label = name if len(name) <= 30 else name[:28] + "..."
        axes.text(x + width / 2, y + 0.12, label, ha="center", va="center",
                  fontsize=9 if len(label) <= 22 else 7.5, weight="bold")
        axes.text(x + width / 2, y - 0.2, kinds[name], ha="center", va="center", fontsize=8, color="#444444")
    for source, target, label in edges:
        if source not in position or target not in position:
            continue
        (x0, y0), (x1, y1) = position[source], position[target]
        axes.add_patch(FancyArrowPatch(
            (x0 + width + 0.05, y0), (x1 - 0.05, y1), arrowstyle="-|>", mutation_scale=12,
            color="#333333", connectionstyle="arc3,rad=0.0",
        ))
        if label:
            axes.text((x0 + width + x1) / 2, (y0 + y1) / 2 + 0.12, label, ha="center", fontsize=8,
                      style="italic", color="#7f6000")
    xs = [x for x, _ in position.values()] or [0]
    ys = [y for _, y in position.values()] or [0]
    axes.set_xlim(min(xs) - 0.3, max(xs) + width + 0.3)
    axes.set_ylim(min(ys) - height, max(ys) + height)
    axes.set_axis_off()
    axes.set_title(f"{len(steps)} steps", fontsize=10)
    figure.tight_layout()
    return figure


def dag_picture(definition: dict, format: str = "png") -> bytes:
    """The DAG picture as PNG (default) or SVG bytes."""
    import matplotlib

    # SVG keeps its text as text (searchable, readable by screen readers), not as outlines.
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        figure = dag_figure(definition)
        out = io.BytesIO()
        figure.savefig(out, format=format, dpi=110)
    return out.getvalue()
