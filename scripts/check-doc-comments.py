#!/usr/bin/env python3
"""Lists every public declaration that has no doc comment, and fails if there is one.

A declaration counts when it is marked `public` or `open` (also with `private(set)` and other
modifiers around it), when it is a `case` of a public enum, or when it is a member without an
access modifier of a public protocol or a `public extension`. Declarations inside any extension
count. A declaration is documented when the line right above it (or above the attributes such as
`@inlinable` on the lines right above it) is a `///` line or ends a `/** ... */` block; a blank line
in between breaks the link. A declaration on the line of what precedes it (`{ case a, b }`)
cannot have one, and is reported. `import` and `extension` themselves need no doc comment.

Usage: check-doc-comments.py [--exclude FILE]... [DIRECTORY]...
The directories default to Sources/SupervisorCore, Sources/ExtensionProtocol,
Sources/ExtensionTransport, Sources/ExtensionStatus and Sources/SupervisorKernel (relative to
the repository root). Prints `file:line: declaration` for each undocumented declaration and
exits 1 if there is any, 0 if there is none, and 2 on bad arguments.
"""

import argparse
import os
import sys

DEFAULT_DIRECTORIES = [
    "Sources/SupervisorCore",
    "Sources/ExtensionProtocol",
    "Sources/ExtensionTransport",
    "Sources/ExtensionStatus",
    "Sources/SupervisorKernel",
]

# Words that may stand before a declaration's keyword. `class` is also a keyword; it is a
# modifier when another modifier or a keyword follows it.
MODIFIERS = {
    "public", "open", "package", "internal", "fileprivate", "private",
    "static", "class", "final", "override", "mutating", "nonmutating", "lazy", "weak",
    "unowned", "convenience", "required", "dynamic", "nonisolated", "indirect", "prefix",
    "postfix", "infix", "consuming", "borrowing", "isolated", "distributed", "optional",
    "sending", "__consuming",
}
ACCESS = {"public", "open", "package", "internal", "fileprivate", "private"}
# Keywords that begin a declaration needing a doc comment when public.
DOCUMENTED = {
    "func", "var", "let", "init", "subscript", "struct", "enum", "class", "actor",
    "protocol", "typealias", "case", "associatedtype", "macro",
}
# Keywords that begin a declaration with a body of members.
TYPE_KINDS = {"struct", "enum", "class", "actor", "protocol", "extension"}
# Keywords that begin a declaration needing no doc comment of its own.
UNDOCUMENTED = {"extension", "import", "deinit", "operator", "precedencegroup"}


class Token:
    __slots__ = ("kind", "text", "line", "first")

    def __init__(self, kind, text, line, first):
        self.kind = kind    # "word", "attr", "directive", "punct", "string"
        self.text = text
        self.line = line    # 1-based line of the token's first character
        self.first = first  # whether it is the first token on its line

    def __repr__(self):
        return f"{self.kind}:{self.text}@{self.line}"


def is_word_start(c):
    return c.isalpha() or c == "_"


def is_word_char(c):
    return c.isalnum() or c == "_"


