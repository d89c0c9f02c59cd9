import HeapModule

/// Lookups over the supervisor's records that would otherwise each be a pass over every
/// record: the next deadline and the records due at a tick, the owner of an open request, the
/// records a host has requests on, the retired records, and how many records are in each state.
///
/// `Supervisor` refreshes a record's entries after every change to that record (`refresh`), so
/// an event costs O(log n) in the number of extensions, not a pass over every record: a mass
/// dismiss, one event per extension, costs O(n log n) in all rather than O(n²).
///
/// Deadlines live in a min-heap with lazy deletion: a record whose deadline changes gets a new
/// heap entry and its old one goes stale (it no longer matches `deadlines`). Stale entries are
/// dropped when they reach the top, and the heap is rebuilt when they outnumber live ones, so
/// its size stays within a constant factor of the number of records with a deadline.
struct RecordIndex: Sendable {
    /// A deadline entry; ordered by instant, then by id so ties are processed in a fixed order.
    struct Due: Comparable, Sendable {
        var at: Instant
        var id: String
        static func < (a: Due, b: Due) -> Bool { a.at != b.at ? a.at < b.at : a.id < b.id }
    }

    /// The indexed parts of a record: what `refresh` compares before and after a change.
    struct Snapshot {
        var state: LifecycleState
        var retired: Bool
        var requests: [OpenRequest]
        var pending: [PendingBegin]
        var observed: Set<String>
        var deadline: Instant?

        init(_ r: borrowing ExtensionRecord) {
            state = r.state
            retired = r.retired
            requests = r.requests
            pending = r.pending
            observed = r.hints.observed
            deadline = r.nextDeadline()
        }
    }

    /// The current deadline of each record that has one.
    private var deadlines: [String: Instant] = [:]
    private var heap = Heap<Due>()
    /// The extension holding each open request.
    private(set) var requestOwner: [UInt64: String] = [:]
    /// For each host, the records it has open or pending requests on, with how many.
    private(set) var hostRecords: [HostID: [String: Int]] = [:]
    /// For each host, how many requests and pending begins it holds over every record.
    private var hostRequests: [HostID: Int] = [:]
    /// Records marked retired by a reload (removed once their process is gone).
    private(set) var retired: Set<String> = []
    /// How many records are in each public state.
    private(set) var stateCounts: [LifecycleState: Int] = [:]
    /// For each notification hint name, the records whose process observes it.
    private var observersByName: [String: Set<String>] = [:]

    /// The records observing the hint `name`, in id order.
    func observers(of name: String) -> [String] { (observersByName[name] ?? []).sorted() }

    /// Updates every entry of record `id` from `before` (nil: the record is new) to `after`
    /// (nil: the record was removed).
    mutating func refresh(_ id: String, from before: Snapshot?, to after: Snapshot?) {
        if before?.state != after?.state {
            if let s = before?.state { stateCounts[s, default: 0] -= 1 }
            if let s = after?.state { stateCounts[s, default: 0] += 1 }
        }
        if after?.retired == true { retired.insert(id) } else if before?.retired == true { retired.remove(id) }
        refreshRequests(id, before, after)
        let oldObserved = before?.observed ?? [], newObserved = after?.observed ?? []
        if oldObserved != newObserved {
            for name in oldObserved.subtracting(newObserved) {
                observersByName[name]?.remove(id)
                if observersByName[name]?.isEmpty == true { observersByName[name] = nil }
            }
            for name in newObserved.subtracting(oldObserved) { observersByName[name, default: []].insert(id) }
        }
        let deadline = after?.deadline
        if deadlines[id] != deadline {
            deadlines[id] = deadline
            if let deadline { heap.insert(Due(at: deadline, id: id)) }
            if heap.count > 2 * deadlines.count + 64 { heap = Heap(deadlines.map { Due(at: $0.value, id: $0.key) }) }
        }
    }

    /// Up to how many requests (before and after a change together) the owners are found by
    /// looking through the lists rather than through sets.
    static let listedRequests = 32

