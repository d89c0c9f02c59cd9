import ExtensionProtocol
import ExtensionRuntime
import Foundation
import Synchronization

/// The test extension's commands for the containing app (AppTests, SystemdTests):
///   defaults-open <suite>          -> GroupDefaults(suiteName:): "opened", or "refused: <error>";
///                                     each change another member makes is then answered on this
///                                     channel as "changed <suite>"
///   defaults-get <suite> <key>     -> "value <the value, as Swift describes it>" or "value nil"
///   defaults-set <suite> <key> <text> -> sets a string: "set" or "refused: <error>"
///   defaults-changes               -> "changes <n>": the change calls so far
///   defaults-read-loop <suite> <key> -> reads the key in a loop on a thread of its own, without
///                                     pause (so a stop lands in the middle of a read): "reading"
///   defaults-reads                 -> "reads <n> last <value>" of that loop
///   open-url <url>                 -> ExtensionContext.open: "opened true" or "opened false"
func defaultsProbe(_ line: String, _ channel: RequestChannel) -> String? {
    let words = line.split(separator: " ", maxSplits: 3).map(String.init)
    func word(_ i: Int) -> String { words.count > i ? words[i] : "" }
    switch words.first {
    case "defaults-open":
        do {
            let defaults = try GroupDefaults(suiteName: word(1))
            defaults.onChange { suite in
                DefaultsState.changes.withLock { $0 += 1 }
                reply(channel, "changed \(suite)")
            }
            DefaultsState.suites.withLock { $0[word(1)] = defaults }
            return "opened"
        } catch {
            return "refused: \(error)"
        }
    case "defaults-get":
        guard let defaults = DefaultsState.suites.withLock({ $0[word(1)] }) else { return "refused: not open" }
        return "value \(defaults[word(2)].map { "\($0)" } ?? "nil")"
    case "defaults-set":
        guard let defaults = DefaultsState.suites.withLock({ $0[word(1)] }) else { return "refused: not open" }
        do {
            try defaults.set(.string(word(3)), forKey: word(2))
            return "set"
        } catch {
            return "refused: \(error)"
        }
    case "defaults-changes":
        return "changes \(DefaultsState.changes.withLock { $0 })"
    case "defaults-read-loop":
        guard let defaults = DefaultsState.suites.withLock({ $0[word(1)] }) else { return "refused: not open" }
        let key = word(2)
        Thread.detachNewThread {
            while true {
                let value = defaults[key]
                DefaultsState.reads.withLock {
                    $0.count += 1; $0.last = value.map { "\($0)" } ?? "nil"
                }
            }
        }
        return "reading"
    case "defaults-reads":
        let (count, last) = DefaultsState.reads.withLock { ($0.count, $0.last) }
        return "reads \(count) last \(last)"
    case "open-url":
        let url = word(1)
        // Said before the open starts: its answer ("opened false" at once for a scheme no app
        // declares) must not overtake it. "" tells the caller the reply is sent.
        reply(channel, "opening")
        Task {
            let opened = await ExtensionContext.open(url)
            reply(channel, "opened \(opened)")
        }
        return ""
    default:
        return nil
    }
}

/// What the defaults commands keep between requests.
enum DefaultsState {
    static let suites = Mutex<[String: GroupDefaults]>([:])
    static let changes = Mutex(0)
    static let reads = Mutex<(count: Int, last: String)>((0, "nil"))
}
