import ExtensionProtocol
import ExtensionStatus
import SupervisorCore

/// The last output lines of each extension (`extctl logs`, `extctl status`, the reason of a
/// launch that ended before it was ready), and the connections that follow them (`extctl logs
/// -f`). In memory only: the journal (or the daemon's log) keeps every line for good. At most
/// `OutputLog.kept` lines and `byteLimit` bytes per extension; an extension's lines outlive its
/// process (a crash's last words stay readable). Owned by the daemon's loop.
final class OutputHistory {
    /// Bytes of text kept per extension.
    static let byteLimit = 64 * 1024

    private struct Kept {
        var lines: [OutputLog.Line] = []
        var bytes = 0
        /// Lines ever appended, and that count when its current process was launched.
        var total = 0
        var atLaunch = 0

        /// Appends `line`, then lets the oldest go beyond `OutputLog.kept` lines or
        /// `byteLimit` bytes (the newest always stays).
        mutating func add(_ line: OutputLog.Line) {
            lines.append(line)
            bytes += line.text.utf8.count
            total += 1
            var drop = 0
            while lines.count - drop > OutputLog.kept || (bytes > OutputHistory.byteLimit && lines.count - drop > 1) {
                bytes -= lines[drop].text.utf8.count
                drop += 1
            }
            if drop > 0 { lines.removeFirst(drop) }
        }
    }

    private var kept: [String: Kept] = [:]
    private var followers: [HostID: Set<String>] = [:]
    /// Sends an `output` message to a follower.
    var deliver: ((HostID, Message) -> Void)?
    private let wallClock: () -> Double

    init(wallClock: @escaping () -> Double) { self.wallClock = wallClock }

    /// Keeps `text` (escaped already) as the newest line of `id`, and sends it to its followers.
    func append(_ id: String, _ text: String) {
        let line = OutputLog.Line(time: WallClock.iso8601(secondsSince1970: wallClock()), text: text)
        // In place: a copy taken out of the dictionary would share its buffer, and the append
        // would copy every kept line (retaining each) at each line.
        kept[id, default: Kept()].add(line)
        guard !followers.isEmpty, let deliver else { return }
        var object = line
        object.id = id
        let message = Message.output(json: [object.jsonBytes()])
        for (host, ids) in followers where ids.contains(id) { deliver(host, message) }
    }

    /// The lines kept for `id`, oldest first.
    func log(_ id: String) -> OutputLog { OutputLog(id: id, lines: kept[id]?.lines ?? []) }

    /// The last `count` lines of `id`'s, oldest first.
    func last(_ count: Int, of id: String) -> [OutputLog.Line] { Array((kept[id]?.lines ?? []).suffix(count)) }

    /// A process of `id` was launched: `sinceLaunch` counts from here.
    func launched(_ id: String) {
        var k = kept[id] ?? Kept()
        k.atLaunch = k.total
        kept[id] = k
    }

    /// The last `count` lines (at most) its current or last process wrote, oldest first.
    func sinceLaunch(_ count: Int, of id: String) -> [OutputLog.Line] {
        guard let k = kept[id] else { return [] }
        return Array(k.lines.suffix(min(count, k.total - k.atLaunch)))
    }

    /// `host` follows `ids` from now on (in addition to what it followed).
    func follow(_ host: HostID, _ ids: [String]) { followers[host, default: []].formUnion(ids) }

    /// `host` is gone.
    func forget(_ host: HostID) { followers[host] = nil }

    /// Lets go of the lines of every extension but `ids` (those removed by a reload), and
    /// stops following them.
    func retain(only ids: Set<String>) {
        kept = kept.filter { ids.contains($0.key) }
        for (host, followed) in followers {
            let left = followed.intersection(ids)
            followers[host] = left.isEmpty ? nil : left
        }
    }

    /// Lets go of `id`'s kept lines: its app changed at a reload, and they were written for the
    /// eyes of the previous app's processes.
    func forgetLines(of id: String) { kept[id] = nil }

