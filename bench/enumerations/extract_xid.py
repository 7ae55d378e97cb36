"""NVIDIA Xid catalogue: every Xid of NVIDIA's "Analyzing Xid Errors with the Xid Catalog" page
(its "Xids" table: code, mnemonic, description, products, immediate and investigatory
resolution buckets, Xid 154 linkage, trigger conditions; and its "Guidance Class" table, what
each bucket means), joined with the kernel driver's own names for the numbers
(open-gpu-kernel-modules, src/common/sdk/nvidia/inc/nverror.h).

    python bench/enumerations/extract_xid.py --page xid-catalog.md --nverror nverror.h \
        --nverror-commit C --nverror-version 595.45.04 > xid.json

--page is the page's text as a table-per-line dump (each cell on its own line ending in " |",
rows starting with "XID |", as the docs site renders to text); --nverror is the header.
A number the header has and the page does not (newer Xids) is kept with the header's name
and null doc fields.
"""
from __future__ import annotations

import argparse
import re

import _enum

PRODUCTS = ("A100", "H100", "B100", "GB200")
LINKAGE = re.compile(r"^(CUDA [\d.]+; GPU driver R\d+|yes; .*)$")


def cells(block: str) -> list[str]:
    out = []
    for line in block.splitlines():
        line = line.strip()
        if not line or set(line) == {"|"}:
            continue
        out.append(line[:-1].rstrip() if line.endswith("|") else line)
    return out


def parse_page(text: str) -> tuple[list[dict], dict[str, str]]:
    table = text[text.index("Type (XID) |"):]
    xids_part, _, rest = table.partition("\nGuidance Class |")
    rows = re.split(r"^XID \|\n", xids_part, flags=re.M)[1:]
    guidance = {}
    guide_cells = cells(rest.split("|---|---|", 1)[1]) if "|---|---|" in rest else []
    for name, action in zip(guide_cells[0::2], guide_cells[1::2]):
        guidance.setdefault(name, action)
    buckets = set(guidance) | {"N/A; Unused"}

    parsed = []
    for row in rows:
        c = cells(row)
        code = int(c[0])
        mnemonics = [m.strip() for m in c[1].split(" / ")]
        applies = dict(zip(PRODUCTS, (v == "YES" for v in c[3:7])))
        rest_cells = c[7:]
        actions = []
        while rest_cells and rest_cells[0] in buckets and len(actions) < 2:
            actions.append(rest_cells.pop(0))
        linkage = None
        trigger = []
        for cell in rest_cells:
            if linkage is None and LINKAGE.match(cell) or cell == "N/A; Unused":
                linkage = cell if cell != "N/A; Unused" else linkage
                if cell == "N/A; Unused" and len(actions) < 2:
                    actions.append(cell)
            elif cell in buckets and len(actions) < 2:
                actions.append(cell)
            else:
                trigger.append(cell)
        parsed.append({
            "number": code,
            "mnemonic": mnemonics[0],
            "mnemonic_aliases": mnemonics[1:],
            "description": c[2],
            "applies_to": applies,
            "immediate_action": actions[0] if actions else None,
            "investigatory_action": actions[1] if len(actions) > 1 else None,
            "xid154_linkage": linkage,
            "trigger_conditions": " ".join(trigger) or None,
        })
    return parsed, guidance


def parse_nverror(text: str) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    start = text.index("#define ROBUST_CHANNEL_GR_EXCEPTION")
    end = text.index("#define ROBUST_CHANNEL_LAST_ERROR")
    for name, value in re.findall(r"^#define\s+(\w+)\s+\((\d+)\)", text[start:end], re.M):
        names.setdefault(int(value), []).append(name)
    return names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--page", required=True)
    parser.add_argument("--nverror", required=True)
    parser.add_argument("--nverror-commit", required=True)
    parser.add_argument("--nverror-version", required=True)
    args = parser.parse_args()

    rows, guidance = parse_page(_enum.read(args.page))
    header = parse_nverror(_enum.read(args.nverror))
    by_number = {row["number"]: row for row in rows}
    if len(by_number) != len(rows):
        raise SystemExit("an Xid number appears twice on the page")

    entries = []
    for number in sorted(set(by_number) | set(header)):
        row = by_number.get(number)
        header_names = header.get(number, [])
        if row:
            entry = {"name": row["mnemonic"], "number": number, "message": None,
                     "description": row["description"]}
            entry.update({k: row[k] for k in ("mnemonic_aliases", "applies_to", "immediate_action",
                                              "investigatory_action", "xid154_linkage", "trigger_conditions")})
            entry["unused"] = row["description"] == "Unused"
        else:
            entry = {"name": header_names[0], "number": number, "message": None, "description": None,
                     "documented": False}
        entry["driver_names"] = header_names
        entries.append(entry)

    source = {
        "url": "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",
        "repository": None, "path": None, "commit": None,
        "version": "Xid Catalog page as stored (covers Xid 1-172; products A100, H100, B100, GB200)",
    }
    extra = {
        "driver_names_source": {"repository": "NVIDIA/open-gpu-kernel-modules",
                                "path": "src/common/sdk/nvidia/inc/nverror.h",
                                "commit": args.nverror_commit, "version": args.nverror_version},
        "resolution_buckets": guidance,
        "printed_forms": ["NVRM: Xid (PCI:<domain:bus:dev>): <number>, <details>"],
        "note": "message is null: an Xid line's text after the number varies per event; "
                "description is the catalog's Description column; 'Unused' means deprecated or V100-and-older only",
    }
    _enum.emit(_enum.document("xid", source, entries, **extra))


if __name__ == "__main__":
    main()
