import Foundation
import Testing

/// The C host library (libExtensionHostC) and its Python module when the daemon leaves the bus
/// under a host's open requests, or the host's own connection is lost: each open request ends
/// as interrupted, once, saying why (the library follows org.extensiond1's owner; no signal of
/// the daemon's says it); a request the daemon's next program answered after a re-exec goes
/// on; and a Python callback that closes the host while the library runs it is safe.
/// (HostLibraryTests has the Python host's request under a daemon killed with SIGKILL.)
@Suite(.serialized, .enabled(if: BusClients.unavailability == nil, "needs root, dbus-daemon and busctl"))
struct HostLibraryLeaveTests {
    static let interrupted = "extensiond left the bus: the request ended with it"
    static let lost = "the host's connection to the bus was lost"

    /// A C host that begins ARGV[2] (1 to 3) requests on extension ARGV[1], prints `begun`,
    /// runs the host until every request ended (`end NAME OUTCOME REASON` each time a callback
    /// runs), then prints what processing the rest returns (`process R`), what a later call
    /// gives (`list R TEXT`), and how often the callbacks ran (`calls N`).
    static let cHost = #"""
        #include <extension_host.h>
        #include <stdint.h>
        #include <stdio.h>
        #include <stdlib.h>

        static int calls;

        static void on_end(ext_host_request *request, ext_host_outcome outcome, const void *payload, size_t size,
                           const char *reason, void *context) {
            (void)request, (void)payload, (void)size;
            calls++;
            printf("end %s %d %s\n", (const char *)context, (int)outcome, reason ? reason : "");
            fflush(stdout);
        }

