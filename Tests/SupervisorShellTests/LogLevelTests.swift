import Logging
import SupervisorCore
import Testing

@testable import SupervisorShell

/// The journal priority of each lifecycle entry (docs/operations.md, "Priorities"): what can
/// come by the thousand a second, at an extension's or a host's pace, is debug.
struct LogLevelTests {
    @Test func whatComesAtAnExtensionsPaceIsDebug() {
        for kind: LifecycleEvent.Kind in [.begin, .end, .suspend, .resume, .acquire, .release, .deny, .stopSent] {
            #expect(Daemon.logLevel(of: kind) == .debug, "\(kind)")
        }
    }

    @Test func whatOperatorsNeedIsLogged() {
        for kind: LifecycleEvent.Kind in [.crash, .launchFailed, .launchTimeout, .overrun, .expiryUnacknowledged, .lockHeldAtSuspend] {
            #expect(Daemon.logLevel(of: kind) == .warning, "\(kind)")
        }
        for kind: LifecycleEvent.Kind in [.refuse, .throttle, .kill] { #expect(Daemon.logLevel(of: kind) == .notice, "\(kind)") }
        for kind: LifecycleEvent.Kind in [.launch, .ready, .exit, .reclaim, .expire, .refresh, .refreshed, .prewarm, .lockHeldWhileSuspended] {
            #expect(Daemon.logLevel(of: kind) == .info, "\(kind)")
        }
    }
}
