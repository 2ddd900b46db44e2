"""A readable diff of two pipeline definitions: what a reviewer needs before a deploy.

Line-based diffs of the JSON bury a changed hyperparameter in brace noise and reorderings.
This compares by meaning: parameters by name, steps by name, and inside a step each changed
value by its path, old -> new.

    parameters:
      ~ Epochs: default 10 -> 3
    steps:
      ~ TrainModel
          Arguments.HyperParameters.epochs: ... -> ...
      + NewStep (Processing)
"""

from __future__ import annotations

import json

MAX_VALUE_CHARS = 120
MAX_CHANGES_PER_STEP = 40


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


def _flatten(node, path: str = "") -> dict[str, object]:
    """path -> leaf value; list items by index, except lists of named things by name."""
    if isinstance(node, dict):
        if not node:
            return {path: {}}
        out: dict[str, object] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(node, list):
        if not node:
            return {path: []}
        out = {}
        for index, value in enumerate(node):
            label = index
            if isinstance(value, dict):
                # Channels, inputs and outputs are named: a reordering is no change.
                for key in ("ChannelName", "InputName", "OutputName", "Name"):
                    if isinstance(value.get(key), str):
                        label = value[key]
                        break
            out.update(_flatten(value, f"{path}[{label}]"))
        return out
    return {path: node}


def _changes(old, new) -> list[str]:
    flat_old, flat_new = _flatten(old), _flatten(new)
    lines = []
    for path in sorted(set(flat_old) | set(flat_new)):
        if path not in flat_new:
            lines.append(f"- {path}: {_short(flat_old[path])}")
        elif path not in flat_old:
            lines.append(f"+ {path}: {_short(flat_new[path])}")
        elif flat_old[path] != flat_new[path]:
            lines.append(f"~ {path}: {_short(flat_old[path])} -> {_short(flat_new[path])}")
    return lines


def _all_steps(definition: dict) -> dict[str, dict]:
    """Every step by name, including those nested in a condition's branches."""
    found: dict[str, dict] = {}

    def visit(steps):
        for step in steps or []:
            found[step["Name"]] = step
            arguments = step.get("Arguments") or {}
            if step.get("Type") == "Condition":
                visit(arguments.get("IfSteps"))
                visit(arguments.get("ElseSteps"))

    visit(definition.get("Steps"))
    return found


def _without_branches(step: dict) -> dict:
    """A condition step compared without its branch steps (those are compared by name)."""
    if step.get("Type") != "Condition":
        return step
    arguments = {
        k: [s["Name"] for s in v] if k in ("IfSteps", "ElseSteps") else v
        for k, v in (step.get("Arguments") or {}).items()
    }
    return {**step, "Arguments": arguments}


def definition_diff(old: dict | None, new: dict) -> str:
    """The readable diff; ``old`` None means nothing is deployed yet."""
    if old is None:
        steps = _all_steps(new)
        return (
            f"new pipeline: {len(steps)} steps ({', '.join(steps)}), "
            f"{len(new.get('Parameters') or [])} parameters"
        )
    if old == new:
        return "no changes: the deployed definition is identical"
    sections = []
    old_params = {p["Name"]: p for p in old.get("Parameters") or []}
    new_params = {p["Name"]: p for p in new.get("Parameters") or []}
    param_lines = []
    for name in sorted(set(old_params) | set(new_params)):
        before, after = old_params.get(name), new_params.get(name)
        if before is None:
            param_lines.append(f"  + {name} ({after.get('Type')}): default {_short(after.get('DefaultValue'))}")
        elif after is None:
            param_lines.append(f"  - {name}")
        elif before != after:
            if {k: v for k, v in before.items() if k != "DefaultValue"} == {
                k: v for k, v in after.items() if k != "DefaultValue"
            }:
                param_lines.append(
                    f"  ~ {name}: default {_short(before.get('DefaultValue'))} -> "
                    f"{_short(after.get('DefaultValue'))}"
                )
            else:
                param_lines += [f"  ~ {name}"] + [f"      {c}" for c in _changes(before, after)]
    if param_lines:
        sections.append("parameters:\n" + "\n".join(param_lines))
    old_steps, new_steps = _all_steps(old), _all_steps(new)
    step_lines = []
    for name in [*new_steps, *[n for n in old_steps if n not in new_steps]]:
        before, after = old_steps.get(name), new_steps.get(name)
        if before is None:
            step_lines.append(f"  + {name} ({after.get('Type')})")
        elif after is None:
            step_lines.append(f"  - {name} ({before.get('Type')})")
        else:
            changes = _changes(_without_branches(before), _without_branches(after))
            if changes:
                shown = changes[:MAX_CHANGES_PER_STEP]
                more = len(changes) - len(shown)
                step_lines += [f"  ~ {name}"] + [f"      {c}" for c in shown]
                if more:
                    step_lines.append(f"      ... and {more} more")
    if step_lines:
        sections.append("steps:\n" + "\n".join(step_lines))
    rest_old = {k: v for k, v in old.items() if k not in ("Parameters", "Steps")}
    rest_new = {k: v for k, v in new.items() if k not in ("Parameters", "Steps")}
    other = _changes(rest_old, rest_new)
    if other:
        sections.append("definition:\n" + "\n".join(f"  {c}" for c in other))
    return "\n".join(sections) or "only the order of steps or of named items changed"
