// stocks-widget: an example widget extension.
//
// Each request gets a few quote lines over its channel; the host may send "refresh" to get
// new ones. Every time it is shown, the widget saves how often it was shown, under a task
// assertion taken as soon as the data changes (not when the request ends: a dismissed
// extension is suspended at once unless it already holds an assertion). The write is atomic
// (temporary file, fsync, rename): if it is told to expire it abandons the write and the
// previous file stays intact.
//
// It also handles background refresh (its manifest asks for one every 15 minutes at most):
// it fetches the quotes and answers new-data when they changed since the last fetch, no-data
// otherwise, and extensiond suspends it again.
import ExtensionRuntime
import Foundation
import Synchronization

// Only FoundationEssentials-level API is used (no String(format:), no NSTemporaryDirectory):
// the program links the Swift runtime and Foundation statically (Package.swift), and a
// formatter would pull in CoreFoundation and ICU as well.
let environment = ProcessInfo.processInfo.environment
let stateFile = (environment["STOCKS_STATE_DIR"] ?? environment["TMPDIR"] ?? "/tmp") + "/stocks-widget.state"
let views = Mutex(Int((try? String(contentsOfFile: stateFile, encoding: .utf8))?.filter { !$0.isWhitespace } ?? "") ?? 0)

/// `value` with two decimals ("231.40").
func twoDecimals(_ value: Double) -> String {
    let cents = Int((value * 100).rounded())
    let fraction = cents % 100
    return "\(cents / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

func quotes() -> String {
    let symbols = ["AAPL": 231.4, "GOOG": 172.9, "MSFT": 418.2]
    return symbols.keys.sorted().map { s in
        "\(s) \(twoDecimals(symbols[s]! * Double.random(in: 0.98...1.02)))"
    }.joined(separator: "\n") + "\n"
}

/// The quotes last fetched, to tell a refresh with new data from one without.
let lastQuotes = Mutex("")

/// Fetches the quotes and remembers them; true when they changed.
func fetchQuotes() -> (text: String, changed: Bool) {
    let text = quotes()
    let changed = lastQuotes.withLock { last -> Bool in
        defer { last = text }
        return last != text
    }
    return (text, changed)
}

func saveState() {
    ProcessInfo.processInfo.performExpiringActivity(withReason: "save widget state") { expired in
        guard !expired else { return }  // told to stop: the last complete file stays in place
        let text = "\(views.withLock { $0 })\n"
        let temporary = stateFile + ".tmp"
        guard let fd = Optional(open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)), fd >= 0 else { return }
        _ = text.withCString { write(fd, $0, strlen($0)) }
        fsync(fd)
        close(fd)
        rename(temporary, stateFile)
    }
}

ExtensionMain.onRefresh { completion in
    completion(fetchQuotes().changed ? .newData : .noData)
}

ExtensionMain.run(
    onRequest: { request in
        let shown = views.withLock { v -> Int in
            v += 1; return v
        }
        saveState()
        request.channel.write("stocks-widget pid \(getpid()), shown \(shown) time(s)\n" + fetchQuotes().text)
        while let line = request.channel.readLine() {
            if line == "refresh" { request.channel.write(fetchQuotes().text) }
        }
        request.channel.close()
    })