class Lexer:
    """Splits Swift source into tokens, skipping comments and the contents of string literals
    (including interpolations, so braces inside them are not counted)."""

    def __init__(self, text):
        self.s = text
        self.i = 0
        self.line = 1
        self.line_has_token = False
        self.silent = 0  # nesting of string interpolations, whose tokens are not kept
        self.tokens = []

    def advance(self, n=1):
        for _ in range(n):
            if self.i < len(self.s) and self.s[self.i] == "\n":
                self.line += 1
                self.line_has_token = False
            self.i += 1

    def emit(self, kind, text, line):
        if self.silent:
            return
        self.tokens.append(Token(kind, text, line, not self.line_has_token))
        self.line_has_token = True

    def run(self):
        self.code(until_paren=False)
        return self.tokens

    def code(self, until_paren):
        """Lexes code; inside an interpolation (`until_paren`) stops after its closing `)`."""
        depth = 0
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            nxt = s[self.i + 1] if self.i + 1 < len(s) else ""
            if c == "\n" or c.isspace():
                self.advance()
            elif c == "/" and nxt == "/":
                while self.i < len(s) and s[self.i] != "\n":
                    self.advance()
            elif c == "/" and nxt == "*":
                self.block_comment()
            elif c == '"' or (c == "#" and self.raw_string_ahead()):
                self.emit("string", '""', self.line)
                self.string()
            elif c == "@" and is_word_start(nxt):
                start, line = self.i, self.line
                self.advance()
                while self.i < len(s) and is_word_char(s[self.i]):
                    self.advance()
                self.emit("attr", s[start:self.i], line)
            elif c == "#" and is_word_start(nxt):
                start, line = self.i, self.line
                self.advance()
                while self.i < len(s) and is_word_char(s[self.i]):
                    self.advance()
                self.emit("directive", s[start:self.i], line)
            elif c == "`":
                start, line = self.i, self.line
                self.advance()
                while self.i < len(s) and s[self.i] not in "`\n":
                    self.advance()
                self.advance()
                self.emit("word", s[start + 1:self.i - 1], line)
            elif is_word_start(c):
                start, line = self.i, self.line
                while self.i < len(s) and is_word_char(s[self.i]):
                    self.advance()
                self.emit("word", s[start:self.i], line)
            elif c.isdigit():
                start, line = self.i, self.line
                while self.i < len(s) and (is_word_char(s[self.i]) or s[self.i] == "."):
                    if s[self.i] == "." and not (self.i + 1 < len(s) and s[self.i + 1].isdigit()):
                        break
                    self.advance()
                self.emit("number", s[start:self.i], line)
            else:
                if until_paren:
                    if c == "(":
                        depth += 1
                    elif c == ")":
                        if depth == 0:
                            self.advance()
                            return
                        depth -= 1
                self.emit("punct", c, self.line)
                self.advance()

    def block_comment(self):
        nesting = 0
        s = self.s
        while self.i < len(s):
            if s.startswith("/*", self.i):
                nesting += 1
                self.advance(2)
            elif s.startswith("*/", self.i):
                nesting -= 1
                self.advance(2)
                if nesting == 0:
                    return
            else:
                self.advance()

    def raw_string_ahead(self):
        j = self.i
        while j < len(self.s) and self.s[j] == "#":
            j += 1
        return j < len(self.s) and self.s[j] == '"'

    def string(self):
        s = self.s
        hashes = 0
        while s[self.i] == "#":
            hashes += 1
            self.advance()
        multiline = s.startswith('"""', self.i)
        quote = '"""' if multiline else '"'
        self.advance(len(quote))
        closing = quote + "#" * hashes
        escape = "\\" + "#" * hashes
        while self.i < len(s):
            if s.startswith(closing, self.i):
                self.advance(len(closing))
                return
            if s.startswith(escape, self.i):
                self.advance(len(escape))
                if self.i < len(s) and s[self.i] == "(":
                    self.advance()
                    self.silent += 1
                    self.code(until_paren=True)
                    self.silent -= 1
                else:
                    self.advance()
                continue
            if s[self.i] == "\n" and not multiline:
                return  # an unterminated literal; the compiler reports it
            self.advance()


class Scope:
    __slots__ = ("kind", "public")

    def __init__(self, kind, public):
        self.kind = kind      # a TYPE_KINDS keyword, or "body" for any other braces
        self.public = public  # whether the type (or extension) is public


def parse_declaration(tokens, k):
    """Reads attributes, modifiers and the keyword from tokens[k]. Returns (attribute count,
    modifiers, keyword, index after the keyword) or None when tokens[k] starts no declaration."""
    n = len(tokens)
    attributes = 0
    while k < n and tokens[k].kind == "attr":
        attributes += 1
        k += 1
        if k < n and tokens[k].text == "(" and tokens[k].line == tokens[k - 1].line:
            depth = 0
            while k < n:
                if tokens[k].text == "(":
                    depth += 1
                elif tokens[k].text == ")":
                    depth -= 1
                    if depth == 0:
                        k += 1
                        break
                k += 1
    modifiers = []
    while k < n and tokens[k].kind == "word":
        word = tokens[k].text
        if word == "class" and not (k + 1 < n and tokens[k + 1].kind == "word"
                                    and (tokens[k + 1].text in MODIFIERS
                                         or tokens[k + 1].text in DOCUMENTED)):
            break
        if word not in MODIFIERS:
            break
        k += 1
        if (k + 2 < n and tokens[k].text == "(" and tokens[k + 1].kind == "word"
                and tokens[k + 2].text == ")"):
            word += "(" + tokens[k + 1].text + ")"
            k += 3
        modifiers.append(word)
    if k < n and tokens[k].kind == "word" and (tokens[k].text in DOCUMENTED
                                               or tokens[k].text in UNDOCUMENTED):
        return attributes, modifiers, tokens[k].text, k + 1
    return None


