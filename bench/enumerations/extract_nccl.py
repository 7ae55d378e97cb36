"""ncclResult_t and NCCL's WARN lines.

    python bench/enumerations/extract_nccl.py --repo /path/to/NVIDIA/nccl/checkout \
        --header .../nvidia/nccl/include/nccl.h --lib .../nvidia/nccl/lib/libnccl.so.2 \
        --out-dir envcheck/data/enumerations

writes ncclResult_t.json (names and numbers from the header, messages from the library's own
ncclGetErrorString, and the source's switch in src/init.cc for comparison) and
nccl_warn.json (every WARN("...") format string under src/, with its file, line, enclosing
function and the ncclResult_t named within the next lines, which is what the warning usually
ends in), merged over --older-tags releases with the releases each wording is seen in.
--repo is a git checkout of NVIDIA/nccl; --commit is recorded.
"""
from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

import _enum

IN_PROGRESS = {"ncclInProgress"}
RESULTS = ("ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
           "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
           "ncclTimeout")
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_WARN = re.compile(r"\bWARN\(\s*((?:" + _STRING + r"\s*|[A-Z_][A-Z0-9_]*\s*)+)", re.S)
_FUNC = re.compile(r"^(?:[\w:<>*&~]+[ \t*&]+)+\**([A-Za-z_][\w:]*)\s*\([^;{]*\)?\s*(?:const\s*)?\{?\s*$")


def source_switch(init_cc: str) -> dict[str, str]:
    body = init_cc[init_cc.index("const char* ncclGetErrorString(ncclResult_t code)"):]
    body = body[:body.index("default:")]
    return dict(re.findall(r"case (nccl\w+):\s*return \"([^\"]*)\";", body))


def literal(text: str) -> str:
    """Adjacent C string literals joined; a macro between them kept as <MACRO>."""
    parts = re.findall(_STRING + r"|[A-Z_][A-Z0-9_]*", text)
    out = []
    for part in parts:
        if part.startswith('"'):
            out.append(_enum.c_unescape(part[1:-1]))
        else:
            out.append(f"<{part}>")
    return "".join(out)


