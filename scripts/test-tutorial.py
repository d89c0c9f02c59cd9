#!/usr/bin/env python3
"""Runs docs/tutorial.md as a reader would, after the packages are installed and while the
system daemon runs (scripts/test-packages.sh calls it as root): every block marked
`<!-- tutorial-file: PATH -->` is written to PATH, and every ```console block marked
`<!-- tutorial -->` is run command by command (`$ COMMAND`, from the source tree, with bash),
in the order of the page. A command must exit 0 and print what the page shows after it, where
`<PID>` and `<N>` stand for a number, `<TIME>` for an ISO 8601 time, `…` alone on a line for
any number of lines and `…` in a line for any text. Prints one line per step; exits 1 at the
first step that fails, naming it.

    scripts/test-tutorial.py [--page docs/tutorial.md] [--skip SECTION]...

`--skip SECTION` leaves out a `## SECTION` of the page (a runtime this machine lacks).
The blocks before the first `## ` section after "Install" (the install commands themselves)
are not run: the caller installed the packages.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLACEHOLDERS = [("<PID>", r"[0-9]+"), ("<N>", r"[0-9]+(?:\.[0-9]+)?"),
                ("<TIME>", r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"), ("…", r".*?")]


def blocks(path):
    """(section, marker, language, lines) of every fenced block, in order."""
    lines = open(path, encoding="utf-8").read().split("\n")
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        if line.strip().startswith("```"):
            previous = lines[i - 1].strip() if i > 0 else ""
            marker = previous[4:-3].strip() if previous.startswith("<!--") and previous.endswith("-->") else None
            language = line.strip()[3:]
            body, j = [], i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                body.append(lines[j])
                j += 1
            yield section, marker, language, body, i + 1
            i = j
        i += 1


def pattern(expected):
    """The expected lines as one regular expression over the whole output."""
    regex = "^"
    for line in expected:
        if line.strip() == "…":
            regex += r"(?:.*\n)*?"
            continue
        piece, rest = "", line.rstrip()
        while rest:
            for token, replacement in PLACEHOLDERS:
                if rest.startswith(token):
                    piece += replacement
                    rest = rest[len(token):]
                    break
            else:
                if rest[0] == " ":
                    piece += " +"
                    rest = rest.lstrip(" ")
                else:
                    piece += re.escape(rest[0])
                    rest = rest[1:]
        regex += piece + r"\n"
    return regex + "$"


def steps(body):
    """(command, expected lines) of a console block."""
    result = []
    for line in body:
        if line.startswith("$ "):
            result.append((line[2:], []))
        elif result:
            result[-1][1].append(line)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--page", default=os.path.join(ROOT, "docs", "tutorial.md"))
    parser.add_argument("--skip", action="append", default=[])
    options = parser.parse_args()
    count = 0
    for section, marker, language, body, line in blocks(options.page):
        if section in options.skip or section in ("", "Install") or marker is None:
            continue
        where = f"{os.path.basename(options.page)}:{line} ({section})"
        if marker.startswith("tutorial-file:"):
            target = marker.split(":", 1)[1].strip()
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write("\n".join(body) + "\n")
            os.chmod(target, 0o644)
            count += 1
            print(f"ok {count} - {where}: wrote {target}")
        elif marker == "tutorial":
            if language != "console":
                sys.exit(f"test-tutorial: {where}: a tutorial block is a ```console block")
            for command, expected in steps(body):
                r = subprocess.run(["/bin/bash", "-c", "exec 2>&1; " + command], cwd=ROOT, stdout=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True, timeout=600)
                output = "\n".join(l.rstrip() for l in r.stdout.split("\n"))
                if r.returncode != 0 or re.fullmatch(pattern(expected)[1:-1], output) is None:
                    sys.exit(f"test-tutorial: FAILED: {where}: `$ {command}` exited {r.returncode} and printed\n{r.stdout}"
                             f"where the page shows\n" + "\n".join(expected))
                count += 1
                print(f"ok {count} - {where}: $ {command}")
    if count == 0:
        sys.exit("test-tutorial: no step found")
    print(f"test-tutorial: {count} steps of {os.path.basename(options.page)} passed")


if __name__ == "__main__":
    main()
