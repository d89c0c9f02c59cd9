import Foundation
import Testing

/// The manual pages (man/, generated from the Markdown docs by scripts/generate-man.py), the
/// shell completions, and where scripts/install.sh puts both.
@Suite struct ManualPageTests {
    static let packageRoot = RuntimeC.packageRoot
    static let pages = ["extensiond.8", "extctl.1", "extensiond.conf.5", "extensiond-manifest.5", "extensiond.dbus.5"]

    /// `MANWIDTH=80 man --warnings -l FILE` renders each page with no warning at all.
    @Test(arguments: pages) func eachPageRendersWithoutWarnings(page: String) throws {
        let r = try runProgram(
            "/usr/bin/env", ["MANWIDTH=80", "LC_ALL=C.UTF-8", "MAN_KEEP_FORMATTING=", "man", "--warnings", "-l", Self.packageRoot + "/man/" + page])
        #expect(r.status == 0)
        #expect(r.err == "", "\(page): \(r.err)")
        #expect(r.out.count > 2000, "\(page) renders its content")
        let title = page.split(separator: ".").dropLast().joined(separator: ".").uppercased()
        #expect(r.out.hasPrefix(title + "(" + page.split(separator: ".").last! + ")"), "\(page): \(r.out.prefix(80))")
    }

    /// The pages in man/ are what the generator makes of the current docs (run
    /// scripts/generate-man.py after editing docs/extensiond.md, extctl.md, policies.md or
    /// manifest.md).
    @Test func thePagesAreGeneratedFromTheCurrentDocs() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let r = try runProgram("/usr/bin/env", ["python3", Self.packageRoot + "/scripts/generate-man.py", directory])
        try #require(r.status == 0, "\(r.err)")
        for page in Self.pages {
            let fresh = try String(contentsOfFile: directory + "/" + page, encoding: .utf8)
            let committed = try String(contentsOfFile: Self.packageRoot + "/man/" + page, encoding: .utf8)
            #expect(fresh == committed, "man/\(page) is stale: run scripts/generate-man.py")
        }
    }

    /// Every subcommand and every long option of extctl and extensiond (their
    /// `--experimental-dump-help`) appears in the page.
    @Test(arguments: [("extctl", "extctl.1"), ("extensiond", "extensiond.8")])
    func thePagesNameEveryCommandAndOption(tool: String, page: String) throws {
        let dump = try runProgram(BuildProducts.path(tool), ["--experimental-dump-help"])
        try #require(dump.status == 0, "\(dump.err)")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(dump.out.utf8)) as? [String: Any])
        let text = try String(contentsOfFile: Self.packageRoot + "/man/" + page, encoding: .utf8)
        var missing: [String] = []
        func walk(_ command: [String: Any]) {
            for argument in command["arguments"] as? [[String: Any]] ?? [] {
                for name in argument["names"] as? [[String: Any]] ?? [] where name["kind"] as? String == "long" {
                    let option = "--" + (name["name"] as? String ?? "")
                    if !text.contains(option) { missing.append(option) }
                }
            }
            for sub in command["subcommands"] as? [[String: Any]] ?? [] {
                let name = sub["commandName"] as? String ?? ""
                if !text.contains(name) { missing.append(name) }
                walk(sub)
            }
        }
        walk(try #require(info["command"] as? [String: Any]))
        #expect(missing.isEmpty, "\(page) does not name \(missing)")
    }

    /// install.sh puts the pages where `man` finds them, and the completion scripts extctl
    /// generates where bash, zsh and fish look for them; the bash script is valid.
    @Test func installPutsPagesAndCompletionsInTheStandardDirectories() throws {
        let destdir = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: destdir) }
        let install = try runProgram(
            "/bin/bash", [Self.packageRoot + "/scripts/install.sh", "--from", BuildProducts.directory, "--destdir", destdir, "--prefix", "/usr"])
        try #require(install.status == 0, "\(install.err)\(install.out)")
        let root = destdir + "/usr"
        for (name, section) in [("extensiond", "8"), ("extctl", "1"), ("extensiond.conf", "5"), ("extensiond-manifest", "5"), ("extensiond.dbus", "5")] {
            let found = try runProgram("/usr/bin/env", ["man", "-M", root + "/share/man", "-w", section, name])
            #expect(found.out == "\(root)/share/man/man\(section)/\(name).\(section)\n", "man -w \(section) \(name): \(found.out)\(found.err)")
            let rendered = try runProgram("/usr/bin/env", ["MANWIDTH=80", "LC_ALL=C.UTF-8", "man", "--warnings", "-M", root + "/share/man", section, name])
            #expect(rendered.status == 0 && rendered.err == "", "\(name)(\(section)): \(rendered.err)")
        }
        for (shell, path) in [
            ("bash", "share/bash-completion/completions/extctl"), ("zsh", "share/zsh/site-functions/_extctl"),
            ("fish", "share/fish/vendor_completions.d/extctl.fish"),
        ] {
            let generated = try runProgram(BuildProducts.path("extctl"), ["--generate-completion-script", shell])
            let installed = try String(contentsOfFile: root + "/" + path, encoding: .utf8)
            #expect(installed == generated.out && !installed.isEmpty, "\(path)")
        }
        let syntax = try runProgram("/bin/bash", ["-n", root + "/share/bash-completion/completions/extctl"])
        #expect(syntax.status == 0, "\(syntax.err)")
    }

    /// Extension ids complete from the running daemon (argument-parser's custom completion, as
    /// the completion scripts call it), and quietly to nothing without a daemon.
    @Test func extensionIDsCompleteFromTheRunningDaemon() throws {
        let daemon = try TestDaemon(manifests: [
            "a.json": TestDaemon.testExtension("org.example.alpha"),
            "b.json": TestDaemon.testExtension("org.example.beta"),
            "c.json": TestDaemon.testExtension("com.example.gamma"),
        ])
        try daemon.start()
        let extctl = BuildProducts.path("extctl")
        for command in ["status", "kill", "open", "prewarm", "refresh"] {
            let r = try runProgram(
                extctl, ["---completion", command, "--", "positional@0", "4", "6", "extctl", command, "--socket", daemon.socketPath, "org.ex"])
            #expect(r.status == 0, "\(r.err)")
            #expect(r.out == "org.example.alpha\norg.example.beta\n", "\(command): \(r.out)")
        }
        let none = try runProgram(
            extctl, ["---completion", "status", "--", "positional@0", "4", "0", "extctl", "status", "--socket", daemon.directory + "/absent.sock", ""])
        #expect(none.status == 0 && none.out == "" && none.err == "", "\(none.out)\(none.err)")
    }
}