    /// Stops each following that `may` no longer allows (a reload changed an extension's app or
    /// the administrators; a re-exec's new program checks what crossed), and returns them,
    /// host by host, each host's ids sorted.
    func recheckFollowers(_ may: (HostID, String) -> Bool) -> [(host: HostID, ids: [String])] {
        var stopped: [(host: HostID, ids: [String])] = []
        for (host, followed) in followers.sorted(by: { $0.key < $1.key }) {
            let refused = followed.filter { !may(host, $0) }
            guard !refused.isEmpty else { continue }
            let left = followed.subtracting(refused)
            followers[host] = left.isEmpty ? nil : left
            stopped.append((host, refused.sorted()))
        }
        return stopped
    }

    /// What crosses a re-exec: every extension's kept lines, and who follows which.
    struct Handover: Codable, Equatable {
        struct Lines: Codable, Equatable {
            var lines: [OutputLog.Line]
            /// How many of them its current or last process wrote.
            var sinceLaunch: Int
        }
        struct Follower: Codable, Equatable {
            var host: HostID
            var ids: [String]
        }
        var kept: [String: Lines]
        var followers: [Follower]
    }

    /// Bytes of kept lines the hand-over document carries across a re-exec, at most (each
    /// extension's 64 KiB times a thousand extensions would be 64 MiB to write and read while
    /// the loop waits). A line counts as `handoverCost`: its text, its time and the framing
    /// the document's binary form gives it.
    static let handoverByteLimit = 4 * 1024 * 1024

    /// Bytes the binary form (`BinaryFormat`) adds to a line's text and time, at most: the
    /// keyed container's header (9), the keys `text` and `time` with their lengths (10), two
    /// tags and two LEB128 lengths (up to 8). Without it 1,000 extensions of 200 short lines
    /// each would carry some 9 MB of framing past a budget of text alone.
    static let handoverLineFraming = 27

    /// What `line` costs the hand-over document, at most.
    static func handoverCost(_ line: OutputLog.Line) -> Int { line.text.utf8.count + line.time.utf8.count + handoverLineFraming }

    /// This history, for the program that replaces the daemon. When the lines of every
    /// extension together cost more than `handoverByteLimit`, each extension keeps its newest
    /// lines within an equal share of it.
    var handover: Handover { handover(byteLimit: Self.handoverByteLimit) }

    /// `handover` with a budget of `byteLimit` bytes of lines (`handoverCost`).
    func handover(byteLimit: Int) -> Handover {
        let costs = kept.mapValues { $0.lines.reduce(0) { $0 + Self.handoverCost($1) } }
        let total = costs.values.reduce(0, +)
        let share = total > byteLimit && !kept.isEmpty ? byteLimit / kept.count : Int.max
        return Handover(
            kept: Dictionary(
                uniqueKeysWithValues: kept.map { id, k in
                    var lines = k.lines[...]
                    var bytes = costs[id] ?? 0
                    while bytes > share, let first = lines.first {
                        bytes -= Self.handoverCost(first)
                        lines = lines.dropFirst()
                    }
                    return (id, Handover.Lines(lines: Array(lines), sinceLaunch: min(lines.count, k.total - k.atLaunch)))
                }),
            followers: followers.sorted { $0.key < $1.key }.map { Handover.Follower(host: $0.key, ids: $0.value.sorted()) })
    }

    /// Takes the history the replaced daemon handed over (`hosts`: the connections that
    /// crossed; a follower among none of them is dropped).
    func restore(_ h: Handover, hosts: Set<HostID>) {
        for (id, l) in h.kept {
            // Within this program's bounds, whatever the document holds.
            var lines = l.lines.suffix(OutputLog.kept)
            var bytes = lines.reduce(0) { $0 + $1.text.utf8.count }
            while lines.count > 1, bytes > Self.byteLimit, let first = lines.first {
                bytes -= first.text.utf8.count
                lines = lines.dropFirst()
            }
            kept[id] = Kept(lines: Array(lines), bytes: bytes, total: lines.count, atLaunch: lines.count - min(l.sinceLaunch, lines.count))
        }
        for f in h.followers where hosts.contains(f.host) { followers[f.host, default: []].formUnion(f.ids) }
    }
}
