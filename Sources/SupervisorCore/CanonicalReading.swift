/// Values that the hand-over document holds once or more per record, read without the generic
/// containers when their bytes are in the form their encoders write: the manifest's limits,
/// refresh schedules and host lists (each member in its place, of its type, within what the
/// manifest file's decoder accepts), the enums written as their names, accounts, exit
/// statuses, and string lists and dictionaries. Anything else (a member missing, extra or out
/// of order, a number out of range or written as a double, an unknown name, a damaged entry)
/// is read by the type's own `init(from:)` (for the manifest's values, the manifest file's
/// decoder), so the value read and the error thrown are always the ones it gives.
package protocol BinaryCanonicalReadable: Decodable {
    /// The value at `offset` when its bytes are in the form the type's encoder writes and the
    /// manifest file's decoder accepts them; nil for anything else.
    static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> Self?
}

extension BinaryCanonicalReadable {
    /// The value at `offset`: the canonical reading when there is one, else `init(from:)`.
    package static func read(_ input: BinaryInput, at offset: Int, within end: Int) throws -> Self {
        if let value = canonical(input, at: offset, within: end) { return value }
        return try Self(from: BinaryDecoding(input: input, offset: offset, end: end))
    }
}

/// The members of a keyed container read in the order they were written, each under the key
/// given: nil as soon as one is not where it is expected.
struct BinaryCanonicalMembers {
    private let input: BinaryInput
    private let end: Int
    private var offset: Int
    private var left: Int

    init?(_ input: BinaryInput, at offset: Int, within limit: Int, count: Int) {
        guard let container = try? input.container(BinaryFormat.keyed, at: offset, within: limit), container.count == count else { return nil }
        self.input = input
        end = container.end
        self.offset = container.entries
        left = count
    }

    /// The offset of the next member's value when its key is `key`, moving past it.
    mutating func next(_ key: StaticString) -> Int? {
        guard left > 0, let range = try? input.text(offset, within: end),
            key.withUTF8Buffer({ input.matches(range, UnsafeRawBufferPointer($0)) }),
            let after = try? input.skip(range.upperBound, within: end)
        else { return nil }
        left -= 1
        offset = after
        return range.upperBound
    }

    /// The next member, `key`, when it is a non-negative integer of at most `maximum`.
    mutating func unsigned(_ key: StaticString, maximum: UInt64) -> UInt64? {
        guard let at = next(key), (try? input.byte(at, within: end)) == BinaryFormat.unsigned,
            let n = try? input.leb128(at + 1, within: end).value, n <= maximum
        else { return nil }
        return n
    }

    /// The next member, `key`: `.some(nil)` when it is nil, `.some(n)` when it is an integer in
    /// `range`, nil otherwise.
    mutating func unsignedOrNil(_ key: StaticString, in range: ClosedRange<UInt64>) -> UInt64?? {
        guard let at = next(key), let tag = try? input.byte(at, within: end) else { return nil }
        if tag == BinaryFormat.null { return .some(nil) }
        guard tag == BinaryFormat.unsigned, let n = try? input.leb128(at + 1, within: end).value, range.contains(n) else { return nil }
        return .some(n)
    }

    /// The next member, `key`, when it is a double.
    mutating func double(_ key: StaticString) -> Double? {
        guard let at = next(key), (try? input.byte(at, within: end)) == BinaryFormat.double else { return nil }
        return try? input.double(at, within: end)
    }

    /// The next member, `key`, when it is a list of integers each at most `maximum`.
    mutating func unsignedList(_ key: StaticString, maximum: UInt64) -> [UInt64]? {
        guard let at = next(key), let list = try? input.container(BinaryFormat.unkeyed, at: at, within: end) else { return nil }
        var values: [UInt64] = []
        values.reserveCapacity(list.count)
        var element = list.entries
        for _ in 0..<list.count {
            guard (try? input.byte(element, within: list.end)) == BinaryFormat.unsigned,
                let (n, next) = try? input.leb128(element + 1, within: list.end), n <= maximum
            else { return nil }
            values.append(n)
            element = next
        }
        guard element == list.end else { return nil }
        return values
    }
}

extension ResourceLimits: BinaryCanonicalReadable {
    /// Each limit nil or an integer within `ranges`, in the order of `keys`.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> ResourceLimits? {
        guard var m = BinaryCanonicalMembers(input, at: offset, within: end, count: 5),
            let memory = m.unsignedOrNil("memoryMaxBytes", in: ranges["memoryMaxBytes"]!),
            let tasks = m.unsignedOrNil("tasksMax", in: ranges["tasksMax"]!),
            let files = m.unsignedOrNil("openFilesMax", in: ranges["openFilesMax"]!),
            let weight = m.unsignedOrNil("cpuWeight", in: ranges["cpuWeight"]!),
            let disk = m.unsignedOrNil("diskMaxBytes", in: ranges["diskMaxBytes"]!)
        else { return nil }
        return ResourceLimits(memoryMaxBytes: memory, tasksMax: tasks, openFilesMax: files, cpuWeight: weight, diskMaxBytes: disk)
    }
}