def undocumented_in(path, text):
    """Yields (line, declaration text) for each public declaration in `text` without a doc
    comment."""
    lines = text.split("\n")
    tokens = Lexer(text).run()
    scopes = []          # open braces, innermost last
    pending = None       # the scope the next `{` opens, set by the last declaration
    parens = 0           # depth of ( and [ at the current token
    k = 0
    n = len(tokens)
    while k < n:
        token = tokens[k]
        enclosing = scopes[-1] if scopes else Scope("file", False)
        # A declaration starts a line, or follows `{` or `;` on the line of another (where no
        # doc comment can reach it, so it is reported).
        starts = token.first or (k > 0 and tokens[k - 1].text in ("{", ";"))
        if starts and parens == 0 and enclosing.kind != "body":
            parsed = parse_declaration(tokens, k)
            if parsed is not None:
                attributes, modifiers, keyword, after = parsed
                access = {m for m in modifiers if m in ACCESS}
                if access:
                    public = bool(access & {"public", "open"})
                else:
                    public = ((enclosing.kind in ("protocol", "extension") and enclosing.public)
                              or (keyword == "case" and enclosing.kind == "enum"
                                  and enclosing.public))
                if keyword in TYPE_KINDS:
                    pending = Scope(keyword, public)
                else:
                    pending = Scope("body", False)
                if public and keyword in DOCUMENTED and not (token.first and documented(lines, token.line)):
                    start = tokens[k + attributes].line
                    yield start, lines[start - 1].strip()
                k = after
                continue
        if token.kind == "punct":
            if token.text in "([":
                parens += 1
            elif token.text in ")]":
                parens = max(0, parens - 1)
            elif token.text == "{":
                scopes.append(pending if pending is not None else Scope("body", False))
                pending = None
            elif token.text == "}":
                if scopes:
                    scopes.pop()
                pending = None
        k += 1


def documented(lines, line):
    """Whether the declaration whose first token (an attribute or a modifier) is on `line`
    has a doc comment right above it, attributes on lines of their own allowed in between."""
    j = line - 2
    while j >= 0 and lines[j].strip().startswith("@"):
        j -= 1
    if j < 0:
        return False
    above = lines[j].strip()
    if above.startswith("///"):
        return True
    if above.endswith("*/"):
        while j >= 0:
            if "/*" in lines[j]:
                return lines[j].strip().startswith("/**")
            j -= 1
    return False


def swift_files(directory):
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".swift"):
                yield os.path.join(root, name)


def main():
    parser = argparse.ArgumentParser(
        description="List public Swift declarations without a /// doc comment; fail if any.")
    parser.add_argument("directories", nargs="*", metavar="DIRECTORY",
                        help="directories to search for .swift files (default: "
                             + " ".join(DEFAULT_DIRECTORIES) + ")")
    parser.add_argument("--exclude", action="append", default=[], metavar="FILE",
                        help="a .swift file not to check (may be given more than once)")
    arguments = parser.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    directories = arguments.directories or [os.path.join(root, d) for d in DEFAULT_DIRECTORIES]
    excluded = set()
    for name in arguments.exclude:
        if not os.path.isfile(name) and os.path.isfile(os.path.join(root, name)):
            name = os.path.join(root, name)
        if not os.path.isfile(name):
            parser.error(f"--exclude {name}: no such file")
        excluded.add(os.path.realpath(name))
    for directory in directories:
        if not os.path.isdir(directory):
            parser.error(f"{directory}: no such directory")

    found = 0
    checked = 0
    for directory in directories:
        for path in swift_files(directory):
            if os.path.realpath(path) in excluded:
                continue
            checked += 1
            with open(path, encoding="utf-8") as f:
                text = f.read()
            shown = os.path.relpath(path)
            for line, declaration in undocumented_in(path, text):
                print(f"{shown}:{line}: {declaration}")
                found += 1
    if found:
        print(f"doc comments: {found} public declaration(s) above have no /// doc comment",
              file=sys.stderr)
        return 1
    print(f"doc comments: every public declaration in {checked} file(s) has one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
