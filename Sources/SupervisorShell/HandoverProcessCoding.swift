import SupervisorCore

/// The processes of a hand-over document, a thousand of them with as many extensions, written
/// and read directly (`BinaryDirectCodable`): the members of `HandoverDocument.Process` in the
/// order and form its synthesized `Codable` conformance gives `BinaryEncoder`, an absent
/// optional as an explicit nil; a suspended group's locks go through their own conformance.
extension HandoverDocument.Process: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.string(extensionID, "extensionID")
        w.integer(generation, "generation")
        w.integer(pid, "pid")
        w.integer(pidfd, "pidfd")
        w.optional(startTicks, "startTicks") { w.integer($0, $1) }
        w.optional(channel, "channel") { w.integer($0, $1) }
        w.optional(self.output, "output") { w.integer($0, $1) }
        w.optional(channelGraceUntil, "channelGraceUntil") { w.instant($0, $1) }
        w.optional(cgroup, "cgroup") { w.string($0, $1) }
        w.optional(cgroupEvents, "cgroupEvents") { w.integer($0, $1) }
        w.optional(cgroupProcs, "cgroupProcs") { w.integer($0, $1) }
        w.optional(cgroupFreeze, "cgroupFreeze") { w.integer($0, $1) }
        w.bool(freezer, "freezer")
        w.optional(memoryCgroupV1, "memoryCgroupV1") { w.string($0, $1) }
        w.optional(memoryOOMKillsAtStart, "memoryOOMKillsAtStart") { w.integer($0, $1) }
        w.string(mechanism.rawValue, "mechanism")
        try w.direct(group, "group")
        try w.optional(locks, "locks") { try w.value($0, $1) }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        extensionID = try r.string("extensionID")
        generation = try r.integer(UInt64.self, "generation")
        pid = try r.integer(Int32.self, "pid")
        pidfd = try r.integer(Int32.self, "pidfd")
        startTicks = try r.integerIfPresent(UInt64.self, "startTicks")
        channel = try r.integerIfPresent(Int32.self, "channel")
        output = try r.integerIfPresent(Int32.self, "output")
        channelGraceUntil = try r.instantIfPresent("channelGraceUntil")
        cgroup = try r.stringIfPresent("cgroup")
        cgroupEvents = try r.integerIfPresent(Int32.self, "cgroupEvents")
        cgroupProcs = try r.integerIfPresent(Int32.self, "cgroupProcs")
        cgroupFreeze = try r.integerIfPresent(Int32.self, "cgroupFreeze")
        freezer = try r.bool("freezer")
        memoryCgroupV1 = try r.stringIfPresent("memoryCgroupV1")
        memoryOOMKillsAtStart = try r.integerIfPresent(Int.self, "memoryOOMKillsAtStart")
        mechanism = try r.canonical(SuspendMode.self, "mechanism")
        group = try r.direct(GroupControl.Snapshot.self, "group")
        locks = try r.valueIfPresent(HandoverDocument.Locks.self, "locks")
    }
}