def warn_lines(repo: Path) -> list[dict]:
    found = []
    for path in sorted((repo / "src").rglob("*")):
        if path.suffix not in {".cc", ".h", ".cu", ".c", ".cpp"} or "windows" in path.name:
            continue
        text = path.read_text(errors="replace")
        lines = text.splitlines()
        for match in _WARN.finditer(text):
            line_no = text.count("\n", 0, match.start()) + 1
            if lines[line_no - 1].lstrip().startswith(("//", "#define")):
                continue
            function = None
            for back in range(line_no - 1, max(0, line_no - 400), -1):
                hit = _FUNC.match(lines[back - 1])
                if hit and hit.group(1) not in {"if", "for", "while", "switch", "return"}:
                    function = hit.group(1)
                    break
            after = "\n".join(lines[line_no - 1:line_no + 4])
            result = re.search(r"\b(" + "|".join(RESULTS[1:]) + r")\b", after)
            found.append({
                "file": str(path.relative_to(repo)),
                "line": line_no,
                "function": function,
                "format": literal(match.group(1)),
                "result_nearby": result.group(1) if result else None,
            })
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    parser.add_argument("--commit", default=None)
    parser.add_argument("--header", required=True)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--lib-version", default="2.32.3 (PyPI nvidia-nccl-cu13 2.32.3)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--older-tags", default="",
                        help="comma-separated release tags of --repo's git history whose WARN lines are merged in "
                             "(needs --repo to be a git checkout with tags)")
    args = parser.parse_args()
    repo = Path(args.repo)
    commit = args.commit or subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"],
                                           capture_output=True, text=True).stdout.strip() or None
    version_mk = (repo / "makefiles" / "version.mk").read_text()
    repo_version = ".".join(re.search(rf"NCCL_{k}\s*:=\s*(\d+)", version_mk).group(1)
                            for k in ("MAJOR", "MINOR", "PATCH"))

    items = _enum.parse_enum(_enum.enum_body(_enum.read(args.header), "ncclResult_t"))
    repo_items = {i["name"]: i["value"] for i in
                  _enum.parse_enum(_enum.enum_body(_enum.read(repo / "src" / "nccl.h.in"), "ncclResult_t"))}
    get_string = _enum.c_string_fn(_enum.load(args.lib), "ncclGetErrorString")
    switch = source_switch((repo / "src" / "init.cc").read_text())

    entries = []
    for item in items:
        name, number = item["name"], item["value"]
        entry = {"name": name, "number": number, "message": get_string(number),
                 "description": _enum.sentences(item["doc"])}
        if name == "ncclNumResults":
            entry["message"] = None
            entry["not_a_result"] = True   # the count of results, never returned
        elif switch.get(name) != entry["message"]:
            entry["source_message"] = switch.get(name)
        if repo_items.get(name) != number:
            entry["number_in_repository"] = repo_items.get(name)
        if number == 0:
            entry["success"] = True
        if name in IN_PROGRESS:
            entry["in_progress"] = True
        entries.append(entry)

    source = {"url": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/types.html#ncclresult-t",
              "repository": "NVIDIA/nccl", "path": "src/nccl.h.in (ncclResult_t); src/init.cc (ncclGetErrorString)",
              "commit": commit, "version": f"repository {repo_version}; header and messages from libnccl {args.lib_version}"}
    out = Path(args.out_dir)
    doc = _enum.document("ncclResult_t", source, entries, message_function="ncclGetErrorString",
                         printed_forms=["NCCL error: <message>", "ncclX", "Failed, NCCL error <file>:<line> '<message>'"])
    _enum.check_unique(doc)
    (out / "ncclResult_t.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")

    # WARN lines of this checkout and of older releases (wordings in the wild are older).
    by_key: dict[tuple[str, str], dict] = {}
    releases = [(f"v{repo_version}", repo)]
    temps = []
    for tag in [t for t in args.older_tags.split(",") if t]:
        temp = tempfile.TemporaryDirectory()
        temps.append(temp)
        archive = subprocess.run(["git", "-C", str(repo), "archive", tag, "src", "makefiles"],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(temp.name)
        releases.append((tag, Path(temp.name)))
    for version, root in releases:
        for warn in warn_lines(root):
            key = (warn["file"], warn["format"])
            if key not in by_key:
                by_key[key] = dict(warn, name=f"{warn['file']}:{warn['line']} ({version})", seen_in=[])
            by_key[key]["seen_in"].append(version)
    for temp in temps:
        temp.cleanup()
    warns = list(by_key.values())
    warn_doc = {"schema": _enum.SCHEMA, "name": "nccl_warn",
                "source": {"url": None, "repository": "NVIDIA/nccl", "path": "src/**/*.{cc,h,cu,c,cpp}",
                           "commit": commit, "version": ", ".join(v for v, _ in releases)},
                "printed_form": "<host>:<pid>:<tid> [<cuda device>] NCCL WARN <format filled in>",
                "note": "format is the printf format of a WARN(...) whose format is a string literal; <MACRO> marks a "
                        "macro spliced between literals; result_nearby is the ncclResult_t named within four lines "
                        "after the WARN (null if none); file/line/function are from the first release listed in "
                        "seen_in (newest first); a WARN whose format is not a literal is not listed",
                "entries": [{"name": w["name"], **{k: w[k] for k in ("file", "line", "function", "format",
                                                                   "result_nearby", "seen_in")}}
                            for w in warns]}
    (out / "nccl_warn.json").write_text(json.dumps(warn_doc, indent=1, ensure_ascii=False) + "\n")
    print(len(entries), "results,", len(warns), "WARN lines")


if __name__ == "__main__":
    main()
