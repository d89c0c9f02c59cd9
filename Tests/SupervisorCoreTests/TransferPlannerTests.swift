import ExtensionProtocol
import SupervisorCore
import Testing

/// Background transfers' decisions (TransferPlanner, TransferSession, TransferBudget,
/// TransferWorkerMessage: pure), in simulated wall-clock time.
@Suite struct TransferPlannerTests {
    static let key = TransferSessionKey(app: "com.example.app", group: "group.com.example", identifier: "s")
    static func task(_ method: TransferMethod = .download, created: Double = 1_000) -> TransferTask {
        TransferTask(
            id: 7, session: key, creator: "com.example.widget", method: method, url: "https://h/f", path: "f", discretionary: false, createdAt: created)
    }

    @Test func aRequestNeedsAnHTTPURLWithAHostAndAPathInsideTheContainer() {
        func problem(_ url: String, _ path: String = "", _ method: TransferMethod = .download, session: String = "s") -> String? {
            TransferPlanner.problem(TransferRequest(session: session, group: "g", method: method, url: url, path: path))
        }
        #expect(problem("https://example.org/a") == nil)
        #expect(problem("HTTP://127.0.0.1:8080/a?b=c") == nil)
        #expect(problem("ftp://example.org/a") != nil)
        #expect(problem("file:///etc/passwd") != nil)
        #expect(problem("https:///nohost") != nil)
        #expect(problem("https://example.org/a b") != nil)
        #expect(problem("https://h/" + String(repeating: "a", count: WireLimits.maxTransferURL)) != nil)
        #expect(problem("https://h/a", "../escape") != nil)
        #expect(problem("https://h/a", "a/../../b") != nil)
        #expect(problem("https://h/a", "/abs") != nil)
        #expect(problem("https://h/a", "a//b") != nil)
        #expect(problem("https://h/a", "dir/file.bin") == nil)
        #expect(problem("https://h/a", "", .uploadPut) != nil, "an upload names its file")
        #expect(problem("https://h/a", session: "") != nil)
        #expect(TransferPlanner.defaultPath(session: "s", task: 9) == "transfers/s/9")
    }

    @Test func backoffDoublesFromOneSecondToTenMinutes() {
        #expect(TransferPlanner.backoff(failures: 0) == 0)
        #expect(TransferPlanner.backoff(failures: 1) == 1)
        #expect(TransferPlanner.backoff(failures: 2) == 2)
        #expect(TransferPlanner.backoff(failures: 3) == 4)
        #expect(TransferPlanner.backoff(failures: 10) == 512)
        #expect(TransferPlanner.backoff(failures: 11) == 600)
        #expect(TransferPlanner.backoff(failures: 1_000) == 600)
    }

    @Test func aDownloadResumesOnlyWithPartialBytesAndAValidator() {
        var t = Self.task()
        #expect(TransferPlanner.start(t, partialBytes: 500) == (0, ""), "no validator: from zero")
        t.validator = "\"v1\""
        #expect(TransferPlanner.start(t, partialBytes: 500) == (500, "\"v1\""))
        #expect(TransferPlanner.start(t, partialBytes: 0) == (0, ""))
        var upload = Self.task(.uploadPut)
        upload.validator = "\"v1\""
        #expect(TransferPlanner.start(upload, partialBytes: 500) == (0, ""), "an upload starts from zero")
        #expect(TransferPlanner.validator(etag: "\"a\"", lastModified: "Mon, 02 Jan 2026 00:00:00 GMT") == "\"a\"")
        #expect(TransferPlanner.validator(etag: "W/\"a\"", lastModified: "Mon, 02 Jan 2026 00:00:00 GMT") == "Mon, 02 Jan 2026 00:00:00 GMT")
        #expect(TransferPlanner.validator(etag: "W/\"a\"", lastModified: "") == nil)
    }

    @Test func anAttemptsEndIsAnAnswerARetryARestartOrAFailure() {
        let t = Self.task()
        let now = 2_000.0
        func next(_ status: UInt16, _ code: Int32, _ task: TransferTask = Self.task()) -> TransferPlanner.Next {
            TransferPlanner.next(task, after: .init(status: status, curlCode: code, text: "e"), now: now)
        }
        #expect(next(200, 0) == .completed(status: 200))
        #expect(next(206, 0) == .completed(status: 206))
        #expect(next(404, 0) == .completed(status: 404), "the server's answer, whatever it is")
        #expect(next(503, 0) == .retry(at: now + 1, why: "HTTP 503"))
        #expect(next(429, 0) == .retry(at: now + 1, why: "HTTP 429"))
        var failed = t
        failed.failures = 2
        #expect(next(0, 56, failed) == .retry(at: now + 4, why: "e"), "a receive error: the third backoff")
        #expect(next(0, 18) == .retry(at: now + 1, why: "e"), "a connection dropped mid-body")
        #expect(next(0, 28) == .retry(at: now + 1, why: "e"), "no progress for the stall time")
        #expect(next(0, 60) == .failed(domain: "curl", code: 60, text: "e"), "a certificate that does not verify is not retried")
        #expect(next(0, 1) == .failed(domain: "curl", code: 1, text: "e"))
        #expect(next(416, 0) == .restart(why: "the server cannot satisfy the range (416)"))
        var short = Self.task()
        short.bytes = 500
        short.total = 1_000
        #expect(next(206, 0, short) == .retry(at: now + 1, why: "the answer ended at byte 500 of 1000"), "a short answer is resumed")
        short.bytes = 1_000
        #expect(next(206, 0, short) == .completed(status: 206))
        #expect(next(416, 0, Self.task(.uploadPut)) == .completed(status: 416))
        #expect(next(0, -1) == .failed(domain: "extensiond", code: TransferError.cannotPerform.rawValue, text: "e"))
        // A retry that would fall past the 7 days fails instead.
        let old = Self.task(created: now - TransferPlanner.resourceSeconds + 0.5)
        #expect(next(503, 0, old) == .failed(domain: "http", code: 503, text: "no answer within 7 days (its resource timeout); the last attempt: HTTP 503"))
        #expect(next(0, 7, old) == .failed(domain: "curl", code: 7, text: "no answer within 7 days (its resource timeout); the last attempt: e"))
        #expect(TransferPlanner.expired(Self.task(created: 0), now: TransferPlanner.resourceSeconds + 1))
        #expect(!TransferPlanner.expired(Self.task(created: 0), now: TransferPlanner.resourceSeconds - 1))
    }

