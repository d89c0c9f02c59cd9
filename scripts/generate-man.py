#!/usr/bin/env python3
"""Generates the manual pages in man/ from the Markdown documentation, which is the source of
their prose:

    docs/extensiond.md  -> man/extensiond.8
    docs/extctl.md      -> man/extctl.1
    docs/policies.md    -> man/extensiond.conf.5      (the configuration file, policies, limits)
    docs/manifest.md    -> man/extensiond-manifest.5  (extension manifests)
    docs/dbus.md        -> man/extensiond.dbus.5      (the D-Bus interface)

Usage: scripts/generate-man.py [OUTPUT_DIRECTORY]   (default: man/)

The output is man(7) roff: headings become .SH/.SS, paragraphs .PP, code blocks no-fill
blocks, lists .IP, tables one .TP entry per row; links keep their text (a link to another
page's Markdown source names that page). Deterministic: no date, so the pages in man/ can be
checked against a fresh generation (IntegrationTests/ManualPageTests).
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = "extensiond 0.1.0"

# page file, source, title, section, NAME line, extra SYNOPSIS (for the section 5 pages)
PAGES = [
    ("extensiond.8", "docs/extensiond.md", "EXTENSIOND", "8", None, None),
    ("extctl.1", "docs/extctl.md", "EXTCTL", "1", None, None),
    ("extensiond.conf.5", "docs/policies.md", "EXTENSIOND.CONF", "5",
     "extensiond.conf \\- configuration file of extensiond: extension-point policies and limits",
     ["/etc/extensiond/config.json (system daemon)",
      "${XDG_CONFIG_HOME:-$HOME/.config}/extensiond/config.json (user daemon)",
      "extensiond --config FILE"]),
    ("extensiond-manifest.5", "docs/manifest.md", "EXTENSIOND-MANIFEST", "5",
     "extensiond-manifest \\- the JSON manifest declaring one extension to extensiond",
     ["EXTENSIONS_DIRECTORY/ID.json"]),
    ("extensiond.dbus.5", "docs/dbus.md", "EXTENSIOND.DBUS", "5",
     "extensiond.dbus \\- the D-Bus interface of extensiond",
     ["org.extensiond1 on the system bus (system daemon) or the session bus (user daemon)",
      "/org/extensiond1, /org/extensiond1/extension/ESCAPED_ID, /org/extensiond1/request/ID",
      "extensiond --bus=auto|system|session|none"]),
]

# Markdown sources that have a manual page: a link to one names the page.
PAGE_OF = {"extensiond.md": "extensiond(8)", "extctl.md": "extctl(1)", "policies.md": "extensiond.conf(5)",
           "manifest.md": "extensiond-manifest(5)", "dbus.md": "extensiond.dbus(5)"}


def escape(text):
    return text.replace("\\", "\\e")


def inline(text):
    """Markdown inline markup to roff: code, bold, emphasis, links."""
    out, i = [], 0
    pattern = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])|\[([^\]]+)\]\(([^)]+)\)", re.DOTALL)
    for m in pattern.finditer(text):
        out.append(escape(text[i:m.start()]))
        if m.group(1) is not None:
            out.append("\\fB" + escape(m.group(1)) + "\\fR")
        elif m.group(2) is not None:
            out.append("\\fB" + inline(m.group(2)) + "\\fR")
        elif m.group(3) is not None:
            out.append("\\fI" + inline(m.group(3)) + "\\fR")
        else:
            label, target = m.group(4), m.group(5)
            out.append(inline(label))
            page = PAGE_OF.get(os.path.basename(target.split("#")[0]))
            if page and page not in label:
                out.append(" (" + page + ")")
        i = m.end()
    out.append(escape(text[i:]))
    return "".join(out)


def inline_lines(lines):
    """The lines of one paragraph or item to roff lines: markup may span a line break."""
    return [line_safe(t) for t in inline("\n".join(lines)).split("\n")]


def line_safe(text):
    """A roff text line: one starting with '.' or '\\'' is protected."""
    return "\\&" + text if text.startswith((".", "'")) else text


def cells(row):
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|"):
        row = row[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row)]


