/// The shapes the hand-over document (`SupervisorSnapshot`) gives the core's enums whose
/// shape is chosen by hand rather than synthesized: an enum with associated values is an object
/// naming its case, so a later version can add a case or a field without changing the shape of
/// the others; a plain enum is its case's name. Elsewhere: an instant is one number of
/// nanoseconds (`Instant.encode(to:)`), an enum with a string raw value is its raw value, and
/// the structs of the records use synthesized coding, with their property names as keys (and
/// the hottest of them the same shape written directly: RecordDirectCoding.swift). The
/// manifest's nested values (`limits`, `refresh`, `activation`, `hosts`) are read back by the
/// manifest file's own decoders, whose key names they share.

/// A phase is an object with its case in `name` (`not-running`, `launching`, `active`,
/// `background`, `expiring`, `stopping`, `suspended`, `resuming`, `terminating`) and its
/// associated values under their labels: `{"name": "suspended", "reclaimAt": 1200000000}`.
extension Phase {
    private enum Key: String, CodingKey {
        case name, deadline, expireAt, stopAt, wasExpiring, reclaimAt, reason, killAt
    }

    /// Reads a phase written by `encode(to:)`; an unknown `name` is an error naming it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let name = try c.decode(String.self, forKey: .name)
        switch name {
        case "not-running": self = .notRunning
        case "launching": self = .launching(deadline: try c.decode(Instant.self, forKey: .deadline))
        case "active": self = .active
        case "background":
            self = .background(
                expireAt: try c.decodeIfPresent(Instant.self, forKey: .expireAt), stopAt: try c.decodeIfPresent(Instant.self, forKey: .stopAt))
        case "expiring": self = .expiring(stopAt: try c.decode(Instant.self, forKey: .stopAt))
        case "stopping": self = .stopping(wasExpiring: try c.decode(Bool.self, forKey: .wasExpiring))
        case "suspended": self = .suspended(reclaimAt: try c.decode(Instant.self, forKey: .reclaimAt))
        case "resuming": self = .resuming
        case "terminating":
            self = .terminating(reason: try c.decode(ExitReason.self, forKey: .reason), killAt: try c.decodeIfPresent(Instant.self, forKey: .killAt))
        default:
            throw DecodingError.dataCorruptedError(forKey: .name, in: c, debugDescription: "unknown phase '\(name)'")
        }
    }

    /// Writes the case's name and its associated values (nil ones left out).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        switch self {
        case .notRunning: try c.encode("not-running", forKey: .name)
        case .launching(let deadline):
            try c.encode("launching", forKey: .name)
            try c.encode(deadline, forKey: .deadline)
        case .active: try c.encode("active", forKey: .name)
        case .background(let expireAt, let stopAt):
            try c.encode("background", forKey: .name)
            try c.encodeIfPresent(expireAt, forKey: .expireAt)
            try c.encodeIfPresent(stopAt, forKey: .stopAt)
        case .expiring(let stopAt):
            try c.encode("expiring", forKey: .name)
            try c.encode(stopAt, forKey: .stopAt)
        case .stopping(let wasExpiring):
            try c.encode("stopping", forKey: .name)
            try c.encode(wasExpiring, forKey: .wasExpiring)
        case .suspended(let reclaimAt):
            try c.encode("suspended", forKey: .name)
            try c.encode(reclaimAt, forKey: .reclaimAt)
        case .resuming: try c.encode("resuming", forKey: .name)
        case .terminating(let reason, let killAt):
            try c.encode("terminating", forKey: .name)
            try c.encode(reason, forKey: .reason)
            try c.encodeIfPresent(killAt, forKey: .killAt)
        }
    }
}

/// The same object, written and read directly (`BinaryDirectCodable`): every record has one.
extension Phase: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        switch self {
        case .notRunning: w.string("not-running", "name")
        case .launching(let deadline):
            w.string("launching", "name")
            w.instant(deadline, "deadline")
        case .active: w.string("active", "name")
        case .background(let expireAt, let stopAt):
            w.string("background", "name")
            w.optional(expireAt, "expireAt") { w.instant($0, $1) }
            w.optional(stopAt, "stopAt") { w.instant($0, $1) }
        case .expiring(let stopAt):
            w.string("expiring", "name")
            w.instant(stopAt, "stopAt")
        case .stopping(let wasExpiring):
            w.string("stopping", "name")
            w.bool(wasExpiring, "wasExpiring")
        case .suspended(let reclaimAt):
            w.string("suspended", "name")
            w.instant(reclaimAt, "reclaimAt")
        case .resuming: w.string("resuming", "name")
        case .terminating(let reason, let killAt):
            w.string("terminating", "name")
            w.string(reason.rawValue, "reason")
            w.optional(killAt, "killAt") { w.instant($0, $1) }
        }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        let name = try r.string("name")
        switch name {
        case "not-running": self = .notRunning
        case "launching": self = .launching(deadline: try r.instant("deadline"))
        case "active": self = .active
        case "background": self = .background(expireAt: try r.instantIfPresent("expireAt"), stopAt: try r.instantIfPresent("stopAt"))
        case "expiring": self = .expiring(stopAt: try r.instant("stopAt"))
        case "stopping": self = .stopping(wasExpiring: try r.bool("wasExpiring"))
        case "suspended": self = .suspended(reclaimAt: try r.instant("reclaimAt"))
        case "resuming": self = .resuming
        case "terminating": self = .terminating(reason: try r.canonical(ExitReason.self, "reason"), killAt: try r.instantIfPresent("killAt"))
        default: throw DecodingError.dataCorrupted(.init(codingPath: [Key.name], debugDescription: "unknown phase '\(name)'"))
        }
    }
}

