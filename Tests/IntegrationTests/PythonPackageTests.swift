import ExtensionHost
import Foundation
import Testing

/// bindings/python: `pip install ./bindings/python` in a fresh virtual environment (pip fetches
/// the build backend, flit_core, from PyPI into its isolated build environment), then the example extension
/// (examples/python-extension) on the installed package, under a real daemon.
@Suite(.serialized)
struct PythonPackageTests {
    static let packageRoot = RuntimeC.packageRoot
    static let id = "org.example.python"

    /// One virtual environment with the package installed, shared by the suite's tests.
    static let environment: Result<String, HarnessError> = {
        do {
            let directory = try TestDaemon.makeTemporaryDirectory()
            let venv = try runProgram("/usr/bin/python3", ["-m", "venv", directory + "/venv"])
            guard venv.status == 0 else { return .failure(HarnessError("python3 -m venv failed: \(venv.err)")) }
            let pip = try runProgram(directory + "/venv/bin/pip", ["install", "--disable-pip-version-check", packageRoot + "/bindings/python"])
            guard pip.status == 0 else { return .failure(HarnessError("pip install failed: \(pip.out)\(pip.err)")) }
            return .success(directory + "/venv/bin/python")
        } catch {
            return .failure(HarnessError("cannot create the virtual environment: \(error)"))
        }
    }()

    func python() throws -> String { try Self.environment.get() }