extension RefreshSchedule: BinaryCanonicalReadable {
    /// The interval a double and the budget an integer, both as `violation()` allows them.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> RefreshSchedule? {
        guard var m = BinaryCanonicalMembers(input, at: offset, within: end, count: 2), let interval = m.double("minimumIntervalSeconds"),
            let budget = m.unsigned("dailyBudget", maximum: 1_440)
        else { return nil }
        let schedule = RefreshSchedule(minimumIntervalSeconds: interval, dailyBudget: Int(budget))
        return schedule.violation() == nil ? schedule : nil
    }
}

extension HostRestriction: BinaryCanonicalReadable {
    /// Two lists of integers that fit a uid or gid.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> HostRestriction? {
        guard var m = BinaryCanonicalMembers(input, at: offset, within: end, count: 2),
            let uids = m.unsignedList("uids", maximum: UInt64(UInt32.max)), let gids = m.unsignedList("gids", maximum: UInt64(UInt32.max))
        else { return nil }
        return HostRestriction(uids: uids.map(UInt32.init), gids: gids.map(UInt32.init))
    }
}

/// A case named by its raw value, read as a string, without the generic single-value
/// container: nil when the bytes are not a string or name no case, which `init(from:)` then
/// refuses with its own error.
extension BinaryCanonicalReadable where Self: RawRepresentable, RawValue == String {
    /// The case whose raw value is the string at `offset`; nil for anything else.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> Self? {
        guard let name = try? input.string(offset, within: end) else { return nil }
        return Self(rawValue: name)
    }
}

extension ExitReason: BinaryCanonicalReadable {}
extension Readiness: BinaryCanonicalReadable {}
extension SuspendMode: BinaryCanonicalReadable {}
extension LockContentionPolicy: BinaryCanonicalReadable {}
extension SandboxPart: BinaryCanonicalReadable {}
extension RefreshOutcome: BinaryCanonicalReadable {}

extension LockGrace: BinaryCanonicalReadable {
    /// One of the three names `init(from:)` reads.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> LockGrace? {
        switch try? input.string(offset, within: end) {
        case "none": LockGrace.none
        case "resuming": LockGrace.resuming
        case "spent": LockGrace.spent
        default: nil
        }
    }
}

extension AccountReference: BinaryCanonicalReadable {
    /// What `init(from:)` reads, without the error its first attempt throws for a name: an
    /// integer that fits a uid or gid is a number, else a string is a name.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> AccountReference? {
        if let number = try? input.integer(UInt32.self, offset, within: end) { return .number(number) }
        return (try? input.string(offset, within: end)).map(AccountReference.name)
    }
}

extension ExitStatus: BinaryCanonicalReadable {
    /// One member, `exited` or `signaled`, an integer that fits an `Int32`.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> ExitStatus? {
        guard let container = try? input.container(BinaryFormat.keyed, at: offset, within: end), container.count == 1,
            let key = try? input.text(container.entries, within: container.end),
            let number = try? input.integer(Int32.self, key.upperBound, within: container.end)
        else { return nil }
        if input.matches(key, "exited") { return .exited(number) }
        if input.matches(key, "signaled") { return .signaled(number) }
        return nil
    }
}

/// The manifest's environment and container paths: `Dictionary.init(from:)` reads every key
/// `allKeys` lists, in order, and each key's value, the next entry under that key.
extension Dictionary: BinaryCanonicalReadable where Key == String, Value == String {
    /// Every entry a key of valid UTF-8 (one that finds itself where it lies) and a string; a
    /// key written twice keeps its last value, as `init(from:)` does.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> [String: String]? {
        guard let container = try? input.container(BinaryFormat.keyed, at: offset, within: end) else { return nil }
        var entries: [String: String] = [:]
        entries.reserveCapacity(container.count)
        var at = container.entries
        for _ in 0..<container.count {
            guard let range = try? input.text(at, within: container.end) else { return nil }
            let key = input.string(range)
            guard input.matches(range, key), let value = try? input.string(range.upperBound, within: container.end),
                let next = try? input.skip(range.upperBound, within: container.end)
            else { return nil }
            entries[key] = value
            at = next
        }
        return entries
    }
}

/// A list of strings (a manifest's arguments, shared containers, the hints' names).
extension Array: BinaryCanonicalReadable where Element == String {
    /// Every element a string.
    package static func canonical(_ input: BinaryInput, at offset: Int, within end: Int) -> [String]? {
        guard var elements = try? BinaryElements(input, at: offset, within: end) else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for _ in 0..<elements.count {
            guard let string = try? elements.string() else { return nil }
            strings.append(string)
        }
        return strings
    }
}