        int main(int argc, char **argv) {
            static const char *const names[] = {"first", "second", "third"};
            int n = argc > 2 ? atoi(argv[2]) : 1;
            if (n < 1 || n > 3)
                return 2;
            ext_host *host;
            if (ext_host_open(EXT_HOST_BUS_DEFAULT, &host) < 0) {
                printf("open failed: %s\n", ext_host_error(NULL));
                return 1;
            }
            ext_host_request *requests[3];
            for (int i = 0; i < n; i++)
                if (ext_host_begin(host, argv[1], on_end, (void *)names[i], &requests[i]) < 0) {
                    printf("begin failed: %s\n", ext_host_error(host));
                    return 1;
                }
            printf("begun\n");
            fflush(stdout);
            int r = 1, over = 0;
            while (over < n && r > 0) {
                r = ext_host_wait(host, 60 * 1000000ULL);
                over = 0;
                for (int i = 0; i < n; i++)
                    over += ext_host_request_is_over(requests[i]);
            }
            if (over < n) {
                printf("wait %d %s\n", r, ext_host_error(host));
                return 1;
            }
            while ((r = ext_host_process(host)) > 0)
                ;
            printf("process %d\n", r);
            ext_host_extension *list;
            size_t count;
            r = ext_host_list(host, &list, &count);
            printf("list %d %s\n", r, r < 0 ? ext_host_error(host) : "");
            if (r >= 0)
                ext_host_list_free(list, count);
            for (int i = 0; i < n; i++)
                ext_host_dismiss(requests[i]);
            printf("calls %d\n", calls);
            ext_host_close(host);
            return 0;
        }
        """#

    /// Builds `cHost` against the library in the rig's directory; its path.
    static func buildCHost(_ rig: DBusRig, library: String) throws -> String {
        let source = rig.directory + "/leave-host.c"
        let binary = rig.directory + "/leave-host"
        try Data(cHost.utf8).write(to: URL(fileURLWithPath: source))
        let cc = try runProgram(
            "/usr/bin/env",
            [
                "cc", "-Wall", "-Werror", "-I", HostLibraryTests.root + "/include", source, "-L", library, "-lExtensionHostC", "-Wl,-rpath," + library, "-o",
                binary,
            ])
        guard cc.status == 0 else { throw HarnessError("cc: \(cc.err)") }
        return binary
    }

    /// Starts the C host with `count` requests on the widget, on the rig's bus (freed memory
    /// filled with garbage: a use of a freed request crashes).
    static func startCHost(_ binary: String, rig: DBusRig, count: Int) throws -> RawProcess {
        try RawProcess(
            "/usr/bin/env",
            ["MALLOC_PERTURB_=165", "EXTENSIOND_BUS=session", "DBUS_SESSION_BUS_ADDRESS=" + rig.address, binary, DBusTests.widget, String(count)],
            pipes: true)
    }

    /// The lines `output` gives until one that starts with `last` (included), its end, or
    /// `timeout` seconds.
    static func lines(_ output: HostChannel, until last: String, timeout: Double = 30) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var lines: [String] = []
        while deadline.timeIntervalSinceNow > 0, let line = output.readLine(timeout: deadline.timeIntervalSinceNow) {
            lines.append(line)
            if line.hasPrefix(last) { break }
        }
        return lines
    }

    /// The daemon stopped (SIGTERM) or killed (SIGKILL) under a C host's two open requests:
    /// each request's callback runs once, with EXT_HOST_INTERRUPTED (3); then the name has no
    /// owner, and a call says so. The library's reason is checked after SIGKILL, where no
    /// signal of the daemon's can come (a stop sends none for a bus caller's request either: it
    /// ends as if dismissed; the outcome is what a host relies on).
    @Test(arguments: [SIGTERM, SIGKILL])
    func aCHostsOpenRequestsEndInterruptedOnceWhenTheDaemonLeaves(sent: Int32) throws {
        let library = try HostLibraryTests.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let host = try Self.startCHost(try Self.buildCHost(rig, library: library), rig: rig, count: 2)
        defer { _ = host.stop(SIGKILL, timeout: 5) }
        let output = try HostLibraryTests.begun(host)
        let widget = try #require(rig.extensionProperty(DBusTests.widget, "Pid") as? Int)
        // A killed daemon leaves its extension behind (killed at the end: its exit must not
        // reach a daemon still dying).
        defer { if sent == SIGKILL { kill(pid_t(widget), SIGKILL) } }
        if sent == SIGKILL {
            kill(try #require(rig.daemon.process?.processIdentifier), SIGKILL)
        } else {
            rig.daemon.stop()
        }
        let lines = Self.lines(output, until: "calls")
        let ends = lines.filter { $0.hasPrefix("end ") }.sorted()
        #expect(ends.map { $0.split(separator: " ").prefix(3).joined(separator: " ") } == ["end first 3", "end second 3"], "\(lines)")
        if sent == SIGKILL {
            #expect(ends == ["end first 3 " + Self.interrupted, "end second 3 " + Self.interrupted], "\(lines)")
        }
        #expect(lines.contains("process 0"), "\(lines)")
        #expect(lines.contains { $0.hasPrefix("list -\(EHOSTUNREACH) org.freedesktop.DBus.Error.ServiceUnknown") }, "\(lines)")
        #expect(lines.last == "calls 2", "\(lines)")
        #expect(host.wait(timeout: 10) && host.exitCode == 0, "\(lines)")
    }

    /// The bus killed (SIGKILL: no NameOwnerChanged can come) under a C host's two open
    /// requests and a Python host's: every request ends as interrupted, once, because the
    /// host's own connection is lost; the C host's later calls fail with
    /// org.freedesktop.DBus.Error.Disconnected saying so, and the Python host's
    /// `Request.wait` returns the outcome (the loss is raised by the next call).
    @Test func theHostsOpenRequestsEndInterruptedWhenItsConnectionToTheBusIsLost() throws {
        let library = try HostLibraryTests.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let cHost = try Self.startCHost(try Self.buildCHost(rig, library: library), rig: rig, count: 2)
        defer { _ = cHost.stop(SIGKILL, timeout: 5) }
        let cOutput = try HostLibraryTests.begun(cHost)
        let script = """
            import sys
            from extension_runtime.host import Host, HostError
            with Host() as host:
                request = host.begin(sys.argv[1])
                print("begun", flush=True)
                outcome = request.wait(30)
                print(outcome.kind if outcome else "none", outcome.reason if outcome else "", flush=True)
                try:
                    host.list()
                except HostError as error:
                    print(error.name, flush=True)
            """
        let python = try HostLibraryTests.pythonHost(script, rig: rig, library: library)
        defer { _ = python.stop(SIGKILL, timeout: 5) }
        let pythonOutput = try HostLibraryTests.begun(python)
        // dbus-daemon answers for itself with its own pid.
        let owner = try rig.bus.busctl([
            "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s", "org.freedesktop.DBus",
        ])
        let busPid = try #require(Int32(owner.out.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst(2)), "\(owner)")
        kill(busPid, SIGKILL)

        let lines = Self.lines(cOutput, until: "calls")
        #expect(lines.filter { $0.hasPrefix("end ") }.sorted() == ["end first 3 " + Self.lost, "end second 3 " + Self.lost], "\(lines)")
        #expect(lines.contains { $0.hasPrefix("process -") }, "\(lines)")
        let list = lines.first { $0.hasPrefix("list ") } ?? ""
        #expect(
            (list.hasPrefix("list -\(ENOTCONN) ") || list.hasPrefix("list -\(ECONNRESET) "))
                && list.contains("org.freedesktop.DBus.Error.Disconnected: " + Self.lost), "\(lines)")
        #expect(lines.last == "calls 2", "\(lines)")
        #expect(cHost.wait(timeout: 10) && cHost.exitCode == 0, "\(lines)")

        let ended = pythonOutput.readLine(timeout: 30)
        #expect(ended == "interrupted " + Self.lost, "\(String(describing: ended))")
        let later = pythonOutput.readLine(timeout: 30)
        #expect(later == "org.freedesktop.DBus.Error.Disconnected", "\(String(describing: later))")
        #expect(python.wait(timeout: 10) && python.exitCode == 0)
    }

    /// A Python host's end callback closes the host while the library is ending its two open
    /// requests (the daemon killed): the close waits until the library's call returns (no use
    /// of the freed host), the other request's callback does not run, other methods raise
    /// "the host is closed" at once, and the script exits 0.
    @Test func aPythonEndCallbackMayCloseTheHost() throws {
        let library = try HostLibraryTests.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let script = """
            import json, sys
            from extension_runtime.host import Host
            host = Host()
            seen = []
            def on_end(request, outcome):
                seen.append([outcome.kind, outcome.reason])
                host.close()
                try:
                    host.list()
                except ValueError as error:
                    seen.append(str(error))
            requests = [host.begin(sys.argv[1], on_end), host.begin(sys.argv[1], on_end)]
            print("begun", flush=True)
            try:
                while True:
                    host.wait(30)
            except ValueError as error:
                ended = sum(r.outcome is not None for r in requests)
                print(json.dumps({"seen": seen, "error": str(error), "ended": ended}), flush=True)
            """
        // Freed memory filled with garbage (glibc's MALLOC_PERTURB_): a use of the closed host
        // crashes rather than reads what happened to stay there.
        let host = try HostLibraryTests.pythonHost(script, rig: rig, library: library, environment: ["MALLOC_PERTURB_=165"])
        defer { _ = host.stop(SIGKILL, timeout: 5) }
        let output = try HostLibraryTests.begun(host)
        let widget = try rig.killDaemonLeavingWidget()
        defer { kill(widget, SIGKILL) }
        let line = try #require(output.readLine(timeout: 30), "the script printed nothing more")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        #expect((out["seen"] as? [Any])?.count == 2, "\(out)")
        #expect((out["seen"] as? [Any])?.first as? [String] == ["interrupted", Self.interrupted], "\(out)")
        #expect((out["seen"] as? [Any])?.last as? String == "the host is closed", "\(out)")
        #expect(out["error"] as? String == "the host is closed", "\(out)")
        #expect(out["ended"] as? Int == 1, "no callback after the close: \(out)")
        #expect(host.wait(timeout: 10) && host.exitCode == 0)
    }

    /// A re-exec releases the name and the new program takes it under a new unique name. A
    /// Python host begins a second request after it, before processing anything of it (the
    /// name's changes wait, queued, behind the new program's answer): the first request, the old
    /// program's, ends as interrupted; the second, the new program's, goes on and answers.
    @Test func aRequestTheNewProgramAnsweredOutlivesTheOldProgramsLeaving() throws {
        let library = try HostLibraryTests.hostLibrary.get()
        let rig = try DBusRig()
        defer { rig.close() }
        let script = """
            import json, sys
            from extension_runtime.host import Host
            with Host() as host:
                ended = []
                first = host.begin(sys.argv[1], lambda r, o: ended.append(["first", o.kind, o.reason]))
                print("begun", flush=True)
                sys.stdin.readline()  # the daemon re-executed meanwhile: nothing of it processed yet
                second = host.begin(sys.argv[1], lambda r, o: ended.append(["second", o.kind, o.reason]))
                first.wait(30)
                while host.process():
                    pass
                second.channel.sendall(b"ping\\n")
                answer = second.channel.recv(100).decode().strip()
                print(json.dumps({"ended": ended, "answer": answer}), flush=True)
            """
        let host = try HostLibraryTests.pythonHost(script, rig: rig, library: library)
        defer { _ = host.stop(SIGKILL, timeout: 5) }
        let output = try HostLibraryTests.begun(host)
        let reexec = try rig.daemon.extctl(["reexec"])
        try #require(reexec.status == 0, "\(reexec)\n\(rig.daemon.log())")
        try rig.waitForName("org.extensiond1")
        HostChannel(fd: host.input).send("go")
        let line = try #require(output.readLine(timeout: 30), "the script printed nothing more")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        #expect(out["ended"] as? [[String]] == [["first", "interrupted", Self.interrupted]], "\(out)")
        #expect((out["answer"] as? String)?.hasPrefix("pong ") == true, "\(out)")
        #expect(host.wait(timeout: 10) && host.exitCode == 0)
    }
}