    @Test func pipInstallsThePackageIntoAFreshVirtualEnvironment() throws {
        let python = try python()
        let r = try runProgram(
            python,
            [
                "-c",
                """
                import extension_runtime, os
                print(os.path.exists(os.path.join(os.path.dirname(extension_runtime.__file__), "py.typed")))
                print(extension_runtime.__file__.startswith(os.environ.get("VIRTUAL_ENV", "") or os.path.dirname(os.path.dirname(__import__("sys").executable))))
                """,
            ])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out == "True\nTrue\n")
    }

    /// Every public name has a docstring, and every public function and method is annotated.
    @Test func everyPublicNameIsDocumentedAndTyped() throws {
        let r = try runProgram(
            try python(),
            [
                "-c",
                """
                import inspect, extension_runtime as rt
                missing = []
                for name in rt.__all__:
                    obj = getattr(rt, name)
                    if not isinstance(obj, (int, str)) and not (obj.__doc__ or "").strip():
                        missing.append(name)
                    members = [(name + "." + n, m) for n, m in vars(obj).items() if not n.startswith("_")] if inspect.isclass(obj) and obj.__module__ == rt.__name__ else []
                    for qualified, m in members + [(name, obj)]:
                        f = m.fget if isinstance(m, property) else m
                        if inspect.isfunction(f):
                            if not (f.__doc__ or "").strip():
                                missing.append(qualified)
                            if "return" not in f.__annotations__:
                                missing.append(qualified + " (annotations)")
                print(" ".join(missing) or "ok")
                """,
            ])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out == "ok\n")
    }

    @Test func withoutExtensiondTheExampleSaysSo() throws {
        let r = try runProgram(
            "/usr/bin/env",
            [
                "EXTENSION_RUNTIME_LIB=" + (try RuntimeC.library()), try python(), Self.packageRoot + "/examples/python-extension/extension.py",
            ])
        #expect(r.status == 1)
        #expect(r.err == "python-extension: not launched by extensiond\n")
    }

    /// Without extensiond an activity is denied: `fn(True)` once, at once; the context manager's
    /// body runs with `granted` False and `expired` True. An empty reason, or one over
    /// ACTIVITY_MAX_REASON bytes of UTF-8, raises ValueError and calls nothing.
    @Test func withoutExtensiondActivitiesAreDenied() throws {
        let r = try runProgram(
            "/usr/bin/env",
            [
                "EXTENSION_RUNTIME_LIB=" + (try RuntimeC.library()), try python(), "-c",
                """
                import threading, extension_runtime as rt
                calls, done = [], threading.Event()
                rt.perform_expiring_activity("x", lambda expired: (calls.append(expired), done.set()))
                done.wait(10)
                with rt.expiring_activity("y") as activity:
                    print(calls, activity.granted, activity.expired)
                for reason in ["", "é" * 512 + "x"]:
                    try:
                        rt.perform_expiring_activity(reason, lambda expired: calls.append(expired))
                    except ValueError as e:
                        print(e)
                try:
                    rt.expiring_activity("r" * (rt.ACTIVITY_MAX_REASON + 1))
                except ValueError as e:
                    print(e)
                print(calls)
                """,
            ])
        #expect(r.status == 0, "\(r.err)")
        #expect(
            r.out == """
                [True] False True
                perform_expiring_activity: the reason must not be empty
                perform_expiring_activity: the reason is 1025 bytes, over the limit of 1024
                expiring_activity: the reason is 1025 bytes, over the limit of 1024
                [True]

                """)
    }

    /// Bad arguments raise ValueError, as documented, whether or not extensiond is there: a
    /// reason, cancellation reason, hint name or container group holding NUL (C would see it end
    /// there), a name breaking the rule, a refresh result that is not a RefreshResult.
    @Test func badArgumentsRaiseValueError() throws {
        let r = try runProgram(
            "/usr/bin/env",
            [
                "EXTENSION_RUNTIME_LIB=" + (try RuntimeC.library()), try python(), "-c",
                """
                import socket
                import extension_runtime as rt
                calls = [lambda: rt.perform_expiring_activity("\\0x", print), lambda: rt.expiring_activity("x\\0"),
                         lambda: rt.observe("a.b\\0zz", print), lambda: rt.observe(".a", print), lambda: rt.refresh_complete(1, 7),
                         lambda: rt.Request(1, socket.socketpair()[0].detach()).cancel("cut\\0here"),
                         lambda: rt.shared_container_path("group.a\\0b")]
                for call in calls:
                    try:
                        call()
                        print("no error")
                    except Exception as error:
                        print(type(error).__name__, error)
                """,
            ])
        #expect(r.status == 0, "\(r.err)")
        let rule = "letters, digits, '.', '-', '_', at most 255 bytes, not starting or ending with '.', no '..'"
        #expect(
            r.out == """
                ValueError perform_expiring_activity: the reason must not contain NUL
                ValueError expiring_activity: the reason must not contain NUL
                ValueError bad hint name 'a.b\\x00zz': \(rule)
                ValueError bad hint name '.a': \(rule)
                ValueError 7 is not a valid RefreshResult
                ValueError cancel: the reason must not contain NUL
                ValueError shared_container_path: the group must not contain NUL

                """)
    }

    /// The container paths come from the environment; an unset or empty variable is None.
    @Test func theContainerPathsComeFromTheEnvironment() throws {
        let program = "import extension_runtime as rt; print(rt.shared_container_path('group.com.example'), rt.container_path())"
        let empty = try runProgram(
            "/usr/bin/env",
            [
                "EXTENSION_RUNTIME_LIB=" + (try RuntimeC.library()), "EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE=", "EXTENSIOND_CONTAINER=",
                try python(), "-c", program,
            ])
        #expect(empty.status == 0, "\(empty.err)")
        #expect(empty.out == "None None\n")
        let set = try runProgram(
            "/usr/bin/env",
            [
                "EXTENSION_RUNTIME_LIB=" + (try RuntimeC.library()), "EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE=/srv/shared",
                "EXTENSIOND_CONTAINER=/var/lib/x", try python(), "-c", program,
            ])
        #expect(set.out == "/srv/shared /var/lib/x\n")
    }

    /// Without $EXTENSION_RUNTIME_LIB the package loads the library of the installed pkg-config
    /// file (scripts/install.sh).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/pkg-config"), "pkg-config is not installed"))
    func thePackageFindsTheLibraryThroughPkgConfig() throws {
        let prefix = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        let install = try runProgram("/bin/bash", [Self.packageRoot + "/scripts/install.sh", "--from", BuildProducts.directory, "--prefix", prefix])
        try #require(install.status == 0, "\(install.err)")
        let r = try runProgram(
            "/usr/bin/env",
            [
                "-u", "EXTENSION_RUNTIME_LIB", "PKG_CONFIG_PATH=\(prefix)/lib/pkgconfig", try python(), "-c",
                """
                import extension_runtime as rt
                from extension_runtime import _library
                print(_library.locate())
                print(rt.is_supervised())
                """,
            ])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out == "\(prefix)/lib/libExtensionRuntimeC.so.0\nFalse\n")
    }

    /// A daemon running `script` (package-relative; the example extension by default) on the
    /// installed package as extension `id`.
    func daemon(_ directory: String, script: String = "examples/python-extension/extension.py", policy: [String: Any] = [:]) throws -> TestDaemon {
        let daemon = try TestDaemon(manifests: [
            "app.json": ["kind": "app", "id": "org.example.py-app", "groups": [Self.group], "dbusActivatable": true],
            "py.json": [
                "app": "org.example.py-app",
                "id": Self.id, "executable": try python(),
                "arguments": [Self.packageRoot + "/" + script],
                "environment": ["PY_EXTENSION_STATE": directory + "/state.txt", "EXTENSION_RUNTIME_LIB": try RuntimeC.library()],
                "policy": policy,
            ],
        ])
        try daemon.start()
        return daemon
    }

    static let group = "group.org.example.py-app"

    /// `defaults(suite)` is a mapping over the daemon's suite: the app's write is read and
    /// announced, the extension's write is seen by the app, a missing key is KeyError, a group no
    /// app declares UnknownSuiteError; `open_url` answers False when nothing takes the scheme.
    @Test func sharedDefaultsAndOpenURLWorkThroughTheDaemon() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, script: "Tests/Fixtures/python-probe/probe.py")
        let host = try daemon.host()
        let app = try host.defaults(suiteName: Self.group)
        let channel = try host.begin(Self.id).hostChannel()
        channel.send("defaults-open \(Self.group)")
        #expect(channel.readLine() == "opened", "\(daemon.log())")
        try app.set(.array([.integer(1), .string("two"), .dictionary(["k": .bool(true)])]), forKey: "mixed")
        #expect(channel.readLine() == "changed \(Self.group)")
        channel.send("defaults-get mixed")
        #expect(channel.readLine() == "value [1, 'two', {'k': True}]")
        channel.send("defaults-get missing")
        #expect(channel.readLine()?.hasPrefix("refused: KeyError") == true)
        channel.send("defaults-set theme light")
        #expect(channel.readLine() == "set")
        #expect(app["theme"] == .string("light"))
        channel.send("defaults-open group.org.example.none")
        #expect(channel.readLine()?.hasPrefix("refused: UnknownSuiteError") == true)
        channel.send("open-url nothing-declares-this://x")
        #expect(channel.readLine() == "opened False")
        channel.send("secret-add api.example.com alice py-token")
        #expect(channel.readLine() == "added")
        channel.send("secret-add api.example.com alice again")
        #expect(channel.readLine()?.hasPrefix("refused: DuplicateItemError") == true)
        channel.send("secret-copy api.example.com alice")
        #expect(channel.readLine() == "found py-token in \(Self.group)")
        channel.send("secret-copy api.example.com nobody")
        #expect(channel.readLine()?.hasPrefix("refused: ItemNotFoundError") == true)
    }

    /// The assertion test of the C extension (CInterfaceTests), on the installed package.
    @Test func theInstalledPackageTakesAssertions() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory)
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        channel.send("save hello from the package")
        #expect(channel.readLine() == "saved")
        let acquire = try daemon.events.wait("acquire", of: Self.id)
        #expect(acquire.detail == "python save")
        let release = try daemon.events.wait("release", of: Self.id)
        #expect(release.assertion == acquire.assertion)
        #expect(try String(contentsOfFile: directory + "/state.txt", encoding: .utf8) == "hello from the package\n")
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)
    }

    /// `expiring_activity`: the body learns of the expiry, and the assertion goes when it leaves,
    /// before the stop.
    @Test func theContextManagerTellsTheBodyWhenItExpires() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, policy: ["backgroundSeconds": 3.0, "expiryGraceSeconds": 2.0])
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("hold")
        #expect(channel.readLine() == "holding")
        let acquire = try daemon.events.wait("acquire", of: Self.id)
        #expect(acquire.detail == "python hold")
        try host.dismiss(session)
        try daemon.events.wait("expire", of: Self.id)
        #expect(channel.readLine() == "expired")
        let release = try daemon.events.wait("release", of: Self.id)
        #expect(release.assertion == acquire.assertion)
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(stop.monotonic >= release.monotonic)
        #expect(!daemon.events.all.contains { $0.kind == "assertion-overrun" || $0.kind == "expiry-unacknowledged" })
        try daemon.events.wait("suspend", of: Self.id)
    }

    /// `observe` keeps its callback for the life of the process: a post reaches the handler, as
    /// often as it is made, and the extension lives on.
    @Test func anObservedHintReachesTheHandler() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, script: "Tests/Fixtures/python-probe/probe.py")
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        let hint = Self.id + ".news"
        channel.send("observe \(hint)")
        #expect(channel.readLine() == "observing")
        try host.post(hint)
        #expect(channel.readLine() == "notified \(hint)")
        #expect(try daemon.extctl(["post", hint]).status == 0)
        #expect(channel.readLine() == "notified \(hint)")
        channel.send("observe bad..name")
        #expect(channel.readLine()?.hasPrefix("refused: ValueError: bad hint name 'bad..name'") == true)
        #expect(!daemon.events.all.contains { $0.kind == "exit" }, "\(daemon.events.all.map(\.kind))")
    }

    /// `observe` of a new name beyond OBSERVE_MAX_NAMES raises ExtensionRuntimeError (ENOSPC);
    /// the names observed before are delivered, the refused one is not.
    @Test func theNameAfterTheMostObservedIsRefused() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, script: "Tests/Fixtures/python-probe/probe.py")
        let host = try daemon.host()
        let channel = try host.begin(Self.id).hostChannel()
        let prefix = Self.id + ".hint"
        try expectTheNameAfterTheMostObservedIsRefused(
            host: host, channel: channel, prefix: prefix,
            refusal: "observed 256, then refused: ExtensionRuntimeError: [Errno 28] observe: already observing 256 names, the most one process may",
            sync: "reason 4", synced: ["granted"])
    }

    /// The channel's variable leaves os.environ as well as the C environment: children started
    /// with env=os.environ do not inherit it.
    @Test func theChannelVariableLeavesOsEnviron() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, script: "Tests/Fixtures/python-probe/probe.py")
        let channel = try daemon.host().begin(Self.id).hostChannel()
        channel.send("environ")
        #expect(channel.readLine() == "EXTENSIOND_CHANNEL_FD in os.environ: False")
    }

    /// $EXTENSIOND_CHANNEL_FD naming a regular file (a variable inherited without its channel)
    /// leaves the process unsupervised, and the variable leaves os.environ.
    @Test func aVariableWithoutItsChannelLeavesTheProcessUnsupervised() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let r = try runProgram(
            "/bin/sh",
            [
                "-c", "EXTENSIOND_CHANNEL_FD=3 EXTENSION_RUNTIME_LIB=\"$1\" exec \"$0\" -c \"$2\" 3>\"$3\"", try python(), try RuntimeC.library(),
                "import os, extension_runtime as rt; print(rt.is_supervised(), 'EXTENSIOND_CHANNEL_FD' in os.environ)", directory + "/fd3",
            ])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out == "False False\n")
    }

    /// start() runs once: a second call raises ExtensionRuntimeError (EALREADY), and the first
    /// handler keeps serving requests.
    @Test func theRuntimeStartsOnce() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, script: "Tests/Fixtures/python-probe/probe.py")
        let host = try daemon.host()
        let first = try host.begin(Self.id).hostChannel()
        first.send("start-again")
        #expect(first.readLine() == "refused: ExtensionRuntimeError: [Errno 114] start: the runtime was started already")
        let second = try host.begin(Self.id).hostChannel()
        second.send("environ")
        #expect(second.readLine() == "EXTENSIOND_CHANNEL_FD in os.environ: False")
    }

    /// Request.complete takes bytes-like objects only: a str raises TypeError and sends nothing
    /// (ctypes passed it as a wide string); a bytearray reaches the host as its bytes.
    @Test func completeTakesBytesNotText() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try daemon(directory, script: "Tests/Fixtures/python-probe/probe.py")
        let host = try daemon.host()
        let results = RequestCompletionTests.Results()
        host.onResult { id, result in results.add(id, result) }
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("complete-text hello")
        #expect(channel.readLine() == "refused: TypeError: complete: the result must be bytes-like, not str")
        channel.send("complete hello")  // its "completed" may never come: the extension is suspended at once
        let (requestID, result) = try #require(results.next())
        #expect(requestID == session.requestID)
        #expect(result == .completed(Array("hello".utf8)))
    }
}
