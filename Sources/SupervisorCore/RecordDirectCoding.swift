/// The records of a hand-over document (`ExtensionRecord`, with its `Manifest`, `Policy`,
/// `CredentialRequest`, `Credentials`, requests, assertions and last exit) written and read directly (`BinaryDirectCodable`): the same members, in
/// the same order and form, as their synthesized `Codable` conformances give `BinaryEncoder`,
/// without the generic calls per member that were most of the cost of reading 1,000 records.
/// Nested values of other types go through their own conformances.

extension ExtensionRecord: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        try w.direct(manifest, "manifest")
        try w.direct(phase, "phase")
        w.instant(since, "since")
        w.integer(generation, "generation")
        w.optional(pid, "pid") { w.integer($0, $1) }
        w.optional(startedAt, "startedAt") { w.instant($0, $1) }
        try w.directList(requests, "requests")
        try w.directList(pending, "pending")
        try w.direct(assertions, "assertions")
        try w.optional(lastExit, "lastExit") { try w.direct($0, $1) }
        w.integer(consecutiveCrashes, "consecutiveCrashes")
        w.optional(throttledUntil, "throttledUntil") { w.instant($0, $1) }
        try w.directList(recentEvents, "recentEvents")
        w.bool(retired, "retired")
        w.bool(adminSignaled, "adminSignaled")
        try w.list(resetWaiters, "resetWaiters")
        w.integer(overruns, "overruns")
        w.integer(unacknowledgedExpiries, "unacknowledgedExpiries")
        w.bool(prewarmed, "prewarmed")
        w.optional(reprieveUntil, "reprieveUntil") { w.instant($0, $1) }
        w.integer(locksHeldAtSuspend, "locksHeldAtSuspend")
        try w.value(lockGrace, "lockGrace")
        try w.direct(hints, "hints")
        try w.optional(refresh, "refresh") { try w.direct($0, $1) }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        manifest = try r.direct(Manifest.self, "manifest")
        phase = try r.direct(Phase.self, "phase")
        since = try r.instant("since")
        generation = try r.integer(UInt64.self, "generation")
        pid = try r.integerIfPresent(Int32.self, "pid")
        startedAt = try r.instantIfPresent("startedAt")
        requests = try r.directList(OpenRequest.self, "requests")
        pending = try r.directList(PendingBegin.self, "pending")
        assertions = try r.direct(AssertionLedger.self, "assertions")
        lastExit = try r.directIfPresent(ExitRecord.self, "lastExit")
        consecutiveCrashes = try r.integer(Int.self, "consecutiveCrashes")
        throttledUntil = try r.instantIfPresent("throttledUntil")
        recentEvents = try r.directList(LifecycleEvent.self, "recentEvents")
        retired = try r.bool("retired")
        adminSignaled = try r.bool("adminSignaled")
        resetWaiters = try r.list(ResetWaiter.self, "resetWaiters")
        overruns = try r.integer(Int.self, "overruns")
        unacknowledgedExpiries = try r.integer(Int.self, "unacknowledgedExpiries")
        prewarmed = try r.bool("prewarmed")
        reprieveUntil = try r.instantIfPresent("reprieveUntil")
        locksHeldAtSuspend = try r.integer(Int.self, "locksHeldAtSuspend")
        lockGrace = try r.canonical(LockGrace.self, "lockGrace")
        hints = try r.direct(NotificationHints.self, "hints")
        refresh = try r.directIfPresent(RefreshState.self, "refresh")
    }
}

