import ExtensionHost
import Foundation
import Testing

/// Launch errors that say what to do (docs/extensiond.md, "Launch errors"): an executable behind
/// a directory the extension's uid cannot search is named with that uid and that directory, in
/// the answer `extctl open` prints, and such a configuration error is not counted as a crash.
@Suite(.enabled(if: getuid() == 0, "needs a root daemon (an extension under a uid of its own)"))
struct LaunchErrorTests {
    @Test func aDirectoryTheUidCannotSearchIsNamedAndNotThrottled() throws {
        // /bin/true behind a 0700 directory of root's, reached through a link a venv would have.
        let tree = ReachableCopies.directory + "/private-\(getpid())"
        try FileManager.default.createDirectory(atPath: tree + "/bin", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tree) }
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: tree + "/bin/program")
        #expect(chmod(tree, 0o700) == 0)
        let venv = ReachableCopies.directory + "/venv-\(getpid())"
        try FileManager.default.createDirectory(atPath: venv, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: venv) }
        try FileManager.default.createSymbolicLink(atPath: venv + "/python", withDestinationPath: tree + "/bin/program")

        let id = "org.example.unreachable"
        let daemon = try TestDaemon(
            manifests: ["u.json": ["id": id, "point": "widget", "executable": venv + "/python", "readiness": "exec", "sandbox": "none"]],
            config: ["allowUnsandboxedExtensions": true], extensionsAsRoot: false)
        try daemon.start()
        let uid = try #require((try CredentialTests.statusEntry(daemon, id)["credentials"] as? [String: Any])?["uid"] as? Int)
        for attempt in 1...3 {
            let r = try daemon.extctl(["open", id], stdin: "")
            #expect(r.status == 1, "attempt \(attempt): \(r)")
            #expect(r.err.contains("uid \(uid) (the extension's) cannot search the directory \(tree) (mode 0700, owner 0"), "attempt \(attempt): \(r)")
            #expect(!r.err.contains("throttled"), "attempt \(attempt): a configuration error must not throttle: \(r)")
        }
        #expect(try CredentialTests.statusEntry(daemon, id)["consecutiveCrashes"] as? Int == 0)
    }

    /// A program under a directory the sandbox replaces (/tmp) is named at reload, before any
    /// launch, with what stays visible of it; the same program unsandboxed is not.
    @Test func aProgramTheSandboxHidesIsNamedAtReload() throws {
        let tree = ReachableCopies.directory + "/venv-\(getpid())-reload/bin"
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: (tree as NSString).deletingLastPathComponent) }
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: tree + "/python")
        let daemon = try TestDaemon(
            manifests: [
                "s.json": ["id": "org.example.sandboxed", "point": "widget", "executable": tree + "/python", "readiness": "exec"],
                "n.json": ["id": "org.example.open", "point": "widget", "executable": tree + "/python", "readiness": "exec", "sandbox": "none"],
            ],
            config: ["allowUnsandboxedExtensions": true], extensionsAsRoot: false)
        try daemon.start()
        let r = try daemon.extctl(["reload"])
        #expect(r.status == 0, "\(r)")
        let hidden = try #require(ReachableCopies.directory.split(separator: "/").first.map { "/" + $0 })
        #expect(
            r.err.contains(
                "extctl: warning: org.example.sandboxed: its executable \(tree)/python is under \(hidden), which the sandbox replaces with a private, empty directory: only \(tree) stays visible to it"
            ), "\(r)")
        #expect(!r.err.contains("org.example.open"), "\(r)")
    }
}
