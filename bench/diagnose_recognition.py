"""Recognition of real failure lines by `envcheck diagnose` (issue 29 point 4), on the lines of
one file of bench/data/ (``--data``; default diagnose_lines.jsonl, the first collection): its
held-out lines (the measurement) or the others (what the catalogue was developed against).
diagnose_lines_2.jsonl is a second held-out collection, diagnose_lines_dev2.jsonl a second
development one (bench/data/README.md says how each was made).

Each line is diagnosed alone. A line is
- right: its one finding's id maps to the line's cause (bench/data/cause_map.json: one id, or a
  list where the collections' accounts name one cause differently; else the id itself when a
  collection's vocabulary has it), or the finding is ambiguous (asserts no cause) and lists the
  line's cause among its possible causes (issue 29 point 3);
- wrong: a finding asserts another cause (or an ambiguous one not listing the cause);
- none: no finding.
"""
from __future__ import annotations

import collections
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINES = ROOT / "bench" / "data" / "diagnose_lines.jsonl"
CAUSE_MAP = ROOT / "bench" / "data" / "cause_map.json"
def vocabulary() -> set[str]:
    """The cause ids each collection's account defines (README.md, HELD_OUT_*.md, DEV_*.md)."""
    folder = ROOT / "bench" / "data"
    accounts = [folder / "README.md", *sorted(folder.glob("HELD_OUT_*.md")), *sorted(folder.glob("DEV_*.md"))]
    return {cause for account in accounts
            for cause in re.findall(r"^\| `([a-z0-9-]+)` \|", account.read_text("utf-8"), re.M)}


def load(held_out: bool, lines: Path = LINES) -> list[dict]:
    """The lines of one side only: the other side is never read into memory."""
    with lines.open(encoding="utf-8") as fh:
        return [r for r in map(json.loads, fh) if r["held_out"] is held_out]


def judge(findings: list, cause: str, mapped) -> str:
    if not findings:
        return "none"
    found = findings[0]
    if cause in mapped(found.id):
        return "right"
    if found.ambiguous and any(cause in mapped(i) for i in found.possible_ids):
        return "right"
    return "wrong"


def measure(held_out: bool, lines: Path = LINES) -> dict:
    from envcheck.validation.diagnose import diagnose

    known, table = vocabulary(), json.loads(CAUSE_MAP.read_text("utf-8"))["map"]

    xid_ids = {}  # Xid number -> the vocabulary's ids naming it ("xid-109-ctx-switch-timeout", "xid-144-150-...")
    for cause in known:
        numbers = re.match(r"xid-(\d+)(?:-(\d+))?-[a-z]", cause)
        if numbers:
            low = int(numbers.group(1))
            for n in range(low, int(numbers.group(2) or low) + 1):
                xid_ids.setdefault(n, set()).add(cause)

    def mapped(entry_id: str) -> set[str]:
        """The cause ids a finding's id stands for: cause_map's (one id, or several where the
        collections name one cause differently), else its own if the vocabulary has it; a
        generated ``xid-N`` also stands for the vocabulary's ids that name Xid N."""
        ids = table.get(entry_id, entry_id if entry_id in known else ())
        ids = {ids} if isinstance(ids, str) else set(ids)
        number = re.fullmatch(r"xid-(\d+)", entry_id)
        return ids | xid_ids.get(int(number.group(1)), set()) if number else ids

    data = lines
    lines = load(held_out, data)
    overall: collections.Counter = collections.Counter()
    families: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for record in lines:
        verdict = judge(diagnose(record["line"]), record["cause"], mapped)
        overall[verdict] += 1
        families[record["family"]][verdict] += 1
    total = len(lines)

    def shares(counts: collections.Counter, n: int) -> dict:
        return {k: {"lines": counts[k], "percent": round(100 * counts[k] / n, 1)} for k in ("right", "wrong", "none")}

    return {"file": data.name, "lines": "held-out" if held_out else "visible (development)", "count": total,
            "threads": len({r["source"] for r in lines}), "overall": shares(overall, total),
            "families": {f: {"count": sum(c.values()), **shares(c, sum(c.values()))} for f, c in sorted(families.items())},
            "targets": {"right_percent_at_least": 90, "wrong_percent_at_most": 2}}


def table(result: dict) -> str:
    rows = ["| family | lines | right | wrong | none |", "|---|---:|---:|---:|---:|"]
    for family, r in result["families"].items():
        rows.append(f"| {family} | {r['count']} | {r['right']['lines']} ({r['right']['percent']}%) | "
                    f"{r['wrong']['lines']} ({r['wrong']['percent']}%) | {r['none']['lines']} ({r['none']['percent']}%) |")
    o = result["overall"]
    rows.append(f"| **all** | **{result['count']}** | **{o['right']['lines']} ({o['right']['percent']}%)** | "
                f"**{o['wrong']['lines']} ({o['wrong']['percent']}%)** | **{o['none']['lines']} ({o['none']['percent']}%)** |")
    return "\n".join(rows)