extension Manifest: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.string(id, "id")
        w.string(point, "point")
        w.string(executable, "executable")
        try w.list(arguments, "arguments")
        try w.value(environment, "environment")
        w.string(readiness.rawValue, "readiness")
        try w.direct(policy, "policy")
        try w.value(hosts, "hosts")
        w.bool(hostAccess, "hostAccess")
        w.optional(displayName, "displayName") { w.string($0, $1) }
        try w.optional(activation, "activation") { try w.value($0, $1) }
        w.string(source, "source")
        try w.direct(credentialRequest, "credentialRequest")
        try w.optional(credentials, "credentials") { try w.direct($0, $1) }
        try w.list(sharedContainers, "sharedContainers")
        try w.value(containerPaths, "containerPaths")
        w.bool(sandboxed, "sandboxed")
        w.optional(app, "app") { w.string($0, $1) }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        id = try r.string("id")
        point = try r.string("point")
        executable = try r.string("executable")
        arguments = try r.canonical([String].self, "arguments")
        environment = try r.canonical([String: String].self, "environment")
        readiness = try r.canonical(Readiness.self, "readiness")
        policy = try r.direct(Policy.self, "policy")
        hosts = try r.canonical(HostRestriction.self, "hosts")
        hostAccess = try r.bool("hostAccess")
        displayName = try r.stringIfPresent("displayName")
        activation = try r.valueIfPresent(ActivationRule.self, "activation")
        source = try r.string("source")
        credentialRequest = try r.direct(CredentialRequest.self, "credentialRequest")
        credentials = try r.directIfPresent(Credentials.self, "credentials")
        sharedContainers = try r.canonical([String].self, "sharedContainers")
        containerPaths = try r.canonical([String: String].self, "containerPaths")
        sandboxed = try r.bool("sandboxed")
        app = try r.stringIfPresent("app")
    }
}

extension Policy: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.double(backgroundSeconds, "backgroundSeconds")
        w.double(expiryGraceSeconds, "expiryGraceSeconds")
        w.double(assertionMaxSeconds, "assertionMaxSeconds")
        w.double(launchTimeoutSeconds, "launchTimeoutSeconds")
        w.double(suspendedLifetimeSeconds, "suspendedLifetimeSeconds")
        w.string(suspend.rawValue, "suspend")
        w.string(lockedWhileSuspended.rawValue, "lockedWhileSuspended")
        w.double(refreshSeconds, "refreshSeconds")
        try w.optional(refresh, "refresh") { try w.value($0, $1) }
        try w.value(limits, "limits")
        w.bool(network, "network")
        w.integer(openURLsPerMinute, "openURLsPerMinute")
        w.integer(transferTasksPerApp, "transferTasksPerApp")
        w.integer(transferBytesPerDay, "transferBytesPerDay")
        try w.optional(sandboxRequires, "sandboxRequires") { try w.list($0, $1) }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        backgroundSeconds = try r.double("backgroundSeconds")
        expiryGraceSeconds = try r.double("expiryGraceSeconds")
        assertionMaxSeconds = try r.double("assertionMaxSeconds")
        launchTimeoutSeconds = try r.double("launchTimeoutSeconds")
        suspendedLifetimeSeconds = try r.double("suspendedLifetimeSeconds")
        suspend = try r.canonical(SuspendMode.self, "suspend")
        lockedWhileSuspended = try r.canonical(LockContentionPolicy.self, "lockedWhileSuspended")
        refreshSeconds = try r.double("refreshSeconds")
        refresh = try r.canonicalIfPresent(RefreshSchedule.self, "refresh")
        limits = try r.canonical(ResourceLimits.self, "limits")
        network = try r.bool("network")
        openURLsPerMinute = try r.integer(Int.self, "openURLsPerMinute")
        transferTasksPerApp = try r.integer(Int.self, "transferTasksPerApp")
        transferBytesPerDay = try r.integer(Int64.self, "transferBytesPerDay")
        sandboxRequires = try r.canonicalListIfPresent(SandboxPart.self, "sandboxRequires")
    }
}

extension CredentialRequest: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        try w.optional(user, "user") { try w.value($0, $1) }
        try w.optional(group, "group") { try w.value($0, $1) }
        try w.list(supplementaryGroups, "supplementaryGroups")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        user = try r.canonicalIfPresent(AccountReference.self, "user")
        group = try r.canonicalIfPresent(AccountReference.self, "group")
        supplementaryGroups = try r.canonicalList(AccountReference.self, "supplementaryGroups")
    }
}

extension Credentials: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.integer(uid, "uid")
        w.integer(gid, "gid")
        try w.list(groups, "groups")
        w.bool(ownUID, "ownUID")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        uid = try r.integer(UInt32.self, "uid")
        gid = try r.integer(UInt32.self, "gid")
        groups = try r.list(UInt32.self, "groups")
        ownUID = try r.bool("ownUID")
    }
}