    private mutating func refreshRequests(_ id: String, _ before: Snapshot?, _ after: Snapshot?) {
        let oldRequests = before?.requests ?? [], newRequests = after?.requests ?? []
        let oldPending = before?.pending ?? [], newPending = after?.pending ?? []
        if oldRequests == newRequests && oldPending == newPending { return }  // the usual case: O(1) buffer identity
        // The owners of the requests that left or came. A record holds few requests, looked for
        // in the lists; a record that holds many (one host may open thousands) is compared by
        // sets, so that each change costs linear time, not quadratic.
        if oldRequests.count + newRequests.count <= RecordIndex.listedRequests {
            for q in oldRequests where !newRequests.contains(where: { $0.id == q.id }) { requestOwner[q.id] = nil }
            for q in newRequests where !oldRequests.contains(where: { $0.id == q.id }) { requestOwner[q.id] = id }
        } else {
            let oldIDs = Set(oldRequests.lazy.map(\.id)), newIDs = Set(newRequests.lazy.map(\.id))
            for q in oldRequests where !newIDs.contains(q.id) { requestOwner[q.id] = nil }
            for q in newRequests where !oldIDs.contains(q.id) { requestOwner[q.id] = id }
        }
        // Each host of the four lists once, in order of first appearance. The lists are short
        // (a record's requests), so the hosts seen are looked for in a list, not hashed; the
        // first is kept apart, so that the usual case, one host, allocates nothing.
        var first: HostID?
        var others: [HostID] = []
        func recount(_ host: HostID) {
            if first == nil {
                first = host
            } else {
                guard host != first, !others.contains(host) else { return }
                others.append(host)
            }
            let n = newRequests.count(where: { $0.host == host }) + newPending.count(where: { $0.host == host })
            let total = (hostRequests[host] ?? 0) - (hostRecords[host]?[id] ?? 0) + n
            hostRequests[host] = total > 0 ? total : nil
            hostRecords[host, default: [:]][id] = n > 0 ? n : nil
            if hostRecords[host]?.isEmpty == true { hostRecords[host] = nil }
        }
        for q in oldRequests { recount(q.host) }
        for p in oldPending { recount(p.host) }
        for q in newRequests { recount(q.host) }
        for p in newPending { recount(p.host) }
    }

    /// The earliest deadline of any record.
    var nextDeadline: Instant? {
        if let top = heap.min, deadlines[top.id] == top.at { return top.at }
        return deadlines.values.min()  // only between a change and `dropStale` (not on the hot path)
    }

    /// Drops stale entries from the top of the heap, so `nextDeadline` reads the top.
    mutating func dropStale() {
        while let top = heap.min, deadlines[top.id] != top.at { heap.removeMin() }
    }

    /// Removes and returns, in id order, the records whose deadline is at or before `now`.
    /// Their deadline entries are cleared: processing them sets new ones through `refresh`.
    mutating func takeDue(at now: Instant) -> [String] {
        var due: [String] = []
        while let top = heap.min, top.at <= now {
            heap.removeMin()
            guard deadlines[top.id] == top.at else { continue }
            deadlines[top.id] = nil
            due.append(top.id)
        }
        return due.sorted()
    }

    /// The requests and pending begins `host` holds, over every record.
    func requestCount(of host: HostID) -> Int { hostRequests[host] ?? 0 }

    /// Differences between this index and one rebuilt from `records` (empty when consistent).
    /// For tests: the index must always equal what a pass over every record would find.
    func discrepancies(_ records: [String: ExtensionRecord]) -> [String] {
        var rebuilt = RecordIndex()
        for (id, r) in records { rebuilt.refresh(id, from: nil, to: Snapshot(r)) }
        var found: [String] = []
        if rebuilt.deadlines != deadlines { found.append("deadlines \(deadlines) != \(rebuilt.deadlines)") }
        if rebuilt.requestOwner != requestOwner { found.append("requestOwner \(requestOwner) != \(rebuilt.requestOwner)") }
        if rebuilt.hostRecords != hostRecords { found.append("hostRecords \(hostRecords) != \(rebuilt.hostRecords)") }
        if rebuilt.hostRequests != hostRequests { found.append("hostRequests \(hostRequests) != \(rebuilt.hostRequests)") }
        if rebuilt.retired != retired { found.append("retired \(retired) != \(rebuilt.retired)") }
        if rebuilt.stateCounts.filter({ $0.value != 0 }) != stateCounts.filter({ $0.value != 0 }) {
            found.append("stateCounts \(stateCounts) != \(rebuilt.stateCounts)")
        }
        for (id, at) in deadlines where !heap.unordered.contains(Due(at: at, id: id)) { found.append("deadline of \(id) missing from the heap") }
        return found
    }
}