/// An exit status is an object with one member naming its case: `{"exited": 0}` or
/// `{"signaled": 9}`.
extension ExitStatus {
    private enum Key: String, CodingKey {
        case exited, signaled
    }

    /// Reads `{"exited": CODE}` or `{"signaled": SIGNAL}`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        if let code = try c.decodeIfPresent(Int32.self, forKey: .exited) {
            self = .exited(code)
        } else if let signal = try c.decodeIfPresent(Int32.self, forKey: .signaled) {
            self = .signaled(signal)
        } else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: "neither 'exited' nor 'signaled'"))
        }
    }

    /// Writes the case's name with its number.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        switch self {
        case .exited(let code): try c.encode(code, forKey: .exited)
        case .signaled(let signal): try c.encode(signal, forKey: .signaled)
        }
    }
}

/// The lock grace is its case's name: `none`, `resuming` or `spent`.
extension LockGrace {
    /// Reads a case name; an unknown one is an error naming it.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let name = try c.decode(String.self)
        switch name {
        case "none": self = .none
        case "resuming": self = .resuming
        case "spent": self = .spent
        default: throw DecodingError.dataCorruptedError(in: c, debugDescription: "unknown lock grace '\(name)'")
        }
    }

    /// Writes the case's name.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .none: try c.encode("none")
        case .resuming: try c.encode("resuming")
        case .spent: try c.encode("spent")
        }
    }
}

/// An account is written as a manifest writes it: a name is a string, a number a number.
extension AccountReference {
    /// Reads a string as a name and a number as a uid or gid.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let number = try? c.decode(UInt32.self) {
            self = .number(number)
        } else {
            self = .name(try c.decode(String.self))
        }
    }

    /// Writes a name as a string and a number as a number.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .name(let name): try c.encode(name)
        case .number(let number): try c.encode(number)
        }
    }
}

/// A lifecycle event is a list of its nine fields in declaration order, a missing optional as
/// nil: `[at, kind, extensionID, pid, state, assertionID, requestID, detail, lock]`. Each record
/// keeps up to `ExtensionRecord.historyLimit` of them, so they are most of the document, and a
/// list is read in order without looking up a key per field.
extension LifecycleEvent {
    /// Reads the list `encode(to:)` writes; a list of another length is an error.
    public init(from decoder: any Decoder) throws {
        if let direct = try Self.directly(from: decoder) {
            self = direct
            return
        }
        var c = try decoder.unkeyedContainer()
        guard c.count == 9 else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: c.codingPath, debugDescription: "an event has 9 fields, not \(c.count.map(String.init) ?? "?")"))
        }
        at = try c.decode(Instant.self)
        // The two names are read as strings and looked up here: the same bytes as their raw
        // values' default coding, without its generic path (a tenth of a hand-over's decoding).
        let kindName = try c.decode(String.self)
        guard let kind = Kind(rawValue: kindName) else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: "unknown event kind '\(kindName)'"))
        }
        self.kind = kind
        extensionID = try c.decode(String.self)
        pid = try c.decodeNil() ? nil : try c.decode(Int32.self)
        let stateName = try c.decode(String.self)
        guard let state = LifecycleState(rawValue: stateName) else {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: "unknown state '\(stateName)'"))
        }
        self.state = state
        assertionID = try c.decodeNil() ? nil : try c.decode(UInt64.self)
        requestID = try c.decodeNil() ? nil : try c.decode(UInt64.self)
        detail = try c.decodeNil() ? nil : try c.decode(String.self)
        lock = try c.decodeNil() ? nil : try c.decode(LockReport.self)
    }

    /// Writes the nine fields in order.
    public func encode(to encoder: any Encoder) throws {
        if try wroteDirectly(to: encoder) { return }
        var c = encoder.unkeyedContainer()
        try c.encode(at)
        try c.encode(kind.rawValue)
        try c.encode(extensionID)
        if let pid { try c.encode(pid) } else { try c.encodeNil() }
        try c.encode(state.rawValue)
        if let assertionID { try c.encode(assertionID) } else { try c.encodeNil() }
        if let requestID { try c.encode(requestID) } else { try c.encodeNil() }
        if let detail { try c.encode(detail) } else { try c.encodeNil() }
        if let lock { try c.encode(lock) } else { try c.encodeNil() }
    }
}