extension PeerIdentity: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.integer(pid, "pid")
        w.integer(uid, "uid")
        w.integer(gid, "gid")
        try w.list(groups, "groups")
        w.optional(app, "app") { w.string($0, $1) }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        pid = try r.integer(Int32.self, "pid")
        uid = try r.integer(UInt32.self, "uid")
        gid = try r.integer(UInt32.self, "gid")
        groups = try r.list(UInt32.self, "groups")
        app = try r.stringIfPresent("app")
    }
}

extension OpenRequest: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.integer(id, "id")
        w.integer(host, "host")
        w.integer(tag, "tag")
        try w.direct(peer, "peer")
        w.instant(begunAt, "begunAt")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        id = try r.integer(UInt64.self, "id")
        host = try r.integer(HostID.self, "host")
        tag = try r.integer(UInt32.self, "tag")
        peer = try r.direct(PeerIdentity.self, "peer")
        begunAt = try r.instant("begunAt")
    }
}

extension PendingBegin: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.integer(host, "host")
        try w.direct(peer, "peer")
        w.integer(tag, "tag")
        w.integer(requestID, "requestID")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        host = try r.integer(HostID.self, "host")
        peer = try r.direct(PeerIdentity.self, "peer")
        tag = try r.integer(UInt32.self, "tag")
        requestID = try r.integer(UInt64.self, "requestID")
    }
}

extension Assertion: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.integer(id, "id")
        w.string(reason, "reason")
        w.instant(grantedAt, "grantedAt")
        w.instant(hardDeadline, "hardDeadline")
        w.optional(expireSentAt, "expireSentAt") { w.instant($0, $1) }
        w.bool(expireAcknowledged, "expireAcknowledged")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        id = try r.integer(UInt64.self, "id")
        reason = try r.string("reason")
        grantedAt = try r.instant("grantedAt")
        hardDeadline = try r.instant("hardDeadline")
        expireSentAt = try r.instantIfPresent("expireSentAt")
        expireAcknowledged = try r.bool("expireAcknowledged")
    }
}

extension ExitRecord: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        try w.optional(status, "status") { try w.value($0, $1) }
        w.string(reason.rawValue, "reason")
        w.instant(at, "at")
        w.optional(pid, "pid") { w.integer($0, $1) }
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        status = try r.canonicalIfPresent(ExitStatus.self, "status")
        reason = try r.canonical(ExitReason.self, "reason")
        at = try r.instant("at")
        pid = try r.integerIfPresent(Int32.self, "pid")
    }
}

/// A process group's settled state, which the shell's part of the document holds once per
/// process: written and read directly, as its synthesized conformance gives `BinaryEncoder`.
extension GroupControl.Snapshot: BinaryDirectCodable {
    package func write(to output: BinaryOutput, level: Int) throws {
        let w = BinaryFieldWriter(output, level: level)
        w.string(state.rawValue, "state")
        w.bool(aloneAtLastStop, "aloneAtLastStop")
    }

    package init(binary input: BinaryInput, at offset: Int, within end: Int) throws {
        var r = try BinaryFields(input, at: offset, within: end)
        state = try r.canonical(State.self, "state")
        aloneAtLastStop = try r.bool("aloneAtLastStop")
    }
}

extension GroupControl.Snapshot.State: BinaryCanonicalReadable {}

/// The shell's process entries read and write a group's snapshot and its suspension mechanism
/// through these, not the generic `direct` and `canonical`: a generic method called from
/// another module runs unspecialized, at several times the cost.
extension BinaryFields {
    /// `key`'s group snapshot, read directly.
    package mutating func direct(_ type: GroupControl.Snapshot.Type, _ key: StaticString) throws -> GroupControl.Snapshot {
        try required(key) { [input, end] in try GroupControl.Snapshot(binary: input, at: $0, within: end) }
    }
    /// `key`'s suspension mechanism, read canonically.
    package mutating func canonical(_ type: SuspendMode.Type, _ key: StaticString) throws -> SuspendMode {
        try required(key) { [input, end] in try SuspendMode.read(input, at: $0, within: end) }
    }
}

extension BinaryFieldWriter {
    /// Writes `k` with the group snapshot `value`, directly.
    package func direct(_ value: GroupControl.Snapshot, _ k: StaticString) throws {
        key(k)
        try value.write(to: output, level: level + 1)
        output.close(above: level)
    }
}
