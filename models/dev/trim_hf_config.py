#!/usr/bin/env python3
"""Developer tool: the fields of a Hugging Face config.json that servesim reads, for a catalogue entry's
"hf_config" (models/README.md, "A model in the catalogue").

    models/dev/trim_hf_config.py CONFIG.json [--servesim build/servesim] > trimmed.json

It imports the config (`servesim model --model-file CONFIG --format json`), then drops each field in
turn (top level, then inside text_config, quantization_config and the like) and keeps it dropped when
the import gives the same model: what is left is every field the import depends on, as the config has
it. A sibling hf_quant_config.json is not read (put the checkpoint's format in quantization_config or in
the entry's checkpoint_precisions). Exit status 1 when the config does not import.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# Fields of the import's output that name the file, not the model.
NAMING = ("name", "display_name", "source")


def imported(servesim, cfg, folder):
    path = os.path.join(folder, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = subprocess.run([servesim, "model", "--model-file", path, "--format", "json"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    spec = json.loads(out.stdout)
    for k in NAMING:
        spec.pop(k, None)
    return spec


def trim(servesim, cfg, folder, want, where):
    """Drops every key of cfg[where...] (a nested dict) whose removal keeps the import equal to `want`."""
    node = cfg
    for k in where:
        node = node[k]
    for key in list(node.keys()):
        value = node.pop(key)
        if imported(servesim, cfg, folder) != want:
            node[key] = value
            if isinstance(value, dict):
                trim(servesim, cfg, folder, want, where + [key])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--servesim", default="build/servesim")
    a = ap.parse_args()
    with open(a.config) as f:
        cfg = json.load(f)
    with tempfile.TemporaryDirectory() as folder:
        want = imported(a.servesim, cfg, folder)
        if want is None:
            sys.exit(f"{a.config}: servesim does not import it (servesim model --model-file {a.config})")
        trim(a.servesim, cfg, folder, want, [])
        order = list(cfg.keys())   # model_type first, as the catalogue's entries have it
        if "model_type" in order:
            order.remove("model_type")
            order.insert(0, "model_type")
        print(json.dumps({k: cfg[k] for k in order}, indent=2))


if __name__ == "__main__":
    main()
