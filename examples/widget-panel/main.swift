// widget-panel: an example host. It opens a widget extension, reads what it shows, dismisses
// it, and after each step prints the state extensiond reports, so the lifecycle is visible:
// launch -> active -> dismissed -> suspended -> resumed (same pid) -> suspended.
//
// Usage: widget-panel [--socket PATH] [--cycles N] EXTENSION_ID
import ExtensionHost
import Foundation

var args = Array(CommandLine.arguments.dropFirst())
var socketPath: String?
var cycles = 2
while let first = args.first, first.hasPrefix("--") {
    args.removeFirst()
    switch first {
    case "--socket": socketPath = args.isEmpty ? nil : args.removeFirst()
    case "--cycles": cycles = Int(args.isEmpty ? "" : args.removeFirst()) ?? 2
    default:
        FileHandle.standardError.write(Data("widget-panel: unknown option \(first)\n".utf8))
        exit(2)
    }
}
guard let extensionID = args.first else {
    FileHandle.standardError.write(Data("usage: widget-panel [--socket PATH] [--cycles N] EXTENSION_ID\n".utf8))
    exit(2)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("widget-panel: \(message)\n".utf8))
    exit(1)
}

/// The extension's state and group members as extensiond reports them.
func describe(_ client: ControlClient) -> String {
    guard case .json(let bytes)? = try? client.call(timeout: 5, { .query(tag: $0, kind: .status, extensionIDs: [extensionID]) }),
        let doc = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
        let e = (doc["extensions"] as? [[String: Any]])?.first
    else { return "(status unavailable)" }
    let group = (e["processes"] as? [[String: Any]] ?? []).map { "\($0["pid"] as? Int ?? 0):\($0["state"] as? String ?? "?")" }
    return "state=\(e["state"] as? String ?? "?") pid=\((e["pid"] as? Int).map(String.init) ?? "-") /proc=\(group.joined(separator: ","))"
}

/// Waits (on extensiond's word, not a fixed sleep) until the extension reports `state`.
func waitFor(_ state: String, _ client: ControlClient) -> String {
    let deadline = Date().addingTimeInterval(10)
    var last = ""
    while Date() < deadline {
        last = describe(client)
        if last.hasPrefix("state=\(state) ") { return last }
        usleep(20_000)
    }
    fail("extension did not reach '\(state)' (last: \(last))")
}

let host: ExtensionHostConnection
do { host = try ExtensionHostConnection(socketPath: socketPath) } catch { fail(error.message) }
print("before:   \(describe(host.client))")
var firstPID: Int32?
for cycle in 1...cycles {
    let started = Date()
    let session: ExtensionSession
    do { session = try host.begin(extensionID) } catch { fail(error.message) }
    let ms = Date().timeIntervalSince(started) * 1000
    let how = firstPID == nil ? "launched" : (firstPID == session.pid ? "resumed (same pid)" : "relaunched (new pid)")
    firstPID = firstPID ?? session.pid
    print(String(format: "open %d:   %@ in %.2f ms, pid %d", cycle, how, ms, session.pid))
    if let fd = session.channel {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(fd, &buffer, buffer.count)
        if n > 0 {
            for line in String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n") { print("          | \(line)") }
        }
    }
    print("          \(describe(host.client))")
    do { try host.dismiss(session) } catch { fail(error.message) }
    if let fd = session.channel { close(fd) }
    print("dismiss:  \(waitFor("suspended", host.client))")
}
host.close()
