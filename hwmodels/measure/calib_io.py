"""Writes a calibration family file: compact JSON, one point per line."""
import json


def write_family(path, family, about, env, points, extra=None):
    lines = ["{", f' "about": {json.dumps(about)},', f' "env": {json.dumps(env)},',
             f' "family": {json.dumps(family)},']
    for k, v in (extra or {}).items():
        lines.append(f' {json.dumps(k)}: {json.dumps(v, separators=(",", ":"))},')
    lines += [' "points": [']
    for i, p in enumerate(points):
        lines.append("  " + json.dumps(p, separators=(",", ":")) + ("," if i + 1 < len(points) else ""))
    lines += [" ]", "}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