def convert(markdown, title, section, name_line, synopsis):
    lines = markdown.split("\n")
    out = [f'.TH {title} {section} "" "{VERSION}" "extensiond"']
    if name_line:
        out += [".SH NAME", name_line, ".SH SYNOPSIS"]
        for i, s in enumerate(synopsis):
            out += ([".br"] if i else []) + [line_safe(escape(s))]
        out += [".SH DESCRIPTION"]
    i, n = 0, len(lines)
    paragraph = []

    def flush():
        if paragraph and out[-1] == '.SH "NAME"':
            # whatis, apropos and mandb (lexgrog) read NAME as "name \- summary", no macro before it.
            out.extend(p.replace(" — ", " \\- ", 1) for p in inline_lines(paragraph))
            paragraph.clear()
        elif paragraph:
            out.append(".PP")
            out.extend(inline_lines(paragraph))
            paragraph.clear()

    while i < n:
        line = lines[i]
        stripped = line.strip()
        if re.match(r"^<!--.*-->$", stripped):  # a marker for the tests (docs/README.md), not prose
            i += 1
            continue
        if stripped.startswith("```"):
            flush()
            i += 1
            block = []
            while i < n and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            out += [".PP", ".RS 2", ".nf"] + [line_safe(escape(b)) if b else "" for b in block] + [".fi", ".RE"]
            continue
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        if heading:
            flush()
            level, text = len(heading.group(1)), heading.group(2).strip()
            if level == 1:
                if name_line:  # a section 5 page: the document title is a subsection
                    pass
            elif level == 2:
                out.append('.SH "' + inline(text).upper().replace('"', "") + '"' if not name_line else '.SS "' + inline(text).replace('"', "") + '"')
            else:
                out.append('.SS "' + inline(text).replace('"', "") + '"')
            i += 1
            continue
        if stripped == "" or re.match(r"^-{3,}$", stripped):
            flush()
            i += 1
            continue
        if stripped.startswith("|") and i + 1 < n and re.match(r"^\s*\|?\s*:?-{2,}", lines[i + 1]):
            flush()
            header = cells(lines[i])
            i += 2
            while i < n and lines[i].strip().startswith("|"):
                row = cells(lines[i])
                out += [".TP", line_safe(inline(row[0]) or "\\&")]
                for k, cell in enumerate(row[1:], start=1):
                    label = header[k] if len(row) > 2 and k < len(header) and header[k] else ""
                    if k > 1:
                        out.append(".br")
                    out.append(line_safe((inline(label) + ": " if label else "") + inline(cell)))
                i += 1
            continue
        item = re.match(r"^(\s*)([*-]|\d+\.)\s+(.*)$", line)
        if item:
            flush()
            marker = "\\(bu" if item.group(2) in "*-" else item.group(2)
            indent = len(item.group(1))
            text = [item.group(3)]
            i += 1
            while i < n and lines[i].strip() and not re.match(r"^\s*([*-]|\d+\.)\s+", lines[i]) \
                    and (lines[i].startswith(" ") or not lines[i].startswith(("#", "|", "```"))):
                if lines[i].strip().startswith("```"):
                    break
                text.append(lines[i].strip())
                i += 1
            out += [".IP " + marker + (" 4" if indent == 0 else " 6")] + inline_lines(text)
            continue
        if stripped.startswith(">"):
            flush()
            quote = []
            while i < n and lines[i].strip().startswith(">"):
                quote.append(lines[i].strip()[1:].strip())
                i += 1
            out += [".RS 4"] + inline_lines([q for q in quote if q]) + [".RE"]
            continue
        paragraph.append(stripped)
        i += 1
    flush()
    return "\n".join(out) + "\n"


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "man")
    os.makedirs(directory, exist_ok=True)
    for page, source, title, section, name_line, synopsis in PAGES:
        with open(os.path.join(ROOT, source), encoding="utf-8") as f:
            markdown = f.read()
        header = f'.\\" Generated by scripts/generate-man.py from {source}: edit that file, then run the script.\n'
        with open(os.path.join(directory, page), "w", encoding="utf-8") as f:
            f.write(header + convert(markdown, title, section, name_line, synopsis))


if __name__ == "__main__":
    main()
