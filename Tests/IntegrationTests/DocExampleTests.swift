import Foundation
import Testing

/// Every example marked runnable in docs/extctl.md, docs/manifest.md and docs/policies.md is
/// run against a real daemon and prints what the doc shows. The convention (the marker, the
/// fixture extensions, the placeholders) is in docs/README.md.
@Suite struct DocExampleTests {
    static let root = RuntimeC.packageRoot
    static let documents = ["extctl.md", "manifest.md", "policies.md"]

    /// The extensions every runnable block starts with (docs/README.md lists them).
    static func fixtureManifests() -> [String: [String: Any]] {
        [
            "test.json": TestDaemon.testExtension("org.example.test"),
            "sleeper.json": [
                "id": "org.example.sleeper", "executable": "/bin/sleep", "arguments": ["infinity"], "readiness": "exec",
                "policy": ["suspend": "never"],
            ],
            "notes-share.json": TestDaemon.testExtension(
                "com.example.notes.share",
                extra: [
                    "point": "share", "displayName": "Notes",
                    "activation": ["text": true, "urls": 1, "images": 3, "contentTypes": [["type": "application/pdf", "max": 1]]],
                ]),
            "stocks-widget.json": [
                "id": "com.example.stocks.widget", "point": "widget", "executable": BuildProducts.path("stocks-widget"),
            ],
        ]
    }

    /// One `$ COMMAND` of a block and the lines the doc shows after it.
    struct Step {
        var command: String
        var expected: [String]
    }

    static func steps(_ block: DocBlock) -> [Step] {
        var steps: [Step] = []
        for line in block.lines {
            if line.hasPrefix("$ ") {
                steps.append(Step(command: String(line.dropFirst(2)), expected: []))
            } else if !steps.isEmpty {
                steps[steps.count - 1].expected.append(line)
            }
        }
        return steps
    }

    /// The expected lines as a regular expression over the whole output (docs/README.md):
    /// `…` alone is any number of lines, `…` in a line any text, `<PID>` a process id,
    /// `<TIME>` an ISO 8601 time, `<N>` a number; a run of spaces matches any run of spaces.
    static func pattern(_ expected: [String]) -> String {
        let placeholders = [
            ("<PID>", "[0-9]+"), ("<TIME>", "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"), ("<N>", "[0-9]+(?:\\.[0-9]+)?"), ("…", ".*?"),
        ]
        var regex = "^"
        for line in expected {
            if line == "…" { regex += "(?:.*\\n)*?"; continue }
            var piece = ""
            var rest = Substring(trimmed(Substring(line)))
            while !rest.isEmpty {
                if let (token, replacement) = placeholders.first(where: { rest.hasPrefix($0.0) }) {
                    piece += replacement
                    rest = rest.dropFirst(token.count)
                } else if rest.first == " " {
                    piece += " +"
                    rest = rest.drop { $0 == " " }
                } else {
                    piece += NSRegularExpression.escapedPattern(for: String(rest.first!))
                    rest = rest.dropFirst()
                }
            }
            regex += piece + "\\n"
        }
        return regex + "$"
    }

    /// A line without its trailing spaces.
    static func trimmed(_ line: Substring) -> String {
        String(line[..<(line.lastIndex { $0 != " " }.map(line.index(after:)) ?? line.startIndex)])
    }

    static func matches(_ output: String, _ expected: [String]) throws -> Bool {
        let normalized = output.split(separator: "\n", omittingEmptySubsequences: false).map(trimmed)
            .joined(separator: "\n")
        let regex = try NSRegularExpression(pattern: pattern(expected), options: [])
        let range = NSRange(normalized.startIndex..., in: normalized)
        guard let m = regex.firstMatch(in: normalized, options: [.anchored], range: range) else { return false }
        return m.range.length == range.length
    }

    /// Runs a block's commands in order against a fresh daemon with the fixture extensions.
    static func run(_ block: DocBlock) throws {
        let daemon = try TestDaemon(manifests: fixtureManifests())
        try daemon.start()
        let bin = daemon.directory + "/bin", scratch = daemon.directory + "/scratch"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let wrapper = "#!/bin/sh\nexec '\(BuildProducts.path("extctl"))' --socket '\(daemon.socketPath)' \"$@\"\n"
        try Executables.write(wrapper, to: bin + "/extctl")
        try FileManager.default.createSymbolicLink(atPath: bin + "/extensiond", withDestinationPath: BuildProducts.path("extensiond"))
        let environment = [
            "PATH=\(bin):/usr/local/bin:/usr/bin:/bin", "EXTENSIONS=\(daemon.extensionsDirectory)", "LC_ALL=C.UTF-8",
            "HOME=\(scratch)", "XDG_RUNTIME_DIR=\(scratch)",
        ]
        for step in steps(block) {
            // stdout and stderr in one pipe, in the order written, as a terminal shows them.
            let r = try runProgram("/usr/bin/env", ["-i"] + environment + ["/bin/bash", "-c", "cd '\(scratch)' && exec 2>&1 && " + step.command])
            let output = r.out + r.err
            #expect(
                try matches(output, step.expected),
                "\(block): `$ \(step.command)` printed\n\(output)\nwhere the doc shows\n\(step.expected.joined(separator: "\n"))")
        }
    }

    @Test(arguments: documents) func everyRunnableExamplePrintsWhatTheDocShows(document: String) throws {
        let blocks = try DocBlock.all(in: Self.root + "/docs/" + document).filter { $0.marker == "runnable" }
        #expect(!blocks.isEmpty, "\(document) has runnable examples")
        for block in blocks {
            #expect(block.language == "console", "\(block): a runnable block is a ```console block")
            #expect(!Self.steps(block).isEmpty, "\(block): a runnable block has commands ($ …)")
            try Self.run(block)
        }
    }

    /// The matcher itself: placeholders, elided lines, spaces, and a mismatch that must fail.
    @Test func theMatcherHonoursThePlaceholdersAndRefusesADifference() throws {
        let out = "ID    STATE\norg.example.test  suspended  4242\n2026-11-21T02:50:53.761Z x\nmore\nlast\n"
        #expect(try Self.matches(out, ["ID STATE", "org.example.test suspended <PID>", "<TIME> x", "…", "last"]))
        #expect(try Self.matches(out, ["ID STATE", "org.example.test … <N>", "…"]))
        #expect(try !Self.matches(out, ["ID STATE", "org.example.test suspended <PID>", "<TIME> y", "…"]))
        #expect(try !Self.matches(out, ["ID STATE"]), "output beyond the shown lines is a difference")
        #expect(try !Self.matches("a\n", ["a", "b"]))
    }
}
