import SupervisorCore
import Testing

@Suite("Policy")
struct PolicyTests {
    @Test func theBuiltInPointsAreValid() {
        for (name, policy) in ExtensionPoints.builtIn.policies {
            #expect(policy.violation() == nil, "\(name)")
            #expect(policy.suspend == .stop, "\(name)")
        }
        #expect(Set(ExtensionPoints.builtIn.policies.keys) == ["widget", "share", "action", "default"])
    }

    static var fields: [WritableKeyPath<Policy, Double>] {
        [\.backgroundSeconds, \.expiryGraceSeconds, \.assertionMaxSeconds, \.launchTimeoutSeconds, \.suspendedLifetimeSeconds]
    }
    static let names = ["backgroundSeconds", "expiryGraceSeconds", "assertionMaxSeconds", "launchTimeoutSeconds", "suspendedLifetimeSeconds"]

    @Test(arguments: [-1.0, -0.000_001, .nan, .infinity, -.infinity, 86_400.5, 1e300])
    func outOfRangeValuesAreViolations(value: Double) {
        for (path, name) in zip(Self.fields, Self.names) {
            var p = testPolicy
            // Keep the relations valid where the field under test is one side of them.
            p.backgroundSeconds = 100
            p.assertionMaxSeconds = 100
            p[keyPath: path] = value
            #expect(p.violation()?.field == name, "\(name) = \(value)")
        }
    }

    @Test func relationsBetweenFieldsAreChecked() {
        var p = testPolicy
        p.launchTimeoutSeconds = 0
        #expect(p.violation()?.field == "launchTimeoutSeconds")

        p = testPolicy
        p.expiryGraceSeconds = p.backgroundSeconds + 0.5
        #expect(p.violation()?.field == "expiryGraceSeconds")

        p = testPolicy
        p.assertionMaxSeconds = p.expiryGraceSeconds - 0.5
        #expect(p.violation()?.field == "expiryGraceSeconds")

        p = testPolicy
        p.expiryGraceSeconds = p.backgroundSeconds  // equal is allowed
        #expect(p.violation() == nil)

        p = Policy(backgroundSeconds: 0, expiryGraceSeconds: 0, assertionMaxSeconds: 0, launchTimeoutSeconds: 0.1, suspendedLifetimeSeconds: 0)
        #expect(p.violation() == nil, "zero durations are allowed except the launch timeout")
    }

    @Test func overridesApplyOnlyTheirNonNilFields() {
        var o = PolicyOverrides()
        #expect(o.applied(to: testPolicy) == testPolicy)
        o.backgroundSeconds = 1
        o.expiryGraceSeconds = 0.5
        o.assertionMaxSeconds = 2
        o.launchTimeoutSeconds = 3
        o.suspendedLifetimeSeconds = 4
        o.suspend = .never
        #expect(
            o.applied(to: testPolicy)
                == Policy(
                    backgroundSeconds: 1, expiryGraceSeconds: 0.5, assertionMaxSeconds: 2, launchTimeoutSeconds: 3,
                    suspendedLifetimeSeconds: 4, suspend: .never))
    }
}

@Suite("Assertion ledger")
struct AssertionLedgerTests {
    @Test func grantReleaseAndDoubleRelease() {
        var l = AssertionLedger()
        #expect(l.isEmpty)
        l.grant(id: 1, reason: "a", at: .seconds(10), maxSeconds: 60)
        l.grant(id: 2, reason: "b", at: .seconds(11), maxSeconds: 60)
        #expect(l.count == 2)
        #expect(l.assertions.map(\.hardDeadline) == [.seconds(70), .seconds(71)])
        let released = l.release(1)
        let again = l.release(1)
        let unknown = l.release(42)
        #expect(released?.reason == "a")
        #expect(again == nil, "a second release finds nothing")
        #expect(unknown == nil)
        #expect(l.assertions.map(\.id) == [2])
    }

    @Test func expireIsMarkedOnceAndAcknowledged() {
        var l = AssertionLedger()
        l.grant(id: 1, reason: "a", at: .seconds(0), maxSeconds: 60)
        l.grant(id: 2, reason: "b", at: .seconds(0), maxSeconds: 60)
        #expect(l.unexpired.map(\.id) == [1, 2])
        let first = l.markExpireSent(1, at: .seconds(5))
        let second = l.markExpireSent(1, at: .seconds(6))
        let unknown = l.markExpireSent(9, at: .seconds(6))
        #expect(first)
        #expect(!second, "expire is sent once")
        #expect(!unknown, "unknown ids are not marked")
        #expect(l.assertions[0].expireSentAt == .seconds(5))
        #expect(l.unexpired.map(\.id) == [2])
        l.acknowledgeExpire(1)
        l.acknowledgeExpire(9)
        #expect(l.assertions.map(\.expireAcknowledged) == [true, false])
    }

    @Test func nextDeadlineIsExpireTimeThenHardDeadline() {
        var l = AssertionLedger()
        #expect(l.nextDeadline(grace: 3) == nil)
        l.grant(id: 1, reason: "a", at: .seconds(0), maxSeconds: 60)  // expire due 57
        l.grant(id: 2, reason: "b", at: .seconds(10), maxSeconds: 20)  // expire due 27
        #expect(l.nextDeadline(grace: 3) == .seconds(27))
        _ = l.markExpireSent(2, at: .seconds(27))
        #expect(l.nextDeadline(grace: 3) == .seconds(30), "then its hard deadline")
        l.release(2)
        #expect(l.nextDeadline(grace: 3) == .seconds(57))
    }

    @Test func revokeAllEmptiesTheLedger() {
        var l = AssertionLedger()
        l.grant(id: 1, reason: "a", at: .seconds(0), maxSeconds: 60)
        l.grant(id: 2, reason: "b", at: .seconds(0), maxSeconds: 60)
        let revoked = l.revokeAll()
        #expect(revoked.map(\.id) == [1, 2])
        #expect(l.isEmpty)
        let none = l.revokeAll()
        #expect(none.isEmpty)
    }
}

@Suite("Instant")
struct InstantTests {
    @Test func arithmeticSaturates() {
        #expect(Instant.seconds(1).adding(seconds: 2) == .seconds(3))
        #expect(Instant.seconds(5).adding(seconds: -2) == .seconds(3))
        #expect(Instant.seconds(1).adding(seconds: -5) == Instant(nanoseconds: 0), "never before the origin")
        #expect(Instant(nanoseconds: .max - 1).adding(seconds: 1) == Instant(nanoseconds: .max))
        #expect(Instant.seconds(1).adding(seconds: .infinity) == Instant(nanoseconds: .max))
        #expect(Instant.seconds(3).seconds(since: .seconds(1)) == 2)
        #expect(Instant.seconds(1).seconds(since: .seconds(3)) == -2)
        #expect(Instant.seconds(1) < Instant.seconds(1.000_000_001))
        #expect(Instant.seconds(12.3456).description == "12.346s")
        #expect(Instant.seconds(0.007).description == "0.007s")
    }
}
