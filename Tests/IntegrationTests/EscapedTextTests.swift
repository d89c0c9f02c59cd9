import Foundation
import Testing

/// Text from untrusted input reaches neither the daemon's log nor extctl's output raw: a refused
/// manifest's values, and what an extension says (an assertion reason), are escaped
/// (`UntrustedText`, docs/security.md), so an ESC sequence or a NUL shows as `\x1b` or `\x00`.
@Suite struct EscapedTextTests {
    /// Whether `text` holds a NUL or an ESC.
    static func hasRawControl(_ text: String) -> Bool {
        text.utf8.contains(0) || text.utf8.contains(0x1B)
    }

    @Test func aRefusedManifestsValuesAreEscapedInTheLogAndInExtctlReload() throws {
        let daemon = try TestDaemon(manifests: [
            "esc.json": ["id": "a\u{1B}[31mb", "executable": "/bin/true"],
            "nul.json": ["id": "org.example.nul", "executable": "/bin/true", "user": "\u{0}root"],
        ])
        try daemon.start()
        let log = daemon.log()
        #expect(log.contains(#"esc.json: field 'id': 'a\x1b[31mb' may contain only letters, digits, '.', '-' and '_'"#), "\(log)")
        #expect(log.contains(#"nul.json: field 'user': "#) && log.contains(#"\x00root"#), "\(log)")
        #expect(!Self.hasRawControl(log), "\(Array(log.utf8).filter { $0 < 0x20 && $0 != 0x0A })")

        let reload = try daemon.extctl(["reload"])
        #expect(reload.status == 1)
        #expect(reload.err.contains(#"esc.json: field 'id': 'a\x1b[31mb'"#), "\(reload.err)")
        #expect(reload.err.contains(#"\x00root"#), "\(reload.err)")
        #expect(!Self.hasRawControl(reload.err))
        // The JSON report escapes them as JSON does.
        let json = try daemon.extctl(["reload", "--json"])
        #expect(json.out.contains(#"a\u001b[31mb"#) && json.out.contains(#"\u0000root"#), "\(json.out)")
        #expect(!Self.hasRawControl(json.out))
        #expect(!Self.hasRawControl(daemon.log()))
        #expect(daemon.stop() == 0)
    }

    @Test func anExtensionsAssertionReasonIsEscapedInTheLogAndInExtctlStatus() throws {
        let id = "org.example.reason"
        let daemon = try TestDaemon(manifests: ["r.json": TestDaemon.testExtension(id)])
        try daemon.start(arguments: ["--log-level", "debug"])
        let host = try daemon.host()
        let session = try host.begin(id)
        let channel = try session.hostChannel()
        channel.send("assert 30 a\u{1B}]0;owned\u{7}b\u{0}c")
        #expect(channel.readLine() == "granted")
        let acquire = try daemon.events.wait("acquire", of: id)
        #expect(acquire.detail == "a\u{1B}]0;owned\u{7}b\u{0}c", "the event itself keeps the text as the extension gave it")

        let escaped = #"a\x1b]0;owned\x07b\x00c"#
        try eventually("the acquire is logged") { daemon.log().contains("ASSERTION_REASON=\(escaped)") }
        #expect(!Self.hasRawControl(daemon.log()))
        let status = try daemon.extctl(["status", id])
        #expect(status.status == 0)
        #expect(status.out.contains("\"\(escaped)\" age"), "\(status.out)")
        #expect(status.out.contains("(\(escaped))"), "the recent acquire event: \(status.out)")
        #expect(!Self.hasRawControl(status.out))
        try host.dismiss(session)
        #expect(daemon.stop() == 0)
    }
}
