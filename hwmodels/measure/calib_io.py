"""Reads and writes calibration family files: compact JSON, one point per line. A file may give
its points as rows of values under a top-level "columns" list instead of objects (a third of
the size); read_points() returns objects either way."""
import json


def write_family(path, family, about, env, points, extra=None, columns=None):
    """`columns`: write each point as a row of these fields' values (absent fields as null)."""
    lines = ["{", f' "about": {json.dumps(about)},', f' "env": {json.dumps(env)},',
             f' "family": {json.dumps(family)},']
    for k, v in (extra or {}).items():
        lines.append(f' {json.dumps(k)}: {json.dumps(v, separators=(",", ":"))},')
    if columns:
        lines.append(f' "columns": {json.dumps(columns, separators=(",", ":"))},')
    lines += [' "points": [']
    for i, p in enumerate(points):
        row = [p.get(c) for c in columns] if columns else p
        lines.append("  " + json.dumps(row, separators=(",", ":")) + ("," if i + 1 < len(points) else ""))
    lines += [" ]", "}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def read_points(doc):
    """The points of a parsed family file as dicts (rows expanded by "columns"; nulls dropped)."""
    cols = doc.get("columns")
    return [p if isinstance(p, dict) else {c: v for c, v in zip(cols, p) if v is not None} for p in doc["points"]]