    @Test func aWaitingTaskStartsAfterItsBackoffAndADiscretionaryOneNotWhenConstrained() {
        var t = Self.task()
        #expect(TransferPlanner.mayStart(t, now: 1_000, constrained: true))
        t.retryAt = 1_010
        #expect(!TransferPlanner.mayStart(t, now: 1_005, constrained: false))
        #expect(TransferPlanner.mayStart(t, now: 1_010, constrained: false))
        t.discretionary = true
        #expect(!TransferPlanner.mayStart(t, now: 1_010, constrained: true))
        t.state = .running
        #expect(!TransferPlanner.mayStart(t, now: 1_010, constrained: false))
    }

    @Test func progressGoesOnlyToAReadyConsumerAndAnEndIsQueuedForTheApp() {
        #expect(TransferPlanner.recipient(.progress, consumerReady: true, appWoken: false) == .consumer)
        #expect(TransferPlanner.recipient(.progress, consumerReady: false, appWoken: false) == .dropped, "a suspended extension is never woken for progress")
        #expect(TransferPlanner.recipient(.completed, consumerReady: false, appWoken: false) == .queued(wakeApp: true))
        #expect(TransferPlanner.recipient(.failed, consumerReady: false, appWoken: true) == .queued(wakeApp: false), "the app is brought up once")
    }

    @Test func aSessionNumbersItsEventsAndForgetsThemOnceHandled() {
        var s = TransferSession(key: Self.key)
        let a = s.enqueue(TransferEvent(sequence: 0, task: 1, kind: .completed, bytes: 1, total: 1, status: 200))
        let b = s.enqueue(TransferEvent(sequence: 0, task: 2, kind: .failed, bytes: 0, total: -1, domain: "curl", code: 7))
        #expect(a.sequence == 1 && b.sequence == 2)
        let none = s.handled(through: 0)
        #expect(!none)
        let first = s.handled(through: 1)
        #expect(first)
        #expect(s.queued.map(\.sequence) == [2])
        let rest = s.handled(through: 9)
        #expect(rest)
        #expect(s.queued.isEmpty)
        let third = s.enqueue(TransferEvent(sequence: 0, task: 3, kind: .completed, bytes: 0, total: 0))
        #expect(third.sequence == 3, "never a number twice")
    }

    @Test func theDaysBytesAreCountedPerAppAndStartAgainEachDay() {
        var b = TransferBudget()
        b.add(100, app: "a", now: 86_400 * 10 + 5)
        b.add(50, app: "b", now: 86_400 * 10 + 6)
        let today = b.used(app: "a", now: 86_400 * 10 + 7)
        #expect(today == 100)
        #expect(b.nextDay() == 86_400 * 11)
        let tomorrowA = b.used(app: "a", now: 86_400 * 11), tomorrowB = b.used(app: "b", now: 86_400 * 11)
        #expect(tomorrowA == 0 && tomorrowB == 0)
    }

    @Test func theWorkersMessagesRoundTripAndMalformedOnesAreRefused() {
        let messages: [TransferWorkerMessage] = [
            .start(task: 1, method: 1, offset: 500, uploadSize: 0, stallSeconds: 60, url: "https://h/é", ifRange: "\"v\""),
            .cancel(task: .max),
            .headers(task: 2, status: 206, restarted: true, total: -1, etag: "\"e\"", lastModified: ""),
            .progress(task: 3, done: 10, total: 20),
            .done(task: 4, status: 200, curlCode: -1, done: 5, error: "write: No space left on device"),
        ]
        for m in messages {
            #expect(TransferWorkerMessage.decode(m.encoded) == m)
            let bytes = m.encoded
            for cut in 0..<bytes.count { #expect(TransferWorkerMessage.decode(Array(bytes[0..<cut])) == nil, "\(m) cut at \(cut)") }
            #expect(TransferWorkerMessage.decode(bytes + [0]) == nil, "trailing byte")
        }
        #expect(TransferWorkerMessage.decode([99]) == nil)
        #expect(TransferWorkerMessage.decode([10] + [UInt8](repeating: 0, count: 12) + [2] + [UInt8](repeating: 0, count: 12)) == nil, "restarted is 0 or 1")
        // The worker's layout, byte for byte (docs/transfers.md, "The worker").
        #expect(TransferWorkerMessage.cancel(task: 0x0102).encoded == [2, 2, 1, 0, 0, 0, 0, 0, 0])
        #expect(
            TransferWorkerMessage.progress(task: 1, done: 2, total: -1).encoded == [11, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]
                + [UInt8](repeating: 255, count: 8))
    }
}