/// The same list, written and read directly (`BinaryDirectCodable`): a hand-over document holds
/// tens of thousands of events.
extension LifecycleEvent: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        _ = output.openContainer(BinaryFormat.unkeyed, level: level)
        func element(_ write: () -> Void) {
            output.countEntry(level: level)
            write()
        }
        element { output.integer(at.nanoseconds) }
        element { output.string(kind.rawValue) }
        element { output.string(extensionID) }
        element { if let pid { output.integer(pid) } else { output.null() } }
        element { output.string(state.rawValue) }
        element { if let assertionID { output.integer(assertionID) } else { output.null() } }
        element { if let requestID { output.integer(requestID) } else { output.null() } }
        element { if let detail { output.string(detail) } else { output.null() } }
        output.countEntry(level: level)
        if let lock { try output.value(lock, level: level + 1) } else { output.null() }
    }

    /// The error `init(from:)` throws for the same fault: the event itself is corrupt.
    private static func corrupt(_ problem: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: problem))
    }

    /// The event at `offset` when its nine fields are in the form `write(to:level:)` writes
    /// (integers unsigned, names known) and it has no lock report: read without a throw or a
    /// closure per field, the value `init(binary:at:within:)` reads. Nil for anything else,
    /// which that reader then reads or refuses.
    private static func plain(_ input: BinaryInput, at offset: Int, within limit: Int) -> LifecycleEvent? {
        guard let list = try? input.container(BinaryFormat.unkeyed, at: offset, within: limit), list.count == 9 else { return nil }
        let end = list.end
        guard let (at, afterAt) = input.plainUnsigned(UInt64.self, list.entries, within: end),
            let kindBytes = try? input.stringBytes(afterAt, within: end), let kind = kindNames.value(input, in: kindBytes),
            let (extensionID, afterID) = input.plainString(kindBytes.upperBound, within: end),
            let (pid, afterPID) = input.plainUnsignedOrNil(Int32.self, afterID, within: end),
            let stateBytes = try? input.stringBytes(afterPID, within: end), let state = stateNames.value(input, in: stateBytes),
            let (assertionID, afterAssertion) = input.plainUnsignedOrNil(UInt64.self, stateBytes.upperBound, within: end),
            let (requestID, afterRequest) = input.plainUnsignedOrNil(UInt64.self, afterAssertion, within: end),
            let (detail, afterDetail) = input.plainStringOrNil(afterRequest, within: end),
            (try? input.null(afterDetail, within: end)) == true
        else { return nil }
        return LifecycleEvent(
            at: Instant(nanoseconds: at), kind: kind, extensionID: extensionID, pid: pid, state: state, assertionID: assertionID,
            requestID: requestID, detail: detail, lock: nil)
    }

    private static let kindNames = BinaryNames(Kind.allCases.map { ($0.rawValue, $0) })
    private static let stateNames = BinaryNames(LifecycleState.allCases.map { ($0.rawValue, $0) })

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        if let plain = Self.plain(input, at: offset, within: end) {
            self = plain
            return
        }
        var fields = try BinaryElements(input, at: offset, within: end)
        guard fields.count == 9 else { throw Self.corrupt("an event has 9 fields, not \(fields.count)") }
        at = Instant(nanoseconds: try fields.integer(UInt64.self))
        let kindAt = fields.offset
        guard let kind = try fields.name(in: Self.kindNames) else {
            throw Self.corrupt("unknown event kind '\(try input.string(kindAt, within: fields.end))'")
        }
        self.kind = kind
        extensionID = try fields.string()
        pid = try fields.integerOrNil(Int32.self)
        let stateAt = fields.offset
        guard let state = try fields.name(in: Self.stateNames) else {
            throw Self.corrupt("unknown state '\(try input.string(stateAt, within: fields.end))'")
        }
        self.state = state
        assertionID = try fields.integerOrNil(UInt64.self)
        requestID = try fields.integerOrNil(UInt64.self)
        detail = try fields.stringOrNil()
        lock = try fields.valueOrNil(LockReport.self)
    }
}
