"""Check every envcheck.enumeration/1 file in a folder: it parses, has the document keys, each
entry has a name, names are unique, and a number repeats only where the entry says whose alias
it is (alias_of). Prints one line per file; exits 1 on the first problem.

    python bench/enumerations/validate.py envcheck/data/enumerations
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REQUIRED = ("schema", "name", "source", "entries")
SOURCE_KEYS = ("url", "repository", "path", "commit", "version")
# Files whose entries are not an enumeration (numbers absent or not unique by design).
NOT_NUMBERED = {"nccl_warn", "host_messages"}


def check(path: Path) -> str:
    doc = json.loads(path.read_text(encoding="utf-8"))
    for key in REQUIRED:
        if key not in doc:
            raise ValueError(f"{path.name}: no {key!r}")
    if doc["schema"] != "envcheck.enumeration/1":
        raise ValueError(f"{path.name}: schema {doc['schema']!r}")
    for key in SOURCE_KEYS:
        if key not in doc["source"]:
            raise ValueError(f"{path.name}: source has no {key!r}")
    names: set[str] = set()
    numbers: dict[int, str] = {}
    flags = {"success": 0, "in_progress": 0, "alias_of": 0}
    for entry in doc["entries"]:
        name = entry.get("name")
        if not name:
            raise ValueError(f"{path.name}: an entry without a name")
        if name in names:
            raise ValueError(f"{path.name}: {name} twice")
        names.add(name)
        for flag in flags:
            flags[flag] += bool(entry.get(flag))
        if doc["name"] in NOT_NUMBERED:
            continue
        number = entry.get("number")
        if number is None:
            continue
        if not isinstance(number, int):
            raise ValueError(f"{path.name}: {name} number {number!r}")
        if number in numbers and not entry.get("alias_of"):
            raise ValueError(f"{path.name}: {number} is {numbers[number]} and {name}, neither an alias")
        numbers.setdefault(number, name)
    return (f"{path.name}: {len(doc['entries'])} entries, {len(numbers)} numbers, "
            f"{flags['alias_of']} aliases, success {flags['success']}, in_progress {flags['in_progress']}")


def main() -> None:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "envcheck/data/enumerations")
    files = sorted(folder.glob("*.json"))
    if not files:
        sys.exit(f"no JSON files in {folder}")
    try:
        for path in files:
            print(check(path))
    except (ValueError, json.JSONDecodeError) as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    main()
